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
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/google/uuid"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"

	"partita.dev/partita/test/integration/kubetest"
)

func main() {
	dir := flag.String("dir", "", "where to write the kubeconfig (required)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("kubeharness: -dir is required")
	}
	etcdURL, err := kubetest.Etcd()
	if err != nil {
		log.Fatalf("kubeharness: etcd: %v", err)
	}
	storage := storagebackend.NewDefaultConfig("/"+uuid.NewString()+"/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	flags := []string{
		// The ServiceAccount admission plugin rejects pods until the
		// namespace's "default" ServiceAccount exists, which a controller
		// that does not run here would create.
		"--disable-admission-plugins=ServiceAccount",
	}
	flags = append(flags, flag.Args()...)
	server, err := kubeapiservertesting.StartTestServer(&harnessTB{}, nil, flags, storage)
	if err != nil {
		log.Fatalf("kubeharness: kube-apiserver: %v", err)
	}
	cfg := server.ClientConfig
	ca := cfg.TLSClientConfig.CAData
	if len(ca) == 0 && cfg.TLSClientConfig.CAFile != "" {
		if ca, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
			log.Fatalf("kubeharness: %v", err)
		}
	}
	// The client config trusts the loopback CA, whose certificate names
	// the server "apiserver-loopback-client", not 127.0.0.1.
	serverName := cfg.TLSClientConfig.ServerName
	if serverName == "" {
		serverName = "127.0.0.1"
	}
	path := filepath.Join(*dir, "kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: harness
  cluster:
    server: %s
    certificate-authority-data: %s
    tls-server-name: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: harness
  context: {cluster: harness, user: admin}
current-context: harness
`, cfg.Host, base64.StdEncoding.EncodeToString(ca), serverName, cfg.BearerToken)
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		log.Fatalf("kubeharness: %v", err)
	}
	fmt.Println("READY", path)
	// Until the test process is gone. A graceful stop of etcd and the API
	// server takes seconds and buys nothing here.
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// harnessTB is the test context the API server's helpers want, for a
// program: it logs, and a fatal error ends the process.
type harnessTB struct{ cleanups []func() }

func (t *harnessTB) Attr(key, value string)            {}
func (t *harnessTB) Chdir(dir string)                  { _ = os.Chdir(dir) }
func (t *harnessTB) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *harnessTB) Error(args ...any)                 { log.Print(args...) }
func (t *harnessTB) Errorf(format string, args ...any) { log.Printf(format, args...) }
func (t *harnessTB) Fail()                             {}
func (t *harnessTB) FailNow()                          { log.Fatal("kubeharness: failed") }
func (t *harnessTB) Failed() bool                      { return false }
func (t *harnessTB) Fatal(args ...any)                 { log.Fatal(args...) }
func (t *harnessTB) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }
func (t *harnessTB) Helper()                           {}
func (t *harnessTB) Log(args ...any)                   {}
func (t *harnessTB) Logf(format string, args ...any)   {}
func (t *harnessTB) Name() string                      { return "kubeharness" }
func (t *harnessTB) Setenv(key, value string)          { _ = os.Setenv(key, value) }
func (t *harnessTB) Skip(args ...any)                  {}
func (t *harnessTB) Skipf(format string, args ...any)  {}
func (t *harnessTB) SkipNow()                          {}
func (t *harnessTB) Skipped() bool                     { return false }
func (t *harnessTB) TempDir() string {
	d, err := os.MkdirTemp("", "kubeharness")
	if err != nil {
		log.Fatal(err)
	}
	return d
}
