package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// RunOptions are Options plus the process around the scheduler.
type RunOptions struct {
	Options
	// LeaderElect: only the holder of the Lease LeaseNamespace/LeaseName
	// schedules; the others keep their caches warm and serve the webhook.
	LeaderElect               bool
	LeaseNamespace, LeaseName string
	Identity                  string // default: hostname + random suffix
	// MetricsAddr serves /metrics, /healthz (liveness: the process and,
	// when leading, its lease renewal) and /readyz (informers synced).
	MetricsAddr string
	// WebhookAddr serves the admission webhook over TLS with the given
	// certificate, read when the files appear and again when they change
	// (a renewal needs no restart); "" turns it off.
	WebhookAddr             string
	TLSCertFile, TLSKeyFile string
	// OnListen, when set, is told the addresses actually bound (tests pass
	// ":0").
	OnListen func(metrics, webhook string)
}

// Lease timing: client-go's recommended values (as kube-scheduler's).
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// ClientConfig returns cfg set up for the scheduler's traffic: protobuf
// for built-in types (cheaper than JSON for the API server and for us;
// the dynamic client of the custom resources still speaks JSON).
func ClientConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.ContentType = "application/vnd.kubernetes.protobuf"
	out.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return out
}

// Run runs the scheduler until ctx ends or, with leader election, until
// this replica loses the lease (it then returns an error; the Deployment
// restarts it, which is how kube-scheduler behaves too).
func Run(ctx context.Context, cfg *rest.Config, ro RunOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client, err := kubernetes.NewForConfig(ClientConfig(cfg))
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := NewMetrics(reg)
	s, err := New(client, dyn, ro.Options, m)
	if err != nil {
		return err
	}
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	errc := make(chan error, 2)
	metricsAddr, err := serve(ctx, ro.MetricsAddr, healthMux(reg, s, watchdog), "", "", errc)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	webhookAddr := ""
	if ro.WebhookAddr != "" {
		mux := http.NewServeMux()
		mux.Handle(WebhookPath, &Webhook{SchedulerName: s.opt.SchedulerName, Headroom: s.engine.Config().Headroom, Nodes: s.Nodes})
		if webhookAddr, err = serve(ctx, ro.WebhookAddr, mux, ro.TLSCertFile, ro.TLSKeyFile, errc); err != nil {
			return err
		}
	}
	if ro.OnListen != nil {
		ro.OnListen(metricsAddr, webhookAddr)
	}
	go func() {
		if !ro.LeaderElect {
			m.leader.Set(1)
			errc <- s.Run(ctx)
			return
		}
		errc <- lead(ctx, client, ro, watchdog, m, s)
	}()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

// lead runs the scheduler while this replica holds the lease.
func lead(ctx context.Context, client kubernetes.Interface, ro RunOptions, watchdog *leaderelection.HealthzAdaptor, m *Metrics, s *Scheduler) error {
	id := ro.Identity
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + string(uuid.NewUUID())
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ro.LeaseNamespace, Name: ro.LeaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	lost := errors.New("lost the leader lease")
	result := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		ReleaseOnCancel: true, WatchDog: watchdog, Name: ro.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				m.leader.Set(1)
				s.opt.Logger.Info("leading", "identity", id)
				if err := s.Run(ctx); err != nil {
					result <- err
				}
			},
			OnStoppedLeading: func() {
				m.leader.Set(0)
				select {
				case result <- lost:
				default:
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	select {
	case err := <-result:
		return err
	default:
		return lost
	}
}

func healthMux(reg *prometheus.Registry, s *Scheduler, watchdog *leaderelection.HealthzAdaptor) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := watchdog.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.Ready() {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// serve listens on addr and serves h (over TLS when a certificate is
// given) until ctx ends; it returns the bound address.
func serve(ctx context.Context, addr string, h http.Handler, cert, key string, errc chan<- error) (string, error) {
	if addr == "" {
		return "", nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if cert != "" {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: (&certFiles{cert: cert, key: key}).get}
	}
	go func() {
		var err error
		if cert != "" {
			err = srv.ServeTLS(l, "", "")
		} else {
			err = srv.Serve(l)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			select {
			case errc <- err:
			default:
			}
		}
	}()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	return l.Addr().String(), nil
}

// certFiles serves the certificate in a pair of files, read at each
// handshake (webhook calls are few: one per pod created) and parsed again
// when the bytes change: the Secret that holds it may be mounted after the
// process starts (it is optional in the Deployment, so the scheduler runs
// without the webhook) and cert-manager renews it in place. Until the
// files are readable, handshakes fail with the reason; a renewal that
// cannot be read keeps the last good pair.
type certFiles struct {
	cert, key string

	mu      sync.Mutex
	loaded  *tls.Certificate
	certPEM []byte
	keyPEM  []byte
}

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(c.cert)
	var keyPEM []byte
	if err == nil {
		keyPEM, err = os.ReadFile(c.key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && c.loaded != nil && bytes.Equal(certPEM, c.certPEM) && bytes.Equal(keyPEM, c.keyPEM) {
		return c.loaded, nil
	}
	if err == nil {
		pair, perr := tls.X509KeyPair(certPEM, keyPEM)
		if perr == nil {
			c.loaded, c.certPEM, c.keyPEM = &pair, certPEM, keyPEM
			return c.loaded, nil
		}
		err = fmt.Errorf("%s, %s: %w", c.cert, c.key, perr)
	}
	if c.loaded != nil {
		return c.loaded, nil
	}
	return nil, fmt.Errorf("webhook certificate: %w", err)
}
