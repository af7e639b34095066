package sched

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"partita.dev/partita/internal/cluster"
)

// kept is what a snapshot sums over every job, kept from cycle to cycle
// for a world that lists what changed (Input.Incremental), with each
// job's part in the sums so that a change takes it out again. Reading
// every unfinished job each cycle, most of them running and unchanged,
// was about a third of a simulated week of 1,000 GPUs, nearly all of it
// waiting for memory (docs/mixed.md, "Simulation speed").
type kept struct {
	ok    bool
	set   *cluster.NodeSet
	nodes int
	teams []string // the input's team names, by position
	// The sums, as recount makes them: GPU milli held by team position
	// (others by name), and when the running work on each node ends.
	use        []int64
	useOther   map[string]int64
	endsBy     []time.Duration
	endUnknown []bool
	// onNode lists the jobs not pending that hold each node, for its end
	// time; dirty the nodes whose end time must be taken again.
	onNode [][]*Job
	dirty  []int
	// of is each job's part; pending the pending jobs, by submission
	// and ID: the part of the cycle's order that does not change from
	// cycle to cycle (order).
	of      map[*Job]*part
	pending []*Job
}

// part is one job's share of the sums, as counted.
type part struct {
	milli   int64
	team    int    // position, or -1
	name    string // the team's name, for a team not in the input
	nodes   []int  // the entry's nodes (never changed in place)
	running bool   // counted in onNode
	phase   Phase  // the job's phase when counted (CheckKept)
	pending bool   // in kept.pending
}

// fits says whether the kept sums apply to in: kept from an incremental
// input on the same nodes and the same teams.
func (k *kept) fits(in Input) bool {
	if !k.ok || k.set != in.Cluster.NodeSet() || k.nodes != in.Cluster.Len() || len(k.teams) != len(in.Teams) {
		return false
	}
	for i, t := range in.Teams {
		if k.teams[i] != t.Name {
			return false
		}
	}
	return true
}

// reset empties k for a recount of in.
func (k *kept) reset(in Input) {
	*k = kept{
		ok: true, set: in.Cluster.NodeSet(), nodes: in.Cluster.Len(),
		useOther: map[string]int64{}, onNode: make([][]*Job, in.Cluster.Len()),
		of: make(map[*Job]*part, len(in.Jobs)),
	}
	for _, t := range in.Teams {
		k.teams = append(k.teams, t.Name)
	}
}

// take keeps the sums a recount made.
func (k *kept) take(c *cycle) {
	k.use = slices.Clone(c.use)
	k.useOther = maps.Clone(c.useOther)
	k.endsBy = slices.Clone(c.endsBy)
	k.endUnknown = slices.Clone(c.endUnknown)
	k.dirty = k.dirty[:0]
}

// add records j's part, from its entry just refreshed. The sums
// themselves are the recount's (take) or updated by applyChanges.
func (k *kept) add(j *Job) *part {
	e := &j.held
	p := &part{milli: e.milli, team: e.team, name: j.Spec.Team, nodes: e.nodes, running: j.Phase != Pending, phase: j.Phase}
	if p.running {
		for _, i := range p.nodes {
			k.onNode[i] = append(k.onNode[i], j)
		}
	}
	if j.Phase == Pending {
		p.pending = true
		i, _ := slices.BinarySearchFunc(k.pending, j, submittedFirst)
		k.pending = slices.Insert(k.pending, i, j)
	}
	k.of[j] = p
	return p
}

// count adds p to the sums (sign 1) or takes it out (sign -1).
func (k *kept) count(p *part, sign int64) {
	if p.milli > 0 {
		if p.team >= 0 {
			k.use[p.team] += sign * p.milli
		} else {
			k.useOther[p.name] += sign * p.milli
		}
	}
	if p.running {
		k.dirty = append(k.dirty, p.nodes...)
	}
}

// remove takes j's part out of the sums and lists.
func (k *kept) remove(j *Job) {
	p := k.of[j]
	if p == nil {
		return
	}
	k.count(p, -1)
	if p.running {
		for _, i := range p.nodes {
			if at := slices.Index(k.onNode[i], j); at >= 0 {
				last := len(k.onNode[i]) - 1
				k.onNode[i][at] = k.onNode[i][last]
				k.onNode[i][last] = nil
				k.onNode[i] = k.onNode[i][:last]
			}
		}
	}
	if p.pending {
		if i := slices.Index(k.pending, j); i >= 0 {
			k.pending = slices.Delete(k.pending, i, i+1)
		}
	}
	delete(k.of, j)
}

// endsOf takes node i's end time again from the jobs that hold it, as
// recount does.
func (k *kept) endsOf(i int) {
	k.endsBy[i], k.endUnknown[i] = 0, false
	for _, j := range k.onNode[i] {
		addEnd(k.endsBy, k.endUnknown, i, j)
	}
}

// addEnd adds the expected end of j, not pending, to node i's end time:
// unknown when j declared no run time.
func addEnd(endsBy []time.Duration, unknown []bool, i int, j *Job) {
	if j.Estimate == 0 {
		unknown[i] = true
	} else {
		endsBy[i] = max(endsBy[i], j.Started+j.Estimate)
	}
}

// applyChanges is recount for an incremental input: only the jobs gone
// and changed are read.
func (s *Scheduler) applyChanges(c *cycle) {
	in, k := c.in, &s.kept
	for _, j := range in.Gone {
		k.remove(j)
		if s.byID[j.ID()] == j {
			delete(s.byID, j.ID())
		}
		j.held.owner = nil // not live; indexed again if it comes back
	}
	for _, j := range in.Changed {
		k.remove(j)
		s.refresh(c, j)
		k.count(k.add(j), 1)
	}
	for _, i := range k.dirty {
		k.endsOf(i)
	}
	k.dirty = k.dirty[:0]
	c.use = slices.Clone(k.use)
	c.useOther = maps.Clone(k.useOther)
	c.endsBy = slices.Clone(k.endsBy)
	c.endUnknown = slices.Clone(k.endUnknown)
}

// submittedFirst orders jobs by submission, then ID: the end of the
// cycle's order (order).
func submittedFirst(x, y *Job) int {
	if x.Submitted != y.Submitted {
		return cmp.Compare(x.Submitted, y.Submitted)
	}
	return strings.Compare(x.ID(), y.ID())
}

// jobsToOrder is the jobs order looks at for pending ones: the kept
// pending jobs when the sums are kept, in submittedFirst's order
// (sorted true), else every job of the input.
func (s *Scheduler) jobsToOrder(c *cycle) (jobs []*Job, sorted bool) {
	if c.in.Incremental && s.kept.ok {
		return s.kept.pending, true
	}
	return c.in.Jobs, false
}

// CheckKept recounts every job of in, the input of the last Cycle, and
// says where the sums kept from its changes differ (nil when they agree
// or none are kept). For tests of a world that gives incremental inputs:
// a change it did not list shows here.
func (s *Scheduler) CheckKept(in Input) error {
	k := &s.kept
	if !in.Incremental || !k.ok {
		return nil
	}
	use, other := make([]int64, len(in.Teams)), map[string]int64{}
	ends, unknown := make([]time.Duration, in.Cluster.Len()), make([]bool, in.Cluster.Len())
	pending := 0
	for _, j := range in.Jobs {
		e := &j.held
		if !s.live(e) || s.byID[j.ID()] != j {
			return fmt.Errorf("job %s: not indexed as a job of the input", j.ID())
		}
		if !e.holds(j.Placed) {
			return fmt.Errorf("job %s: its placement changed and was not listed", j.ID())
		}
		milli := j.Held(in.Cluster)
		if milli != e.milli {
			return fmt.Errorf("job %s: holds %d milli, its entry %d", j.ID(), milli, e.milli)
		}
		p := k.of[j]
		if p == nil {
			return fmt.Errorf("job %s: no part in the kept sums", j.ID())
		}
		if p.phase != j.Phase || p.running != (j.Phase != Pending) || p.pending != (j.Phase == Pending) {
			return fmt.Errorf("job %s: phase %v changed and was not listed", j.ID(), j.Phase)
		}
		if j.Phase == Pending {
			pending++
		} else {
			for _, i := range e.nodes {
				addEnd(ends, unknown, i, j)
			}
		}
		if milli > 0 {
			if t := teamIndex(in, j.Spec.Team); t >= 0 {
				use[t] += milli
			} else {
				other[j.Spec.Team] += milli
			}
		}
	}
	switch {
	case len(k.of) != len(in.Jobs):
		return fmt.Errorf("%d jobs in the kept sums, %d in the input", len(k.of), len(in.Jobs))
	case pending != len(k.pending):
		return fmt.Errorf("%d pending jobs kept, %d in the input", len(k.pending), pending)
	case !slices.IsSortedFunc(k.pending, submittedFirst):
		return fmt.Errorf("the pending jobs kept are not in the order of submission")
	case !slices.Equal(use, k.use):
		return fmt.Errorf("teams hold %v, kept %v", use, k.use)
	case !slices.Equal(ends, k.endsBy) || !slices.Equal(unknown, k.endUnknown):
		return fmt.Errorf("node end times %v %v, kept %v %v", ends, unknown, k.endsBy, k.endUnknown)
	}
	for _, m := range []map[string]int64{k.useOther, other} {
		for name := range m {
			if other[name] != k.useOther[name] {
				return fmt.Errorf("team %s holds %d, kept %d", name, other[name], k.useOther[name])
			}
		}
	}
	return nil
}

// teamIndex is the position of the team named so in in, -1 when not
// there.
func teamIndex(in Input, name string) int {
	for i, t := range in.Teams {
		if t.Name == name {
			return i
		}
	}
	return -1
}
