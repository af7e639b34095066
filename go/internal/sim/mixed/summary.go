package mixed

import "math"

// The targets of the mixed benchmark (docs/metrics.md, "Over several
// seeds"): a summary counts the seeds that meet each.
const (
	TargetUseful        = 0.85 // useful_utilization, at least
	TargetProductionP95 = 30.0 // wait_p95_s of production, at most (s)
	TargetJain          = 0.9  // jain_fairness, at least
)

// Summary is one scheduler's results over several job streams (seeds) of
// a scenario: one seed can meet a target by luck, so robustness is
// judged by how many seeds do.
type Summary struct {
	Seeds              int     `json:"seeds"`
	UsefulMean         float64 `json:"useful_utilization_mean"`
	UsefulMin          float64 `json:"useful_utilization_min"`
	UsefulMet          int     `json:"seeds_useful_met"`
	ProductionP95Max   float64 `json:"production_wait_p95_s_max"`
	ProductionP95Met   int     `json:"seeds_production_p95_met"`
	BothMet            int     `json:"seeds_useful_and_production_p95_met"`
	ViolationTotal     float64 `json:"guarantee_violation_s_total"`
	ViolationOwedTotal float64 `json:"guarantee_violation_owed_s_total"`
	NoViolation        int     `json:"seeds_without_violation"`
	NoViolationOwed    int     `json:"seeds_without_owed_violation"`
	// JainMin is nil when no seed has Jain samples.
	JainMin           *float64 `json:"jain_fairness_min"`
	JainMet           int      `json:"seeds_jain_met"`
	JainSeeds         int      `json:"seeds_with_jain_samples"`
	OOMEvents         int      `json:"oom_events_total"`
	Preemptions       int      `json:"preemptions_total"`
	LostGPUHours      float64  `json:"lost_gpu_hours_total"`
	AllTargetsMet     int      `json:"seeds_all_targets_met"`
	AllTargetsMetOwed int      `json:"seeds_all_targets_met_owed_clock"`
	// JCTP50Mean is the mean of jct_p50_s over the seeds where a job
	// finished; nil when none did.
	JCTP50Mean          *float64 `json:"jct_p50_s_mean"`
	MIGReconfigurations int      `json:"mig_reconfigurations_total"`
	Migrations          int      `json:"migrations_total"`
	OfferedLoadMean     float64  `json:"offered_load_mean"`
	OfferedLoadMin      float64  `json:"offered_load_min"`
	// BelowCapacity counts the seeds whose stream offers less than the
	// cluster (offered_load < 1).
	BelowCapacity int `json:"seeds_offered_below_capacity"`
	// IdleGPUHoursMean is idle_gpu_hours averaged over the seeds (a seed
	// without a cause counts 0 for it).
	IdleGPUHoursMean map[string]float64 `json:"idle_gpu_hours_mean"`
	// OwedLateJobs is owed_late_jobs summed over the seeds.
	OwedLateJobs map[string]int `json:"owed_late_jobs_total"`
	// OwedLateBehindTeam is owed_late_behind_own_team summed over the
	// seeds.
	OwedLateBehindTeam int `json:"owed_late_behind_own_team_total"`
	// OwedWaits and OwedWaitsLate are owed_waits and owed_waits_late
	// summed over the seeds; OwedWaitMax the longest owed wait of any.
	OwedWaits     int      `json:"owed_waits_total"`
	OwedWaitsLate int      `json:"owed_waits_late_total"`
	OwedWaitMax   *float64 `json:"owed_wait_max_s_max"`
}

// Summarize sums results, one per seed, of one scheduler. A seed whose
// Jain's index has no samples (never every team backlogged) counts
// neither for nor against the Jain target and not in JainMin. A seed
// meets all targets when it meets the three above, has no OOM event and
// no guarantee violation; AllTargetsMetOwed counts the seeds that do
// with the violation by the owed clock (GuaranteeViolationOwed). A
// statistic no seed has a sample of (Jain's index, the JCT, the owed
// waits) is nil, null in JSON.
func Summarize(results []*Result) Summary {
	s := Summary{Seeds: len(results)}
	if len(results) == 0 {
		return s
	}
	s.IdleGPUHoursMean, s.OwedLateJobs = map[string]float64{}, map[string]int{}
	s.UsefulMin, s.OfferedLoadMin = math.Inf(1), math.Inf(1)
	jainMin, jctSum, jctSeeds := math.Inf(1), 0.0, 0
	for _, r := range results {
		s.OfferedLoadMean += r.OfferedLoad
		s.OfferedLoadMin = min(s.OfferedLoadMin, r.OfferedLoad)
		if r.OfferedLoad < 1 {
			s.BelowCapacity++
		}
		s.UsefulMean += r.UsefulUtilization
		s.UsefulMin = min(s.UsefulMin, r.UsefulUtilization)
		useful := r.UsefulUtilization >= TargetUseful
		p95 := r.WaitP95["production"]
		s.ProductionP95Max = max(s.ProductionP95Max, p95)
		prod := p95 <= TargetProductionP95
		jain := true
		if r.JainSamples > 0 {
			s.JainSeeds++
			index := 0.0
			if r.JainFairness != nil {
				index = *r.JainFairness
			}
			jainMin = min(jainMin, index)
			jain = index >= TargetJain
			if jain {
				s.JainMet++
			}
		}
		if useful {
			s.UsefulMet++
		}
		if prod {
			s.ProductionP95Met++
		}
		if useful && prod {
			s.BothMet++
		}
		s.ViolationTotal += r.GuaranteeViolation
		s.ViolationOwedTotal += r.GuaranteeViolationOwed
		if r.GuaranteeViolation == 0 {
			s.NoViolation++
		}
		if r.GuaranteeViolationOwed == 0 {
			s.NoViolationOwed++
		}
		if useful && prod && jain && r.OOMEvents == 0 {
			if r.GuaranteeViolation == 0 {
				s.AllTargetsMet++
			}
			if r.GuaranteeViolationOwed == 0 {
				s.AllTargetsMetOwed++
			}
		}
		s.OOMEvents += r.OOMEvents
		s.Preemptions += r.Preemptions
		s.LostGPUHours += r.LostGPUHours
		if r.JCTP50 != nil {
			jctSum += *r.JCTP50
			jctSeeds++
		}
		s.MIGReconfigurations += r.MIGReconfigurations
		s.Migrations += r.Migrations
		for cause, h := range r.IdleGPUHours {
			s.IdleGPUHoursMean[cause] += h / float64(len(results))
		}
		for reason, n := range r.OwedLateJobs {
			s.OwedLateJobs[reason] += n
		}
		s.OwedLateBehindTeam += r.OwedLateBehindTeam
		s.OwedWaits += r.OwedWaits
		s.OwedWaitsLate += r.OwedWaitsLate
		if r.OwedWaitMax != nil {
			longest := *r.OwedWaitMax
			if s.OwedWaitMax != nil {
				longest = max(*s.OwedWaitMax, longest)
			}
			s.OwedWaitMax = &longest
		}
	}
	s.UsefulMean /= float64(len(results))
	s.OfferedLoadMean /= float64(len(results))
	if s.JainSeeds > 0 {
		s.JainMin = &jainMin
	}
	if jctSeeds > 0 {
		mean := jctSum / float64(jctSeeds)
		s.JCTP50Mean = &mean
	}
	return s
}
