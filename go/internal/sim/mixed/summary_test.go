package mixed

import (
	"math"
	"reflect"
	"testing"
)

func TestSummarizeCountsTheSeedsThatMeetEachTarget(t *testing.T) {
	res := func(useful, p95, viol, owed, jain float64, samples, oom int) *Result {
		return &Result{
			UsefulUtilization: useful, WaitP95: map[string]float64{"production": p95},
			GuaranteeViolation: viol, GuaranteeViolationOwed: owed,
			JainFairness: jain, JainSamples: samples, OOMEvents: oom, Preemptions: 10, LostGPUHours: 1.5,
		}
	}
	results := []*Result{
		res(0.90, 30, 0, 0, 0.95, 12, 0),   // meets everything
		res(0.84, 30, 100, 40, 0.80, 5, 0), // useful and Jain miss; violations
		res(0.86, 31, 0, 0, 0, 0, 0),       // p95 misses; no Jain samples
		res(0.88, 12, 0, 0, 0.91, 3, 2),    // OOM
		res(0.87, 30, 50, 0, 0.92, 4, 0),   // violations by the queue clock only
	}
	for i, load := range []float64{1.25, 0.875, 1, 1.125, 0.75} {
		results[i].OfferedLoad = load
	}
	results[0].IdleGPUHours = map[string]float64{IdleNoWork: 10}
	results[1].IdleGPUHours = map[string]float64{IdleNoWork: 5, IdleTooBig: 2.5}
	results[1].OwedLateJobs = map[string]int{"batch: a": 2, "best-effort: b": 1}
	results[4].OwedLateJobs = map[string]int{"batch: a": 1}
	results[0].OwedWaits, results[0].OwedWaitMax = 40, 30
	results[1].OwedWaits, results[1].OwedWaitsLate, results[1].OwedWaitMax = 20, 3, 150
	got := Summarize(results)
	want := Summary{
		Seeds: 5, UsefulMean: (0.90 + 0.84 + 0.86 + 0.88 + 0.87) / 5, UsefulMin: 0.84, UsefulMet: 4,
		ProductionP95Max: 31, ProductionP95Met: 4, BothMet: 3,
		ViolationTotal: 150, ViolationOwedTotal: 40, NoViolation: 3, NoViolationOwed: 4,
		JainMin: 0.80, JainMet: 3, JainSeeds: 4,
		OOMEvents: 2, Preemptions: 50, LostGPUHours: 7.5, AllTargetsMet: 1, AllTargetsMetOwed: 2,
		OfferedLoadMean: 1, OfferedLoadMin: 0.75, BelowCapacity: 2,
		IdleGPUHoursMean: map[string]float64{IdleNoWork: 3, IdleTooBig: 0.5},
		OwedLateJobs:     map[string]int{"batch: a": 3, "best-effort: b": 1},
		OwedWaits:        60, OwedWaitsLate: 3, OwedWaitMax: 150,
	}
	if math.Abs(got.UsefulMean-want.UsefulMean) > 1e-12 {
		t.Errorf("useful mean %v, want %v", got.UsefulMean, want.UsefulMean)
	}
	got.UsefulMean = want.UsefulMean
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Summarize =\n%+v\nwant\n%+v", got, want)
	}
}

func TestSummarizeOfNoResultsIsEmpty(t *testing.T) {
	if got := Summarize(nil); !reflect.DeepEqual(got, Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want the zero Summary", got)
	}
	// Without Jain samples anywhere, JainMin is 0, not +Inf (JSON has no
	// infinity).
	if got := Summarize([]*Result{{WaitP95: map[string]float64{}}}); got.JainMin != 0 || got.JainSeeds != 0 {
		t.Errorf("no Jain samples: JainMin %v over %d seeds, want 0 over 0", got.JainMin, got.JainSeeds)
	}
}

func TestSummarizeAddsTheLateJobsBehindTheirTeamsOwnClaims(t *testing.T) {
	r := func(n int) *Result {
		return &Result{WaitP95: map[string]float64{}, OwedLateBehindTeam: n}
	}
	if got := Summarize([]*Result{r(2), r(0), r(3)}).OwedLateBehindTeam; got != 5 {
		t.Errorf("owed_late_behind_own_team_total %d, want 5", got)
	}
}
