// Package frag measures GPU fragmentation the way the FGD paper does
// (Weng et al., "Beware of Fragmentation", USENIX ATC'23): free GPU
// capacity counts as fragment when the tasks that typically arrive could
// not use it.
//
// The definitions follow hkust-adsl/kubernetes-scheduler-simulator
// (pkg/utils/frag.go, GetTypicalPods and NodeGpuShareFragAmount), as
// summarised in shared/reference/fgd-protocol.md §4.
package frag

import (
	"slices"
	"sort"
	"strings"
	"sync"
)

// Shape is a task's request as fragmentation sees it. The paper leaves
// host memory out (MemMiB = 0); Partita puts it in, since GPUs stranded
// on a node whose memory is full are as lost as any other fragment.
type Shape struct {
	CPUMilli int64
	MemMiB   int64
	Milli    int    // per-GPU share: 1..1000; 0 for CPU-only
	Num      int    // GPUs; 0 for CPU-only
	Spec     string // allowed models as written ("" = any); part of the key
}

// Typical is one frequent shape and its probability.
type Typical struct {
	Shape
	P      float64
	models map[string]bool // canonical allowed models; nil = any
}

// Distribution is the set of typical tasks, the "workload" FGD expects.
type Distribution struct {
	Pods      []Typical
	canonical func(string) string
	access    sync.Map // model name -> []bool, per typical pod: may it use the model
	ratio     sync.Map // model name -> [2]float64: CPU and memory per GPU milli of the mix
}

// DefaultThreshold keeps the most frequent shapes that cover 95% of tasks
// (podPopularityThreshold=95 in the published runs).
const DefaultThreshold = 0.95

// Typicals counts shapes and keeps the most frequent ones that together
// cover at least threshold of all tasks, with probabilities renormalised
// over the kept ones. Ties in count go to the larger shape first.
// canonical maps a model name as written in Spec to the name nodes use
// (gpu.Lookup(name).Name); nil keeps names as they are.
func Typicals(shapes []Shape, threshold float64, canonical func(string) string) *Distribution {
	if canonical == nil {
		canonical = func(s string) string { return s }
	}
	// Memory is not part of the key (a key per memory size would split
	// the rare large tasks below the threshold); a shape carries the mean
	// memory of its tasks.
	counts := map[Shape]float64{}
	tasks := map[Shape]int64{}
	memory := map[Shape]int64{}
	total := 0.0
	for _, s := range shapes {
		k := s
		k.MemMiB = 0
		counts[k]++
		total++
		tasks[k]++
		memory[k] += s.MemMiB
	}
	keys := make([]Shape, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if counts[a] != counts[b] {
			return counts[a] > counts[b]
		}
		return larger(a, b)
	})
	d := &Distribution{canonical: canonical}
	cum := 0.0
	for _, k := range keys {
		if cum >= threshold*total {
			break
		}
		cum += counts[k]
		t := Typical{Shape: k, P: counts[k]}
		t.MemMiB = memory[k] / tasks[k]
		d.Pods = append(d.Pods, t)
	}
	for i := range d.Pods {
		d.Pods[i].P /= cum
		d.Pods[i].models = modelSet(d.Pods[i].Spec, canonical)
	}
	return d
}

func larger(a, b Shape) bool {
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

func modelSet(spec string, canonical func(string) string) map[string]bool {
	if spec == "" {
		return nil
	}
	set := map[string]bool{}
	for _, m := range strings.Split(spec, "|") {
		if m != "" {
			set[canonical(m)] = true
		}
	}
	return set
}

// accessible returns, per typical pod, whether it may use GPUs of model.
func (d *Distribution) accessible(model string) []bool {
	if v, ok := d.access.Load(model); ok {
		return v.([]bool)
	}
	acc := make([]bool, len(d.Pods))
	for i, t := range d.Pods {
		acc[i] = t.models == nil || t.models[model]
	}
	d.access.Store(model, acc)
	return acc
}

// Node returns the expected fragment of one node in GPU milli: for each
// typical task, the free GPU it could not use, weighted by its probability.
// left holds the milli left on each GPU; model is the GPUs' model; memLeft
// only matters for shapes with memory.
//
// A task that needs no GPU, may not use the model, or finds too few GPUs
// or too little CPU leaves all free GPU as fragment; a task that fits
// leaves the GPUs too small for it.
func (d *Distribution) Node(model string, cpuLeft, memLeft int64, left []int) float64 {
	total := 0
	for _, l := range left {
		total += l
	}
	if total == 0 {
		return 0
	}
	acc := d.accessible(model)
	f := 0.0
	for i := range d.Pods {
		t := &d.Pods[i]
		if t.Milli == 0 || !acc[i] {
			f += t.P * float64(total)
			continue
		}
		fit, small := 0, 0
		for _, l := range left {
			if l >= t.Milli {
				fit++
			} else {
				small += l
			}
		}
		if fit >= t.Num && cpuLeft >= t.CPUMilli && memLeft >= t.MemMiB {
			f += t.P * float64(small)
		} else {
			f += t.P * float64(total)
		}
	}
	return f
}

// NodeOver is Node with a horizon of h arrivals. Node adds, for each free
// GPU j, left_j × q_j, where q_j is the chance that the next typical task
// could not use GPU j (it does not fit the node, or its share is bigger
// than left_j); NodeOver adds left_j × q_j^h, the chance that none of the
// next h could. A room that many frequent tasks fit (530 milli beside a
// 470 share, when 470s, 460s and 320s are common) is then not counted as
// lost, while a sliver only rare tasks fit (60, or 190 beside an 810) still
// is. NodeOver(…, 1) equals Node.
func (d *Distribution) NodeOver(model string, cpuLeft, memLeft int64, left []int, h int) float64 {
	return d.nodeOver(model, cpuLeft, memLeft, left, h, nil)
}

// NodeOverRooms is NodeOver with a horizon per room: a free GPU with l
// milli left is given rooms[l] arrivals (h where l is past the table).
func (d *Distribution) NodeOverRooms(model string, cpuLeft, memLeft int64, left []int, h int, rooms []int) float64 {
	return d.nodeOver(model, cpuLeft, memLeft, left, h, rooms)
}

func (d *Distribution) nodeOver(model string, cpuLeft, memLeft int64, left []int, h int, rooms []int) float64 {
	total := 0
	for _, l := range left {
		total += l
	}
	if total == 0 {
		return 0
	}
	acc := d.accessible(model)
	// GPUs with the same milli left have the same q: it is summed once
	// per distinct value (a node's GPUs are mostly full, free or alike,
	// and the typical mix of a list with GPU models has dozens of
	// shapes; per GPU, this loop was half of a fill run's time).
	var valBuf, countBuf [16]int
	vals, count := valBuf[:0], countBuf[:0]
	for _, l := range left {
		k := slices.Index(vals, l)
		if k < 0 {
			k = len(vals)
			vals, count = append(vals, l), append(count, 0)
		}
		count[k]++
	}
	var qBuf [16]float64
	q := qBuf[:0]
	for range vals {
		q = append(q, 0)
	}
	for i := range d.Pods {
		t := &d.Pods[i]
		if t.Milli == 0 || !acc[i] {
			for k := range q {
				q[k] += t.P
			}
			continue
		}
		fit := 0
		for k, v := range vals {
			if v >= t.Milli {
				fit += count[k]
			}
		}
		nodeFits := fit >= t.Num && cpuLeft >= t.CPUMilli && memLeft >= t.MemMiB
		for k, v := range vals {
			if !nodeFits || v < t.Milli {
				q[k] += t.P
			}
		}
	}
	var pBuf [16]float64
	p := pBuf[:0]
	for k, v := range vals {
		n := h
		if v < len(rooms) {
			n = rooms[v]
		}
		pk := 1.0
		for range n {
			pk *= q[k]
		}
		p = append(p, pk)
	}
	// Summed by value, in ascending order, so that the result depends on
	// the GPUs' values and not on their order: a share's trial on each of
	// a node's GPUs with the same room then scores the same, and only the
	// first is computed (fragScorer.Score).
	f := 0.0
	last := 0
	for {
		k := -1
		for x, v := range vals {
			if v > last && (k < 0 || v < vals[k]) {
				k = x
			}
		}
		if k < 0 {
			return f
		}
		last = vals[k]
		for range count[k] {
			f += float64(vals[k]) * p[k]
		}
	}
}

// WithoutMemory returns the shapes with memory cleared, the paper's view.
func WithoutMemory(shapes []Shape) []Shape {
	out := make([]Shape, len(shapes))
	for i, s := range shapes {
		s.MemMiB = 0
		out[i] = s
	}
	return out
}

// ratios returns, for model, the CPU milli and memory MiB the typical mix
// asks per GPU milli, counting every typical task that may run there
// (CPU-only ones too: they take CPU from GPU nodes as well).
func (d *Distribution) ratios(model string) (cpu, mem float64) {
	if v, ok := d.ratio.Load(model); ok {
		r := v.([2]float64)
		return r[0], r[1]
	}
	acc := d.accessible(model)
	var c, m, g float64
	for i, t := range d.Pods {
		if t.Milli > 0 && !acc[i] {
			continue
		}
		c += t.P * float64(t.CPUMilli)
		m += t.P * float64(t.MemMiB)
		g += t.P * float64(t.Milli*t.Num)
	}
	if g > 0 {
		cpu, mem = c/g, m/g
	}
	d.ratio.Store(model, [2]float64{cpu, mem})
	return cpu, mem
}

// Unbalanced is the free GPU (milli) a node would strand if the typical
// mix kept arriving: when its CPU or memory per free GPU is below what the
// mix asks, that resource runs out first and the GPU beyond it is lost.
// FGD's measure asks whether one task fits and cannot see this.
func (d *Distribution) Unbalanced(model string, cpuLeft, memLeft int64, left []int) float64 {
	total := 0
	for _, l := range left {
		total += l
	}
	if total == 0 {
		return 0
	}
	cpu, mem := d.ratios(model)
	usable := float64(total)
	if cpu > 0 {
		usable = min(usable, float64(cpuLeft)/cpu)
	}
	if mem > 0 {
		usable = min(usable, float64(memLeft)/mem)
	}
	return float64(total) - max(usable, 0)
}
