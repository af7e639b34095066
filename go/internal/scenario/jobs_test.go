package scenario

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/profiles"
	"partita.dev/partita/internal/workload"
)

func jobs(t testing.TB, s *Scenario, seed int64) []Arrival {
	t.Helper()
	arrivals, err := s.Jobs(seed)
	if err != nil {
		t.Fatalf("Jobs: %v", err)
	}
	return arrivals
}

// of keeps the arrivals of one workload.
func of(arrivals []Arrival, workload string) []Arrival {
	var out []Arrival
	for _, a := range arrivals {
		if a.Job.Project == workload {
			out = append(out, a)
		}
	}
	return out
}

// longRun is base with a 1,000-hour horizon and poisson training arrivals,
// for statistics.
func longRun(t testing.TB) string {
	text := edit(t, base, "duration: 24h", "duration: 1000h")
	return edit(t, text, "    arrival: {process: fixed, at: [0s, 10m]}", "    arrival: {process: poisson, rate_per_hour: 10}")
}

func TestJobsAreDeterministic(t *testing.T) {
	s, err := Load("../../../scenarios/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, b := jobs(t, s, 1), jobs(t, s, 1)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two different streams")
	}
	c := jobs(t, s, 2)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 1 and 2 gave the same stream")
	}
	if len(a) < 1000 {
		t.Fatalf("%d jobs in a week of the default scenario, want thousands", len(a))
	}
}

func TestJobsOfAWorkloadDoNotDependOnTheOthers(t *testing.T) {
	both := parse(t, base)
	alone := parse(t, base[:strings.Index(base, "  - name: train")])
	if got, want := of(jobs(t, alone, 7), "chat"), of(jobs(t, both, 7), "chat"); !reflect.DeepEqual(got, want) {
		t.Fatalf("removing a workload changed another's jobs: %d vs %d", len(got), len(want))
	}
}

func TestJobsArriveInOrderWithinTheHorizon(t *testing.T) {
	s := parse(t, base)
	arrivals := jobs(t, s, 1)
	if !slices.IsSortedFunc(arrivals, func(a, b Arrival) int { return cmp.Compare(a.At, b.At) }) {
		t.Fatal("arrivals are not in time order")
	}
	for _, a := range arrivals {
		if a.At < 0 || a.At >= s.Duration || a.Duration < minRunTime {
			t.Fatalf("job %s at %v for %v", a.Job.ID, a.At, a.Duration)
		}
	}
	train := of(arrivals, "train")
	if len(train) != 2 || train[0].At != 0 || train[1].At != 10*time.Minute {
		t.Fatalf("fixed arrivals %v, want at 0s and 10m", train)
	}
}

func TestPoissonArrivalsKeepTheirRate(t *testing.T) {
	s := parse(t, longRun(t))
	for _, tt := range []struct {
		workload string
		perHour  float64
	}{{"chat", 30}, {"train", 10}} {
		n := float64(len(of(jobs(t, s, 3), tt.workload)))
		want := tt.perHour * 1000
		if sigma := math.Sqrt(want); math.Abs(n-want) > 5*sigma {
			t.Errorf("%s: %v jobs in 1000h, want %v ± %.0f", tt.workload, n, want, 5*sigma)
		}
	}
}

func TestRunTimesFollowTheirDistribution(t *testing.T) {
	tests := []struct {
		name     string
		dist     string
		mean     time.Duration
		min, max time.Duration
	}{
		{"exponential keeps its mean", "{dist: exponential, mean: 2h}", 2 * time.Hour, minRunTime, 1000 * time.Hour},
		{"lognormal keeps its mean, not its median", "{dist: lognormal, mean: 2h, sigma: 0.5}", 2 * time.Hour, minRunTime, 1000 * time.Hour},
		{"uniform stays within its bounds", "{dist: uniform, min: 1h, max: 3h}", 2 * time.Hour, time.Hour, 3 * time.Hour},
		{"fixed is always the same", "{dist: fixed, value: 90m}", 90 * time.Minute, 90 * time.Minute, 90 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := edit(t, longRun(t), "    duration: {dist: exponential, mean: 2h}", "    duration: "+tt.dist)
			chat := of(jobs(t, parse(t, text), 5), "chat")
			var sum float64
			for _, a := range chat {
				if a.Duration < tt.min || a.Duration > tt.max {
					t.Fatalf("run time %v outside [%v, %v]", a.Duration, tt.min, tt.max)
				}
				sum += a.Duration.Hours()
			}
			mean := sum / float64(len(chat))
			if math.Abs(mean-tt.mean.Hours()) > 0.03*tt.mean.Hours() {
				t.Fatalf("mean run time %.3fh over %d jobs, want %.3fh ± 3%%", mean, len(chat), tt.mean.Hours())
			}
		})
	}
}

func TestMixAndGangFollowTheirWeights(t *testing.T) {
	text := edit(t, longRun(t), "    profile: llm-7b-bf16", "    mix: {llm-7b-bf16: 3, embed-335m: 1}")
	text = edit(t, text, "weights: [0.5, 0.5]", "weights: [3, 1]")
	arrivals := jobs(t, parse(t, text), 11)
	share := func(as []Arrival, match func(Arrival) bool) float64 {
		n := 0
		for _, a := range as {
			if match(a) {
				n++
			}
		}
		return float64(n) / float64(len(as))
	}
	llm := share(of(arrivals, "chat"), func(a Arrival) bool { return a.Job.Tasks[0].GPU.PeakMemoryMiB == 31819 })
	small := share(of(arrivals, "train"), func(a Arrival) bool { return a.Job.GangSize == 4 })
	for name, got := range map[string]float64{"llm-7b-bf16 in the mix": llm, "gangs of 4": small} {
		if math.Abs(got-0.75) > 0.03 {
			t.Errorf("%s: %.3f of jobs, want 0.75 ± 0.03", name, got)
		}
	}
}

func TestJobsAreBuiltFromTheirProfile(t *testing.T) {
	arrivals := jobs(t, parse(t, base), 1)
	chat, train := of(arrivals, "chat")[0], of(arrivals, "train")[1]
	wantChat := workload.Job{
		ID: "chat-000000", Team: "search", Project: "chat", Class: workload.Production,
		Tasks: []workload.Task{
			{Name: "chat-000000-0", CPUMilli: 4000, MemoryMiB: 32 * 1024,
				GPU: workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: 31819, Compute: 0.40}},
			{Name: "chat-000000-1", CPUMilli: 4000, MemoryMiB: 32 * 1024,
				GPU: workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: 31819, Compute: 0.40}},
		},
	}
	if !reflect.DeepEqual(chat.Job, wantChat) || chat.CheckpointEvery != 0 {
		t.Fatalf("chat job\n got  %+v\n want %+v", chat.Job, wantChat)
	}
	if train.Job.ID != "train-000001" || train.Job.Team != "research" || train.Job.Class != workload.Batch ||
		len(train.Job.Tasks) != train.Job.GangSize || train.CheckpointEvery != 30*time.Minute || train.Duration != time.Hour {
		t.Fatalf("train job %+v", train)
	}
	for _, task := range train.Job.Tasks {
		if task.GPU.Kind != workload.WholeGPUs || task.GPU.Count != 1 || task.GPU.Models != nil {
			t.Fatalf("training task %+v, want one whole GPU of any model", task)
		}
	}
}

func TestJobsKeepTrainingOffGPUsTooSmallForIt(t *testing.T) {
	text := edit(t, base, "    leaves: [leaf-a, leaf-b]\n", `    leaves: [leaf-a, leaf-b]
  - group: a100
    gpu: A100-40GB
    gpus: 8
    cpu: 96
    memory: 1Ti
`)
	arrivals := jobs(t, parse(t, text), 1)
	train := of(arrivals, "train")[0].Job.Tasks[0].GPU
	if !slices.Equal(train.Models, []string{"H100-80GB"}) {
		t.Fatalf("pre-training may run on %v, want only H100-80GB (40 GB is too small)", train.Models)
	}
	chat := of(arrivals, "chat")[0].Job.Tasks[0].GPU
	if chat.Models != nil {
		t.Fatalf("7B serving may run on %v, want any model (it fits both)", chat.Models)
	}
}

func TestShippedScenariosOfferJobsTheirClusterCanRun(t *testing.T) {
	for _, name := range []string{"default", "demo", "week-1000"} {
		t.Run(name, func(t *testing.T) {
			s, err := Load("../../../scenarios/" + name + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := s.Nodes()
			if err != nil {
				t.Fatal(err)
			}
			capacity := capacityOf(nodes)
			for _, a := range jobs(t, s, s.Seed) {
				if err := a.Job.Validate(capacity); err != nil {
					t.Fatalf("%v", err)
				}
			}
		})
	}
}

// capacityOf summarises nodes the way workload.Job.Validate wants.
func capacityOf(nodes []*cluster.Node) *workload.Capacity {
	c := &workload.Capacity{MaxGPUs: map[string]int{}, MIGProfiles: map[string][]string{}, GPUMemoryMiB: map[string]int64{}}
	for _, n := range nodes {
		c.MaxCPUMilli = max(c.MaxCPUMilli, n.CPUMilli)
		c.MaxMemoryMiB = max(c.MaxMemoryMiB, n.MemoryMiB)
		if len(n.GPUs) == 0 {
			continue
		}
		m := n.GPUs[0].Model
		c.MaxGPUs[m.Name] = max(c.MaxGPUs[m.Name], len(n.GPUs))
		c.GPUMemoryMiB[m.Name] = m.MemoryMiB
		for _, p := range m.Profiles {
			if !slices.Contains(c.MIGProfiles[p.Name], m.Name) {
				c.MIGProfiles[p.Name] = append(c.MIGProfiles[p.Name], m.Name)
			}
		}
	}
	return c
}

func TestDefaultScenarioOffersMoreThanTheClusterCanRun(t *testing.T) {
	s, err := Load("../../../scenarios/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The comment at the top of default.yaml works this out by hand.
	load := s.OfferedLoad()
	if s.GPUs() < 64 || load < float64(s.GPUs()) || math.Abs(load-78.22) > 0.01 {
		t.Fatalf("offered load %.2f GPUs on %d; the file says 78.22 on 64", load, s.GPUs())
	}
	var production, batch, bestEffort float64
	for i := range s.Workloads {
		w := &s.Workloads[i]
		switch w.Class {
		case workload.Production:
			production += s.WorkloadLoad(w)
		case workload.Batch:
			batch += s.WorkloadLoad(w)
		default:
			bestEffort += s.WorkloadLoad(w)
		}
	}
	got := fmt.Sprintf("%.2f %.2f %.2f", production, batch, bestEffort)
	if got != "32.36 38.72 7.14" {
		t.Fatalf("production, batch, best-effort load %s; the file says 32.36 38.72 7.14", got)
	}
}

func TestShippedScenarioLoads(t *testing.T) {
	for _, tt := range []struct {
		name     string
		min, max float64 // offered load / GPUs
	}{
		{"default", 1.0, 1.5}, {"week-1000", 1.0, 1.5}, {"demo", 0.2, 0.6},
	} {
		s, err := Load("../../../scenarios/" + tt.name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if r := s.OfferedLoad() / float64(s.GPUs()); r < tt.min || r > tt.max {
			t.Errorf("%s: offered load is %.2f× its %d GPUs, want %.1f–%.1f", tt.name, r, s.GPUs(), tt.min, tt.max)
		}
	}
}

func TestGPUEquivalentsOfASlice(t *testing.T) {
	s := parse(t, base)
	for _, tt := range []struct {
		profile string
		want    float64
	}{
		{"embed-335m", 1.0 / 7},           // 1g.10gb: compute decides
		{"speech-whisper-large", 2.0 / 8}, // 1g.20gb: memory decides
		{"llm-7b-bf16", 4.0 / 8},          // 3g.40gb
		{"llm-13b-bf16", 1},               // 7g.80gb
		{"llm-70b-bf16", 4},               // whole GPUs
	} {
		p, err := profiles.Lookup(tt.profile)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.gpuEquivalents(p); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: %.3f GPU-equivalents, want %.3f", tt.profile, got, tt.want)
		}
	}
	if gpu.DefaultHeadroom != 0.05 {
		t.Fatal("the figures above assume 5% headroom")
	}
}

func TestTraceArrivals(t *testing.T) {
	s, err := Load("testdata/trace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range jobs(t, s, 1) {
		got = append(got, fmt.Sprintf("%s at %v for %v", a.Job.ID, a.At, a.Duration))
	}
	want := []string{
		"replay-000000 at 0s for 30m0s",       // p-first: 0..3600 s, halved
		"replay-000001 at 30m0s for 23h30m0s", // p-open: no deletion time, runs to the horizon
		"replay-000002 at 1h0m0s for 30m0s",   // p-late: 7200..10800 s, halved
	} // p-cpu asks for no GPU; p-beyond arrives after the horizon
	if !slices.Equal(got, want) {
		t.Fatalf("trace arrivals\n got  %q\n want %q", got, want)
	}
}

func TestTraceArrivalsCanTakeRunTimesFromADistribution(t *testing.T) {
	s, err := Load("testdata/trace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s.Workloads[0].Duration = Dist{Dist: Constant, Value: 5 * time.Minute}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, a := range jobs(t, s, 1) {
		if a.Duration != 5*time.Minute {
			t.Fatalf("%s runs %v, want the distribution's 5m", a.Job.ID, a.Duration)
		}
	}
}

func TestTraceErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want string
	}{
		{"names a file it cannot open", "absent.csv",
			"testdata/trace.yaml:19: workloads[0].arrival.file: open testdata/absent.csv: no such file or directory"},
		{"passes on the trace reader's error", "pods_bad.csv",
			"testdata/trace.yaml:19: workloads[0].arrival.file: testdata/pods_bad.csv:2: "}, // the rest is the reader's
		{"refuses a GPU pod without a creation time", "pods_no_creation.csv",
			"testdata/trace.yaml:19: workloads[0].arrival.file: testdata/pods_no_creation.csv:3: pod p-none has no creation_time"},
		{"refuses a pod deleted before it is created", "pods_backwards.csv",
			"testdata/trace.yaml:19: workloads[0].arrival.file: testdata/pods_backwards.csv:3: pod p-back is deleted (100) before it is created (500)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Load("testdata/trace.yaml")
			if err != nil {
				t.Fatal(err)
			}
			s.Workloads[0].Arrival.File = "testdata/" + tt.file
			_, err = s.Jobs(1)
			if strings.HasSuffix(tt.want, ": ") && err != nil && strings.HasPrefix(err.Error(), tt.want) {
				return
			}
			wantError(t, err, tt.want)
		})
	}
}
