package workload

import (
	"math"
	"testing"
)

// mixedCluster is a cluster whose largest nodes have 64 CPUs, 512 GiB, 8
// H100-80GB (MIG-capable, offering three profiles) or 4 V100-32GB.
func mixedCluster() *Capacity {
	return capacity().cpu(64000).memory(512*1024).
		gpus("H100-80GB", 8, 80*1024).
		gpus("V100-32GB", 4, 32*1024).
		offers("H100-80GB", "1g.10gb", "3g.40gb", "7g.80gb").
		build()
}

// cpuCluster is a cluster without a GPU.
func cpuCluster() *Capacity {
	return capacity().cpu(32000).memory(128 * 1024).build()
}

func TestJobValidateAcceptsWellFormedJobs(t *testing.T) {
	tests := []struct {
		name string
		job  *jobBuilder
	}{
		{"accepts a CPU-only job", job("j").tasks(task("a").cpu(1000).memory(1024))},
		{"accepts a task asking for nothing", job("j").tasks(task("a"))},
		{"accepts every class", job("j").class(BestEffort).tasks(task("a"))},
		{"accepts production", job("j").class(Production).tasks(task("a"))},
		{"accepts gang size 0", job("j").gang(0).tasks(task("a"), task("b"))},
		{"accepts gang size 1", job("j").gang(1).tasks(task("a"), task("b"))},
		{"accepts a gang of every task", job("j").gang(2).tasks(task("a").gpu(wholeGPUs(8)), task("b").gpu(wholeGPUs(8)))},
		{"accepts a task using a whole node", job("j").tasks(task("a").cpu(64000).memory(512 * 1024).gpu(wholeGPUs(8)))},
		{"accepts whole GPUs on an allowed model", job("j").tasks(task("a").gpu(wholeGPUs(4).on("V100-32GB")))},
		{"accepts the smallest and largest fraction", job("j").tasks(task("a").gpu(fraction(1)), task("b").gpu(fraction(999)))},
		{"accepts an offered MIG profile", job("j").tasks(task("a").gpu(migProfile("3g.40gb")))},
		{"accepts an offered MIG profile on its model", job("j").tasks(task("a").gpu(migProfile("1g.10gb").on("H100-80GB", "V100-32GB")))},
		{"accepts a peak equal to the largest GPU", job("j").tasks(task("a").gpu(memoryProfile(80*1024, 1)))},
		{"accepts no compute share", job("j").tasks(task("a").gpu(memoryProfile(1024, 0)))},
		{"accepts a peak that fits an allowed model", job("j").tasks(task("a").gpu(memoryProfile(32*1024, 0.5).on("V100-32GB")))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := tt.job.build()
			if err := j.Validate(nil); err != nil {
				t.Fatalf("Validate(nil): %v", err)
			}
			if err := j.Validate(mixedCluster()); err != nil {
				t.Fatalf("Validate(mixed cluster): %v", err)
			}
		})
	}
}

func TestJobValidateRefusesBadShapes(t *testing.T) {
	tests := []struct {
		name string
		job  *jobBuilder
		want []string
	}{
		{"refuses an empty id", job("").tasks(task("a")), []string{"job: id is empty"}},
		{"refuses a job without tasks", job("j1"), []string{"job j1: has no tasks"}},
		{"refuses a class past the highest", job("j1").class(Production + 1).tasks(task("a")), []string{"job j1: class(3) is not a priority class"}},
		{"refuses a negative class", job("j1").class(-1).tasks(task("a")), []string{"job j1: class(-1) is not a priority class"}},
		{"refuses a negative gang size", job("j1").gang(-1).tasks(task("a"), task("b")), []string{"job j1: gang size -1 must be between 0 and the number of tasks (2)"}},
		{"refuses a gang larger than the job", job("j1").gang(3).tasks(task("a"), task("b")), []string{"job j1: gang size 3 must be between 0 and the number of tasks (2)"}},
		{"refuses an empty task name", job("j1").tasks(task("a"), task("")), []string{"job j1: task 1: name is empty"}},
		{"refuses a task name used twice", job("j1").tasks(task("w"), task("x"), task("w")), []string{`job j1: task name "w" is used twice`}},
		{"refuses negative cpu", job("j1").tasks(task("w").cpu(-1)), []string{"job j1: task w: cpu -1m is negative"}},
		{"refuses negative memory", job("j1").tasks(task("w").memory(-5)), []string{"job j1: task w: memory -5 MiB is negative"}},
		{"refuses models without a GPU", job("j1").tasks(task("w").gpu(noGPU().on("H100-80GB"))), []string{"task w: gpu models are given but no GPU is asked for"}},
		{"refuses zero whole GPUs", job("j1").tasks(task("w").gpu(wholeGPUs(0))), []string{"task w: gpus: 0 must be at least 1"}},
		{"refuses negative whole GPUs", job("j1").tasks(task("w").gpu(wholeGPUs(-2))), []string{"gpus: -2 must be at least 1"}},
		{"refuses a zero fraction", job("j1").tasks(task("w").gpu(fraction(0))), []string{"task w: gpu fraction: 0 milli must be between 1 and 999"}},
		{"refuses a fraction of a whole GPU", job("j1").tasks(task("w").gpu(fraction(1000))), []string{"gpu fraction: 1000 milli must be between 1 and 999", "ask for whole GPUs"}},
		{"refuses a negative fraction", job("j1").tasks(task("w").gpu(fraction(-3))), []string{"gpu fraction: -3 milli"}},
		{"refuses an empty MIG profile", job("j1").tasks(task("w").gpu(migProfile(""))), []string{"task w: mig profile: empty"}},
		{"refuses a zero peak memory", job("j1").tasks(task("w").gpu(memoryProfile(0, 0.5))), []string{"task w: gpu memory: peak 0 MiB must be positive"}},
		{"refuses a negative peak memory", job("j1").tasks(task("w").gpu(memoryProfile(-1, 0.5))), []string{"gpu memory: peak -1 MiB must be positive"}},
		{"refuses a negative compute share", job("j1").tasks(task("w").gpu(memoryProfile(1024, -0.1))), []string{"task w: gpu compute: share -0.1 must be between 0 and 1"}},
		{"refuses a compute share over one", job("j1").tasks(task("w").gpu(memoryProfile(1024, 1.5))), []string{"gpu compute: share 1.5 must be between 0 and 1"}},
		{"refuses an infinite compute share", job("j1").tasks(task("w").gpu(memoryProfile(1024, math.Inf(1)))), []string{"gpu compute: share +Inf"}},
		{"refuses an unknown demand kind", job("j1").tasks(task("w").gpu(&demandBuilder{Demand{Kind: Kind(7)}})), []string{"task w: gpu demand: unknown kind 7"}},
		{"names the first bad task", job("j1").tasks(task("ok"), task("bad").gpu(fraction(0)), task("worse").cpu(-1)), []string{"task bad: gpu fraction"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := tt.job.build()
			wantErr(t, j.Validate(nil), tt.want...)
			// A cluster cannot make a malformed job valid.
			wantErr(t, j.Validate(mixedCluster()), tt.want...)
		})
	}
}

func TestJobValidateRefusesANaNComputeShare(t *testing.T) {
	j := job("j1").tasks(task("w").gpu(memoryProfile(1024, math.NaN()))).build()
	wantErr(t, j.Validate(nil), "task w", "gpu compute", "NaN")
}

func TestJobValidateRefusesWhatTheClusterCannotOffer(t *testing.T) {
	tests := []struct {
		name     string
		capacity *Capacity
		task     *taskBuilder
		want     []string
	}{
		{
			name: "refuses more GPUs than the largest node has", capacity: mixedCluster(),
			task: task("big").gpu(wholeGPUs(9)),
			want: []string{"job j1: task big: asks for 9 GPUs but the largest node has 8 (H100-80GB)"},
		},
		{
			name: "refuses more GPUs of a model than its largest node has", capacity: mixedCluster(),
			task: task("big").gpu(wholeGPUs(5).on("V100-32GB")),
			want: []string{"asks for 5 GPUs but the largest node of V100-32GB has 4 (V100-32GB)"},
		},
		{
			name: "refuses whole GPUs on a cluster without GPUs", capacity: cpuCluster(),
			task: task("big").gpu(wholeGPUs(1)),
			want: []string{"task big: asks for 1 GPUs but no node has a GPU"},
		},
		{
			name: "refuses a model no node has", capacity: mixedCluster(),
			task: task("w").gpu(wholeGPUs(1).on("A100-80GB")),
			want: []string{`task w: gpu model "A100-80GB": no node has it (cluster has: H100-80GB, V100-32GB)`},
		},
		{
			name: "refuses a model no node has among known ones", capacity: mixedCluster(),
			task: task("w").gpu(fraction(100).on("V100-32GB", "T4")),
			want: []string{`gpu model "T4": no node has it`},
		},
		{
			name: "refuses a fraction on a cluster without GPUs", capacity: cpuCluster(),
			task: task("w").gpu(fraction(250)),
			want: []string{"task w: asks for a GPU share but no node has a GPU"},
		},
		{
			name: "refuses a MIG profile no GPU offers", capacity: mixedCluster(),
			task: task("w").gpu(migProfile("2g.20gb")),
			want: []string{`task w: mig profile "2g.20gb": no GPU in the cluster offers it (offered: 1g.10gb, 3g.40gb, 7g.80gb)`},
		},
		{
			name: "refuses a MIG profile on a cluster without MIG", capacity: cpuCluster(),
			task: task("w").gpu(migProfile("1g.10gb")),
			want: []string{`mig profile "1g.10gb": no GPU in the cluster offers it (offered: )`},
		},
		{
			name: "refuses a MIG profile on a model that does not offer it", capacity: mixedCluster(),
			task: task("w").gpu(migProfile("1g.10gb").on("V100-32GB")),
			want: []string{`mig profile "1g.10gb": offered only on H100-80GB, not on V100-32GB`},
		},
		{
			name: "refuses a peak larger than the largest GPU", capacity: mixedCluster(),
			task: task("w").gpu(memoryProfile(80*1024+1, 0.5)),
			want: []string{"task w: gpu memory: peak 81921 MiB is more than the largest GPU has (81920 MiB)"},
		},
		{
			name: "refuses a peak larger than an allowed model", capacity: mixedCluster(),
			task: task("w").gpu(memoryProfile(40*1024, 0.5).on("V100-32GB")),
			want: []string{"gpu memory: peak 40960 MiB is more than the largest GPU of V100-32GB has (32768 MiB)"},
		},
		{
			name: "refuses a memory profile on a cluster without GPUs", capacity: cpuCluster(),
			task: task("w").gpu(memoryProfile(1024, 0.1)),
			want: []string{"peak 1024 MiB is more than the largest GPU has (0 MiB)"},
		},
		{
			name: "refuses more CPU than the largest node has", capacity: mixedCluster(),
			task: task("w").cpu(64001),
			want: []string{"task w: asks for 64001m CPU but the largest node has 64000m"},
		},
		{
			name: "refuses more memory than the largest node has", capacity: mixedCluster(),
			task: task("w").memory(512*1024 + 1),
			want: []string{"task w: asks for 524289 MiB memory but the largest node has 524288 MiB"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := job("j1").tasks(task("fine").cpu(100), tt.task).build()
			wantErr(t, j.Validate(tt.capacity), tt.want...)
			// The job's shape is fine: without a cluster it passes.
			if err := j.Validate(nil); err != nil {
				t.Fatalf("Validate(nil): %v", err)
			}
		})
	}
}

func TestTaskValidateNamesOnlyTheTask(t *testing.T) {
	tests := []struct {
		name     string
		task     *taskBuilder
		capacity *Capacity
		want     string
	}{
		{"names the task on a shape error", task("w").cpu(-7), nil, "task w: cpu -7m is negative"},
		{"names the task on a cluster error", task("w").gpu(wholeGPUs(9)), mixedCluster(), "task w: asks for 9 GPUs but the largest node has 8 (H100-80GB)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := tt.task.build()
			err := tk.Validate(tt.capacity)
			wantErr(t, err, tt.want)
			if got := err.Error(); got != tt.want {
				t.Fatalf("error %q, want exactly %q (no job prefix)", got, tt.want)
			}
		})
	}
}

func TestTaskValidateChecksCapacityOnlyWhenGiven(t *testing.T) {
	tk := task("w").cpu(1 << 40).memory(1 << 40).gpu(wholeGPUs(1000)).build()
	if err := tk.Validate(nil); err != nil {
		t.Fatalf("Validate(nil) looked at a cluster: %v", err)
	}
	wantErr(t, tk.Validate(mixedCluster()), "task w", "CPU")
}

func TestLargestNodePicksTheMostGPUsAmongAllowedModels(t *testing.T) {
	c := capacity().gpus("A", 4, 1).gpus("B", 8, 1).gpus("C", 8, 1).gpus("D", 2, 1).build()
	tests := []struct {
		name      string
		models    []string
		wantCount int
		wantModel string
	}{
		{"picks the largest of all", nil, 8, "B"},
		{"breaks ties by name", []string{"C", "B"}, 8, "B"},
		{"keeps to the allowed models", []string{"A", "D"}, 4, "A"},
		{"finds nothing for a model the cluster lacks", []string{"Z"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, m := c.largestNode(tt.models)
			if n != tt.wantCount || m != tt.wantModel {
				t.Fatalf("largestNode(%v) = %d, %q; want %d, %q", tt.models, n, m, tt.wantCount, tt.wantModel)
			}
		})
	}
}
