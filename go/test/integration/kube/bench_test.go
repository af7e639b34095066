package kube_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"partita.dev/partita/internal/kube"
	"partita.dev/partita/test/integration/kubetest"
)

// BenchmarkBindThroughput binds pods end to end through the API server
// on 1,000 fake 8-GPU nodes and reports pods per second:
//
//	cd test/integration && go test -run '^$' -bench BindThroughput -benchtime 1x ./kube/
//
// The pods (5,000 one-GPU pods by default, -pods to change) are created
// first; the clock starts when the scheduler starts (it syncs its
// informers, then schedules the backlog) and stops when a separate
// informer has seen every pod bound. So it measures start-up, scheduling
// and binding, not pod creation. Everything (etcd, the API server, the
// scheduler, the watcher) shares this machine's CPUs.
func BenchmarkBindThroughput(b *testing.B) {
	const nodes = 1000
	pods := *benchPods
	cfg := kubetest.Start(b)
	cfg.QPS, cfg.Burst = 100000, 100000
	client := kubernetes.NewForConfigOrDie(cfg)
	e := &env{t: b, ctx: b.Context(), cfg: cfg, client: client, dyn: dynamic.NewForConfigOrDie(cfg)}
	ctx := b.Context()
	parallel(ctx, 64, nodes, func(i int) error {
		return createReadyNode(ctx, client, kubetest.NewGPUNode(fmt.Sprintf("node-%04d", i), 8, nil))
	})
	e.applyCRDs()
	for it := 0; it < b.N; it++ {
		queue := fmt.Sprintf("bench-%d", it)
		if err := e.createQueue(queue, 8*nodes, 8*nodes, nil); err != nil {
			b.Fatal(err)
		}
		parallel(ctx, 64, pods, func(i int) error {
			_, err := client.CoreV1().Pods("default").Create(ctx, benchPod(fmt.Sprintf("p-%d-%05d", it, i), queue), metav1.CreateOptions{})
			return err
		})
		bound, done := watchBound(ctx, client, pods)
		opt := testOptions()
		opt.Interval = time.Second
		opt.BindWorkers = *benchWorkers
		if testing.Verbose() {
			opt.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
		b.ResetTimer()
		start := time.Now()
		s, err := kube.New(kubernetes.NewForConfigOrDie(kube.ClientConfig(cfg)), e.dyn, opt, nil)
		if err != nil {
			b.Fatal(err)
		}
		sctx, cancel := context.WithCancel(ctx)
		if err := s.Start(sctx); err != nil {
			b.Fatal(err)
		}
		synced := time.Since(start)
		go func() { _ = s.Run(sctx) }()
		select {
		case <-done:
		case <-time.After(10 * time.Minute):
			b.Fatalf("only %d of %d pods bound in 10 minutes", bound.Load(), pods)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		cancel()
		b.ReportMetric(float64(pods)/elapsed.Seconds(), "pods/s")
		b.Logf("%d pods bound on %d nodes in %v (informers synced after %v): %.0f pods/s", pods, nodes,
			elapsed.Round(time.Millisecond), synced.Round(time.Millisecond), float64(pods)/elapsed.Seconds())
		parallel(ctx, 64, pods, func(i int) error {
			return client.CoreV1().Pods("default").Delete(ctx, fmt.Sprintf("p-%d-%05d", it, i), *metav1.NewDeleteOptions(0))
		})
	}
}

var (
	benchPods    = flag.Int("pods", 5000, "BenchmarkBindThroughput: pods to bind")
	benchWorkers = flag.Int("bind-workers", 32, "BenchmarkBindThroughput: the scheduler's concurrent binds")
)

func benchPod(name, queue string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{kube.LabelQueue: queue}},
		Spec: corev1.PodSpec{
			SchedulerName: "partita",
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

// watchBound counts, through its own informer, pods that are bound; done
// closes when n are.
func watchBound(ctx context.Context, client kubernetes.Interface, n int) (*atomic.Int64, chan struct{}) {
	var count atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	seen := sync.Map{}
	f := informers.NewSharedInformerFactory(client, 0)
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

// parallel runs f(0..n-1) on workers goroutines and fails on an error.
func parallel(ctx context.Context, workers, n int, f func(int) error) {
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
	if first != nil {
		panic(first)
	}
}
