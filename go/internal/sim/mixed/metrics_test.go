package mixed

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/workload"
)

// A waiting job becomes owed at the first fall of its team's holdings
// after which it fits in what the team is owed, not at the first fall
// since the last look.
func TestAJobBecomesOwedAtTheFallThatMakesItFit(t *testing.T) {
	const guarantee = 4000
	s := time.Second
	m := &metrics{drops: [][]drop{{{at: 100 * s, held: 3000}, {at: 130 * s, held: 2000}, {at: 150 * s, held: 0}}}}
	for _, c := range []struct {
		name string
		j    job
		want time.Duration
	}{
		{"waiting at the last look", job{team: 0, milli: 2000, queuedAt: 10 * s}, 130 * s},
		{"fits after the first fall", job{team: 0, milli: 1000, queuedAt: 10 * s}, 100 * s},
		{"queued since, fitting then", job{team: 0, milli: 2000, queuedAt: 120 * s, within: true}, 120 * s},
		{"queued since, fitting after a later fall", job{team: 0, milli: 2000, queuedAt: 110 * s}, 130 * s},
		{"queued after the fall that makes it fit", job{team: 0, milli: 4000, queuedAt: 140 * s}, 150 * s},
	} {
		if got := m.owedFrom(&c.j, 90*s, guarantee); got != c.want {
			t.Errorf("%s: owed from %v, want %v", c.name, got, c.want)
		}
	}
}

// A late owed job is behind its team's own claims when the guarantee,
// served to the team's claims in the scheduler's order (a higher class,
// then the older), is taken by those ahead of it: each claim ahead that
// fits in what is left takes its part, one that does not fit takes
// nothing.
func TestALateJobIsBehindItsTeamsOwnClaims(t *testing.T) {
	const held, guarantee = 7000, 16000 // 9000 left
	waiting := func(team int, class workload.Class, submitted time.Duration, milli int64) *job {
		j := &job{team: team, milli: milli}
		j.Phase, j.Submitted, j.Spec.Class = sched.Pending, submitted, class
		return j
	}
	j := waiting(0, workload.Batch, time.Hour, 1000)
	for _, c := range []struct {
		name   string
		others []*job
		want   bool
	}{
		{"a younger claim of a higher class takes the room", []*job{waiting(0, workload.Production, 2*time.Hour, 8500)}, true},
		{"an older claim of its class takes it", []*job{waiting(0, workload.Batch, time.Minute, 8500)}, true},
		{"a younger claim of its class does not count", []*job{waiting(0, workload.Batch, 2*time.Hour, 8500)}, false},
		{"a lower class does not count", []*job{waiting(0, workload.BestEffort, time.Minute, 8500)}, false},
		{"another team's claim does not count", []*job{waiting(1, workload.Batch, time.Minute, 8500)}, false},
		{"an older claim that leaves room", []*job{waiting(0, workload.Batch, time.Minute, 8000)}, false},
		{"an older claim too big for the room takes nothing", []*job{waiting(0, workload.Batch, time.Minute, 9500)}, false},
		{"two claims ahead take it together", []*job{waiting(0, workload.Batch, time.Minute, 4500), waiting(0, workload.Production, 2*time.Hour, 4000)}, true},
		{"one too big, then one that takes it", []*job{waiting(0, workload.Batch, time.Minute, 9500), waiting(0, workload.Batch, 2*time.Minute, 8500)}, true},
	} {
		if got := behindOwnTeam(append(c.others, j), j, held, guarantee); got != c.want {
			t.Errorf("%s: behind %v, want %v", c.name, got, c.want)
		}
	}
	running := waiting(0, workload.Batch, time.Minute, 8500)
	running.Phase = sched.Running
	if behindOwnTeam([]*job{running, j}, j, held, guarantee) {
		t.Error("a running job of the team counted as a claim ahead (what it holds is in held)")
	}
}

// countReason counts as a map would, with few reasons and with many.
func TestCountReasonCountsEachReason(t *testing.T) {
	for _, distinct := range []int{1, 5, 63, 64, 65, 300} {
		var counts []reasonCount
		want := map[string]int{}
		for i := range 5 * distinct {
			r := fmt.Sprintf("reason %d", (i*7919)%distinct)
			counts = countReason(counts, r)
			want[r]++
		}
		got := map[string]int{}
		for _, c := range counts {
			if _, twice := got[c.reason]; twice {
				t.Fatalf("%d reasons: %q counted in two places", distinct, c.reason)
			}
			got[c.reason] = c.n
		}
		if !maps.Equal(got, want) {
			t.Errorf("%d reasons: counted %v, want %v", distinct, got, want)
		}
	}
}
