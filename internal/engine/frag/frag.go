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
	"sort"
	"strings"
	"sync"
)

// Shape is a task's request as fragmentation sees it. Memory is left out,
// as in the paper.
type Shape struct {
	CPUMilli int64
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
	counts := map[Shape]int{}
	for _, s := range shapes {
		counts[s]++
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
	total := float64(len(shapes))
	d := &Distribution{canonical: canonical}
	cum := 0.0
	for _, k := range keys {
		if cum >= threshold*total {
			break
		}
		cum += float64(counts[k])
		d.Pods = append(d.Pods, Typical{Shape: k, P: float64(counts[k])})
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
// left holds the milli left on each GPU; model is the GPUs' model.
//
// A task that needs no GPU, may not use the model, or finds too few GPUs
// or too little CPU leaves all free GPU as fragment; a task that fits
// leaves the GPUs too small for it.
func (d *Distribution) Node(model string, cpuLeft int64, left []int) float64 {
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
		if fit >= t.Num && cpuLeft >= t.CPUMilli {
			f += t.P * float64(small)
		} else {
			f += t.P * float64(total)
		}
	}
	return f
}
