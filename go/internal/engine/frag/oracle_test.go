package frag_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/random"
)

// The oracle tests check Typicals and Node against a naive version written
// straight from fgd-protocol.md §4, over random workloads and nodes.

// naiveTypical is one kept shape of the naive version.
type naiveTypical struct {
	key   frag.Shape // memory cleared
	mem   int64      // mean memory
	p     float64
	specs []string // canonical allowed models; nil = any
}

// naiveTypicals counts keys without memory, orders them by count and then
// by the larger (cpu, milli, num, spec) with a selection sort, keeps the
// shortest prefix with at least threshold of all tasks, and renormalises.
func naiveTypicals(shapes []frag.Shape, threshold float64, canonical func(string) string) []naiveTypical {
	var keys []frag.Shape
	count := map[frag.Shape]int{}
	memSum := map[frag.Shape]int64{}
	for _, s := range shapes {
		k := s
		k.MemMiB = 0
		if count[k] == 0 {
			keys = append(keys, k)
		}
		count[k]++
		memSum[k] += s.MemMiB
	}
	before := func(a, b frag.Shape) bool {
		if count[a] != count[b] {
			return count[a] > count[b]
		}
		if a.CPUMilli != b.CPUMilli {
			return a.CPUMilli > b.CPUMilli
		}
		if a.Milli != b.Milli {
			return a.Milli > b.Milli
		}
		if a.Num != b.Num {
			return a.Num > b.Num
		}
		return a.Spec > b.Spec
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if before(keys[j], keys[i]) {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	var out []naiveTypical
	kept := 0
	for _, k := range keys {
		if float64(kept) >= threshold*float64(len(shapes)) {
			break
		}
		kept += count[k]
		nt := naiveTypical{key: k, mem: memSum[k] / int64(count[k]), p: float64(count[k])}
		if k.Spec != "" {
			for _, m := range strings.Split(k.Spec, "|") {
				nt.specs = append(nt.specs, canonical(m))
			}
		}
		out = append(out, nt)
	}
	for i := range out {
		out[i].p /= float64(kept)
	}
	return out
}

// naiveNode is §4's node fragmentation, with Partita's host memory check.
func naiveNode(typ []naiveTypical, model string, cpuLeft, memLeft int64, left []int) float64 {
	total := 0
	for _, l := range left {
		total += l
	}
	f := 0.0
	for _, k := range typ {
		allowed := k.specs == nil
		for _, m := range k.specs {
			allowed = allowed || m == model
		}
		if k.key.Milli == 0 || !allowed {
			f += k.p * float64(total)
			continue
		}
		gpus, small := 0, 0
		for _, l := range left {
			if l >= k.key.Milli {
				gpus++
			} else {
				small += l
			}
		}
		if gpus >= k.key.Num && cpuLeft >= k.key.CPUMilli && memLeft >= k.mem {
			f += k.p * float64(small)
		} else {
			f += k.p * float64(total)
		}
	}
	return f
}

// randomShapes draws a workload from a small alphabet, so that shapes
// repeat and counts tie.
func randomShapes(rng *random.Rand, n int) []frag.Shape {
	cpus := []int64{0, 1000, 2000, 4000, 8000}
	mems := []int64{0, 1024, 4096}
	shares := []int{100, 250, 500, 750, 900}
	gpus := []int{1, 2, 4, 8}
	specs := []string{"", "", "V100M16", "V100M16|V100M32", "G2", "G2|G3"}
	out := make([]frag.Shape, n)
	for i := range out {
		s := frag.Shape{CPUMilli: cpus[rng.Intn(len(cpus))], MemMiB: mems[rng.Intn(len(mems))]}
		switch rng.Intn(3) {
		case 0: // CPU-only
		case 1:
			s.Milli, s.Num, s.Spec = shares[rng.Intn(len(shares))], 1, specs[rng.Intn(len(specs))]
		case 2:
			s.Milli, s.Num, s.Spec = 1000, gpus[rng.Intn(len(gpus))], specs[rng.Intn(len(specs))]
		}
		out[i] = s
	}
	return out
}

// nodeLeft is what a node has left.
type nodeLeft struct {
	model   string
	cpu     int64
	mem     int64
	gpuLeft []int
}

func (n nodeLeft) String() string {
	return fmt.Sprintf("%s cpu %d mem %d left %v", n.model, n.cpu, n.mem, n.gpuLeft)
}

// randomNode draws what a node has left.
func randomNode(rng *random.Rand) nodeLeft {
	models := []string{"V100-16GB", "V100-32GB", "G2", "G3"}
	steps := []int{0, 100, 250, 499, 500, 750, 1000, 1000}
	n := nodeLeft{model: models[rng.Intn(len(models))], cpu: int64(rng.Intn(10)) * 1000, mem: int64(rng.Intn(6)) * 1024}
	n.gpuLeft = make([]int, []int{1, 2, 4, 8}[rng.Intn(4)])
	for i := range n.gpuLeft {
		if rng.Intn(4) == 0 {
			n.gpuLeft[i] = rng.Intn(1001)
		} else {
			n.gpuLeft[i] = steps[rng.Intn(len(steps))]
		}
	}
	return n
}

func TestTypicalsAndNodeAgreeWithANaiveVersion(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		rng := random.New(seed)
		shapes := randomShapes(rng, 5+rng.Intn(200))
		threshold := []float64{0.5, 0.8, frag.DefaultThreshold, 1}[rng.Intn(4)]
		d := frag.Typicals(shapes, threshold, canonical)
		naive := naiveTypicals(shapes, threshold, canonical)
		if len(d.Pods) != len(naive) {
			t.Fatalf("seed %d: kept %d shapes, naive keeps %d", seed, len(d.Pods), len(naive))
		}
		for i, p := range d.Pods {
			want := naive[i].key
			want.MemMiB = naive[i].mem
			if p.Shape != want || !near(p.P, naive[i].p) {
				t.Fatalf("seed %d: shape %d = %+v P %v, naive %+v P %v", seed, i, p.Shape, p.P, want, naive[i].p)
			}
		}
		for k := 0; k < 50; k++ {
			n := randomNode(rng)
			got := d.Node(n.model, n.cpu, n.mem, n.gpuLeft)
			want := naiveNode(naive, n.model, n.cpu, n.mem, n.gpuLeft)
			if !near(got, want) {
				t.Fatalf("seed %d: Node(%s) = %v, naive %v", seed, n, got, want)
			}
		}
	}
}

// TestPartitaMeasuresStayInRange checks only what any fragment measure
// must satisfy: none without free GPU, never negative, never more than
// the free GPU.
func TestPartitaMeasuresStayInRange(t *testing.T) {
	measures := map[string]func(d *frag.Distribution, n nodeLeft) float64{
		"Unbalanced": func(d *frag.Distribution, n nodeLeft) float64 {
			return d.Unbalanced(n.model, n.cpu, n.mem, n.gpuLeft)
		},
		"NodeOver5": func(d *frag.Distribution, n nodeLeft) float64 {
			return d.NodeOver(n.model, n.cpu, n.mem, n.gpuLeft, 5)
		},
	}
	for name, measure := range measures {
		t.Run(name, func(t *testing.T) {
			for seed := int64(1); seed <= 20; seed++ {
				rng := random.New(seed)
				d := frag.Typicals(randomShapes(rng, 5+rng.Intn(100)), frag.DefaultThreshold, canonical)
				full := nodeLeft{model: "V100-16GB", cpu: 8000, mem: 8192, gpuLeft: []int{0, 0, 0, 0}}
				if got := measure(d, full); got != 0 {
					t.Fatalf("seed %d: %s(%s) = %v, want 0 on a node with no free GPU", seed, name, full, got)
				}
				for k := 0; k < 50; k++ {
					n := randomNode(rng)
					total := 0
					for _, l := range n.gpuLeft {
						total += l
					}
					got := measure(d, n)
					if got < -eps || got > float64(total)+eps*float64(total) {
						t.Fatalf("seed %d: %s(%s) = %v, want within 0..%d", seed, name, n, got, total)
					}
				}
			}
		})
	}
}

// TestNodeOverOneArrivalIsNode: a horizon of one task is FGD's fragment,
// and a longer one never counts more.
func TestNodeOverOneArrivalIsNode(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := random.New(seed)
		d := frag.Typicals(randomShapes(rng, 5+rng.Intn(100)), frag.DefaultThreshold, canonical)
		for k := 0; k < 50; k++ {
			n := randomNode(rng)
			one := d.NodeOver(n.model, n.cpu, n.mem, n.gpuLeft, 1)
			if want := d.Node(n.model, n.cpu, n.mem, n.gpuLeft); !near(one, want) {
				t.Fatalf("seed %d: NodeOver(%s, 1) = %v, Node %v", seed, n, one, want)
			}
			if five := d.NodeOver(n.model, n.cpu, n.mem, n.gpuLeft, 5); five > one+eps*math.Max(1, one) {
				t.Fatalf("seed %d: NodeOver(%s, 5) = %v, more than over one task (%v)", seed, n, five, one)
			}
		}
	}
}

// TestNodeOverRoomsPerRoom: NodeOverRooms gives a free GPU with l milli
// left rooms[l] arrivals, and h where l is past the table: without a
// table, or with one that holds the same horizon c for every room, it is
// NodeOver with h, or with c.
func TestNodeOverRoomsPerRoom(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := random.New(seed)
		d := frag.Typicals(randomShapes(rng, 5+rng.Intn(100)), frag.DefaultThreshold, canonical)
		for k := 0; k < 50; k++ {
			n := randomNode(rng)
			h, c := 1+rng.Intn(10), 1+rng.Intn(20)
			rooms := make([]int, 1001)
			for l := range rooms {
				rooms[l] = c
			}
			if got, want := d.NodeOverRooms(n.model, n.cpu, n.mem, n.gpuLeft, h, nil), d.NodeOver(n.model, n.cpu, n.mem, n.gpuLeft, h); !near(got, want) {
				t.Fatalf("seed %d: NodeOverRooms(%s, %d, nil) = %v, NodeOver %v", seed, n, h, got, want)
			}
			if got, want := d.NodeOverRooms(n.model, n.cpu, n.mem, n.gpuLeft, h, rooms), d.NodeOver(n.model, n.cpu, n.mem, n.gpuLeft, c); !near(got, want) {
				t.Fatalf("seed %d: NodeOverRooms(%s, %d, all %d) = %v, NodeOver with %d %v", seed, n, h, c, got, c, want)
			}
			if got, want := d.NodeOverRooms(n.model, n.cpu, n.mem, n.gpuLeft, h, rooms[:1]), d.NodeOver(n.model, n.cpu, n.mem, n.gpuLeft, h); !near(got, want) {
				t.Fatalf("seed %d: NodeOverRooms(%s, %d, table for room 0 only) = %v, NodeOver %v", seed, n, h, got, want)
			}
		}
	}
}

// TestNodeMeasuresDependOnTheRoomsNotTheirOrder: Node and NodeOver give
// exactly the same value, not merely a near one, for any order of the
// same GPUs. fragScorer.Score relies on it: a share is tried on only the
// first of a node's GPUs with the same room, and the others would score
// the same.
func TestNodeMeasuresDependOnTheRoomsNotTheirOrder(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := random.New(seed)
		d := frag.Typicals(randomShapes(rng, 5+rng.Intn(100)), frag.DefaultThreshold, canonical)
		for k := 0; k < 50; k++ {
			n := randomNode(rng)
			h := 1 + rng.Intn(20)
			node, over := d.Node(n.model, n.cpu, n.mem, n.gpuLeft), d.NodeOver(n.model, n.cpu, n.mem, n.gpuLeft, h)
			for range 5 {
				p := slices.Clone(n.gpuLeft)
				rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
				if got := d.Node(n.model, n.cpu, n.mem, p); got != node {
					t.Fatalf("seed %d: Node(%v) = %v, but %v for %v", seed, p, got, node, n.gpuLeft)
				}
				if got := d.NodeOver(n.model, n.cpu, n.mem, p, h); got != over {
					t.Fatalf("seed %d: NodeOver(%v, %d) = %v, but %v for %v", seed, p, h, got, over, n.gpuLeft)
				}
			}
		}
	}
}
