package api

import "time"

// SubmitRequest is the body of POST /jobs. Unknown fields are refused.
type SubmitRequest struct {
	// Team defaults to the caller's team; only an admin submits for
	// another.
	Team string `json:"team,omitempty"`
	// Project must be a project of the team; default "default".
	Project string `json:"project,omitempty"`
	Name    string `json:"name,omitempty"` // free text, up to 200 characters
	// Image and Command say what the tasks run: a container image and
	// a command line (either or both). The virtual cluster runs nothing
	// and keeps them with the job; worlds that run processes use them.
	Image   string `json:"image,omitempty"`
	Command string `json:"command,omitempty"`
	// Class is production, batch or best-effort (default batch); the team
	// must allow it.
	Class string `json:"class,omitempty"`
	// Tasks is the number of tasks (default 1); Replicas is the same for
	// services. Give at most one.
	Tasks    int `json:"tasks,omitempty"`
	Replicas int `json:"replicas,omitempty"`
	// Gang is how many tasks must start together: 0 or 1 (each on its
	// own) or the task count (all or nothing).
	Gang int `json:"gang,omitempty"`
	// CPU and Memory are per task: "4" or "500m" cores, "32Gi" memory.
	// They default to the named profile's, else 1 core and 4Gi.
	CPU    string     `json:"cpu,omitempty"`
	Memory string     `json:"memory,omitempty"`
	GPU    GPURequest `json:"gpu"`
	// Duration is how long the job runs once every task has started
	// (cluster time); empty: until cancelled. FailAfter makes a virtual
	// job fail after running that long (for trying out failure handling).
	Duration  string `json:"duration,omitempty"`
	FailAfter string `json:"fail_after,omitempty"`
	// CheckpointEvery: a preempted job loses the work since its last
	// checkpoint; empty: it loses all of it (production services lose
	// nothing: they are stateless).
	CheckpointEvery string `json:"checkpoint_every,omitempty"`
	// IdempotencyKey (or the Idempotency-Key header): the same key with
	// the same body gives the same job, never two; with another body, 409.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// GPURequest is one task's GPU demand: exactly one of Count, MIG,
// Memory (with Compute), Milli or Profile, or none for a CPU-only task.
type GPURequest struct {
	Count   int     `json:"count,omitempty"`   // whole GPUs, all on one node
	MIG     string  `json:"mig,omitempty"`     // a MIG profile: "1g.10gb", "3g.40gb"
	Memory  string  `json:"memory,omitempty"`  // peak GPU memory "20Gi": the engine picks the slice
	Compute float64 `json:"compute,omitempty"` // with Memory: share of one GPU's compute, 0..1
	Milli   int     `json:"milli,omitempty"`   // a share of one GPU in thousandths, 1..999
	// Profile names a row of the profile catalog (GET /profiles); it also
	// sets CPU and Memory unless given.
	Profile string   `json:"profile,omitempty"`
	Models  []string `json:"models,omitempty"` // allowed GPU models; default any
}

// Job is a job as the API shows it.
type Job struct {
	ID              string     `json:"id"`
	Name            string     `json:"name,omitempty"`
	Team            string     `json:"team"`
	Project         string     `json:"project"`
	User            string     `json:"user"`
	Image           string     `json:"image,omitempty"`
	Command         string     `json:"command,omitempty"`
	Class           string     `json:"class"`
	State           string     `json:"state"`
	Reason          string     `json:"reason,omitempty"` // of the last transition, or why it waits
	GPUs            float64    `json:"gpus"`             // what it asks for, in GPUs
	Gang            int        `json:"gang,omitempty"`
	Duration        string     `json:"duration,omitempty"`
	CheckpointEvery string     `json:"checkpoint_every,omitempty"`
	Tasks           []Task     `json:"tasks"`
	SubmittedAt     time.Time  `json:"submitted_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`  // last admission
	FinishedAt      *time.Time `json:"finished_at,omitempty"` // when it ended for good
	Attempts        int        `json:"attempts"`              // admissions so far
	Queue           *QueueSlot `json:"queue,omitempty"`       // while queued
	Events          []Event    `json:"events,omitempty"`      // on GET /jobs/{id}
}

// Task is one task of a job and where it runs.
type Task struct {
	Name      string     `json:"name"`
	CPUMilli  int64      `json:"cpu_milli"`
	MemoryMiB int64      `json:"memory_mib"`
	GPU       string     `json:"gpu"` // the demand in words: "1 GPU", "MIG 1g.10gb", "20480 MiB peak, 0.25 compute"
	Placement *Placement `json:"placement,omitempty"`
}

// Placement is what a task holds on one node.
type Placement struct {
	Node   string  `json:"node"`
	Tier   string  `json:"tier"`
	Grants []Grant `json:"grants,omitempty"`
}

// Grant is one GPU's part of a placement: a MIG slice, or a share or
// whole GPU in milli.
type Grant struct {
	GPU   int    `json:"gpu"`
	Model string `json:"model"`
	Slice string `json:"slice,omitempty"` // "3g.40gb@4": profile at its start slice
	Milli int    `json:"milli,omitempty"`
}

// Event is one transition of a job.
type Event struct {
	Time   time.Time `json:"time"`
	State  string    `json:"state"` // the state entered, or "submitted", "requeued", "priority"
	Reason string    `json:"reason"`
}

// JobList is a page of jobs, newest first. Next, when set, is the cursor
// for the following page (?after=).
type JobList struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next,omitempty"`
}

// JobPatch is the body of PATCH /jobs/{id}: a new priority class, within
// the team's allowed classes.
type JobPatch struct {
	Class string `json:"class"`
}

// QueueSlot is a queued job's place: its position in its team's queue
// (1 = next), why it waits, and when it is expected to start.
type QueueSlot struct {
	Position int    `json:"position"`
	Reason   string `json:"reason,omitempty"`
	// EstimatedStart projects the queue forward on a copy of the cluster,
	// assuming running jobs end when declared and nothing new arrives;
	// absent when the projection does not reach the job.
	EstimatedStart *time.Time `json:"estimated_start,omitempty"`
	// WaitSeconds is the same in wall-clock seconds from now.
	WaitSeconds *float64 `json:"wait_seconds,omitempty"`
}

// Queue is every queued job, by team, in the order the scheduler will
// consider them.
type Queue struct {
	Clock Clock       `json:"clock"`
	Teams []TeamQueue `json:"teams"`
}

// TeamQueue is one team's queued jobs.
type TeamQueue struct {
	Team string       `json:"team"`
	Jobs []QueueEntry `json:"jobs"`
}

// QueueEntry is one queued job.
type QueueEntry struct {
	Job         string    `json:"job"`
	Name        string    `json:"name,omitempty"`
	Project     string    `json:"project"`
	Class       string    `json:"class"`
	GPUs        float64   `json:"gpus"`
	SubmittedAt time.Time `json:"submitted_at"`
	QueueSlot
}

// JobPreview is the answer to POST /jobs/preview: the job as a submission
// of the same body would make it (defaults filled in, every check done),
// and what one task would get on each GPU model of the cluster. Nothing
// is stored.
type JobPreview struct {
	Team      string          `json:"team"`
	Project   string          `json:"project"`
	Class     string          `json:"class"`
	Tasks     int             `json:"tasks"`
	Gang      int             `json:"gang,omitempty"`
	CPUMilli  int64           `json:"cpu_milli"`  // per task
	MemoryMiB int64           `json:"memory_mib"` // per task
	Demand    string          `json:"demand"`     // one task's GPU demand in words
	GPUs      float64         `json:"gpus"`       // the whole job, in GPUs (a slice counts its compute share)
	BurstGPUs float64         `json:"burst_gpus"` // the most the team may hold
	Options   []PreviewOption `json:"options"`
}

// PreviewOption is what one task would take on GPUs of one model: a MIG
// profile (picked as the engine picks it: the smallest that holds the
// peak memory with 5% headroom and the compute share), a share of a GPU
// with MIG off, or whole GPUs on one node. Fits is false, with Note
// saying why, when no GPU of the model can ever hold the task.
type PreviewOption struct {
	Model      string  `json:"model"`
	MIG        string  `json:"mig,omitempty"`
	MIGMemMiB  int64   `json:"mig_memory_mib,omitempty"`
	MIGCompute float64 `json:"mig_compute,omitempty"` // the profile's share of the GPU's compute
	Milli      int     `json:"milli,omitempty"`       // with MIG off: thousandths of one GPU
	WholeGPUs  int     `json:"whole_gpus,omitempty"`
	Fits       bool    `json:"fits"`
	Note       string  `json:"note,omitempty"`
}
