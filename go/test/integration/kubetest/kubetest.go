// Package kubetest runs a real kube-apiserver inside the test process, backed
// by an embedded etcd, so that integration tests talk to the same API server
// code (validation, admission, subresources, CRDs, watch) that a cluster runs.
//
// There are no nodes, kubelets, controllers or schedulers: tests create Node
// objects themselves (see NewGPUNode) and play every other component.
//
// Typical use:
//
//	func TestMain(m *testing.M) { kubetest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		cfg := kubetest.Start(t)
//		client := kubernetes.NewForConfigOrDie(cfg)
//		...
//	}
package kubetest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/rest"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// etcd is shared by every API server of the test binary: starting it costs
// about a second, and each API server gets its own key prefix, so tests stay
// isolated from each other.
var etcd struct {
	once sync.Once
	url  string // client URL, e.g. http://127.0.0.1:40123
	err  error
	stop func()
}

// Main is meant to be called from TestMain. It runs the tests, then stops the
// shared etcd and removes its data directory. Start also works without it;
// etcd then just dies with the process and leaves its temp dir behind.
func Main(m *testing.M) {
	code := m.Run()
	if etcd.stop != nil {
		etcd.stop()
	}
	os.Exit(code)
}

// Start starts a kube-apiserver for this test and returns a rest.Config with
// cluster-admin rights (system:masters, loopback token). The server has its
// own storage prefix in the shared etcd, started on first use, and is torn
// down by t.Cleanup. extraFlags are kube-apiserver command-line flags, e.g.
// "--feature-gates=Foo=true".
func Start(t testing.TB, extraFlags ...string) *rest.Config {
	t.Helper()
	etcd.once.Do(startEtcd)
	if etcd.err != nil {
		t.Fatalf("start embedded etcd: %v", etcd.err)
	}

	storage := storagebackend.NewDefaultConfig("/"+uuid.NewString()+"/registry", nil)
	storage.Transport.ServerList = []string{etcd.url}

	flags := append([]string{
		// The ServiceAccount admission plugin rejects pods until the
		// namespace's "default" ServiceAccount exists, which is created
		// by a controller (kube-controller-manager) that does not run
		// here.
		"--disable-admission-plugins=ServiceAccount",
	}, extraFlags...)

	// StartTestServerOrDie generates its own serving certificates and
	// service-account key, listens on a free loopback port and waits for
	// /healthz and the "default" namespace. It locates its testdata
	// directory via runtime.Caller, so do not build with -trimpath.
	server := kubeapiservertesting.StartTestServerOrDie(t, nil, flags, storage)
	t.Cleanup(server.TearDownFn)
	return rest.CopyConfig(server.ClientConfig)
}

// startEtcd starts one embedded single-member etcd on free loopback ports.
func startEtcd() {
	dir, err := os.MkdirTemp("", "kubetest-etcd")
	if err != nil {
		etcd.err = err
		return
	}
	ports, err := freePorts(2)
	if err != nil {
		etcd.err = err
		return
	}
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}

	cfg := embed.NewConfig()
	cfg.Dir = dir
	// Data is thrown away after the run, so durability buys nothing;
	// fsync would dominate the cost of every write.
	cfg.UnsafeNoFsync = true
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// etcd logs every request at info level, and on Close it logs its
	// closed listeners as errors with stack traces; problems that matter
	// surface as API server errors anyway.
	cfg.LogLevel = "fatal"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		etcd.err = err
		return
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Close()
		os.RemoveAll(dir)
		etcd.err = fmt.Errorf("etcd not ready after a minute")
		return
	}
	etcd.url = clientURL.String()
	etcd.stop = func() {
		e.Close()
		os.RemoveAll(dir)
	}
}

// freePorts asks the kernel for n free loopback ports. Another process could
// take one before etcd binds it; that is unlikely enough for tests.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Etcd starts the shared embedded etcd on first use and returns its
// client URL: for cmd/kubeharness, which serves the Rust tests.
func Etcd() (string, error) {
	etcd.once.Do(startEtcd)
	return etcd.url, etcd.err
}
