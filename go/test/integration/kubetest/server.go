package kubetest

import (
	"encoding/base64"
	"fmt"
	"log"
	"os"

	"github.com/google/uuid"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/rest"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// StartServer starts a kube-apiserver on the shared embedded etcd for a
// program rather than a test (cmd/kubeharness, cmd/kubebench) and returns
// its cluster-admin rest.Config. It runs until the process exits.
// extraFlags go to the kube-apiserver after its defaults.
func StartServer(extraFlags ...string) (*rest.Config, error) {
	etcdURL, err := Etcd()
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	storage := storagebackend.NewDefaultConfig("/"+uuid.NewString()+"/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	flags := []string{
		// The ServiceAccount admission plugin rejects pods until the
		// namespace's "default" ServiceAccount exists, which a controller
		// that does not run here would create.
		"--disable-admission-plugins=ServiceAccount",
	}
	flags = append(flags, extraFlags...)
	server, err := kubeapiservertesting.StartTestServer(&programTB{}, nil, flags, storage)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	return rest.CopyConfig(server.ClientConfig), nil
}

// WriteKubeconfig writes a kubeconfig for cfg (bearer token, the loopback
// CA) to path, for clients in other processes.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	ca := cfg.TLSClientConfig.CAData
	if len(ca) == 0 && cfg.TLSClientConfig.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
			return err
		}
	}
	// The client config trusts the loopback CA, whose certificate names
	// the server "apiserver-loopback-client", not 127.0.0.1.
	serverName := cfg.TLSClientConfig.ServerName
	if serverName == "" {
		serverName = "127.0.0.1"
	}
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
	return os.WriteFile(path, []byte(kubeconfig), 0o600)
}

// programTB is the test context the API server's helpers want, for a
// program: it logs, and a fatal error ends the process.
type programTB struct{ cleanups []func() }

func (t *programTB) Attr(key, value string)            {}
func (t *programTB) Chdir(dir string)                  { _ = os.Chdir(dir) }
func (t *programTB) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *programTB) Error(args ...any)                 { log.Print(args...) }
func (t *programTB) Errorf(format string, args ...any) { log.Printf(format, args...) }
func (t *programTB) Fail()                             {}
func (t *programTB) FailNow()                          { log.Fatal("kube-apiserver: failed") }
func (t *programTB) Failed() bool                      { return false }
func (t *programTB) Fatal(args ...any)                 { log.Fatal(args...) }
func (t *programTB) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }
func (t *programTB) Helper()                           {}
func (t *programTB) Log(args ...any)                   {}
func (t *programTB) Logf(format string, args ...any)   {}
func (t *programTB) Name() string                      { return "kubetest" }
func (t *programTB) Setenv(key, value string)          { _ = os.Setenv(key, value) }
func (t *programTB) Skip(args ...any)                  {}
func (t *programTB) Skipf(format string, args ...any)  {}
func (t *programTB) SkipNow()                          {}
func (t *programTB) Skipped() bool                     { return false }
func (t *programTB) TempDir() string {
	d, err := os.MkdirTemp("", "kubetest")
	if err != nil {
		log.Fatal(err)
	}
	return d
}
