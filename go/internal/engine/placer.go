package engine

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// Placer runs the pipeline of one policy. It keeps a cache of per-node
// verdicts keyed by the node's generation, so a placement costs one cache
// look-up per unchanged node and a full evaluation only of nodes that
// changed since the same kind of request was last seen. The cache never
// changes a result: a verdict is reused only for the very node state it was
// computed on.
type Placer struct {
	policy   Policy
	rng      *random.Rand
	headroom float64
	migOnly  bool
	brief    bool

	classes map[requestKey]int
	cache   [][]verdict // [class][node position]
}

// verdict is the cached outcome of filter and score for one node.
type verdict struct {
	gen    uint64 // node generation it was computed on; 0 = empty
	ok     bool
	reason Reason
	score  int64
	hint   Hint
}

// maxClasses bounds the cache: past it the cache starts over, which costs
// speed, never correctness.
const maxClasses = 512

// NewPlacer builds a placer. rng is the only source of randomness; the
// same policy, rng seed and inputs give the same placements.
func NewPlacer(p Policy, rng *random.Rand) *Placer {
	if p.Picker == nil {
		p.Picker = DefaultPicker{}
	}
	return &Placer{policy: p, rng: rng, headroom: gpu.DefaultHeadroom, classes: map[requestKey]int{}}
}

// Policy returns the placer's policy.
func (p *Placer) Policy() Policy { return p.policy }

// SetHeadroom changes the GPU memory kept above a memory profile's peak.
func (p *Placer) SetHeadroom(h float64) { p.headroom = h }

// SetMIGOnly makes memory profiles take MIG instances on MIG-capable
// models (see Request.MIGOnly).
func (p *Placer) SetMIGOnly(on bool) { p.migOnly = on }

// ErrNoFit is what a placer with brief failures returns when a task fits
// nowhere, instead of a *Failure.
var ErrNoFit = errors.New("no node fits the task")

// SetBriefFailures makes a failed placement return ErrNoFit instead of a
// *Failure counting why each node was ruled out: a scheduling cycle that
// only needs to know that a job did not fit spent a third of each failed
// placement counting reasons.
func (p *Placer) SetBriefFailures(on bool) { p.brief = on }

// Failure says why a task fits nowhere: how many nodes were ruled out for
// each reason.
type Failure struct {
	Task    string
	Nodes   int
	Reasons map[Code]int
}

func (f *Failure) Error() string {
	codes := make([]string, 0, len(f.Reasons))
	for c := range f.Reasons {
		codes = append(codes, string(c))
	}
	sort.Slice(codes, func(i, j int) bool {
		ci, cj := f.Reasons[Code(codes[i])], f.Reasons[Code(codes[j])]
		return ci > cj || ci == cj && codes[i] < codes[j]
	})
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%d %s", f.Reasons[Code(c)], c)
	}
	return fmt.Sprintf("task %s: 0/%d nodes fit (%s)", f.Task, f.Nodes, strings.Join(parts, ", "))
}

// Request prepares a task with the placer's headroom and policy rewrite.
func (p *Placer) Request(t workload.Task) (*Request, error) {
	r, err := NewRequest(t, p.headroom)
	if err != nil {
		return nil, err
	}
	r.MIGOnly, r.key.migOnly = p.migOnly, p.migOnly
	if p.policy.Rewriter != nil {
		r = p.policy.Rewriter.Rewrite(r)
	}
	return r, nil
}

// Rewrites says whether the policy rewrites requests (k8s-default places
// a memory profile or a fraction on a whole GPU): what a task is granted
// then differs from what it asks.
func (p *Placer) Rewrites() bool { return p.policy.Rewriter != nil }

// Place finds where a task goes on st, without changing st. The caller
// applies the assignment with st.Allocate.
func (p *Placer) Place(st *cluster.State, t workload.Task) (cluster.Assignment, error) {
	r, err := p.Request(t)
	if err != nil {
		return cluster.Assignment{}, err
	}
	return p.PlaceRequest(st, r)
}

// PlaceRequest is Place for a prepared request.
func (p *Placer) PlaceRequest(st *cluster.State, r *Request) (cluster.Assignment, error) {
	return p.PlaceIn(st, r, nil)
}

// PlaceIn is PlaceRequest restricted to the nodes allowed says yes to
// (all when nil).
func (p *Placer) PlaceIn(st *cluster.State, r *Request, allowed func(*cluster.Node) bool) (cluster.Assignment, error) {
	verdicts := p.evaluate(st, r)
	// allowed is applied on the fly: the cached row must keep the true
	// verdicts, and copying it per call cost more than the placement.
	feasible := func(i int) bool { return verdicts[i].ok && (allowed == nil || allowed(st.Node(i))) }
	best := -1
	if p.policy.Selector != nil {
		var candidates []int
		for i := range verdicts {
			if feasible(i) {
				candidates = append(candidates, i)
			}
		}
		if len(candidates) > 0 {
			best = p.policy.Selector.Select(st, candidates, p.rng)
		}
	} else {
		best = p.argmax(st, r, verdicts, feasible)
	}
	if best < 0 {
		if p.brief {
			return cluster.Assignment{}, ErrNoFit
		}
		return cluster.Assignment{}, failure(r, verdicts, feasible)
	}
	n := st.Node(best)
	grants, ok := p.policy.Picker.Pick(n, r, verdicts[best].hint, p.rng)
	if !ok {
		// A filter passed a node the picker cannot use: a bug in a policy.
		return cluster.Assignment{}, fmt.Errorf("task %s: policy %s: node %s passed the filters but no device could be picked", r.Task.Name, p.policy.Name, n.Name)
	}
	return cluster.Assignment{Task: r.Task.Name, Node: n.Name, CPUMilli: r.CPUMilli, MemoryMiB: r.MemMiB, Grants: grants}, nil
}

// argmax returns the feasible node with the best score, ties to the lowest
// Rank, or -1.
func (p *Placer) argmax(st *cluster.State, r *Request, vs []verdict, feasible func(int) bool) int {
	adj := p.policy.Adjuster
	if adj != nil {
		adj.Prepare(st, r)
	}
	best, bestScore := -1, int64(0)
	for i := range vs {
		if !feasible(i) {
			continue
		}
		sc := vs[i].score
		if adj != nil {
			sc = adj.Adjust(st.Node(i), r, sc, vs[i].hint)
		}
		if best < 0 || sc > bestScore || sc == bestScore && st.Node(i).Rank < st.Node(best).Rank {
			best, bestScore = i, sc
		}
	}
	return best
}

// failure counts the reasons nodes were ruled out; a node that passed the
// filters but is not allowed counts as ruled out by policy. (Counted in a
// short list first: a map update per node was a third of a failed
// placement's cost.)
func failure(r *Request, vs []verdict, feasible func(int) bool) *Failure {
	type count struct {
		code Code
		n    int
	}
	var counts []count
	for i := range vs {
		code := vs[i].reason.Code
		if vs[i].ok && !feasible(i) {
			code = CodePolicy
		}
		k := 0
		for k < len(counts) && counts[k].code != code {
			k++
		}
		if k == len(counts) {
			counts = append(counts, count{code: code})
		}
		counts[k].n++
	}
	f := &Failure{Task: r.Task.Name, Nodes: len(vs), Reasons: make(map[Code]int, len(counts))}
	for _, c := range counts {
		f.Reasons[c.code] = c.n
	}
	return f
}

// evaluate returns the verdict on every node, from the cache where the
// node has not changed.
func (p *Placer) evaluate(st *cluster.State, r *Request) []verdict {
	vs := p.slot(r, st.Len())
	for i := range vs {
		n := st.Node(i)
		if !p.policy.Volatile && vs[i].gen == n.Gen() && vs[i].gen != 0 {
			continue
		}
		vs[i] = p.judge(n, r)
		vs[i].gen = n.Gen()
	}
	return vs
}

// FitsSomewhere reports whether r fits on some node allowed says yes to
// (every node when nil), that is whether PlaceIn would succeed. It neither
// ranks nor picks: a caller about to try r on several subsets of those
// nodes learns at the cost of one pass that every try would fail.
func (p *Placer) FitsSomewhere(st *cluster.State, r *Request, allowed func(*cluster.Node) bool) bool {
	vs := p.evaluate(st, r)
	for i := range vs {
		if vs[i].ok && (allowed == nil || allowed(st.Node(i))) {
			return true
		}
	}
	return false
}

// Fits reports whether r fits on n: the placer's filters pass there, so
// placing r with n the only node allowed would succeed. It reads n alone;
// a search that asks about one node at a time needs no pass over the
// cluster.
func (p *Placer) Fits(n *cluster.Node, r *Request) bool {
	if ok, _ := fits(n, r); !ok {
		return false
	}
	for _, f := range p.policy.Filters {
		if ok, _ := f.Filter(n, r); !ok {
			return false
		}
	}
	return true
}

func (p *Placer) judge(n *cluster.Node, r *Request) verdict {
	if ok, code := fits(n, r); !ok {
		return verdict{reason: Reason{Filter: "fit", Code: code}}
	}
	for _, f := range p.policy.Filters {
		if ok, why := f.Filter(n, r); !ok {
			return verdict{reason: why}
		}
	}
	v := verdict{ok: true}
	if p.policy.Scorer != nil {
		v.score, v.hint = p.policy.Scorer.Score(n, r)
	}
	return v
}

// slot returns the cache row for r's class, sized for nodes.
func (p *Placer) slot(r *Request, nodes int) []verdict {
	c, ok := p.classes[r.key]
	if !ok {
		if len(p.cache) >= maxClasses {
			p.classes = map[requestKey]int{}
			p.cache = nil
		}
		c = len(p.cache)
		p.classes[r.key] = c
		p.cache = append(p.cache, nil)
	}
	if len(p.cache[c]) != nodes {
		p.cache[c] = make([]verdict, nodes)
	}
	return p.cache[c]
}

// PlaceAll places every request, each after the ones before it, on a
// clone of st: all of them or none. It returns the assignments and the
// clone with them applied, which the caller may adopt.
func (p *Placer) PlaceAll(st *cluster.State, reqs []*Request, allowed func(*cluster.Node) bool) ([]cluster.Assignment, *cluster.State, error) {
	if len(reqs) == 0 {
		return nil, st.Clone(), nil
	}
	// The first task is placed on st itself (placing does not change the
	// state): most attempts that fail, fail there, before a clone.
	first, err := p.PlaceIn(st, reqs[0], allowed)
	if err != nil {
		return nil, nil, err
	}
	trial := st.Clone()
	out := make([]cluster.Assignment, 0, len(reqs))
	for k, r := range reqs {
		a := first
		if k > 0 {
			if a, err = p.PlaceIn(trial, r, allowed); err != nil {
				return nil, nil, err
			}
		}
		if err := trial.Allocate(a); err != nil {
			return nil, nil, fmt.Errorf("task %s: %w", r.Task.Name, err)
		}
		out = append(out, a)
	}
	return out, trial, nil
}
