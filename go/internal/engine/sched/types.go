// Package sched is the scheduling cycle: which pending jobs start, in what
// order, within which quotas, which running jobs are preempted for them,
// and which free MIG regions are re-partitioned. Placement itself is the
// engine's Placer; sched decides what to ask it.
//
// Like the rest of the engine it is pure: a Scheduler takes an Input (the
// world's snapshot and the time) and returns a Decision for the world to
// carry out. It keeps a little state between cycles (who was promised the
// resources of preempted jobs, which gang holds a reservation, when each
// GPU was last re-partitioned), all of it deterministic.
package sched

import (
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// Team is a tenant: a queue with a guaranteed share of the cluster.
// Quantities are GPU milli (a MIG slice counts its compute share).
type Team struct {
	Name string
	// Guarantee is always obtainable: when the team asks for it, borrowers
	// are preempted to make room.
	Guarantee int64
	// Burst is the most the team may hold, borrowed capacity included
	// (≥ Guarantee). Above Guarantee it uses what others leave idle.
	Burst  int64
	Weight float64
}

// Phase is where a job is in its life.
type Phase int

const (
	Pending     Phase = iota // waiting in its team's queue
	Running                  // all its tasks (or, without gangs, some) hold resources
	Terminating              // preempted, in its grace period; still holds its resources
)

// Job is the scheduler's view of one job. The world owns it and keeps it
// current; the scheduler only reads it, but for a cache of its own in an
// unexported field (a copy of a Job may carry it: it is checked before
// use).
type Job struct {
	Spec      workload.Job
	Submitted time.Duration
	Phase     Phase
	// Placed holds, per task, what it holds; nil for a task not started.
	Placed []*cluster.Assignment
	// Started is when the job (the whole gang) started running, and
	// Checkpoint its last checkpoint (Started when none): what a preemption
	// loses is the work since then.
	Started, Checkpoint time.Duration
	// Estimate is the declared run time (0 when unknown), used to judge
	// whether a job can run before a reserved gang starts.
	Estimate time.Duration

	// held is the scheduler's cache of what the job holds (snapshot). It
	// lives in the Job, not in a map nor behind a pointer: reading it for
	// thousands of jobs each cycle was a fifth of a week's simulation,
	// most of it waiting for memory.
	held heldEntry
}

// ID returns the job's ID.
func (j *Job) ID() string { return j.Spec.ID }

// Held returns the GPU milli the job holds now.
func (j *Job) Held(st *cluster.State) int64 {
	var total int64
	for _, a := range j.Placed {
		if a == nil {
			continue
		}
		if n := st.NodeByName(a.Node); n != nil {
			total += int64(a.GPUMilli(n))
		}
	}
	return total
}

// Complete reports whether every task holds its resources.
func (j *Job) Complete() bool {
	for _, a := range j.Placed {
		if a == nil {
			return false
		}
	}
	return len(j.Placed) > 0
}

// Input is one cycle's view of the world.
type Input struct {
	Now time.Duration
	// Cluster is read only, and must not change while Cycle runs: the
	// scheduler plans on a copy sharing its nodes (cluster.State.Scratch)
	// and keeps nothing of it after.
	Cluster *cluster.State
	Teams   []Team
	Jobs    []*Job // every job not finished, in any phase
	// Only, when not nil, limits the cycle to these pending jobs, in this
	// order, with no queue positions computed: a world calls it when jobs
	// arrived and nothing was freed, so the jobs already waiting would
	// find nothing new. Full cycles (Only nil) run when resources free up
	// and now and then.
	Only []string
	// Incremental says that Changed and Gone list every difference from
	// the previous Cycle's input to this Scheduler: Changed the jobs that
	// are new or whose Phase, Placed, Started, Estimate, Submitted or
	// Spec changed, Gone the jobs of the previous input not in this one
	// (each at most once in either list; a job both gone and changed is
	// only gone). Jobs carries every job as always; the scheduler then
	// reads no other job to take its snapshot and to order the queue: a
	// week of 1,000 GPUs spent about a third of its time reading the jobs
	// that had not changed (docs/mixed.md, "Simulation speed"). Only one
	// Scheduler may be given a world's Jobs this way. A world that cannot
	// say leaves it false, and the scheduler reads every job.
	Incremental bool
	Changed     []*Job
	Gone        []*Job
	// Waiting, when not nil, is the Waiting map of an earlier Decision
	// that the world reads no more: a full cycle clears it and gives its
	// own Waiting in it. Each full cycle of a busy week filled a new map
	// of thousands of entries, a sixth of all the bytes the week
	// allocated.
	Waiting map[string]Wait
}

// Decision is what the world must do. Starts are given in order; the world
// applies them to its cluster as they are (the scheduler checked them on
// its clone).
type Decision struct {
	Starts      []Start
	Preemptions []Preemption
	Reconfigs   []Reconfig
	Migrations  []Migration
	// Waiting says, for every pending job left waiting, its position in
	// its team's queue (1 = next) and why it waits.
	Waiting map[string]Wait
	// Retries are claims within their team's guarantee that wait for a
	// timer of the scheduler's own (noteRetry): the world gives each a
	// cycle at At, as a scheduler's backoff queue would, instead of
	// leaving it to its next periodic look. A world that cycles every
	// few seconds anyway (standalone, Kubernetes) may ignore them.
	Retries []Retry
}

// Retry asks for a cycle of Job at At.
type Retry struct {
	Job string
	At  time.Duration
}

// Start starts one task of a job.
type Start struct {
	Job        string
	Task       int
	Assignment cluster.Assignment
	// Creates is set when the assignment uses a MIG instance that does not
	// exist yet: the world creates it first, which takes the MIG
	// reconfiguration delay.
	Creates bool
}

// Migration moves one task of a running service to another node, make
// before break: the world allocates To at once (creating its instance
// first when Creates) and releases what the task held before only when
// the new place is ready. No work is lost; the job keeps running.
type Migration struct {
	Job     string
	Task    int
	To      cluster.Assignment
	Creates bool
	For     string // the job it makes room for
}

// Preemption evicts a running job: it gets Grace to checkpoint and exit,
// then goes back to its queue.
type Preemption struct {
	Job    string
	For    string // the job it makes room for
	Reason string
	Grace  time.Duration
}

// Reconfig re-partitions one GPU: MIG mode and, with MIG on, the layout of
// its free region. Instances in use are kept as they are. The world
// cordons the GPU until the change is done, except for an Add, which only
// creates instances in free space: the GPU goes on taking work, and only a
// task placed on a new instance waits for it to be ready.
type Reconfig struct {
	Node   string
	GPU    int
	MIG    bool
	Layout gpu.Layout
	Add    bool
	For    string // the job it is for
}

// Wait is why a pending job waits.
type Wait struct {
	Position int
	Reason   string
}

// Reasons a job waits; the portal shows them.
const (
	WaitQuota       = "quota: the team is at its limit"
	WaitGang        = "gang: not all tasks fit at once"
	WaitNoRoom      = "no room: no node fits the job"
	WaitNoSlice     = "no fitting MIG slice yet"
	WaitReconfig    = "waiting for a MIG reconfiguration"
	WaitPreempting  = "waiting for preempted jobs to exit"
	WaitMoving      = "waiting for services to move off its node"
	WaitReserved    = "the free GPUs are reserved for an older gang"
	WaitPriority    = "higher-priority jobs go first"
	WaitProdReserve = "the last free GPUs are kept for production"
	WaitInvalidSpec = "invalid: can never run on this cluster"
)
