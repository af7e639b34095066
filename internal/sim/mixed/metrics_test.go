package mixed

import (
	"testing"
	"time"
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
