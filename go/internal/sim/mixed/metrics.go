package mixed

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/workload"
)

// Result is one scheduler's run. docs/metrics.md defines every field.
type Result struct {
	Scenario             string             `json:"scenario"`
	Scheduler            string             `json:"scheduler"`
	UsefulUtilization    float64            `json:"useful_utilization"`
	AllocatedUtilization float64            `json:"allocated_utilization"`
	OOMEvents            int                `json:"oom_events"`
	WaitP95              map[string]float64 `json:"wait_p95_s"`
	// JCTP50 is nil when no job finished: a metric with no sample is
	// null in JSON, not 0 (since 2026-12-05; so are JainFairness and the
	// owed waits' statistics).
	JCTP50             *float64 `json:"jct_p50_s"`
	GuaranteeViolation float64  `json:"guarantee_violation_s"`
	// GuaranteeViolationOwed is GuaranteeViolation with each job's 60 s
	// plus grace counted from the moment it became owed, not from its
	// queueing (docs/metrics.md).
	GuaranteeViolationOwed float64  `json:"guarantee_violation_owed_s"`
	JainFairness           *float64 `json:"jain_fairness"`
	// JainSamples counts the samples JainFairness averages: those with
	// every team backlogged. With none, JainFairness is nil (null).
	JainSamples  int     `json:"jain_samples"`
	Preemptions  int     `json:"preemptions"`
	LostGPUHours float64 `json:"lost_gpu_hours"`
	// WaitP95WithinGuarantee is WaitP95 over the waits that began with
	// the team owed the job's demand (docs/metrics.md).
	WaitP95WithinGuarantee map[string]float64 `json:"wait_p95_within_guarantee_s"`
	// OfferedLoad is the GPU the stream asks for over the horizon, as a
	// share of the cluster's: each job's nominal GPU times its run time
	// within the horizon (docs/metrics.md). It depends on the scenario
	// and seed only, not on the scheduler.
	OfferedLoad float64 `json:"offered_load"`
	// IdleGPUHours splits the unallocated GPU-hours by why they stood
	// unallocated (idleCause): their sum is (1 − allocated_utilization) ×
	// GPUs × the horizon in hours, but for the moments when the instances
	// held count more than the cluster's GPUs (docs/metrics.md).
	IdleGPUHours map[string]float64 `json:"idle_gpu_hours"`
	// OwedLateJobs counts the jobs that waited past the guarantee's 60 s
	// plus grace by the owed clock, once per episode, by class and wait
	// reason at that moment ("best-effort: REASON"; docs/metrics.md):
	// where the owed clock's time comes from, without a trace.
	OwedLateJobs map[string]int `json:"owed_late_jobs"`
	// OwedLateBehindTeam counts those of them behind their team's own
	// claims: the team's guarantee, served to its waiting claims in the
	// scheduler's order (a higher class, then the earlier submitted), was
	// taken by those ahead of them (behindOwnTeam; docs/metrics.md).
	OwedLateBehindTeam int `json:"owed_late_behind_own_team"`
	// OwedWaits counts the waits of jobs owed their team's guarantee
	// while they waited (served, or still waiting at the end), from when
	// they became owed; OwedWaitsLate those over 60 s plus the grace; the
	// rest is their distribution (docs/metrics.md), nil without an owed
	// wait.
	OwedWaits           int                `json:"owed_waits"`
	OwedWaitsLate       int                `json:"owed_waits_late"`
	OwedWaitP50         *float64           `json:"owed_wait_p50_s"`
	OwedWaitP99         *float64           `json:"owed_wait_p99_s"`
	OwedWaitMax         *float64           `json:"owed_wait_max_s"`
	MIGReconfigurations int                `json:"mig_reconfigurations"`
	Migrations          int                `json:"migrations"`
	Jobs                int                `json:"jobs"`
	Completed           int                `json:"completed"`
	GPUs                int                `json:"gpus"`
	Timeline            []Sample           `json:"-"`
	Horizon             time.Duration      `json:"-"`
	Entitlement         map[string]float64 `json:"-"` // GPUs per team
}

// Sample is the state at one instant, for the charts.
type Sample struct {
	T               time.Duration
	Useful, Alloc   float64            // GPUs
	Teams           map[string]float64 // GPUs held per team
	AllBacklogged   bool
	TeamsNormalised map[string]float64
}

type metrics struct {
	gpus        float64
	last        time.Duration
	usefulNow   float64 // GPUs that running work needs now
	allocNow    float64 // GPUs held now
	migrations  int
	usefulInt   float64 // GPU-seconds
	allocInt    float64
	oom         int
	preemptions int
	reconfigs   int
	lostGPUSec  float64
	entitle     map[string]float64 // GPU milli
	// spans and spansOwed are, per team (by position in world.teams), the
	// stretches of violation since the last check, by the queueing clock
	// and by the owed clock; violating, whether the team was in violation
	// at the last check (for the trace).
	spans, spansOwed [][]span
	violating        []bool
	lastCheck        time.Duration
	violationS       float64
	violationOwedS   float64
	// held is what each team holds (GPU milli, by position in
	// world.teams), kept as tasks are placed and released; drops are the
	// moments its holdings fell since the last check, with what it held
	// then: a waiting job becomes owed at the first fall after which it
	// fits in what its team is owed.
	held     []float64
	drops    [][]drop
	jain     []float64
	timeline []Sample
	// idleCause is why GPUs stand unallocated, as the last cycle left
	// them; idleSec the unallocated GPU-seconds by cause.
	idleCause string
	idleSec   map[string]float64
	owedLate  map[string]int // jobs past the owed limit, by class and wait reason
	// owedLateBehind counts those behind their team's own claims
	// (behindOwnTeam).
	owedLateBehind int
	// owedWaits are the waits of the jobs served that were owed while
	// they waited, from when they became owed to their start (s).
	owedWaits []float64
}

func newMetrics(w *world) *metrics {
	m := &metrics{entitle: map[string]float64{}, spans: make([][]span, len(w.teams)), spansOwed: make([][]span, len(w.teams)), violating: make([]bool, len(w.teams)), held: make([]float64, len(w.teams)), drops: make([][]drop, len(w.teams)),
		idleCause: IdleNoWork, idleSec: map[string]float64{}, owedLate: map[string]int{}}
	for i := 0; i < w.st.Len(); i++ {
		m.gpus += float64(len(w.st.Node(i).GPUs))
	}
	// Entitlement: the guarantee plus a weight-share of what guarantees
	// leave over.
	var guaranteed, weights float64
	for _, t := range w.teams {
		guaranteed += float64(t.Guarantee)
		weights += max(t.Weight, 0)
	}
	rest := max(m.gpus*1000-guaranteed, 0)
	for _, t := range w.teams {
		e := float64(t.Guarantee)
		if weights > 0 {
			e += rest * max(t.Weight, 0) / weights
		}
		m.entitle[t.Name] = e
	}
	return m
}

// advance integrates the current rates up to now; every change calls it
// first.
func (m *metrics) advance(now time.Duration) {
	if now <= m.last {
		return
	}
	dt := (now - m.last).Seconds()
	m.usefulInt += m.usefulNow * dt
	m.allocInt += m.allocNow * dt
	if idle := m.gpus - m.allocNow; idle > 1e-9 {
		m.idleSec[m.idleCause] += idle * dt
	}
	m.last = now
}

// The causes of unallocated GPU that are not a wait reason of the engine
// (sched.Wait*).
const (
	IdleNoWork  = "no work waiting"
	IdleTooBig  = "every waiting job needs more GPU than stands free"
	IdleNoCycle = "waiting work not yet looked at"
)

// idleCause says why GPUs stand unallocated after a cycle, free GPUs
// being free: no work waits; every waiting job asks for more GPU than
// stands free (a gang drains the nodes it needs); or else the reason that
// most of the waiting jobs that would fit by size give (ties: the first
// reason in name order). By size only: a job that fits in the free GPU
// in total may still find no node, and then says so.
func idleCause(w *world, free float64) string {
	if free <= 1e-9 {
		return IdleNoWork // nothing stands idle: the cause counts nothing
	}
	// The reasons are counted in a short list: there are a handful, and
	// hashing one for each waiting job that fits, after every cycle, was
	// a fiftieth of a week-1000 run. Jobs given no reason by a light
	// cycle since the last full one (most) are not looked up there.
	waiting := len(w.lists.pending)
	var fits []reasonCount
	for i, j := range w.lists.pending {
		if float64(w.lists.milli[i]) > free*1000+1e-6 {
			continue
		}
		reason, ok := "", false
		if len(w.recent) > 0 {
			reason, ok = w.recent[j.ID()]
		}
		if !ok {
			reason = w.reasons[j.ID()].Reason
		}
		if reason == "" {
			reason = IdleNoCycle
		}
		fits = countReason(fits, reason)
	}
	switch {
	case waiting == 0:
		return IdleNoWork
	case len(fits) == 0:
		return IdleTooBig
	}
	best, most := "", 0
	for _, f := range fits {
		if f.n > most || f.n == most && f.reason < best {
			best, most = f.reason, f.n
		}
	}
	return best
}

// reasonCount is how many waiting jobs give a reason.
type reasonCount struct {
	reason string
	n      int
}

// countReason adds one for reason. The list is searched in turn while
// short; only invalid jobs' own messages make it long, and from 64
// reasons on it is kept sorted and searched by halves.
func countReason(counts []reasonCount, reason string) []reasonCount {
	const short = 64
	if len(counts) < short {
		for i := range counts {
			if counts[i].reason == reason {
				counts[i].n++
				return counts
			}
		}
		counts = append(counts, reasonCount{reason, 1})
		if len(counts) == short {
			slices.SortFunc(counts, func(a, b reasonCount) int { return strings.Compare(a.reason, b.reason) })
		}
		return counts
	}
	i, found := slices.BinarySearchFunc(counts, reason, func(c reasonCount, r string) int { return strings.Compare(c.reason, r) })
	if found {
		counts[i].n++
		return counts
	}
	return slices.Insert(counts, i, reasonCount{reason, 1})
}

func (m *metrics) arrived(j *job) {}

// placed counts a task's held GPU and checks its memory.
func (m *metrics) placed(w *world, j *job, s sched.Start) {
	m.advance(w.now())
	n := w.st.NodeByName(s.Assignment.Node)
	for _, g := range s.Assignment.Grants {
		m.allocNow += engine.GrantShare(n, g)
		j.heldShare += engine.GrantShare(n, g)
		if j.team >= 0 {
			m.held[j.team] += engine.GrantShare(n, g) * 1000
		}
	}
	w.heldChanged(j)
	if oom(n, s.Assignment, j.Spec.Tasks[s.Task]) {
		m.oom++
	}
}

// oom reports whether a task got less GPU memory than its peak.
func oom(n *cluster.Node, a cluster.Assignment, t workload.Task) bool {
	if t.GPU.Kind != workload.MemoryProfile || len(a.Grants) == 0 {
		return false
	}
	var got int64
	for _, g := range a.Grants {
		model := n.GPUs[g.GPU].Model
		if g.Slice != nil {
			if p, err := model.Profile(g.Slice.Profile); err == nil {
				got += p.MemoryMiB
			}
			continue
		}
		got += model.MemoryMiB * int64(g.Milli) / 1000
	}
	return got < t.GPU.PeakMemoryMiB
}

// jobNeed is what a complete job's tasks need.
func jobNeed(w *world, j *job) float64 {
	total := 0.0
	for i, a := range j.Placed {
		if a == nil {
			continue
		}
		total += engine.Need(w.st.NodeByName(a.Node), *a, j.Spec.Tasks[i])
	}
	return total
}

func jobHeld(w *world, j *job) float64 {
	total := 0.0
	for _, a := range j.Placed {
		if a == nil {
			continue
		}
		n := w.st.NodeByName(a.Node)
		for _, g := range a.Grants {
			total += engine.GrantShare(n, g)
		}
	}
	return total
}

// progress is called before a running job stops (departure or end of
// grace): its useful GPU stops counting, its held GPU is released.
func (m *metrics) progress(w *world, j *job) {
	m.advance(w.now())
	if j.runSince >= 0 {
		m.usefulNow -= jobNeed(w, j)
	}
	m.allocNow -= jobHeld(w, j)
}

func (m *metrics) running(w *world, j *job) {
	m.advance(w.now())
	m.usefulNow += jobNeed(w, j)
}

func (m *metrics) finished(w *world, j *job) {}

func (m *metrics) lost(w *world, j *job, lost time.Duration) {
	m.lostGPUSec += lost.Seconds() * jobHeld(w, j)
}

// waiting runs after each cycle: it charges guarantee violations since
// the last cycle, then looks again. A team is in violation while it holds
// less than its guarantee and has a job that fits in what it is still
// owed, waiting longer than 60 s plus the grace period: since its queueing
// (spans), or since it became owed (spansOwed).
func (m *metrics) waiting(w *world, d sched.Decision) {
	m.check(w, d, w.now())
}

// owedLimit is how long a job within its team's guarantee may wait: 60 s
// plus the victims' grace period.
func owedLimit(w *world) time.Duration { return time.Minute + w.sch.Config().Grace }

// span is a stretch of time, from and to.
type span struct{ from, to time.Duration }

// addSpan notes that team was in violation from from to to, within the
// stretch since the last check.
func (m *metrics) addSpan(spans [][]span, team int, from, to time.Duration) {
	if from = max(from, m.lastCheck); to > from {
		spans[team] = append(spans[team], span{from, to})
	}
}

// covered is the time the spans cover, overlaps counted once; it sorts
// them.
func covered(spans []span) time.Duration {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var total, end time.Duration
	for _, s := range spans {
		if s.to <= end {
			continue
		}
		total += s.to - max(s.from, end)
		end = s.to
	}
	return total
}

// served is called when j starts: if it was owed while it waited, its
// wait since it became owed is recorded (owedWaits) and the late part
// counts up to now. Jobs served between two checks were charged up to
// the next check until 2026-12-02, and a wait that crossed the line and
// ended between two checks went unseen: the measured violation depended
// on how often the scheduler ran a full cycle.
func (m *metrics) served(w *world, j *job) {
	if j.team < 0 {
		return
	}
	if !j.owed {
		// Not owed at the last look, or queued since: owed if it fitted
		// at its queueing or after a fall since.
		at, ok := m.owedAfter(j, m.lastCheck, float64(w.teams[j.team].Guarantee))
		if !ok {
			return
		}
		j.owedSince = at
	}
	now, limit := w.now(), owedLimit(w)
	m.owedWaits = append(m.owedWaits, (now - j.owedSince).Seconds())
	m.addSpan(m.spans, j.team, max(j.queuedAt+limit, j.owedSince), now)
	m.addSpan(m.spansOwed, j.team, j.owedSince+limit, now)
	if now-j.owedSince > limit && !j.owedLate {
		m.lateEpisode(w, j, now, lastReason(w, j))
	}
	j.owed, j.owedLate = false, false
}

// lastReason is the reason the last cycle that looked at j gave for its
// wait.
func lastReason(w *world, j *job) string {
	if why, ok := w.recent[j.ID()]; ok {
		return why
	}
	return w.reasons[j.ID()].Reason
}

// outgrown ends, after a cycle's starts, the owed episode of each waiting
// job that no longer fits in what its team is owed: the team's other work
// took the room. The wait until now is recorded and charged as a served
// one would be. Until 2026-12-03 such an episode ended at the next look,
// charged only up to the look before: a job that crossed the line
// between two looks and stopped fitting before the second went unseen,
// and one that fitted again by then went on as if it never stopped.
func (m *metrics) outgrown(w *world) {
	var usage []float64
	now, limit := w.now(), owedLimit(w)
	for _, j := range w.lists.pending {
		if j.team < 0 || j.Phase != sched.Pending {
			continue
		}
		if usage == nil {
			usage = teamUsage(w)
		}
		guarantee := float64(w.teams[j.team].Guarantee)
		if usage[j.team]+float64(j.milli) <= guarantee {
			continue
		}
		if !j.owed {
			at, ok := m.owedAfter(j, m.lastCheck, guarantee)
			if !ok {
				continue
			}
			j.owedSince = at
		}
		m.owedWaits = append(m.owedWaits, (now - j.owedSince).Seconds())
		m.addSpan(m.spans, j.team, max(j.queuedAt+limit, j.owedSince), now)
		m.addSpan(m.spansOwed, j.team, j.owedSince+limit, now)
		if now-j.owedSince > limit && !j.owedLate {
			m.lateEpisode(w, j, now, lastReason(w, j))
		}
		j.owed, j.owedLate, j.outgrownAt = false, false, now
	}
}

// lateEpisode counts j past the owed limit, once per episode: the first
// thing to look for in a trace when the owed clock is not 0.
func (m *metrics) lateEpisode(w *world, j *job, now time.Duration, why string) {
	j.owedLate = true
	if why == "" {
		why = IdleNoCycle
	}
	m.owedLate[fmt.Sprintf("%s: %s", j.Spec.Class, why)]++
	t := &w.teams[j.team]
	behind := ""
	if behindOwnTeam(w.active, j, teamUsage(w)[j.team], float64(t.Guarantee)) {
		m.owedLateBehind++
		behind = " (behind its team's own claims)"
	}
	w.tracef("owed violation %s: %s (%s, %d milli) owed for %.0fs, queued %.0fs, team guarantee %d: %s%s", t.Name, j.ID(), j.Spec.Class, j.milli, (now - j.owedSince).Seconds(), (now - j.queuedAt).Seconds(), t.Guarantee, why, behind)
}

// behindOwnTeam says whether j's team's guarantee, served to the team's
// waiting claims in the order the scheduler serves them (a higher class
// first, then the older), is taken by those ahead of j before j's turn:
// from what the guarantee leaves over held (the GPU milli the team
// holds), each claim ahead that fits in what is left takes its part;
// one that does not fit takes nothing, and those behind it go around
// it. The owed clock counts j owed when held plus j fits, each job
// alone: this is how often it charges the scheduler for serving the
// team's own claims before j.
func behindOwnTeam(active []*job, j *job, held, guarantee float64) bool {
	var ahead []*job
	for _, v := range active {
		if v == j || v.team != j.team || v.Phase != sched.Pending {
			continue
		}
		if v.Spec.Class > j.Spec.Class || v.Spec.Class == j.Spec.Class && v.Submitted < j.Submitted {
			ahead = append(ahead, v)
		}
	}
	slices.SortStableFunc(ahead, func(a, b *job) int {
		if a.Spec.Class != b.Spec.Class {
			return cmp.Compare(b.Spec.Class, a.Spec.Class)
		}
		return cmp.Compare(a.Submitted, b.Submitted)
	})
	room := guarantee - held
	for _, v := range ahead {
		if m := float64(v.milli); m <= room {
			room -= m
		}
	}
	return float64(j.milli) > room
}

// check is waiting at now: the end of the horizon for the last look,
// where the world's clock is already at the first event past it. A team's
// violation since the last look runs from the first moment one of its
// jobs still owed passed the limit (or the last look) to now, and for the
// jobs served since, to their start (served).
func (m *metrics) check(w *world, d sched.Decision, now time.Duration) {
	prev := m.lastCheck
	usage := teamUsage(w)
	limit := owedLimit(w)
	// A job that left the queue since the last look is owed nothing now
	// (and still waits, in the loop below, if it came back since).
	for _, j := range w.lists.left {
		if j.Phase != sched.Pending {
			j.owed, j.owedLate = false, false
		}
	}
	w.lists.left = w.lists.left[:0]
	for _, j := range w.lists.pending {
		if j.team < 0 {
			continue
		}
		t := &w.teams[j.team]
		if j.Phase != sched.Pending || usage[j.team]+float64(j.milli) > float64(t.Guarantee) {
			j.owed, j.owedLate = false, false
			continue
		}
		if !j.owed {
			j.owed, j.owedSince = true, m.owedFrom(j, prev, float64(t.Guarantee))
		}
		if now-j.owedSince > limit {
			if !j.owedLate {
				m.lateEpisode(w, j, now, d.Waiting[j.ID()].Reason)
			}
			m.addSpan(m.spansOwed, j.team, j.owedSince+limit, now)
		}
		if now-j.queuedAt > limit {
			m.addSpan(m.spans, j.team, max(j.queuedAt+limit, j.owedSince), now)
		}
	}
	for i, t := range w.teams {
		late := len(m.spans[i]) > 0
		if late && !m.violating[i] {
			w.tracef("violation %s: team holds %.0f of %d", t.Name, usage[i], t.Guarantee)
		}
		m.violating[i] = late
		m.violationS += covered(m.spans[i]).Seconds()
		m.violationOwedS += covered(m.spansOwed[i]).Seconds()
		m.spans[i], m.spansOwed[i] = m.spans[i][:0], m.spansOwed[i][:0]
	}
	m.lastCheck = now
	for i := range m.drops {
		m.drops[i] = m.drops[i][:0]
		m.held[i] = usage[i] // no drift from the sums kept between looks
	}
	m.idleAt(w, now)
}

// idle looks again at why GPUs stand unallocated, after a cycle that
// looked at some jobs only.
func (m *metrics) idle(w *world) { m.idleAt(w, w.now()) }

// idleAt charges the unallocated time up to now to the cause the last
// cycle left, then takes the cause this one leaves.
func (m *metrics) idleAt(w *world, now time.Duration) {
	m.advance(now)
	m.idleCause = idleCause(w, m.gpus-m.allocNow)
}

// drop is a fall of a team's holdings: when, and what it held after.
type drop struct {
	at   time.Duration
	held float64
}

// released notes that j gave back what it held, now.
func (m *metrics) released(j *job, now time.Duration) {
	if j.team < 0 || j.heldShare <= 0 {
		return
	}
	m.held[j.team] -= j.heldShare * 1000
	m.drops[j.team] = append(m.drops[j.team], drop{now, m.held[j.team]})
}

// owedAfter is when j, waiting, became owed since prev (its queueing or
// the last look, whichever is later): at its queueing if it fitted then
// in what its team is owed, else at the first fall of its team's
// holdings after which it fitted, as only a fall makes a waiting job
// fit; ok is false when neither happened.
func (m *metrics) owedAfter(j *job, prev time.Duration, guarantee float64) (at time.Duration, ok bool) {
	if j.queuedAt > prev && j.queuedAt >= j.outgrownAt && j.within {
		return j.queuedAt, true
	}
	from := max(prev, j.queuedAt, j.outgrownAt)
	for _, d := range m.drops[j.team] {
		if d.at >= from && d.held+float64(j.milli) <= guarantee+1e-6 {
			return d.at, true
		}
	}
	return 0, false
}

// owedFrom is owedAfter for a job found to fit at a look. Until
// 2026-12-02 it was the first fall since the last look, whether or not
// the job fitted after it.
func (m *metrics) owedFrom(j *job, prev time.Duration, guarantee float64) time.Duration {
	if at, ok := m.owedAfter(j, prev, guarantee); ok {
		return at
	}
	// No such fall seen (rounding): the earliest it may have been.
	from := max(prev, j.queuedAt, j.outgrownAt)
	for _, d := range m.drops[j.team] {
		if d.at >= from {
			return d.at
		}
	}
	return from
}

// teamUsage is the GPU milli each team holds, by position in world.teams.
func teamUsage(w *world) []float64 {
	u := make([]float64, len(w.teams))
	for i, t := range w.lists.team {
		if t >= 0 {
			u[t] += w.lists.share[i] * 1000
		}
	}
	return u
}

// sample records the timeline and, while every team has work waiting,
// Jain's fairness of the teams' entitlement-normalised shares.
func (m *metrics) sample(w *world) {
	m.advance(w.now())
	usage := teamUsage(w)
	backlogged := map[string]bool{}
	for _, j := range w.active {
		if j.Phase == sched.Pending {
			backlogged[j.Spec.Team] = true
		}
	}
	s := Sample{T: w.now(), Useful: m.usefulNow, Alloc: m.allocNow, Teams: map[string]float64{}, TeamsNormalised: map[string]float64{}}
	all := len(w.teams) > 0
	var sum, sq float64
	for k, t := range w.teams {
		s.Teams[t.Name] = usage[k] / 1000
		x := 0.0
		if e := m.entitle[t.Name]; e > 0 {
			x = usage[k] / e
		}
		s.TeamsNormalised[t.Name] = x
		sum += x
		sq += x * x
		if !backlogged[t.Name] {
			all = false
		}
	}
	s.AllBacklogged = all
	if w.opt.Trace != nil {
		var migBusy, migIdle, wholeBusy, wholeIdle, cordoned int
		for i := 0; i < w.st.Len(); i++ {
			n := w.st.Node(i)
			for k := range n.GPUs {
				g := &n.GPUs[k]
				switch {
				case g.Cordoned():
					cordoned++
				case g.MIG && g.Idle():
					migIdle++
				case g.MIG:
					migBusy++
				case g.Idle():
					wholeIdle++
				default:
					wholeBusy++
				}
			}
		}
		pending := 0
		for _, j := range w.active {
			if j.Phase == sched.Pending {
				pending++
			}
		}
		per := ""
		for i := 0; i < w.st.Len(); i++ {
			n := w.st.Node(i)
			mig, busy := 0, 0
			for k := range n.GPUs {
				if n.GPUs[k].MIG {
					mig++
				}
				if !n.GPUs[k].Idle() {
					busy++
				}
			}
			per += fmt.Sprintf(" %d/%d", mig, busy)
		}
		w.tracef("nodes mig/busy:%s", per)
		w.tracef("sample useful=%.1f alloc=%.1f gpus: mig-busy=%d mig-idle=%d whole-busy=%d whole-idle=%d cordoned=%d pending=%d",
			m.usefulNow, m.allocNow, migBusy, migIdle, wholeBusy, wholeIdle, cordoned, pending)
	}
	if all && sq > 0 {
		m.jain = append(m.jain, sum*sum/(float64(len(w.teams))*sq))
	}
	m.timeline = append(m.timeline, s)
}

func (m *metrics) finish(w *world, end time.Duration) {
	m.check(w, sched.Decision{}, end)
	// Jobs owed and still waiting at the end: their wait so far, or a
	// scheduler that never serves a claim would look fast.
	for _, j := range w.lists.pending {
		if j.owed && j.Phase == sched.Pending {
			m.owedWaits = append(m.owedWaits, (end - j.owedSince).Seconds())
		}
	}
}

func (m *metrics) result(w *world) *Result {
	horizon := w.sc.Duration.Seconds()
	r := &Result{
		Scenario: w.sc.Name, Scheduler: w.opt.Scheduler, OOMEvents: m.oom, Preemptions: m.preemptions,
		MIGReconfigurations: m.reconfigs, Migrations: m.migrations, GuaranteeViolation: m.violationS, GuaranteeViolationOwed: m.violationOwedS, LostGPUHours: m.lostGPUSec / 3600,
		Jobs: len(w.jobs), GPUs: int(m.gpus), Timeline: m.timeline, WaitP95: map[string]float64{}, WaitP95WithinGuarantee: map[string]float64{},
		Entitlement: map[string]float64{}, IdleGPUHours: map[string]float64{}, OwedLateJobs: map[string]int{}, Horizon: w.sc.Duration,
	}
	for reason, n := range m.owedLate {
		r.OwedLateJobs[reason] = n
	}
	r.OwedLateBehindTeam = m.owedLateBehind
	limit := owedLimit(w).Seconds()
	r.OwedWaits = len(m.owedWaits)
	longest := 0.0
	for _, s := range m.owedWaits {
		if s > limit {
			r.OwedWaitsLate++
		}
		longest = max(longest, s)
	}
	if len(m.owedWaits) > 0 {
		r.OwedWaitMax = &longest
	}
	r.OwedWaitP50, r.OwedWaitP99 = sampled(m.owedWaits, 50), sampled(m.owedWaits, 99)
	for cause, sec := range m.idleSec {
		r.IdleGPUHours[cause] = sec / 3600
	}
	if horizon > 0 && m.gpus > 0 {
		r.UsefulUtilization = m.usefulInt / horizon / m.gpus
		r.AllocatedUtilization = m.allocInt / horizon / m.gpus
		r.OfferedLoad = offeredGPUSeconds(w) / horizon / m.gpus
	}
	for t, e := range m.entitle {
		r.Entitlement[t] = e / 1000
	}
	waits, within := map[workload.Class][]float64{}, map[workload.Class][]float64{}
	var jct []float64
	for _, j := range w.jobs {
		if j.Submitted > w.sc.Duration {
			continue
		}
		for _, d := range j.waits {
			waits[j.Spec.Class] = append(waits[j.Spec.Class], d.Seconds())
		}
		for _, d := range j.waitsWithin {
			within[j.Spec.Class] = append(within[j.Spec.Class], d.Seconds())
		}
		if !j.done && j.Phase == sched.Pending {
			// Still waiting at the end: count the wait so far, or a
			// scheduler that never serves a class would look fast.
			waits[j.Spec.Class] = append(waits[j.Spec.Class], (w.sc.Duration - j.queuedAt).Seconds())
			if j.within {
				within[j.Spec.Class] = append(within[j.Spec.Class], (w.sc.Duration - j.queuedAt).Seconds())
			}
		}
		if j.done {
			r.Completed++
			jct = append(jct, (j.finish - j.Submitted).Seconds())
		}
	}
	for c, ws := range waits {
		r.WaitP95[c.String()] = percentile(ws, 95)
	}
	for c, ws := range within {
		r.WaitP95WithinGuarantee[c.String()] = percentile(ws, 95)
	}
	r.JCTP50 = sampled(jct, 50)
	if len(m.jain) > 0 {
		sum := 0.0
		for _, v := range m.jain {
			sum += v
		}
		mean := sum / float64(len(m.jain))
		r.JainFairness = &mean
	}
	r.JainSamples = len(m.jain)
	return r
}

// offeredGPUSeconds is the GPU-seconds the jobs arriving within the
// horizon ask for: each job's nominal GPU (Job.GPUMilli: whole GPUs, a
// MIG profile's compute slices, a memory profile's compute share) times
// its run time, cut at the horizon. Work lost to preemption is not
// counted, nor the larger slice a small service gets (an embedding
// service asks 0.10 of a GPU and runs on a 1g instance, 1/7): useful
// utilization counts the slice, so it can pass the offered load.
func offeredGPUSeconds(w *world) float64 {
	var total float64
	for _, j := range w.jobs {
		if j.arrival.At >= w.sc.Duration {
			continue
		}
		run := min(j.arrival.Duration, w.sc.Duration-j.arrival.At)
		total += float64(j.milli) / 1000 * run.Seconds()
	}
	return total
}

// sampled is percentile where there are values, nil (null in JSON)
// where there are none: a statistic of no sample is not 0.
func sampled(xs []float64, p float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	v := percentile(xs, p)
	return &v
}

// percentile is the nearest-rank percentile (0 for no values).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}
