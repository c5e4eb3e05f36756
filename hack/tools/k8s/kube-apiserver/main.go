// Command kube-apiserver is the upstream kube-apiserver, built from source so
// that tests and the playground run against a real API server.
package main

import (
	"os"
	_ "time/tzdata" // time zones, as the upstream binary has them

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
