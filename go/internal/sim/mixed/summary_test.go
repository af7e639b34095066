package mixed

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// ptr is a statistic with a value.
func ptr(v float64) *float64 { return &v }

// val is a statistic's value, NaN for none (nil), so that a comparison
// with a number fails.
func val(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func TestSummarizeCountsTheSeedsThatMeetEachTarget(t *testing.T) {
	res := func(useful, p95, viol, owed, jain float64, samples, oom int) *Result {
		r := &Result{
			UsefulUtilization: useful, WaitP95: map[string]float64{"production": p95},
			GuaranteeViolation: viol, GuaranteeViolationOwed: owed,
			JainSamples: samples, OOMEvents: oom, Preemptions: 10, LostGPUHours: 1.5,
		}
		if samples > 0 {
			r.JainFairness = ptr(jain)
		}
		return r
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
	results[0].OwedWaits, results[0].OwedWaitMax = 40, ptr(30)
	results[1].OwedWaits, results[1].OwedWaitsLate, results[1].OwedWaitMax = 20, 3, ptr(150)
	// The mean JCT is over the seeds where a job finished.
	results[0].JCTP50, results[2].JCTP50, results[3].JCTP50 = ptr(100), ptr(200), ptr(600)
	got := Summarize(results)
	want := Summary{
		Seeds: 5, UsefulMean: (0.90 + 0.84 + 0.86 + 0.88 + 0.87) / 5, UsefulMin: 0.84, UsefulMet: 4,
		ProductionP95Max: 31, ProductionP95Met: 4, BothMet: 3,
		ViolationTotal: 150, ViolationOwedTotal: 40, NoViolation: 3, NoViolationOwed: 4,
		JainMin: ptr(0.80), JainMet: 3, JainSeeds: 4, JCTP50Mean: ptr(300),
		OOMEvents: 2, Preemptions: 50, LostGPUHours: 7.5, AllTargetsMet: 1, AllTargetsMetOwed: 2,
		OfferedLoadMean: 1, OfferedLoadMin: 0.75, BelowCapacity: 2,
		IdleGPUHoursMean: map[string]float64{IdleNoWork: 3, IdleTooBig: 0.5},
		OwedLateJobs:     map[string]int{"batch: a": 3, "best-effort: b": 1},
		OwedWaits:        60, OwedWaitsLate: 3, OwedWaitMax: ptr(150),
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
	// Without Jain samples anywhere, JainMin is nil (null), not 0 and
	// not +Inf (JSON has no infinity); the same for the JCT and the owed
	// waits.
	got := Summarize([]*Result{{WaitP95: map[string]float64{}}})
	if got.JainMin != nil || got.JainSeeds != 0 || got.JCTP50Mean != nil || got.OwedWaitMax != nil {
		t.Errorf("no samples: JainMin %v over %d seeds, JCT mean %v, longest owed wait %v; want nil, 0, nil, nil", got.JainMin, got.JainSeeds, got.JCTP50Mean, got.OwedWaitMax)
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

// A metric with no sample prints null, not 0: Jain's index without a
// sample with every team backlogged, the JCT without a finished job, the
// owed waits' statistics without an owed wait; in a run's result and in a
// summary.
func TestAMetricWithNoSampleIsNull(t *testing.T) {
	r := &Result{WaitP95: map[string]float64{}, WaitP95WithinGuarantee: map[string]float64{}}
	out, err := json.Marshal(map[string]any{"result": r, "summary": Summarize([]*Result{r})})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"jain_fairness", "jct_p50_s", "owed_wait_p50_s", "owed_wait_p99_s", "owed_wait_max_s", "jain_fairness_min", "jct_p50_s_mean", "owed_wait_max_s_max"} {
		if !strings.Contains(string(out), `"`+field+`":null`) {
			t.Errorf("%s is not null in %s", field, out)
		}
	}
	// A run whose teams are never all backlogged has no Jain sample.
	sc := load(t, "testdata/owed.yaml")
	got, _ := runWorld(t, sc, "gang-drf")
	if got.JainSamples != 0 || got.JainFairness != nil || got.JCTP50 == nil {
		t.Errorf("owed.yaml under gang-drf: %d Jain samples, index %v, JCT p50 %v; want 0, nil and a JCT", got.JainSamples, got.JainFairness, got.JCTP50)
	}
}
