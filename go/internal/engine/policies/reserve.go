package policies

import (
	"sort"
	"strings"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/workload"
)

// reserve keeps enough nodes able to host multi-GPU tasks. Node-local
// scores (FGD's and ours) cannot see that the last few empty 8-GPU nodes
// are about to go; the cluster can. From the request distribution we know
// what share f_k of GPU demand comes as k-GPU tasks, so of the R free GPUs
// about R·f_k/k will be asked for by k-GPU tasks. While the nodes that can
// still host one (k fully free GPUs, and the CPU and memory such tasks
// typically ask) are no more than that, a placement that would take one of
// them below k goes behind every placement that would not.
//
// Models get the same treatment: a model whose free GPUs are no more than
// the expected demand of the tasks constrained to it (a task allowed on
// several models counts a share on each) is kept for those tasks; a task
// that may also run on a model that is not scarce goes there first.
type reserve struct {
	ks       []int           // k ≥ 2 with demand, ascending
	frac     map[int]float64 // GPU-demand share of k-GPU tasks
	cpu, mem map[int]int64   // typical CPU and memory of a k-GPU task
	factor   float64         // safety margin on the expected demand
	scarce   map[int]bool    // per placement: k-GPU hosts are scarce

	modelFrac   map[string]float64 // GPU-demand share constrained to each model
	modelScarce map[string]bool    // per placement
	models      []string           // models in the cluster

	// prepared is the State version the scarcity flags were computed for:
	// they depend on the cluster alone, so a placement on an unchanged
	// cluster (a gang's tasks tried again, a victim search) reuses them.
	prepared uint64
	// Per-node contributions to the totals, kept by node generation, so a
	// placement re-reads only the nodes that changed since the last one.
	nodes     []contribution
	freeMilli int
	hosts     map[int]int
	modelFree map[string]int
}

// contribution is what one node adds to the totals Prepare needs.
type contribution struct {
	gen   uint64
	free  int
	model string
	hosts []bool // per r.ks: can it host a k-GPU task
}

// reservePenalty moves a placement behind every unpenalised one while
// keeping the order among penalised ones.
const reservePenalty = int64(1) << 50

func newReserve(shapes []frag.Shape, factor float64, canonical func(string) string) *reserve {
	r := &reserve{frac: map[int]float64{}, cpu: map[int]int64{}, mem: map[int]int64{}, factor: factor, scarce: map[int]bool{},
		modelFrac: map[string]float64{}, modelScarce: map[string]bool{}}
	var total float64
	count := map[int]int64{}
	for _, s := range shapes {
		total += float64(s.Milli * s.Num)
		if s.Spec != "" && s.Milli > 0 {
			models := specModels(s.Spec, canonical)
			for _, m := range models {
				r.modelFrac[m] += float64(s.Milli*s.Num) / float64(len(models))
			}
		}
		if s.Milli == 1000 && s.Num >= 2 {
			r.frac[s.Num] += float64(1000 * s.Num)
			r.cpu[s.Num] += s.CPUMilli
			r.mem[s.Num] += s.MemMiB
			count[s.Num]++
		}
	}
	for m := range r.modelFrac {
		r.modelFrac[m] /= total
	}
	for k := 2; k <= 64; k++ {
		if count[k] == 0 {
			continue
		}
		r.ks = append(r.ks, k)
		r.frac[k] /= total
		r.cpu[k] /= count[k]
		r.mem[k] /= count[k]
	}
	return r
}

func (r *reserve) canHost(n *cluster.Node, k int, free int, cpu, mem int64) bool {
	return free >= k && cpu >= r.cpu[k] && mem >= r.mem[k]
}

func (r *reserve) Prepare(st *cluster.State, _ *engine.Request) {
	if v := st.Version(); v != 0 && v == r.prepared {
		return
	}
	r.prepared = st.Version()
	if len(r.nodes) != st.Len() {
		r.nodes = make([]contribution, st.Len())
		r.freeMilli, r.hosts, r.modelFree = 0, map[int]int{}, map[string]int{}
	}
	for i := range r.nodes {
		n := st.Node(i)
		if r.nodes[i].gen == n.Gen() && r.nodes[i].gen != 0 {
			continue
		}
		r.add(r.nodes[i], -1)
		r.nodes[i] = r.contributionOf(n)
		r.add(r.nodes[i], +1)
	}
	for _, k := range r.ks {
		expected := float64(r.freeMilli) / 1000 * r.frac[k] / float64(k) * r.factor
		r.scarce[k] = float64(r.hosts[k]) <= expected
	}
	r.models = r.models[:0]
	for m, free := range r.modelFree {
		r.models = append(r.models, m)
		r.modelScarce[m] = r.modelFrac[m] > 0 && float64(free) <= float64(r.freeMilli)*r.modelFrac[m]*r.factor
	}
	sort.Strings(r.models)
}

func (r *reserve) contributionOf(n *cluster.Node) contribution {
	c := contribution{gen: n.Gen(), free: n.GPUFreeMilli(), hosts: make([]bool, len(r.ks))}
	if m := n.Model(); m != nil {
		c.model = m.Name
	}
	f := n.FullyFreeGPUs()
	for x, k := range r.ks {
		c.hosts[x] = r.canHost(n, k, f, n.CPUFree(), n.MemFree())
	}
	return c
}

// add adds (sign +1) or removes (-1) a node's contribution to the totals.
func (r *reserve) add(c contribution, sign int) {
	if c.gen == 0 {
		return
	}
	r.freeMilli += sign * c.free
	if c.model != "" {
		r.modelFree[c.model] += sign * c.free
	}
	for x, k := range r.ks {
		if c.hosts[x] {
			r.hosts[k] += sign
		}
	}
}

// elsewhere reports whether req may run on a model of the cluster, other
// than model, that is not scarce.
func (r *reserve) elsewhere(req *engine.Request, model string) bool {
	for _, m := range r.models {
		if m == model || r.modelScarce[m] {
			continue
		}
		if len(req.Models) == 0 {
			return true
		}
		for _, allowed := range req.Models {
			if allowed == m {
				return true
			}
		}
	}
	return false
}

func (r *reserve) Adjust(n *cluster.Node, req *engine.Request, score int64, h engine.Hint) int64 {
	if m := n.Model(); m != nil && req.Kind != workload.NoGPU && r.modelScarce[m.Name] && r.elsewhere(req, m.Name) {
		return score - reservePenalty
	}
	f := n.FullyFreeGPUs()
	after := f - takesFree(n, req, h)
	cpu, mem := n.CPUFree()-req.CPUMilli, n.MemFree()-req.MemMiB
	for _, k := range r.ks {
		if r.scarce[k] && r.canHost(n, k, f, n.CPUFree(), n.MemFree()) && !r.canHost(n, k, after, cpu, mem) {
			return score - reservePenalty
		}
	}
	return score
}

// takesFree returns how many fully free GPUs of n the request would take.
func takesFree(n *cluster.Node, r *engine.Request, h engine.Hint) int {
	switch r.Kind {
	case workload.WholeGPUs:
		return r.Count
	case workload.NoGPU:
		return 0
	}
	if h.Set && h.GPU < len(n.GPUs) {
		if n.GPUs[h.GPU].Used() == 0 && !n.GPUs[h.GPU].MIG {
			return 1
		}
		return 0
	}
	return 0
}

func specModels(spec string, canonical func(string) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range strings.Split(spec, "|") {
		if m == "" {
			continue
		}
		if c := canonical(m); !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}
