// Command kubeharness runs a real kube-apiserver, backed by an embedded
// etcd, for the Rust build's Kubernetes tests (tests/kube_*.rs): the same
// API server code a cluster runs (validation, CEL, subresources, CRDs,
// watch), with no nodes, kubelets or controllers.
//
// Arguments after the flags (and a "--") are passed on to the
// kube-apiserver, e.g. "-- --authorization-mode=Node,RBAC".
//
// It writes a kubeconfig (cluster-admin) to DIR/kubeconfig, prints
// "READY <path>" on stdout, and exits when its stdin closes, so it dies
// with the test process that started it. Build it without -trimpath: the
// API server's test helpers find their testdata by source path.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"partita.dev/partita/test/integration/kubetest"
)

func main() {
	dir := flag.String("dir", "", "where to write the kubeconfig (required)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("kubeharness: -dir is required")
	}
	cfg, err := kubetest.StartServer(flag.Args()...)
	if err != nil {
		log.Fatalf("kubeharness: %v", err)
	}
	path := filepath.Join(*dir, "kubeconfig")
	if err := kubetest.WriteKubeconfig(cfg, path); err != nil {
		log.Fatalf("kubeharness: %v", err)
	}
	fmt.Println("READY", path)
	// Until the test process is gone. A graceful stop of etcd and the API
	// server takes seconds and buys nothing here.
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
