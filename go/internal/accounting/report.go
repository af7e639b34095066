package accounting

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/store"
)

// GroupKeys are the fields a report may group by.
var GroupKeys = []string{"team", "project", "user", "model", "tier", "class"}

// ParseGroupBy reads a comma-separated list of GroupKeys; empty means
// team.
func ParseGroupBy(s string) ([]string, error) {
	if s == "" {
		return []string{"team"}, nil
	}
	var out []string
	seen := map[string]bool{}
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if !contains(GroupKeys, k) {
			return nil, fmt.Errorf("group_by: %q is not one of %s", k, strings.Join(GroupKeys, ", "))
		}
		if seen[k] {
			return nil, fmt.Errorf("group_by: %q is given twice", k)
		}
		seen[k] = true
		out = append(out, k)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// msPerHour and the rounding below: a hold of share s (1/7000 GPU) for d
// ms is s·d / (7000 · 3.6e6) GPU-hours = s·d / 25200 micro GPU-hours.
const microHourDivisor = ShareUnit * 3_600_000 / 1_000_000

// Usage is what one hold contributes to [from, to): micro GPU-hours and
// micro currency units, each rounded half up. An open hold counts until
// now.
func Usage(h store.Hold, from, to, now time.Duration, p *Prices) (microGPUHours, costMicros int64) {
	end := now
	if !h.Open {
		end = h.End
	}
	start, stop := max(h.At, from), min(end, to)
	if stop <= start {
		return 0, 0
	}
	ms := int64((stop - start) / time.Millisecond)
	microGPUHours = (h.Share*ms + microHourDivisor/2) / microHourDivisor
	costMicros = (microGPUHours*p.PerHour(h.Model, h.Tier) + 500_000) / 1_000_000
	return microGPUHours, costMicros
}

// Build sums holds into a report over [from, to) grouped by groupBy. The
// caller fills From and To (wall-clock renderings of cluster time).
func Build(holds []store.Hold, from, to, now time.Duration, groupBy []string, p *Prices) api.Report {
	rows := map[string]*api.ReportRow{}
	var total api.ReportRow
	for _, h := range holds {
		gh, cost := Usage(h, from, to, now, p)
		key, row := groupRow(h.LedgerEntry, groupBy)
		r, ok := rows[key]
		if !ok {
			r = &row
			rows[key] = r
		}
		r.MicroGPUHours += gh
		r.CostMicros += cost
		r.Holds++
		total.MicroGPUHours += gh
		total.CostMicros += cost
		total.Holds++
	}
	rep := api.Report{GroupBy: groupBy, Currency: p.Currency, Prices: p.Source, Rows: []api.ReportRow{}}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, finish(*r))
	}
	sort.Slice(rep.Rows, func(i, j int) bool { return rowKey(rep.Rows[i]) < rowKey(rep.Rows[j]) })
	rep.Total = finish(total)
	return rep
}

func groupRow(e store.LedgerEntry, groupBy []string) (string, api.ReportRow) {
	var r api.ReportRow
	for _, k := range groupBy {
		switch k {
		case "team":
			r.Team = e.Team
		case "project":
			r.Project = e.Project
		case "user":
			r.User = e.User
		case "model":
			r.Model = e.Model
		case "tier":
			r.Tier = e.Tier
		case "class":
			r.Class = e.Class
		}
	}
	return rowKey(r), r
}

func rowKey(r api.ReportRow) string {
	return strings.Join([]string{r.Team, r.Project, r.User, r.Model, r.Tier, r.Class}, "\x00")
}

func finish(r api.ReportRow) api.ReportRow {
	r.GPUHours = Micros(r.MicroGPUHours)
	r.Cost = Micros(r.CostMicros)
	return r
}

// Micros writes an integer count of millionths as an exact decimal.
func Micros(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%06d", sign, v/1_000_000, v%1_000_000)
}

// WriteCSV writes a report as CSV: a header, one line per row, and a last
// line with the total (its key columns say "TOTAL").
func WriteCSV(w io.Writer, r api.Report) error {
	cw := csv.NewWriter(w)
	header := append(append([]string{}, r.GroupBy...), "gpu_hours", "cost_"+strings.ToLower(r.Currency), "micro_gpu_hours", "cost_micros", "holds")
	if err := cw.Write(header); err != nil {
		return err
	}
	line := func(row api.ReportRow, total bool) []string {
		var out []string
		for _, k := range r.GroupBy {
			v := map[string]string{"team": row.Team, "project": row.Project, "user": row.User, "model": row.Model, "tier": row.Tier, "class": row.Class}[k]
			if total {
				v = "TOTAL"
			}
			out = append(out, v)
		}
		return append(out, row.GPUHours, row.Cost, strconv.FormatInt(row.MicroGPUHours, 10), strconv.FormatInt(row.CostMicros, 10), strconv.Itoa(row.Holds))
	}
	for _, row := range r.Rows {
		if err := cw.Write(line(row, false)); err != nil {
			return err
		}
	}
	if err := cw.Write(line(r.Total, true)); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}
