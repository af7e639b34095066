package mixed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/random"
)

// randomScenarioYAML writes a small scenario drawn from rng: one to three
// nodes of eight H100s, two or three teams whose guarantees add up to at
// most the cluster, and streams of production services on MIG slices,
// checkpointed training of whole GPUs (single or gangs, now and then
// 8-GPU fine-tunes or pretraining gangs as large as the cluster) and
// best-effort work, at an offered load around or above capacity.
func randomScenarioYAML(rng *random.Rand, name string) string {
	var b strings.Builder
	nodes := 1 + rng.Intn(3)
	gpus := 8 * nodes
	fmt.Fprintf(&b, "name: %s\nduration: 8h\nseed: %d\nnodes:\n", name, 1+rng.Intn(1000))
	fmt.Fprintf(&b, "  - group: n\n    count: %d\n    gpu: H100-80GB\n    gpus: 8\n    mig: %v\n    cpu: 192\n    memory: 2Ti\n", nodes, rng.Intn(3) > 0)
	teams := []string{"t0", "t1", "t2"}[:2+rng.Intn(2)]
	left := gpus
	b.WriteString("teams:\n")
	for i, t := range teams {
		g := left / (len(teams) - i)
		if i < len(teams)-1 {
			g = rng.Intn(g + 1)
		} else {
			g = rng.Intn(left + 1)
		}
		left -= g
		fmt.Fprintf(&b, "  - name: %s\n    guaranteed_gpus: %d\n    burst_gpus: %d\n", t, g, gpus)
	}
	b.WriteString("workloads:\n")
	rate := func(perGPUHour float64) float64 { return perGPUHour * float64(gpus) * (0.5 + rng.Float64()) }
	for _, t := range teams {
		if rng.Intn(2) == 0 {
			fmt.Fprintf(&b, "  - name: %s-svc\n    team: %s\n    class: production\n    profile: %s\n    arrival: {process: poisson, rate_per_hour: %.3f}\n    duration: {dist: exponential, mean: 2h}\n    replicas: %d\n",
				t, t, []string{"embed-335m", "llm-7b-bf16", "llm-8b-fp8"}[rng.Intn(3)], rate(0.05), 1+rng.Intn(3))
		}
		if rng.Intn(3) > 0 {
			fmt.Fprintf(&b, "  - name: %s-train\n    team: %s\n    class: batch\n    profile: lora-ft-7b\n    arrival: {process: poisson, rate_per_hour: %.3f}\n    duration: {dist: exponential, mean: 2h}\n    gang: {sizes: [1, 2, 4]}\n    checkpoint_every: 10m\n",
				t, t, rate(0.1))
		}
		switch rng.Intn(6) {
		case 0:
			// 8-GPU fine-tunes, one or two nodes each.
			sizes := "[1]"
			if nodes > 1 {
				sizes = "[1, 2]"
			}
			fmt.Fprintf(&b, "  - name: %s-big\n    team: %s\n    class: batch\n    profile: full-ft-7b\n    arrival: {process: poisson, rate_per_hour: %.3f}\n    duration: {dist: exponential, mean: 2h}\n    gang: {sizes: %s}\n    checkpoint_every: 20m\n",
				t, t, rate(0.01), sizes)
		case 1:
			// Pretraining gangs of one-GPU tasks, up to every GPU.
			fmt.Fprintf(&b, "  - name: %s-pre\n    team: %s\n    class: batch\n    profile: pretrain-13b-worker\n    arrival: {process: poisson, rate_per_hour: %.3f}\n    duration: {dist: exponential, mean: 3h}\n    gang: {sizes: [4, %d]}\n    checkpoint_every: 30m\n",
				t, t, rate(0.01), gpus)
		}
		switch rng.Intn(3) {
		case 0:
			fmt.Fprintf(&b, "  - name: %s-be\n    team: %s\n    class: best-effort\n    profile: lora-ft-7b\n    arrival: {process: poisson, rate_per_hour: %.3f}\n    duration: {dist: exponential, mean: 1h}\n    checkpoint_every: 15m\n",
				t, t, rate(0.2))
		case 1:
			fmt.Fprintf(&b, "  - name: %s-nb\n    team: %s\n    class: best-effort\n    profile: notebook-small\n    arrival: {process: poisson, rate_per_hour: %.3f}\n    duration: {dist: exponential, mean: 1h}\n",
				t, t, rate(0.5))
		}
	}
	return b.String()
}

// On random small clusters and streams, every scheduler keeps the
// invariants after every cycle (Options.Check: no gang partly running
// under a gang scheduler, no team above its limit, the cluster's own
// invariants) and partita places no task where it runs out of memory.
// With -v it logs partita's claims within a guarantee served past the
// reclaim window (60 s + grace), scenario by scenario: docs/mixed.md,
// "Random scenarios", says what they are. RANDOM_SCENARIOS=N runs N
// scenarios (the first 200 are the same), RANDOM_SCENARIOS_DIR=D keeps
// their files in D, for `partita bench mixed --scenario D/random-K.yaml
// --trace …`.
func TestRandomScenarios(t *testing.T) {
	n := 200
	if v := os.Getenv("RANDOM_SCENARIOS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
			t.Fatalf("RANDOM_SCENARIOS=%q: want a count of scenarios", v)
		}
	}
	if testing.Short() {
		n = 50
	}
	rng := random.New(1)
	dir := os.Getenv("RANDOM_SCENARIOS_DIR") // to keep the files, for --trace
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := sched.Preset("partita", engine.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	window := time.Minute + cfg.Grace // the owed clock's limit
	late, twice, first := 0, 0, 0
	for i := range n {
		name := fmt.Sprintf("random-%d", i)
		text := randomScenarioYAML(rng, name)
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		sc := load(t, path)
		for _, scheduler := range Schedulers {
			r, err := Run(sc, Options{Scheduler: scheduler, Seed: sc.Seed, Check: true})
			if err != nil {
				t.Errorf("%s, %s: %v\n%s", name, scheduler, err, text)
				continue
			}
			if scheduler != "partita" {
				continue
			}
			if r.OOMEvents != 0 {
				t.Errorf("%s: %d OOM events\n%s", name, r.OOMEvents, text)
			}
			if r.OwedWaitsLate == 0 {
				continue
			}
			late++
			longest := time.Duration(val(r.OwedWaitMax) * float64(time.Second)) // late waits: there is one
			if longest > 2*window {
				twice++
			}
			episodes := 0
			for _, k := range r.OwedLateJobs {
				episodes += k
			}
			if episodes > r.OwedLateBehindTeam {
				first++
			}
			t.Logf("%s: %d claims within a guarantee served past %v, the longest after %v: %v (%d of %d behind their team's own claims)", name, r.OwedWaitsLate, window, longest.Round(time.Second), r.OwedLateJobs, r.OwedLateBehindTeam, episodes)
		}
	}
	t.Logf("partita: %d of %d random scenarios with a claim served past the window, %d past twice it, %d with one not behind its team's own claims", late, n, twice, first)
}
