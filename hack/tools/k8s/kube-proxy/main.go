// Command kube-proxy is the upstream Service proxy, built from source so that
// pods on the real node reach Services (the apiserver's `kubernetes` Service
// first of all) through their ClusterIPs.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
