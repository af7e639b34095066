package portal

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/api"
)

// The utilization chart's axis: minutes for a short history, hours for a
// long one, and whole-number ticks either way (a float axis from -1 h to
// 0 once labelled its end "-5.6e-17").
func TestUtilizationChartAxis(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	number := regexp.MustCompile(`>(-?[0-9][^<]*)</text>`)
	for _, c := range []struct {
		history time.Duration
		unit    string
		first   string // a tick: the first, or the first round one
	}{
		{0, "minutes", "-60"}, {10 * time.Minute, "minutes", "-60"}, {27 * time.Minute, "minutes", "-60"},
		{95 * time.Minute, "minutes", "-100"}, {3 * time.Hour, "minutes", "-150"},
		{3*time.Hour + time.Second, "hours", "-4"}, {59*time.Hour + 30*time.Minute, "hours", "-60"},
	} {
		var ss []sample
		for at := now.Add(-c.history); !at.After(now); at = at.Add(max(c.history/50, time.Second)) {
			ss = append(ss, sample{At: at, Allocated: 0.5, Useful: 0.4})
		}
		svg := string(utilizationChart(ss, api.Clock{Now: now}))
		if !strings.Contains(svg, "cluster "+c.unit+" before now") {
			t.Errorf("history %v: the axis is not in %s", c.history, c.unit)
		}
		ticks := number.FindAllStringSubmatch(svg, -1)
		if len(ticks) < 4 {
			t.Fatalf("history %v: %d tick labels", c.history, len(ticks))
		}
		for _, m := range ticks {
			if !regexp.MustCompile(`^-?[0-9]+$`).MatchString(m[1]) {
				t.Errorf("history %v: tick %q is not a whole number", c.history, m[1])
			}
		}
		if !strings.Contains(svg, `text-anchor="middle">`+c.first+`</text>`) {
			t.Errorf("history %v: no tick at %s", c.history, c.first)
		}
	}
}
