package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"partita.dev/partita/internal/kube"
)

func init() {
	register("kube", "run as a Kubernetes scheduler for pods with schedulerName partita (in-cluster or --kubeconfig)", runKube)
}

func runKube(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kube", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var ro kube.RunOptions
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty: in-cluster config (or $KUBECONFIG)")
	qps := fs.Float64("kube-api-qps", 500, "API requests per second this client may make")
	burst := fs.Int("kube-api-burst", 1000, "API request burst")
	tolerated := fs.String("tolerated-taints", "", "comma-separated taint keys to ignore on nodes (nvidia.com/* are always ignored)")
	fs.StringVar(&ro.SchedulerName, "scheduler-name", kube.DefaultSchedulerName, "the spec.schedulerName to serve")
	fs.StringVar(&ro.Preset, "preset", "partita", "engine configuration: partita, gang-drf or naive")
	fs.DurationVar(&ro.Grace, "preemption-grace", 0, "grace period of evicted pods (default 30s)")
	fs.DurationVar(&ro.ReconfigCooldown, "mig-cooldown", 0, "least time between two MIG changes of a GPU (default: the preset's, 10m)")
	fs.StringVar(&ro.MIGConfigNamespace, "mig-configmap-namespace", "gpu-operator", "namespace of the mig-parted ConfigMap the MIG manager reads")
	fs.StringVar(&ro.MIGConfigName, "mig-configmap", "partita-mig-parted", "name of that ConfigMap (point ClusterPolicy spec.migManager.config.name at it)")
	fs.StringVar(&ro.MIGReconfigure, "mig-reconfigure", kube.MIGIdleNodes, "when to change MIG layouts: idle-nodes, keep-instances or off")
	fs.IntVar(&ro.BindWorkers, "bind-workers", 32, "concurrent binds and evictions")
	fs.BoolVar(&ro.LeaderElect, "leader-elect", true, "hold a Lease before scheduling (run several replicas)")
	fs.StringVar(&ro.LeaseNamespace, "lease-namespace", "partita-system", "namespace of the leader Lease")
	fs.StringVar(&ro.LeaseName, "lease-name", "partita-scheduler", "name of the leader Lease")
	fs.StringVar(&ro.MetricsAddr, "metrics-addr", ":8080", "address of /metrics, /healthz and /readyz; empty: off")
	fs.StringVar(&ro.WebhookAddr, "webhook-addr", "", "address of the admission webhook (TLS), e.g. :9443; empty: off")
	fs.StringVar(&ro.TLSCertFile, "tls-cert-file", "/etc/partita/tls/tls.crt", "webhook serving certificate")
	fs.StringVar(&ro.TLSKeyFile, "tls-key-file", "/etc/partita/tls/tls.key", "webhook serving key")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *tolerated != "" {
		ro.ToleratedTaints = strings.Split(*tolerated, ",")
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintln(stderr, "partita kube:", err)
		return 1
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	cfg.UserAgent = "partita-scheduler"
	ro.Logger = slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := kube.Run(ctx, cfg, ro); err != nil {
		fmt.Fprintln(stderr, "partita kube:", err)
		return 1
	}
	return 0
}

// restConfig is the in-cluster config, else the kubeconfig named by the
// flag or $KUBECONFIG or ~/.kube/config.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}
