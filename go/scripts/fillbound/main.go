// Command fillbound bounds the fill benchmark from below: for one pod
// list and seed it takes the exact pods that have arrived by 100 % (same
// shuffle and tune-up as internal/sim/fill), packs them with full
// knowledge and in any order (the configuration LP of bin packing, and a
// few greedy heuristics), and reports the GPU demand left unplaced as %
// of the cluster (what "unallocated at 100 %" is, since arrived =
// capacity). docs/fill.md quotes its figures.
//
// It is a module of its own, so that the main module does not depend on
// gonum; -glpk also needs glpsol (apt-get install glpk-utils). From this
// directory (D=../../../../shared/data/alibaba-gpu-v2023):
//
//	go run . --nodes $D/openb_node_list_gpu_node.csv --pods $D/openb_pod_list_L.csv --seeds 42-45 -glpk
//	go run . ... --seeds 42 -v                      (LP's drops by size; heuristics one by one)
//	go run . ... --seeds 42 -glpk -maxdrop810 N     (at most N 810s dropped)
//	go run . ... --seeds 42 -engine -policies partita -dump   (our policies offline; end state)
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sort"
	"strings"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/sim/fill"
	"partita.dev/partita/internal/trace"
	"partita.dev/partita/internal/workload"
)

type node struct {
	cpu, mem       int64 // free
	cpuCap, memCap int64
	gpus           []int // milli left per GPU
	model          string
}

type pod struct {
	cpu, mem int64
	milli    int // per GPU; 0 CPU-only
	num      int
	models   map[string]bool
	gpu      int64
}

func (n *node) gfree() int {
	t := 0
	for _, g := range n.gpus {
		t += g
	}
	return t
}

func (n *node) fullFree() int {
	c := 0
	for _, g := range n.gpus {
		if g == 1000 {
			c++
		}
	}
	return c
}

// fits returns the GPU index for a share (best fit: least left that fits),
// -1 for whole/CPU-only when it fits, -2 when it does not fit.
func (n *node) fits(p *pod) int {
	if p.cpu > n.cpu || p.mem > n.mem {
		return -2
	}
	if p.num == 0 {
		return -1
	}
	if p.models != nil && !p.models[n.model] {
		return -2
	}
	if p.milli == 1000 {
		if n.fullFree() >= p.num {
			return -1
		}
		return -2
	}
	best, bl := -2, 1<<30
	for i, l := range n.gpus {
		if l >= p.milli && l < bl {
			best, bl = i, l
		}
	}
	return best
}

func (n *node) place(p *pod, g int) {
	n.cpu -= p.cpu
	n.mem -= p.mem
	if p.num == 0 {
		return
	}
	if p.milli < 1000 {
		n.gpus[g] -= p.milli
		return
	}
	k := p.num
	for i := range n.gpus {
		if k > 0 && n.gpus[i] == 1000 {
			n.gpus[i] = 0
			k--
		}
	}
}

var pool, dump, verbose *bool
var maxDrop810 *int

type env struct {
	rho, mu float64 // remaining GPU demand's CPU and memory per GPU milli
}

// costs: lower is better.
var rules = map[string]func(e *env, n *node, p *pod, g int) float64{
	// best fit on GPU left, then CPU left
	"bfgpu": func(e *env, n *node, p *pod, g int) float64 {
		ga := float64(n.gfree()) - float64(p.gpu)
		return ga*1e6 + float64(n.cpu-p.cpu)/1000
	},
	// BestFit-like sum of normalised leftovers
	"bfsum": func(e *env, n *node, p *pod, g int) float64 {
		ga := float64(n.gfree()) - float64(p.gpu)
		return ga/8000 + float64(n.cpu-p.cpu)/128000
	},
	// keep the node's leftover CPU:GPU (and mem:GPU) near the remaining
	// demand's: the GPU (milli) the leftover would strand, then best fit
	"strand": func(e *env, n *node, p *pod, g int) float64 {
		ga := float64(n.gfree()) - float64(p.gpu)
		ca, ma := float64(n.cpu-p.cpu), float64(n.mem-p.mem)
		usable := math.Min(ga, math.Min(ca/e.rho, ma/e.mu))
		return (ga-usable)*1e3 + ga + ca/e.rho
	},
	// vector dot product of demand and leftover (prefer aligned)
	"dot": func(e *env, n *node, p *pod, g int) float64 {
		ga := float64(n.gfree())
		return -(float64(p.gpu)*ga/float64(len(n.gpus)*1000)/1000 + float64(p.cpu)*float64(n.cpu)/float64(n.cpuCap)/(e.rho*1000))
	},
}

var orders = map[string]func(a, b *pod, e *env) bool{
	"gpu": func(a, b *pod, e *env) bool {
		if a.gpu != b.gpu {
			return a.gpu > b.gpu
		}
		return a.cpu > b.cpu
	},
	"cpu": func(a, b *pod, e *env) bool { return a.cpu > b.cpu },
	"vec": func(a, b *pod, e *env) bool {
		va := math.Max(float64(a.gpu), float64(a.cpu)/e.rho)
		vb := math.Max(float64(b.gpu), float64(b.cpu)/e.rho)
		return va > vb
	},
	// whole GPUs first (by count), then shares by CPU per milli descending
	"wholefirst-cpuratio": func(a, b *pod, e *env) bool {
		wa, wb := a.milli == 1000, b.milli == 1000
		if wa != wb {
			return wa
		}
		if wa {
			if a.num != b.num {
				return a.num > b.num
			}
			return a.cpu > b.cpu
		}
		return float64(a.cpu)/float64(a.milli) > float64(b.cpu)/float64(b.milli)
	},
}

func main() {
	nodesPath := flag.String("nodes", "", "node list")
	podsPath := flag.String("pods", "", "pod list")
	seeds := flag.String("seeds", "42", "first-last")
	cpuFirst := flag.Bool("cpufirst", false, "place CPU-only pods first (pessimistic); default last")
	verbose = flag.Bool("v", false, "per-heuristic figures")
	cpuLP := flag.Bool("cpulp", false, "also the configuration LP with CPU and memory per node group (slow)")
	pool = flag.Bool("pool", false, "cpulp: pool node groups into four by CPU per GPU (smaller, weaker LP)")
	dump = flag.Bool("dump", false, "engine arrival runs: dump the final state")
	maxDrop810 = flag.Int("maxdrop810", -1, "glpk: at most this many 810-milli shares may be dropped (-1: any)")
	glpk := flag.Bool("glpk", false, "the GPU+CPU+memory configuration LP, solved by glpsol")
	engineRuns := flag.Bool("engine", false, "also pack with our engine's policies in sorted orders")
	enginePolicies := flag.String("policies", "fgd,partita", "engine policies")
	flag.Parse()
	rows, err := trace.ReadNodesFile(*nodesPath)
	check(err)
	prows, err := trace.ReadPodsFile(*podsPath)
	check(err)
	var lo, hi int64
	fmt.Sscanf(*seeds, "%d-%d", &lo, &hi)
	if hi < lo {
		hi = lo
	}
	var total int64
	for _, r := range rows {
		total += int64(r.GPUs) * 1000
	}
	for seed := lo; seed <= hi; seed++ {
		rng := random.New(seed)
		arr := fill.Arrivals(prows, total, 1.3, rng)
		var pods []*pod
		var prefix []fill.Pod
		var arrived int64
		for _, a := range arr {
			arrived += a.GPUMilli
			if arrived > total {
				break
			}
			pods = append(pods, podOf(a))
			prefix = append(prefix, a)
		}
		ranks := rng.Perm(len(rows))
		if *engineRuns {
			for _, pol := range strings.Split(*enginePolicies, ",") {
				for _, on := range []string{"arrival", "gpu-desc", "cpu-per-milli-desc", "gpu-desc-cpu-last"} {
					u := enginePack(rows, prows, prefix, ranks, pol, on, total)
					fmt.Printf("seed %d engine %s order %s: %.2f\n", seed, pol, on, u)
				}
			}
		}
		bestName, best := "", math.Inf(1)
		var bestNodes []*node
		var bestFailed []*pod
		for on, ord := range orders {
			for rn, rule := range rules {
				ns := buildNodes(rows)
				failed := pack(ns, pods, ord, rule, *cpuFirst)
				u := unplaced(failed, total)
				if *verbose {
					fmt.Printf("seed %d %s/%s: %.2f\n", seed, on, rn, u)
				}
				if u < best {
					best, bestName, bestNodes, bestFailed = u, on+"/"+rn, ns, failed
				}
			}
		}
		fmt.Printf("seed %d pods %d best %.2f (%s) %s\n", seed, len(pods), best, bestName, diagnose(bestNodes, bestFailed, total))
		if *glpk {
			fmt.Printf("  GPU+CPU+memory configuration LP (glpk), CPU-only pods droppable: %.2f\n", glpkBound(pods, rows, total, false))
			fmt.Printf("  GPU+CPU+memory configuration LP (glpk), CPU-only pods all placed: %.2f\n", glpkBound(pods, rows, total, true))
		}
		if *cpuLP {
			fmt.Printf("  GPU+CPU+memory configuration LP lower bound: %.2f\n", cpuBound(pods, rows, total))
		}
		fmt.Printf("  1D GPU-only FFD: %.2f  1D GPU-only LP lower bound: %.2f  configuration-LP lower bound: %.2f\n", gpuOnly(pods, rows, total), lpBound(pods, total), configBound(pods, total))
	}
}

func unplaced(failed []*pod, total int64) float64 {
	var f int64
	for _, p := range failed {
		f += p.gpu
	}
	return float64(f) / float64(total) * 100
}

func podOf(a fill.Pod) *pod {
	t := a.Task
	p := &pod{cpu: t.CPUMilli, mem: t.MemoryMiB, gpu: a.GPUMilli}
	switch t.GPU.Kind {
	case workload.Fraction:
		p.milli, p.num = t.GPU.Milli, 1
	case workload.WholeGPUs:
		p.milli, p.num = 1000, t.GPU.Count
	}
	if len(t.GPU.Models) > 0 {
		p.models = map[string]bool{}
		for _, m := range t.GPU.Models {
			p.models[gpu.Lookup(m).Name] = true
		}
	}
	return p
}

func buildNodes(rows []trace.Node) []*node {
	ns := make([]*node, len(rows))
	for i, r := range rows {
		ns[i] = &node{cpu: r.CPUMilli, mem: r.MemoryMiB, cpuCap: r.CPUMilli, memCap: r.MemoryMiB, gpus: make([]int, r.GPUs), model: gpu.Lookup(r.Model).Name}
		for j := range ns[i].gpus {
			ns[i].gpus[j] = 1000
		}
	}
	return ns
}

func pack(ns []*node, pods []*pod, ord func(a, b *pod, e *env) bool, rule func(e *env, n *node, p *pod, g int) float64, cpuFirst bool) []*pod {
	var gp, cp []*pod
	e := &env{}
	var c, m, g float64
	for _, p := range pods {
		if p.num == 0 {
			cp = append(cp, p)
			continue
		}
		gp = append(gp, p)
		c += float64(p.cpu)
		m += float64(p.mem)
		g += float64(p.gpu)
	}
	e.rho, e.mu = c/g, m/g
	sort.SliceStable(gp, func(i, j int) bool { return ord(gp[i], gp[j], e) })
	sort.SliceStable(cp, func(i, j int) bool { return cp[i].cpu > cp[j].cpu })
	seq := append(append([]*pod(nil), gp...), cp...)
	if cpuFirst {
		seq = append(append([]*pod(nil), cp...), gp...)
	}
	var failed []*pod
	for _, p := range seq {
		bi, bg, bc := -1, 0, math.Inf(1)
		for i, n := range ns {
			gi := n.fits(p)
			if gi == -2 {
				continue
			}
			var cost float64
			if p.num == 0 {
				// CPU-only: where CPU is least useful to GPU pods
				cost = -float64(n.cpu) + float64(n.gfree())*1e3
			} else {
				cost = rule(e, n, p, gi)
			}
			if cost < bc {
				bi, bg, bc = i, gi, cost
			}
		}
		if bi < 0 {
			failed = append(failed, p)
			continue
		}
		ns[bi].place(p, bg)
	}
	return failed
}

// diagnose says why each failed GPU pod fails: per failed pod, does some
// node have the GPU room, and if so is CPU or memory what is short.
func diagnose(ns []*node, failed []*pod, total int64) string {
	kinds := map[string]int{}
	var gpuDemand int64
	for _, p := range failed {
		if p.num == 0 {
			kinds["cpu-only"]++
			continue
		}
		gpuDemand += p.gpu
		gpuRoom, cpuOK, memOK := false, false, false
		for _, n := range ns {
			q := *p
			q.cpu, q.mem = 0, 0
			if n.fits(&q) == -2 {
				continue
			}
			gpuRoom = true
			if p.cpu <= n.cpu {
				cpuOK = true
			}
			if p.mem <= n.mem {
				memOK = true
			}
		}
		k := "share"
		if p.milli == 1000 {
			k = fmt.Sprintf("%dgpu", p.num)
		}
		switch {
		case !gpuRoom:
			kinds[k+":nogpu"]++
		case !cpuOK:
			kinds[k+":cpu"]++
		case !memOK:
			kinds[k+":mem"]++
		default:
			kinds[k+":cpu+mem-per-node"]++
		}
	}
	var idle, fullIdle int
	var cpuLeft, memLeft int64
	for _, n := range ns {
		idle += n.gfree()
		fullIdle += n.fullFree()
		cpuLeft += n.cpu
		memLeft += n.mem
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, kinds[k])
	}
	return fmt.Sprintf("failed[%s] idleGPU=%.1f fullGPUs=%d cpuLeft=%.0f cores memLeft=%.0f GiB", b.String(), float64(idle)/1000, fullIdle, float64(cpuLeft)/1000, float64(memLeft)/1024)
}

// gpuOnly packs GPU demand alone into the cluster's GPUs (per node for
// multi-GPU pods, any GPU for shares), ignoring CPU and memory: the GPU
// fragment's share of the bound.
func gpuOnly(pods []*pod, rows []trace.Node, total int64) float64 {
	ns := buildNodes(rows)
	for _, n := range ns {
		n.cpu, n.mem = math.MaxInt64/2, math.MaxInt64/2
	}
	var gp []*pod
	for _, p := range pods {
		if p.num > 0 {
			q := *p
			q.cpu, q.mem = 0, 0
			gp = append(gp, &q)
		}
	}
	sort.SliceStable(gp, func(i, j int) bool {
		if gp[i].num != gp[j].num {
			return gp[i].num > gp[j].num
		}
		return gp[i].milli > gp[j].milli
	})
	var failed []*pod
	for _, p := range gp {
		bi, bg, bc := -1, 0, math.Inf(1)
		for i, n := range ns {
			gi := n.fits(p)
			if gi == -2 {
				continue
			}
			// best fit on the GPU (shares) or node GPU left (whole)
			cost := float64(n.gfree())
			if p.milli < 1000 {
				cost = float64(n.gpus[gi])*1e4 + float64(n.gfree())
			}
			if cost < bc {
				bi, bg, bc = i, gi, cost
			}
		}
		if bi < 0 {
			failed = append(failed, p)
			continue
		}
		ns[bi].place(p, bg)
	}
	return unplaced(failed, total)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// lpBound is a valid lower bound on the unallocated GPU % of ANY placement
// (online or offline, any order), from GPUs alone: every GPU holds at most
// one item above 500 milli (a whole GPU counts as an item of 1000); items
// of at most 500 are divisible, but an item of size s only goes into room
// of at least s (the room a big item b leaves is 1000-b; an unused GPU has
// 1000). CPU, memory and node boundaries are ignored (they only make it
// worse). Maximise the placed volume with an LP; unallocated ≥ demand −
// that.
func lpBound(pods []*pod, total int64) float64 {
	big := map[int]float64{}   // size -> count
	small := map[int]float64{} // size -> volume
	var demand float64
	for _, p := range pods {
		if p.num == 0 {
			continue
		}
		demand += float64(p.gpu)
		if p.milli > 500 {
			big[p.milli] += float64(p.num)
		} else {
			small[p.milli] += float64(p.milli)
		}
	}
	var bs, ss []int
	for b := range big {
		bs = append(bs, b)
	}
	for s := range small {
		ss = append(ss, s)
	}
	sort.Ints(bs)
	sort.Ints(ss)
	G := float64(total / 1000)
	// rooms: j = 0..len(bs)-1 for big classes, j = len(bs) for empty GPUs.
	type fv struct{ s, j int }
	var fs []fv
	room := func(j int) int {
		if j == len(bs) {
			return 1000
		}
		return 1000 - bs[j]
	}
	for si, s := range ss {
		for j := 0; j <= len(bs); j++ {
			if s <= room(j) {
				fs = append(fs, fv{si, j})
			}
		}
	}
	// variables: x_b (len bs), e, f (len fs), then slacks.
	nx := len(bs) + 1 + len(fs)
	// constraints: (1) sum x + e <= G; (2) per room j: sum f_j - room_j*cnt_j <= 0;
	// (3) per small s: sum f_s <= V_s; (4) per big b: x_b <= n_b.
	nc := 1 + (len(bs) + 1) + len(ss) + len(bs)
	A := mat.NewDense(nc, nx+nc, nil)
	bvec := make([]float64, nc)
	c := make([]float64, nx+nc)
	for i, b := range bs {
		c[i] = -float64(b)
	}
	for k := range fs {
		c[len(bs)+1+k] = -1
	}
	row := 0
	for i := range bs {
		A.Set(row, i, 1)
	}
	A.Set(row, len(bs), 1)
	bvec[row] = G
	row++
	for j := 0; j <= len(bs); j++ {
		for k, f := range fs {
			if f.j == j {
				A.Set(row, len(bs)+1+k, 1)
			}
		}
		A.Set(row, j, -float64(room(j))) // x_j, or e when j == len(bs)
		row++
	}
	for si := range ss {
		for k, f := range fs {
			if f.s == si {
				A.Set(row, len(bs)+1+k, 1)
			}
		}
		bvec[row] = small[ss[si]]
		row++
	}
	for i, b := range bs {
		A.Set(row, i, 1)
		bvec[row] = big[b]
		row++
	}
	for r := 0; r < nc; r++ {
		A.Set(r, nx+r, 1) // slack
	}
	opt, _, err := lp.Simplex(c, A, bvec, 1e-9, nil)
	check(err)
	placed := -opt
	return (demand - placed) / float64(total) * 100
}

// configBound is the configuration (Gilmore-Gomory) LP of the GPUs alone:
// every GPU takes one pattern, a multiset of item sizes summing to at most
// 1000 (a whole GPU is an item of 1000; a k-GPU pod counts as k of them,
// node boundaries ignored); pattern counts are fractional, item counts are
// capped by the demand. Its maximum placed volume is an upper bound on any
// placement's (CPU and memory only make it worse), so demand minus it is a
// lower bound on the unallocated %.
func configBound(pods []*pod, total int64) float64 {
	count := map[int]float64{}
	var demand float64
	for _, p := range pods {
		if p.num == 0 {
			continue
		}
		demand += float64(p.gpu)
		count[p.milli] += float64(p.num)
	}
	var sizes []int
	for s := range count {
		sizes = append(sizes, s)
	}
	sort.Ints(sizes)
	var pats [][]int
	cur := make([]int, len(sizes))
	var rec func(i, rem int)
	rec = func(i, rem int) {
		if i == len(sizes) {
			empty := true
			for _, k := range cur {
				if k > 0 {
					empty = false
				}
			}
			if !empty {
				pats = append(pats, append([]int(nil), cur...))
			}
			return
		}
		for k := 0; k*sizes[i] <= rem && float64(k) <= count[sizes[i]]; k++ {
			cur[i] = k
			rec(i+1, rem-k*sizes[i])
		}
		cur[i] = 0
	}
	rec(0, 1000)
	nc := 1 + len(sizes)
	nv := len(pats) + nc
	A := mat.NewDense(nc, nv, nil)
	b := make([]float64, nc)
	c := make([]float64, nv)
	b[0] = float64(total / 1000)
	for i, s := range sizes {
		b[1+i] = count[s]
	}
	for j, p := range pats {
		A.Set(0, j, 1)
		vol := 0
		for i, k := range p {
			A.Set(1+i, j, float64(k))
			vol += k * sizes[i]
		}
		c[j] = -float64(vol)
	}
	for r := 0; r < nc; r++ {
		A.Set(r, len(pats)+r, 1)
	}
	opt, x, err := lp.Simplex(c, A, b, 1e-9, nil)
	check(err)
	if *verbose {
		placed := make([]float64, len(sizes))
		for j, p := range pats {
			for i, k := range p {
				placed[i] += float64(k) * x[j]
			}
		}
		var w810, wOther float64
		for j, p := range pats {
			vol, has810 := 0, false
			for i, k := range p {
				vol += k * sizes[i]
				if sizes[i] == 810 && k > 0 {
					has810 = true
				}
			}
			if has810 {
				w810 += float64(1000-vol) * x[j]
			} else {
				wOther += float64(1000-vol) * x[j]
			}
		}
		fmt.Printf("  config LP waste: GPUs with an 810 %.1f GPU, others %.1f GPU\n", w810/1000, wOther/1000)
		fmt.Print("  config LP placed/arrived by size:")
		for i, s := range sizes {
			fmt.Printf(" %d:%.0f/%.0f", s, placed[i], count[s])
		}
		fmt.Println()
	}
	return (demand + opt) / float64(total) * 100
}

// enginePack places the prefix's pods with one of our policies, in the
// given order (offline: any order is allowed), and returns the unplaced
// GPU demand as % of the cluster. CPU-only pods go in their arrival
// position for "arrival", last for the others except "gpu-desc" (where
// they go first, by CPU descending, as the biggest CPU items).
func enginePack(rows []trace.Node, prows []trace.Pod, prefix []fill.Pod, ranks []int, pol, order string, total int64) float64 {
	st, err := fill.Nodes(rows, ranks)
	check(err)
	typical := fill.Typical(prows)
	cfg := policies.ConfigFor(st, typical)
	cfg.Shapes = fill.Shapes(prows)
	cfg.Canonical = func(n string) string { return gpu.Lookup(n).Name }
	p, err := policies.New(pol, cfg)
	check(err)
	placer := engine.NewPlacer(p, random.New(1))
	seq := append([]fill.Pod(nil), prefix...)
	cpuPerMilli := func(a fill.Pod) float64 { return float64(a.Task.CPUMilli) / float64(max(a.GPUMilli, 1)) }
	switch order {
	case "gpu-desc":
		sort.SliceStable(seq, func(i, j int) bool {
			a, b := seq[i], seq[j]
			if a.GPUMilli != b.GPUMilli {
				return a.GPUMilli > b.GPUMilli
			}
			return a.Task.CPUMilli > b.Task.CPUMilli
		})
	case "gpu-desc-cpu-last":
		sort.SliceStable(seq, func(i, j int) bool {
			a, b := seq[i], seq[j]
			if (a.GPUMilli == 0) != (b.GPUMilli == 0) {
				return b.GPUMilli == 0
			}
			if a.GPUMilli != b.GPUMilli {
				return a.GPUMilli > b.GPUMilli
			}
			return a.Task.CPUMilli > b.Task.CPUMilli
		})
	case "cpu-per-milli-desc":
		sort.SliceStable(seq, func(i, j int) bool {
			a, b := seq[i], seq[j]
			if (a.GPUMilli == 0) != (b.GPUMilli == 0) {
				return b.GPUMilli == 0
			}
			if (a.GPUMilli >= 1000) != (b.GPUMilli >= 1000) {
				return a.GPUMilli >= 1000
			}
			if a.GPUMilli >= 1000 && a.GPUMilli != b.GPUMilli {
				return a.GPUMilli > b.GPUMilli
			}
			return cpuPerMilli(a) > cpuPerMilli(b)
		})
	}
	var failed int64
	failedBy := map[string]int{}
	for _, a := range seq {
		as, err := placer.Place(st, a.Task)
		if err != nil {
			failed += a.GPUMilli
			if a.Task.GPU.Kind == workload.Fraction {
				failedBy[fmt.Sprintf("share%d/%dc", a.Task.GPU.Milli, a.Task.CPUMilli/1000)]++
			} else {
				failedBy[fmt.Sprintf("%dx%d", a.Task.GPU.Count, a.GPUMilli)]++
			}
			continue
		}
		check(st.Allocate(as))
	}
	if *dump && order == "arrival" {
		dumpState(st, failedBy)
	}
	return float64(failed) / float64(total) * 100
}

// cpuBound adds host CPU and memory to configBound. Nodes are pooled into
// groups of equal CPU and memory per GPU (pooling is a relaxation: a
// group's GPUs, CPU and memory may be combined across its nodes). Per group
// g: y[p,g] GPUs take pattern p (maximal patterns of sizes suffice, since
// slots may stay empty); w[i,g] items of class i (size, CPU, memory) go to
// g; the slots of size m the patterns offer cover the items of size m
// there; CPU and memory of the items fit the group's. A k-GPU pod is k
// items of 1000 with a k-th of its CPU and memory each. CPU-only pods are
// left out (dropping them is a relaxation too).
func cpuBound(pods []*pod, rows []trace.Node, total int64) float64 {
	type class struct {
		milli    int
		cpu, mem float64
	}
	count := map[class]float64{}
	sizeSet := map[int]bool{}
	var demand float64
	for _, p := range pods {
		if p.num == 0 {
			continue
		}
		demand += float64(p.gpu)
		c := class{p.milli, float64(p.cpu) / float64(p.num), float64(p.mem) / float64(p.num)}
		count[c] += float64(p.num)
		sizeSet[p.milli] = true
	}
	var classes []class
	for c := range count {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool {
		a, b := classes[i], classes[j]
		if a.milli != b.milli {
			return a.milli < b.milli
		}
		if a.cpu != b.cpu {
			return a.cpu < b.cpu
		}
		return a.mem < b.mem
	})
	var sizes []int
	for s := range sizeSet {
		sizes = append(sizes, s)
	}
	sort.Ints(sizes)
	sizeIdx := map[int]int{}
	for i, s := range sizes {
		sizeIdx[s] = i
	}
	type grp struct{ gpus, cpu, mem float64 }
	gkey := map[[2]int64]int{}
	var groups []grp
	for _, r := range rows {
		if r.GPUs == 0 {
			continue
		}
		k := [2]int64{r.CPUMilli * 1000 / int64(r.GPUs), r.MemoryMiB * 1000 / int64(r.GPUs)}
		if *pool {
			// four pools by CPU per GPU: ≤ 8 cores, ≤ 12, ≤ 16, more
			perGPU := r.CPUMilli / int64(r.GPUs)
			switch {
			case perGPU <= 8000:
				k = [2]int64{8000, 0}
			case perGPU <= 12000:
				k = [2]int64{12000, 0}
			case perGPU <= 16000:
				k = [2]int64{16000, 0}
			default:
				k = [2]int64{99000, 0}
			}
		}
		gi, ok := gkey[k]
		if !ok {
			gi = len(groups)
			gkey[k] = gi
			groups = append(groups, grp{})
		}
		groups[gi].gpus += float64(r.GPUs)
		groups[gi].cpu += float64(r.CPUMilli)
		groups[gi].mem += float64(r.MemoryMiB)
	}
	pats := maximalPatterns(sizes)
	G, S, C, P := len(groups), len(sizes), len(classes), len(pats)
	// variables: y[p,g] (P*G), w[i,g] (C*G), slacks.
	// rows: per g: GPUs (1), CPU (1), mem (1), per size: items - slots <= 0 (S); per class: sum_g w <= n (C).
	nr := G*(3+S) + C
	nv := P*G + C*G
	A := mat.NewDense(nr, nv+nr, nil)
	b := make([]float64, nr)
	c := make([]float64, nv+nr)
	y := func(p, g int) int { return p*G + g }
	w := func(i, g int) int { return P*G + i*G + g }
	for g, gr := range groups {
		base := g * (3 + S)
		b[base], b[base+1], b[base+2] = gr.gpus, gr.cpu, gr.mem
		for p, pat := range pats {
			A.Set(base, y(p, g), 1)
			for si, k := range pat {
				if k > 0 {
					A.Set(base+3+si, y(p, g), -float64(k))
				}
			}
		}
		for i, cl := range classes {
			A.Set(base+1, w(i, g), cl.cpu)
			A.Set(base+2, w(i, g), cl.mem)
			A.Set(base+3+sizeIdx[cl.milli], w(i, g), 1)
			c[w(i, g)] = -float64(cl.milli)
		}
	}
	for i, cl := range classes {
		r := G*(3+S) + i
		b[r] = count[cl]
		for g := 0; g < G; g++ {
			A.Set(r, w(i, g), 1)
		}
	}
	for r := 0; r < nr; r++ {
		A.Set(r, nv+r, 1)
	}
	fmt.Fprintf(os.Stderr, "cpu LP: %d rows, %d columns\n", nr, nv+nr)
	opt, _, err := lp.Simplex(c, A, b, 1e-9, nil)
	check(err)
	return (demand + opt) / float64(total) * 100
}

// dumpState prints where the idle GPU sits at the end: per node type, the
// idle milli in partly used GPUs (by hole size) and in free GPUs, and the
// CPU left per idle GPU milli.
func dumpState(st *cluster.State, failedBy map[string]int) {
	keys := make([]string, 0, len(failedBy))
	for k := range failedBy {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return failedBy[keys[i]] > failedBy[keys[j]] })
	fmt.Print("  failed:")
	for i, k := range keys {
		if i == 15 {
			break
		}
		fmt.Printf(" %s=%d", k, failedBy[k])
	}
	fmt.Println()
	type agg struct {
		nodes, gpus      int
		holes            map[int]int // hole size bucket (50s) -> count
		idle, fullFree   int
		cpuLeft, memLeft int64
		idleCPUShort     int // idle milli on nodes with < 4 cores left
	}
	byType := map[string]*agg{}
	var order []string
	for i := 0; i < st.Len(); i++ {
		n := st.Node(i)
		if len(n.GPUs) == 0 {
			continue
		}
		key := fmt.Sprintf("%s/%dg/%dc", n.Model().Name, len(n.GPUs), n.CPUMilli/1000)
		a := byType[key]
		if a == nil {
			a = &agg{holes: map[int]int{}}
			byType[key] = a
			order = append(order, key)
		}
		a.nodes++
		a.gpus += len(n.GPUs)
		idle := 0
		for j := range n.GPUs {
			f := n.GPUs[j].Free()
			idle += f
			if f == 1000 {
				a.fullFree++
			} else if f > 0 {
				a.holes[f/50*50]++
			}
		}
		a.idle += idle
		a.cpuLeft += n.CPUFree()
		a.memLeft += n.MemFree()
		if n.CPUFree() < 4000 {
			a.idleCPUShort += idle
		}
	}
	// waste by GPU content pattern (the shares' sizes on the GPU)
	patWaste := map[string]int{}
	patCount := map[string]int{}
	for i := 0; i < st.Len(); i++ {
		n := st.Node(i)
		for j := range n.GPUs {
			g := &n.GPUs[j]
			if g.Free() == 0 || g.Free() == 1000 {
				continue
			}
			var ms []int
			for _, h := range g.Holders() {
				ms = append(ms, h.Milli)
			}
			sort.Sort(sort.Reverse(sort.IntSlice(ms)))
			key := fmt.Sprint(ms)
			patWaste[key] += g.Free()
			patCount[key]++
		}
	}
	pk := make([]string, 0, len(patWaste))
	totalWaste := 0
	for k, w := range patWaste {
		pk = append(pk, k)
		totalWaste += w
	}
	sort.Slice(pk, func(i, j int) bool { return patWaste[pk[i]] > patWaste[pk[j]] })
	fmt.Printf("  waste in partly used GPUs %.1f GPU; top patterns:", float64(totalWaste)/1000)
	for i, k := range pk {
		if i == 25 {
			break
		}
		fmt.Printf(" %s×%d=%.1f", k, patCount[k], float64(patWaste[k])/1000)
	}
	fmt.Println()
	sort.Strings(order)
	for _, k := range order {
		a := byType[k]
		hs := make([]int, 0, len(a.holes))
		for h := range a.holes {
			hs = append(hs, h)
		}
		sort.Ints(hs)
		var b strings.Builder
		for _, h := range hs {
			fmt.Fprintf(&b, "%d:%d ", h, a.holes[h])
		}
		fmt.Printf("  %-22s nodes %4d gpus %4d idle %7.1f GPU (free GPUs %d, idle on nodes <4 cores left %.1f) cpuLeft %6.0f c memLeft %6.0f GiB holes[%s]\n",
			k, a.nodes, a.gpus, float64(a.idle)/1000, a.fullFree, float64(a.idleCPUShort)/1000, float64(a.cpuLeft)/1000, float64(a.memLeft)/1024, b.String())
	}
}

// glpkBound is cpuBound's LP (per group of nodes with equal CPU and memory
// per GPU, not pooled further) written in CPLEX LP format and solved by
// glpsol. With cpuPlaced, CPU-only pods must all be placed (they are, in
// every run we looked at), taking CPU and memory from some group.
func glpkBound(pods []*pod, rows []trace.Node, total int64, cpuPlaced bool) float64 {
	type class struct {
		milli    int
		cpu, mem int64
	}
	count := map[class]int{}
	cpuOnly := map[class]int{}
	sizeSet := map[int]bool{}
	var demand float64
	for _, p := range pods {
		if p.num == 0 {
			cpuOnly[class{0, p.cpu, p.mem}]++
			continue
		}
		demand += float64(p.gpu)
		count[class{p.milli, p.cpu / int64(p.num), p.mem / int64(p.num)}] += p.num
		sizeSet[p.milli] = true
	}
	var sizes []int
	for s := range sizeSet {
		sizes = append(sizes, s)
	}
	sort.Ints(sizes)
	type grp struct{ gpus, cpu, mem int64 }
	gkey := map[[2]int64]int{}
	var groups []grp
	for _, r := range rows {
		if r.GPUs == 0 {
			continue
		}
		k := [2]int64{r.CPUMilli * 1000 / int64(r.GPUs), r.MemoryMiB * 1000 / int64(r.GPUs)}
		gi, ok := gkey[k]
		if !ok {
			gi = len(groups)
			gkey[k] = gi
			groups = append(groups, grp{})
		}
		groups[gi].gpus += int64(r.GPUs)
		groups[gi].cpu += r.CPUMilli
		groups[gi].mem += r.MemoryMiB
	}
	pats := maximalPatterns(sizes)
	var classes, cclasses []class
	for c := range count {
		classes = append(classes, c)
	}
	for c := range cpuOnly {
		cclasses = append(cclasses, c)
	}
	var b strings.Builder
	b.WriteString("Maximize\n obj:")
	for i, cl := range classes {
		for g := range groups {
			fmt.Fprintf(&b, " + %d w%d_%d", cl.milli, i, g)
		}
	}
	b.WriteString("\nSubject To\n")
	for g, gr := range groups {
		fmt.Fprintf(&b, " gpus%d:", g)
		for p := range pats {
			fmt.Fprintf(&b, " + y%d_%d", p, g)
		}
		fmt.Fprintf(&b, " <= %d\n", gr.gpus)
		for _, res := range []string{"cpu", "mem"} {
			fmt.Fprintf(&b, " %s%d:", res, g)
			for i, cl := range classes {
				v := cl.cpu
				if res == "mem" {
					v = cl.mem
				}
				fmt.Fprintf(&b, " + %d w%d_%d", v, i, g)
			}
			if cpuPlaced {
				for i, cl := range cclasses {
					v := cl.cpu
					if res == "mem" {
						v = cl.mem
					}
					fmt.Fprintf(&b, " + %d z%d_%d", v, i, g)
				}
			}
			lim := gr.cpu
			if res == "mem" {
				lim = gr.mem
			}
			fmt.Fprintf(&b, " <= %d\n", lim)
		}
		for si, sz := range sizes {
			fmt.Fprintf(&b, " slot%d_%d:", si, g)
			for i, cl := range classes {
				if cl.milli == sz {
					fmt.Fprintf(&b, " + w%d_%d", i, g)
				}
			}
			for p, pat := range pats {
				if pat[si] > 0 {
					fmt.Fprintf(&b, " - %d y%d_%d", pat[si], p, g)
				}
			}
			b.WriteString(" <= 0\n")
		}
	}
	for i, cl := range classes {
		fmt.Fprintf(&b, " n%d:", i)
		for g := range groups {
			fmt.Fprintf(&b, " + w%d_%d", i, g)
		}
		fmt.Fprintf(&b, " <= %d\n", count[cl])
	}
	if *maxDrop810 >= 0 {
		n810 := 0
		b.WriteString(" place810:")
		for i, cl := range classes {
			if cl.milli == 810 {
				n810 += count[cl]
				for g := range groups {
					fmt.Fprintf(&b, " + w%d_%d", i, g)
				}
			}
		}
		fmt.Fprintf(&b, " >= %d\n", n810-*maxDrop810)
	}
	if cpuPlaced {
		for i, cl := range cclasses {
			fmt.Fprintf(&b, " c%d:", i)
			for g := range groups {
				fmt.Fprintf(&b, " + z%d_%d", i, g)
			}
			fmt.Fprintf(&b, " = %d\n", cpuOnly[cl])
		}
	}
	b.WriteString("End\n")
	dir, err := os.MkdirTemp("", "fillbound")
	check(err)
	defer os.RemoveAll(dir)
	lpPath, outPath := dir+"/m.lp", dir+"/m.out"
	check(os.WriteFile(lpPath, []byte(b.String()), 0o644))
	cmd := exec.Command("glpsol", "--lp", lpPath, "-o", outPath)
	out, err := cmd.CombinedOutput()
	if err != nil {
		fmt.Fprintln(os.Stderr, string(out))
		check(err)
	}
	res, err := os.ReadFile(outPath)
	check(err)
	for _, line := range strings.Split(string(res), "\n") {
		if strings.HasPrefix(line, "Status:") && !strings.Contains(line, "OPTIMAL") {
			fmt.Fprintln(os.Stderr, line)
		}
		if strings.HasPrefix(line, "Objective:") {
			var obj float64
			f := strings.Fields(line)
			fmt.Sscanf(f[3], "%g", &obj)
			return (demand - obj) / float64(total) * 100
		}
	}
	check(fmt.Errorf("no objective in glpsol output"))
	return 0
}

// maximalPatterns lists the multisets of sizes (ascending) that fit in one
// GPU (1000 milli) and leave no room for the smallest size: the columns of
// the configuration LP. pats[p][i] is how many of sizes[i] pattern p holds.
func maximalPatterns(sizes []int) [][]int {
	var pats [][]int
	cur := make([]int, len(sizes))
	var rec func(i, rem int)
	rec = func(i, rem int) {
		if i == len(sizes) {
			if rem < sizes[0] {
				pats = append(pats, append([]int(nil), cur...))
			}
			return
		}
		for k := 0; k*sizes[i] <= rem; k++ {
			cur[i] = k
			rec(i+1, rem-k*sizes[i])
		}
		cur[i] = 0
	}
	rec(0, 1000)
	return pats
}
