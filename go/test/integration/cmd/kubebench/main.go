// Command kubebench measures bind throughput of Kubernetes schedulers side by
// side against one kube-apiserver and etcd (issue 48, items 5 and 6): the Go
// build's `partita kube`, the Rust build's `partita kube`, and the stock
// kube-scheduler built from the same Kubernetes modules as this program.
//
// It starts etcd and kube-apiserver in this process (kubetest), creates
// -nodes fake 8-GPU nodes once, then for every round, client rate limit and
// scheduler: creates -pods one-GPU pods in a fresh namespace, starts the
// scheduler as a child process (the clock starts here), and stops the
// clock when its own informer has seen every pod bound. It then reads the
// scheduler's CPU time from /proc/PID/stat, waits -settle, counts the
// `Scheduled` events that reached the server, stops the scheduler and
// deletes the pods (grace 0). One line per run, then a table of medians.
//
// Everything (etcd, the API server, this watcher, the scheduler) shares
// the machine's CPUs, as in go/test/integration/kube/bench_test.go. Build
// it without -trimpath: the API server's helpers find testdata by source
// path. scripts/kube-bench builds the binaries and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"partita.dev/partita/test/integration/kubetest"
)

// The Queue every partita pod is labelled with (partita.dev/queue); the
// CRDs come from deploy/kubernetes/crds.yaml.
const (
	labelQueue = "partita.dev/queue"
	queueName  = "bench"
)

var queuesGVR = schema.GroupVersionResource{Group: "partita.dev", Version: "v1alpha1", Resource: "queues"}

// scheduler is one contender: how to start it at a client rate limit and
// which spec.schedulerName its pods carry.
type scheduler struct {
	name          string
	binary        string
	schedulerName string
	command       func(s *scheduler, kubeconfig, dir string, l limit) ([]string, error)
}

type limit struct{ qps, burst int }

func (l limit) String() string { return fmt.Sprintf("%d/%d", l.qps, l.burst) }

// run is one measurement.
type run struct {
	round     int
	sched     string
	limit     limit
	pods      int
	bound     int64
	elapsed   time.Duration
	cpu       float64 // scheduler process CPU seconds (utime+stime) until the last pod was bound
	events    int     // bound pods named by a Scheduled event
	evCount   int     // Scheduled events counting aggregated repeats (count, series.count)
	err       error
	startedAt time.Time
}

func (r run) podsPerSec() float64 { return float64(r.bound) / r.elapsed.Seconds() }
func (r run) cpuPer1k() float64   { return r.cpu / float64(r.bound) * 1000 }

func main() {
	nodes := flag.Int("nodes", 1000, "fake 8-GPU nodes")
	pods := flag.Int("pods", 5000, "one-GPU pods per run")
	rounds := flag.Int("rounds", 2, "rounds; each runs every scheduler at every limit, the order rotating per round")
	only := flag.String("schedulers", "go,rust,kube-scheduler", "comma-separated schedulers to run: go, rust, kube-scheduler")
	goBin := flag.String("go", "", "the Go build's partita binary (required for go)")
	rustBin := flag.String("rust", "", "the Rust build's partita binary (required for rust); any binary taking `partita kube`'s flags")
	ksBin := flag.String("kube-scheduler", "", "kube-scheduler binary (required for kube-scheduler)")
	limits := flag.String("limits", "500/500,100000/100000", "comma-separated client rate limits QPS/BURST")
	settle := flag.Duration("settle", 5*time.Second, "wait after the last bind before counting Scheduled events (the scheduler still runs)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up on a run after this long")
	crds := flag.String("crds", defaultCRDs(), "deploy/kubernetes/crds.yaml")
	warmup := flag.Bool("warmup", true, "first run the first scheduler once at the first limit, not counted (the first run after the API server starts is slow)")
	logDir := flag.String("logdir", "", "where the schedulers' logs and configs go (default: a new temp dir)")
	flag.Parse()
	log.SetFlags(log.Ltime)

	var contenders []*scheduler
	for _, name := range strings.Split(*only, ",") {
		switch name = strings.TrimSpace(name); name {
		case "go":
			contenders = append(contenders, &scheduler{name: "go", binary: *goBin, schedulerName: "partita", command: partitaCommand})
		case "rust":
			contenders = append(contenders, &scheduler{name: "rust", binary: *rustBin, schedulerName: "partita", command: partitaCommand})
		case "kube-scheduler":
			contenders = append(contenders, &scheduler{name: "kube-scheduler", binary: *ksBin, schedulerName: "default-scheduler", command: kubeSchedulerCommand})
		default:
			log.Fatalf("kubebench: unknown scheduler %q (go, rust, kube-scheduler)", name)
		}
	}
	for _, s := range contenders {
		if s.binary == "" {
			log.Fatalf("kubebench: no binary for %s (-%s)", s.name, s.name)
		}
		if _, err := os.Stat(s.binary); err != nil {
			log.Fatalf("kubebench: %s: %v", s.name, err)
		}
	}
	var ls []limit
	for _, f := range strings.Split(*limits, ",") {
		q, b, ok := strings.Cut(strings.TrimSpace(f), "/")
		qps, err1 := strconv.Atoi(q)
		burst, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || qps <= 0 || burst <= 0 {
			log.Fatalf("kubebench: bad limit %q, want QPS/BURST", f)
		}
		ls = append(ls, limit{qps, burst})
	}
	if *logDir == "" {
		d, err := os.MkdirTemp("", "kubebench")
		if err != nil {
			log.Fatal(err)
		}
		*logDir = d
	} else if err := os.MkdirAll(*logDir, 0o755); err != nil {
		log.Fatal(err)
	}

	// The API server in this process logs through klog; keep its lines
	// out of the table.
	apiLog, err := os.Create(filepath.Join(*logDir, "apiserver.log"))
	if err != nil {
		log.Fatal(err)
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := klogFlags.Set(name, value); err != nil {
			log.Fatal(err)
		}
	}
	klog.SetOutput(apiLog)

	ctx := context.Background()
	cfg, err := kubetest.StartServer()
	if err != nil {
		log.Fatalf("kubebench: %v", err)
	}
	kubeconfig := filepath.Join(*logDir, "kubeconfig")
	if err := kubetest.WriteKubeconfig(cfg, kubeconfig); err != nil {
		log.Fatalf("kubebench: %v", err)
	}
	// This process's own client (setup, watching, counting) has no
	// effective limit; the schedulers get theirs from their flags.
	cfg.QPS, cfg.Burst = 100000, 100000
	client := kubernetes.NewForConfigOrDie(cfg)
	if err := setup(ctx, cfg, client, *crds, *nodes); err != nil {
		log.Fatalf("kubebench: %v", err)
	}
	log.Printf("kube-apiserver %s, %d nodes ready; logs in %s", cfg.Host, *nodes, *logDir)
	fmt.Printf("%-5s %-14s %-13s %6s %9s %9s %8s %11s %13s\n", "round", "scheduler", "QPS/burst", "bound", "seconds", "pods/s", "CPU s", "CPU s/1k", "Scheduled ev")

	var runs []run
	n := 0
	if *warmup && len(contenders) > 0 {
		n++
		res := measure(ctx, client, contenders[0], ls[0], 0, n, *pods, kubeconfig, *logDir, *settle, *timeout)
		printRun(res) // round "warm": not counted
	}
	for r := range *rounds {
		// Rotate who goes first, so that no scheduler always meets the
		// machine's state after the same other one.
		order := slices.Clone(contenders)
		for range r % max(1, len(order)) {
			order = append(order[1:], order[0])
		}
		for _, l := range ls {
			for _, s := range order {
				n++
				res := measure(ctx, client, s, l, r+1, n, *pods, kubeconfig, *logDir, *settle, *timeout)
				runs = append(runs, res)
				printRun(res)
			}
		}
	}
	summary(runs, contenders, ls)
	failed := false
	for _, r := range runs {
		if r.err != nil {
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// defaultCRDs is deploy/kubernetes/crds.yaml of the checkout this program
// was built from.
func defaultCRDs() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "..", "deploy", "kubernetes", "crds.yaml")
}

func partitaCommand(s *scheduler, kubeconfig, _ string, l limit) ([]string, error) {
	return []string{s.binary, "kube", "--kubeconfig", kubeconfig, "--leader-elect=false", "--metrics-addr", "127.0.0.1:0",
		"--kube-api-qps", strconv.Itoa(l.qps), "--kube-api-burst", strconv.Itoa(l.burst)}, nil
}

// kubeSchedulerCommand writes a KubeSchedulerConfiguration with the
// client's rate limit and leader election off; its default profile serves
// default-scheduler. --secure-port 0 turns its HTTPS endpoint off.
func kubeSchedulerCommand(s *scheduler, kubeconfig, dir string, l limit) ([]string, error) {
	path := filepath.Join(dir, fmt.Sprintf("kube-scheduler-%d-%d.yaml", l.qps, l.burst))
	conf := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, kubeconfig, l.qps, l.burst)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return []string{s.binary, "--config", path, "--secure-port", "0", "-v", "1"}, nil
}

// setup creates the nodes, the CRDs and the Queue the partita pods use.
func setup(ctx context.Context, cfg *rest.Config, client kubernetes.Interface, crds string, nodes int) error {
	if err := parallel(ctx, 64, nodes, func(i int) error {
		return createReadyNode(ctx, client, kubetest.NewGPUNode(fmt.Sprintf("node-%04d", i), 8, nil))
	}); err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	if err := applyCRDs(ctx, cfg, crds); err != nil {
		return err
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	queue := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "partita.dev/v1alpha1", "kind": "Queue",
		"metadata": map[string]any{"name": queueName},
		"spec":     map[string]any{"team": queueName, "guaranteedGPUs": int64(8 * nodes), "burstGPUs": int64(8 * nodes)},
	}}
	return poll(ctx, 30*time.Second, "create the Queue", func() error {
		_, err := dyn.Resource(queuesGVR).Create(ctx, queue, metav1.CreateOptions{})
		return err
	})
}

// createReadyNode creates n and drops the not-ready taint the API server's
// admission adds (no node lifecycle controller runs here to drop it).
func createReadyNode(ctx context.Context, c kubernetes.Interface, n *corev1.Node) error {
	got, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	var keep []corev1.Taint
	for _, t := range got.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			keep = append(keep, t)
		}
	}
	if len(keep) == len(got.Spec.Taints) {
		return nil
	}
	got.Spec.Taints = keep
	_, err = c.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{})
	return err
}

func applyCRDs(ctx context.Context, cfg *rest.Config, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("CRDs: %w", err)
	}
	defer f.Close()
	ext := apiextensionsclient.NewForConfigOrDie(cfg)
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := dec.Decode(&crd); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if crd.Name == "" {
			continue
		}
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}

func benchPod(name, ns, schedulerName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{labelQueue: queueName}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			Containers: []corev1.Container{{
				Name: "main", Image: "example.invalid/work",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
					Limits:   corev1.ResourceList{kubetest.ResourceGPU: resource.MustParse("1")},
				},
			}},
		},
	}
}

// measure runs one scheduler once: pods first, then the clock and the
// scheduler, until every pod is seen bound.
func measure(ctx context.Context, client kubernetes.Interface, s *scheduler, l limit, round, n, pods int,
	kubeconfig, dir string, settle, timeout time.Duration) run {
	res := run{round: round, sched: s.name, limit: l, pods: pods}
	ns := fmt.Sprintf("bench-%d-%s", n, s.name)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		res.err = fmt.Errorf("create namespace: %w", err)
		return res
	}
	if err := parallel(ctx, 64, pods, func(i int) error {
		_, err := client.CoreV1().Pods(ns).Create(ctx, benchPod(fmt.Sprintf("p-%05d", i), ns, s.schedulerName), metav1.CreateOptions{})
		return err
	}); err != nil {
		res.err = fmt.Errorf("create pods: %w", err)
		return res
	}
	defer deletePods(ctx, client, ns)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	bound, done := watchBound(wctx, client, ns, pods)

	args, err := s.command(s, kubeconfig, dir, l)
	if err != nil {
		res.err = err
		return res
	}
	logPath := filepath.Join(dir, fmt.Sprintf("run-%02d-%s-%d.log", n, s.name, l.qps))
	logFile, err := os.Create(logPath)
	if err != nil {
		res.err = err
		return res
	}
	defer logFile.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	res.startedAt = time.Now()
	if err := cmd.Start(); err != nil {
		res.err = fmt.Errorf("start %s: %w", s.name, err)
		return res
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	defer stop()

	select {
	case <-done:
		res.elapsed = time.Since(res.startedAt)
	case err := <-exited:
		stopped = true
		res.elapsed = time.Since(res.startedAt)
		res.err = fmt.Errorf("%s exited early (%v); see %s", s.name, err, logPath)
	case <-time.After(timeout):
		res.elapsed = time.Since(res.startedAt)
		res.err = fmt.Errorf("only %d of %d pods bound in %v; see %s", bound.Load(), pods, timeout, logPath)
	}
	res.bound = bound.Load()
	if !stopped {
		if res.cpu, err = processCPU(cmd.Process.Pid); err != nil && res.err == nil {
			res.err = err
		}
	}
	if res.err != nil {
		return res
	}
	// Events may still be queued in the scheduler: give them time to
	// arrive while it runs, as it would in a cluster.
	time.Sleep(settle)
	res.events, res.evCount, err = scheduledEvents(ctx, client, ns)
	if err != nil {
		res.err = fmt.Errorf("count events: %w", err)
	}
	return res
}

// processCPU is utime+stime of a process (all its threads) in seconds,
// from /proc/PID/stat.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields after it start with the state (field 3). utime and stime are
	// fields 14 and 15, in clock ticks (USER_HZ, 100 on Linux).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	const userHZ = 100
	return (utime + stime) / userHZ, nil
}

// scheduledEvents counts the pods of ns that a `Scheduled` event names
// (involvedObject, which is `regarding` for events.k8s.io/v1 events), and
// the occurrences the events stand for: an aggregated event's count or
// series count covers that many.
func scheduledEvents(ctx context.Context, client kubernetes.Interface, ns string) (pods, occurrences int, err error) {
	seen := map[string]bool{}
	opts := metav1.ListOptions{FieldSelector: "reason=Scheduled", Limit: 1000}
	for {
		list, err := client.CoreV1().Events(ns).List(ctx, opts)
		if err != nil {
			return 0, 0, err
		}
		for _, ev := range list.Items {
			if ev.Reason != "Scheduled" || ev.InvolvedObject.Kind != "Pod" {
				continue
			}
			seen[ev.InvolvedObject.Name] = true
			c := max(1, int(ev.Count))
			if ev.Series != nil {
				c = max(c, int(ev.Series.Count))
			}
			occurrences += c
		}
		if list.Continue == "" {
			return len(seen), occurrences, nil
		}
		opts.Continue = list.Continue
	}
}

// deletePods deletes every pod of ns at once with grace 0 (there is no
// kubelet to finish a graceful deletion) and waits until they are gone,
// so the next run finds every GPU free.
func deletePods(ctx context.Context, client kubernetes.Interface, ns string) {
	zero := int64(0)
	err := poll(ctx, 2*time.Minute, "delete the pods of "+ns, func() error {
		if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			return err
		}
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("pods left")
		}
		return nil
	})
	if err != nil {
		log.Fatalf("kubebench: %v", err)
	}
}

// watchBound counts, through its own informer, pods of ns that are bound;
// done closes when n are. It returns once the informer has synced.
func watchBound(ctx context.Context, client kubernetes.Interface, ns string, n int) (*atomic.Int64, chan struct{}) {
	var count atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	seen := sync.Map{}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	check := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		if _, dup := seen.LoadOrStore(p.UID, true); !dup && count.Add(1) >= int64(n) {
			once.Do(func() { close(done) })
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, o any) { check(o) }})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return &count, done
}

// parallel runs f(0..n-1) on workers goroutines; it returns the first error.
func parallel(ctx context.Context, workers, n int, f func(int) error) error {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	var first error
	var mu sync.Mutex
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// poll calls f every 200ms until it succeeds or d has passed.
func poll(ctx context.Context, d time.Duration, what string, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func printRun(r run) {
	round := strconv.Itoa(r.round)
	if r.round == 0 {
		round = "warm"
	}
	if r.err != nil && r.bound == 0 {
		fmt.Printf("%-5s %-14s %-13s FAILED: %v\n", round, r.sched, r.limit, r.err)
		return
	}
	fmt.Printf("%-5s %-14s %-13s %6d %9.2f %9.1f %8.2f %11.2f %6d/%-6d",
		round, r.sched, r.limit, r.bound, r.elapsed.Seconds(), r.podsPerSec(), r.cpu, r.cpuPer1k(), r.events, r.bound)
	if r.evCount != r.events {
		fmt.Printf(" (%d counted)", r.evCount)
	}
	if r.err != nil {
		fmt.Printf(" FAILED: %v", r.err)
	}
	fmt.Println()
}

// summary prints, per scheduler and limit, the median and range of the
// successful runs.
func summary(runs []run, contenders []*scheduler, ls []limit) {
	fmt.Printf("\nmedians over successful runs (range in brackets)\n")
	fmt.Printf("%-14s %-13s %4s %24s %22s %20s %22s\n", "scheduler", "QPS/burst", "runs", "pods/s", "CPU s", "CPU s/1k pods", "Scheduled events")
	for _, l := range ls {
		for _, s := range contenders {
			var rate, cpu, per1k, ev []float64
			for _, r := range runs {
				if r.sched == s.name && r.limit == l && r.err == nil {
					rate = append(rate, r.podsPerSec())
					cpu = append(cpu, r.cpu)
					per1k = append(per1k, r.cpuPer1k())
					ev = append(ev, float64(r.events))
				}
			}
			if len(rate) == 0 {
				fmt.Printf("%-14s %-13s %4d %24s\n", s.name, l, 0, "no successful run")
				continue
			}
			fmt.Printf("%-14s %-13s %4d %24s %22s %20s %22s\n", s.name, l, len(rate),
				stat(rate, "%.0f"), stat(cpu, "%.2f"), stat(per1k, "%.2f"), stat(ev, "%.0f"))
		}
	}
}

func stat(xs []float64, format string) string {
	sort.Float64s(xs)
	var med float64
	if n := len(xs); n%2 == 1 {
		med = xs[n/2]
	} else {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return fmt.Sprintf(format+" ["+format+"-"+format+"]", med, xs[0], xs[len(xs)-1])
}
