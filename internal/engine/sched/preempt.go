package sched

import (
	"fmt"
	"sort"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/workload"
)

// maxVictims bounds the search: past it, preemption gives up for this job
// this cycle rather than evict half the cluster.
const maxVictims = 64

// mayPreempt reports whether j may evict anyone at all: it outranks some
// running job, or its team is reclaiming its guarantee from borrowers.
func (s *Scheduler) mayPreempt(c *cycle, j *Job) bool {
	if !s.cfg.Preempt {
		return false
	}
	for _, v := range c.in.Jobs {
		if v.Phase == Running && s.eligible(c, j, v) {
			return true
		}
	}
	return false
}

// eligible says whether running job v may be evicted for pending job j:
//   - a lower class of the same team;
//   - a lower class of a team that is borrowing;
//   - when j's team is within its guarantee: any job of no higher class of
//     a team that is borrowing (reclaim).
//
// A team is never taken below its own guarantee for another team, except
// by production work evicting a lower class.
func (s *Scheduler) eligible(c *cycle, j, v *Job) bool {
	if v.Phase != Running || v.ID() == j.ID() {
		return false
	}
	lower := v.Spec.Class < j.Spec.Class
	if v.Spec.Team == j.Spec.Team {
		return lower
	}
	if !borrowing(c, v.Spec.Team) {
		return lower && j.Spec.Class == workload.Production
	}
	keepsGuarantee := true
	if t, ok := c.teams[v.Spec.Team]; ok {
		keepsGuarantee = c.usage[v.Spec.Team]-v.Held(c.in.Cluster) >= t.Guarantee
	}
	if lower && (keepsGuarantee || j.Spec.Class == workload.Production) {
		return true
	}
	return withinGuarantee(c, j) && v.Spec.Class <= j.Spec.Class && keepsGuarantee
}

// victims finds the running jobs to evict so that j fits, losing the least:
// borrowed capacity first, then the lowest class, then the most recent
// checkpoint (least work lost), then the fewest GPUs. It adds victims in
// that order until j fits, then gives back any it did not need.
func (s *Scheduler) victims(c *cycle, j *Job, reqs []*engine.Request) ([]*Job, map[string]bool) {
	var cands []*Job
	for _, v := range c.in.Jobs {
		if s.eligible(c, j, v) && !preemptedThisCycle(c, v) {
			cands = append(cands, v)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	now := c.in.Now
	sort.SliceStable(cands, func(a, b int) bool {
		x, y := cands[a], cands[b]
		if bx, by := borrowing(c, x.Spec.Team), borrowing(c, y.Spec.Team); bx != by {
			return bx
		}
		if x.Spec.Class != y.Spec.Class {
			return x.Spec.Class < y.Spec.Class
		}
		if lx, ly := now-x.Checkpoint, now-y.Checkpoint; lx != ly {
			return lx < ly
		}
		if hx, hy := x.Held(c.in.Cluster), y.Held(c.in.Cluster); hx != hy {
			return hx < hy
		}
		return x.ID() < y.ID()
	})
	if len(cands) > maxVictims {
		cands = cands[:maxVictims]
	}
	// j must fit where it would actually be placed: the same node sets
	// tryStart uses (outside another gang's reservation), or the victims'
	// room goes to someone else and j preempts again.
	allowed := s.candidates(c, j, reqs)
	var target []cluster.Assignment
	fitsIn := func(st *cluster.State) bool {
		for _, a := range allowed {
			if as, _, err := s.placer.PlaceAll(st, reqs, a); err == nil {
				target = as
				return true
			}
		}
		return false
	}
	trial := c.st.Clone()
	var chosen []*Job
	fits := false
	for _, v := range cands {
		if err := release(trial, v); err != nil {
			continue
		}
		chosen = append(chosen, v)
		if fitsIn(trial) {
			fits = true
			break
		}
	}
	if !fits {
		return nil, nil
	}
	// Give back, newest choice first, every victim j fits without.
	for k := len(chosen) - 1; k >= 0; k-- {
		back := trial.Clone()
		if err := restore(back, chosen[k]); err != nil {
			continue
		}
		if fitsIn(back) {
			trial = back
			chosen = append(chosen[:k], chosen[k+1:]...)
		}
	}
	fitsIn(trial) // the target of the final set of victims
	nodes := map[string]bool{}
	for _, a := range target {
		nodes[a.Node] = true
	}
	return chosen, nodes
}

func release(st *cluster.State, v *Job) error {
	for _, a := range v.Placed {
		if a == nil {
			continue
		}
		if _, err := st.Release(a.Node, a.Task); err != nil {
			return err
		}
	}
	return nil
}

func restore(st *cluster.State, v *Job) error {
	for _, a := range v.Placed {
		if a == nil {
			continue
		}
		if err := st.Allocate(*a); err != nil {
			return err
		}
	}
	return nil
}

func preemptedThisCycle(c *cycle, v *Job) bool {
	for _, p := range c.d.Preemptions {
		if p.Job == v.ID() {
			return true
		}
	}
	return false
}

// preempt records the evictions and the promise to j: until its victims
// are gone, the nodes it will use take no one else's new work, or the room
// the victims leave goes to others and j must preempt again.
func (s *Scheduler) preempt(c *cycle, j *Job, victims []*Job, nodes map[string]bool) {
	s.promisedNodes[j.ID()] = nodes
	ids := make([]string, len(victims))
	for i, v := range victims {
		ids[i] = v.ID()
		reason := fmt.Sprintf("preempted for %s (%s, team %s)", j.ID(), j.Spec.Class, j.Spec.Team)
		if v.Spec.Class >= j.Spec.Class {
			reason = fmt.Sprintf("team %s reclaims its guarantee for %s", j.Spec.Team, j.ID())
		}
		c.d.Preemptions = append(c.d.Preemptions, Preemption{Job: v.ID(), For: j.ID(), Reason: reason, Grace: s.cfg.Grace})
	}
	s.promised[j.ID()] = ids
}
