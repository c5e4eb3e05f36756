// Command etcd is the upstream etcd server, built from source so that the
// project's kube-apiserver has a real storage backend.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
