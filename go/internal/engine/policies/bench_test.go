package policies_test

import (
	"os"
	"path/filepath"
	"testing"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/sim/fill"
	"partita.dev/partita/internal/trace"
)

var sharedData = filepath.Join("..", "..", "..", "..", "..", "shared", "data", "alibaba-gpu-v2023")

// BenchmarkPlace measures placements per second on the Alibaba cluster
// (1,213 nodes, 6,212 GPUs) with the default pod list arriving in a
// shuffled order, each placement applied to the cluster as the simulator
// does. When the cluster is full it is rebuilt (outside the timer), so the
// figure covers an empty-to-full fill: the cache warm-up included.
func BenchmarkPlace(b *testing.B) {
	for _, name := range []string{"fgd", "partita", "best-fit", "k8s-default"} {
		b.Run(name, func(b *testing.B) { benchmarkPlace(b, name) })
	}
}

func benchmarkPlace(b *testing.B, policy string) {
	nodes, err := trace.ReadNodesFile(filepath.Join(sharedData, "openb_node_list_gpu_node.csv"))
	if err != nil {
		if os.IsNotExist(err) {
			b.Skip("shared data not present")
		}
		b.Fatal(err)
	}
	pods, err := trace.ReadPodsFile(filepath.Join(sharedData, "openb_pod_list_default.csv"))
	if err != nil {
		b.Fatal(err)
	}
	var milli int64
	for _, n := range nodes {
		milli += int64(n.GPUs) * 1000
	}
	arrivals := fill.Arrivals(pods, milli, 1.3, random.New(42))
	fresh := func() (*cluster.State, *engine.Placer) {
		st, err := fill.Nodes(nodes, nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg := policies.ConfigFor(st, fill.Typical(pods))
		cfg.Shapes = fill.Shapes(pods)
		pol, err := policies.New(policy, cfg)
		if err != nil {
			b.Fatal(err)
		}
		return st, engine.NewPlacer(pol, random.New(1))
	}
	st, placer := fresh()
	next := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if next == len(arrivals) {
			b.StopTimer()
			st, placer = fresh()
			next = 0
			b.StartTimer()
		}
		a, err := placer.Place(st, arrivals[next].Task)
		next++
		if err != nil {
			continue // dropped, as in the fill protocol
		}
		if err := st.Allocate(a); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "placements/s")
}
