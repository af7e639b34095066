package accounting

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"testing"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/store"
)

func hold(team, project, model, tier string, share int64, at, end time.Duration, open bool) store.Hold {
	return store.Hold{
		LedgerEntry: store.LedgerEntry{Hold: team + project + strconv.Itoa(int(at)), Kind: store.Begin, At: at, Team: team, Project: project, Model: model, Tier: tier, Share: share, Class: "batch", User: "u"},
		End:         end, Open: open,
	}
}

func TestBuiltInPricesAreValid(t *testing.T) {
	p := DefaultPrices()
	if got := p.PerHour("H100-80GB", "on-demand"); got != 4_000_000 {
		t.Errorf("H100 on-demand = %d micros; want 4000000", got)
	}
	if got := p.PerHour("V100-32GB", "spot"); got != p.PerHour(Any, "spot") {
		t.Errorf("an unlisted model costs %d; want the any-model price %d", got, p.PerHour(Any, "spot"))
	}
	if _, err := FromTable(p.Table()); err != nil {
		t.Errorf("the table does not round-trip: %v", err)
	}
}

func TestFromTableNamesTheBadField(t *testing.T) {
	for _, c := range []struct {
		name string
		item api.PriceItem
		want string
	}{
		{"unknown tier", api.PriceItem{Model: "L4", Tier: "cheap", Price: 1}, "prices[0].tier"},
		{"negative price", api.PriceItem{Model: "L4", Tier: "spot", Price: -1}, "prices[0].price"},
		{"empty model", api.PriceItem{Tier: "spot", Price: 1}, "prices[0].model"},
	} {
		_, err := FromTable(api.PriceTable{Currency: "USD", Prices: []api.PriceItem{c.item}})
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("%s: err = %v; want it to name %s", c.name, err, c.want)
		}
	}
}

func TestUsageWeighsSlicesByComputeShareAndClipsToThePeriod(t *testing.T) {
	p := DefaultPrices()
	for _, c := range []struct {
		name             string
		h                store.Hold
		from, to, now    time.Duration
		wantGPUh, wantCo int64
	}{
		{"a whole reserved H100 for an hour", hold("a", "p", "H100-80GB", "reserved", 7000, 0, time.Hour, false), 0, 10 * time.Hour, 0, 1_000_000, 2_500_000},
		{"a 3g slice for an hour is 3/7 GPU-hour", hold("a", "p", "H100-80GB", "reserved", 3000, 0, time.Hour, false), 0, 10 * time.Hour, 0, 428_571, 1_071_428},
		{"clipped to the period", hold("a", "p", "H100-80GB", "reserved", 7000, 0, 4*time.Hour, false), time.Hour, 2 * time.Hour, 0, 1_000_000, 2_500_000},
		{"an open hold counts until now", hold("a", "p", "H100-80GB", "reserved", 7000, 0, 0, true), 0, 10 * time.Hour, 30 * time.Minute, 500_000, 1_250_000},
		{"outside the period", hold("a", "p", "H100-80GB", "reserved", 7000, 0, time.Hour, false), 2 * time.Hour, 3 * time.Hour, 0, 0, 0},
	} {
		gh, cost := Usage(c.h, c.from, c.to, c.now, p)
		if gh != c.wantGPUh || cost != c.wantCo {
			t.Errorf("%s: %d micro GPU-h, %d micros; want %d, %d", c.name, gh, cost, c.wantGPUh, c.wantCo)
		}
	}
}

// TestReportReconcilesExactly: for random holds and groupings, the rows
// add up to the total and the total to the holds, to the micro unit.
func TestReportReconcilesExactly(t *testing.T) {
	rng := random.New(1)
	p := DefaultPrices()
	teams, models, tiers := []string{"a", "b", "c"}, []string{"H100-80GB", "A100-80GB", "L4"}, []string{"reserved", "on-demand", "spot"}
	shares := []int64{1000, 2000, 3000, 4000, 7000, 1750}
	for trial := range 50 {
		var holds []store.Hold
		for range rng.Intn(200) {
			at := time.Duration(rng.Intn(int(48 * time.Hour)))
			h := hold(teams[rng.Intn(3)], strconv.Itoa(rng.Intn(4)), models[rng.Intn(3)], tiers[rng.Intn(3)], shares[rng.Intn(len(shares))], at, at+time.Duration(rng.Intn(int(24*time.Hour))), rng.Intn(5) == 0)
			holds = append(holds, h)
		}
		from := time.Duration(rng.Intn(int(24 * time.Hour)))
		to, now := from+time.Duration(rng.Intn(int(48*time.Hour))), 60*time.Hour
		groupBy := [][]string{{"team"}, {"team", "project"}, {"model", "tier"}, {"class"}}[trial%4]
		r := Build(holds, from, to, now, groupBy, p)
		var sumG, sumC, wantG, wantC int64
		for _, row := range r.Rows {
			sumG += row.MicroGPUHours
			sumC += row.CostMicros
		}
		for _, h := range holds {
			g, c := Usage(h, from, to, now, p)
			wantG += g
			wantC += c
		}
		if sumG != r.Total.MicroGPUHours || sumC != r.Total.CostMicros || wantG != sumG || wantC != sumC {
			t.Fatalf("trial %d: rows %d/%d, total %d/%d, holds %d/%d: must all agree", trial, sumG, sumC, r.Total.MicroGPUHours, r.Total.CostMicros, wantG, wantC)
		}
	}
}

func TestCSVEndsWithTheTotal(t *testing.T) {
	r := Build([]store.Hold{hold("a", "p", "L4", "spot", 7000, 0, time.Hour, false), hold("b", "p", "L4", "spot", 7000, 0, 2*time.Hour, false)}, 0, 10*time.Hour, 0, []string{"team"}, DefaultPrices())
	var buf bytes.Buffer
	if err := WriteCSV(&buf, r); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"team", "gpu_hours", "cost_usd", "micro_gpu_hours", "cost_micros", "holds"},
		{"a", "1.000000", "0.350000", "1000000", "350000", "1"},
		{"b", "2.000000", "0.700000", "2000000", "700000", "1"},
		{"TOTAL", "3.000000", "1.050000", "3000000", "1050000", "2"},
	}
	if len(recs) != len(want) {
		t.Fatalf("csv = %v", recs)
	}
	for i := range want {
		for j := range want[i] {
			if recs[i][j] != want[i][j] {
				t.Fatalf("csv line %d = %v; want %v", i, recs[i], want[i])
			}
		}
	}
}

func TestParseGroupByRefusesUnknownAndRepeatedKeys(t *testing.T) {
	if g, err := ParseGroupBy(""); err != nil || len(g) != 1 || g[0] != "team" {
		t.Errorf("default = %v, %v", g, err)
	}
	for _, bad := range []string{"colour", "team,team"} {
		if _, err := ParseGroupBy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
