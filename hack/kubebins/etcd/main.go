// Command etcd is etcd's own server entry point, built from the same module
// graph as the Kubernetes binaries so that kube-apiserver and the server it
// talks to agree on one etcd version.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
