package mixed

import (
	"fmt"
	"slices"
	"time"

	"partita.dev/partita/internal/engine/sched"
)

// The world's passes after each cycle look at the waiting jobs, at what
// each team holds and at the running jobs' checkpoints. Reading every
// unfinished job for them, nine in ten of them running and unchanged,
// cost a miss per job and pass on a week of 1,000 GPUs (docs/mixed.md,
// "Simulation speed"); these lists keep what the passes need, in the
// order of w.active, so that every sum is taken in the same order as
// before.

// lists are the world's compact views of its active jobs.
type lists struct {
	// share and team are each active job's held GPU (job.heldShare) and
	// team position, by position in w.active (teamUsage).
	share []float64
	team  []int
	// pending are the pending active jobs, in the order of w.active,
	// and milli their GPU demand (job.milli; idleCause reads only the
	// jobs that fit); left those that left pending since the last
	// metrics.check.
	pending []*job
	milli   []int64
	left    []*job
	// ckpt are the running jobs that checkpoint: the scheduler must see
	// each one's last checkpoint (lostWork), taken from here.
	ckpt []checkpointed
	seq  int // arrivals so far: job.seq
}

// checkpointed is a running job that checkpoints every every since since;
// at is the checkpoint last written to the job (-1: none yet).
type checkpointed struct {
	j            *job
	since, every time.Duration
	at           time.Duration
}

// arrive adds j, just arrived and pending, to the active jobs.
func (w *world) arrive(j *job) {
	w.lists.seq++
	j.seq = w.lists.seq
	w.active = append(w.active, j)
	w.lists.share = append(w.lists.share, j.heldShare)
	w.lists.team = append(w.lists.team, j.team)
	w.lists.pending = append(w.lists.pending, j) // the latest arrival: last in order
	w.lists.milli = append(w.lists.milli, j.milli)
}

// removeActive drops j, done, from the active jobs.
func (w *world) removeActive(j *job) {
	i := slices.Index(w.active, j)
	if i < 0 {
		return
	}
	w.active = slices.Delete(w.active, i, i+1)
	w.lists.share = slices.Delete(w.lists.share, i, i+1)
	w.lists.team = slices.Delete(w.lists.team, i, i+1)
	w.gone = append(w.gone, j)
	w.notPending(j)
	w.stopCheckpoints(j)
}

// heldChanged copies j.heldShare to the list.
func (w *world) heldChanged(j *job) {
	if i := slices.Index(w.active, j); i >= 0 {
		w.lists.share[i] = j.heldShare
	}
}

// backToPending puts j, active and pending again, back in the pending
// list at its place.
func (w *world) backToPending(j *job) {
	p := w.lists.pending
	i, _ := slices.BinarySearchFunc(p, j.seq, func(x *job, seq int) int { return x.seq - seq })
	if i < len(p) && p[i] == j {
		return
	}
	w.lists.pending = slices.Insert(p, i, j)
	w.lists.milli = slices.Insert(w.lists.milli, i, j.milli)
}

// notPending drops j from the pending list; check resets its owed state.
func (w *world) notPending(j *job) {
	if i := slices.Index(w.lists.pending, j); i >= 0 {
		w.lists.pending = slices.Delete(w.lists.pending, i, i+1)
		w.lists.milli = slices.Delete(w.lists.milli, i, i+1)
		w.lists.left = append(w.lists.left, j)
	}
}

// anyPending says whether a job waits.
func (w *world) anyPending() bool { return len(w.lists.pending) > 0 }

// startCheckpoints lists j, running from now, when it checkpoints.
func (w *world) startCheckpoints(j *job) {
	if every := j.arrival.CheckpointEvery; every > 0 {
		w.lists.ckpt = append(w.lists.ckpt, checkpointed{j: j, since: j.runSince, every: every, at: -1})
	}
}

// stopCheckpoints drops j, no longer running, from the list.
func (w *world) stopCheckpoints(j *job) {
	w.lists.ckpt = slices.DeleteFunc(w.lists.ckpt, func(c checkpointed) bool { return c.j == j })
}

// checkpoints writes each running job's last checkpoint, where it moved.
func (w *world) checkpoints() {
	now := w.now()
	for i := range w.lists.ckpt {
		c := &w.lists.ckpt[i]
		if at := c.since + (now-c.since)/c.every*c.every; at != c.at {
			c.at = at
			c.j.Checkpoint = at
		}
	}
}

// checkLists says where the lists differ from the active jobs
// (Options.Check).
func (w *world) checkLists() error {
	l := &w.lists
	if len(l.share) != len(w.active) || len(l.team) != len(w.active) {
		return fmt.Errorf("lists of %d and %d shares and teams for %d active jobs", len(l.share), len(l.team), len(w.active))
	}
	var pending []*job
	running := 0
	for i, j := range w.active {
		if l.share[i] != j.heldShare || l.team[i] != j.team {
			return fmt.Errorf("job %s: listed as holding %v of team %d, holds %v of team %d", j.ID(), l.share[i], l.team[i], j.heldShare, j.team)
		}
		if j.Phase == sched.Pending {
			pending = append(pending, j)
		}
		if j.runSince >= 0 && j.arrival.CheckpointEvery > 0 {
			running++
			if !slices.ContainsFunc(l.ckpt, func(c checkpointed) bool { return c.j == j && c.since == j.runSince }) {
				return fmt.Errorf("job %s: runs and checkpoints, not listed so", j.ID())
			}
		}
	}
	if !slices.Equal(pending, l.pending) {
		return fmt.Errorf("%d jobs listed as pending, %d pending", len(l.pending), len(pending))
	}
	if len(l.milli) != len(pending) {
		return fmt.Errorf("%d demands listed for %d pending jobs", len(l.milli), len(pending))
	}
	for i, j := range pending {
		if l.milli[i] != j.milli {
			return fmt.Errorf("job %s: listed as asking %d milli, asks %d", j.ID(), l.milli[i], j.milli)
		}
	}
	if running != len(l.ckpt) {
		return fmt.Errorf("%d jobs listed as checkpointing, %d run and checkpoint", len(l.ckpt), running)
	}
	return nil
}
