package api

// Cluster is the state of the cluster: every node, GPU and MIG slice, and
// how much of it is in use. Tasks of other teams show as busy without
// naming the job.
type Cluster struct {
	Clock       Clock       `json:"clock"`
	GPUs        int         `json:"gpus"`
	Utilization Utilization `json:"utilization"`
	Nodes       []Node      `json:"nodes"`
}

// Utilization is in GPUs and as a share of all GPUs. Allocated is what
// tasks hold (a slice counts the larger of its compute and memory share);
// Useful is what running tasks need (a memory profile its need, not the
// slice it got).
type Utilization struct {
	AllocatedGPUs float64 `json:"allocated_gpus"`
	UsefulGPUs    float64 `json:"useful_gpus"`
	Allocated     float64 `json:"allocated"`
	Useful        float64 `json:"useful"`
	QueuedJobs    int     `json:"queued_jobs"`
	RunningJobs   int     `json:"running_jobs"`
}

// Node is one machine.
type Node struct {
	Name      string `json:"name"`
	Tier      string `json:"tier"`
	Leaf      string `json:"leaf,omitempty"`
	CPUMilli  int64  `json:"cpu_milli"`
	CPUUsed   int64  `json:"cpu_used_milli"`
	MemoryMiB int64  `json:"memory_mib"`
	MemUsed   int64  `json:"memory_used_mib"`
	GPUs      []GPU  `json:"gpus"`
}

// GPU is one GPU: whole or shared in milli with MIG off, split into
// slices with MIG on.
type GPU struct {
	Index    int     `json:"index"`
	Model    string  `json:"model"`
	MIG      bool    `json:"mig"`
	Cordoned bool    `json:"cordoned,omitempty"` // a MIG change is in flight
	Used     int     `json:"used_milli"`         // MIG off: milli held
	Slices   []Slice `json:"slices,omitempty"`
	Holders  []Hold  `json:"holders,omitempty"`
}

// Slice is one MIG instance; Busy without Job: another team's task.
type Slice struct {
	Slice string `json:"slice"` // "3g.40gb@4"
	Busy  bool   `json:"busy"`
	Job   string `json:"job,omitempty"`
	Team  string `json:"team,omitempty"`
}

// Hold is a task's share of a GPU with MIG off.
type Hold struct {
	Milli int    `json:"milli"`
	Job   string `json:"job,omitempty"`
	Team  string `json:"team,omitempty"`
}
