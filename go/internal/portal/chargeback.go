package portal

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/svgchart"
)

// chargebackData is a report over a period, as a table and a chart.
type chargebackData struct {
	Report   api.Report
	From, To string // datetime-local values, UTC
	GroupBy  []string
	Team     string // an admin's filter
	Teams    []string
	Admin    bool
	Chart    template.HTML
	CSV      string // the download link, for exactly this report
	Presets  []preset
	Error    string
}

// GroupOptions are the fields a report may be grouped by.
func (chargebackData) GroupOptions() []string { return groupings }

type preset struct{ Name, Href string }

var groupings = []string{"team", "project", "user", "model", "tier", "class"}

const localTime = "2006-01-02T15:04:05"

// period is parsePeriod at the cluster's clock.
func (p *Portal) period(q url.Values) (from, to time.Time, err error) {
	return parsePeriod(p.cfg.World.Clock().Now, q)
}

// parsePeriod reads from and to (RFC 3339, or a datetime-local value in
// UTC) to whole seconds; to defaults to now and from to 7 days before
// to. Both come back explicit and in UTC, so that the CSV link gives
// exactly this report. An error names the field.
func parsePeriod(now time.Time, q url.Values) (from, to time.Time, err error) {
	to = now.UTC().Truncate(time.Second)
	if v := q.Get("to"); v != "" {
		if to, err = parseTime("to", v); err != nil {
			return from, to, err
		}
	}
	from = to.Add(-7 * 24 * time.Hour)
	if earliest := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC); from.Before(earliest) {
		from = earliest // which parseTime reads back
	}
	if v := q.Get("from"); v != "" {
		if from, err = parseTime("from", v); err != nil {
			return from, to, err
		}
	}
	return from, to, nil
}

// parseTime reads one end of a period. Years outside 1 to 9999 (which an
// offset can reach from 0000 or 9999) are refused: RFC 3339 cannot write
// them back.
func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t, err = time.Parse(localTime, s)
	}
	if err != nil {
		t, err = time.Parse("2006-01-02T15:04", s)
	}
	if t = t.UTC().Truncate(time.Second); err != nil || t.Year() < 1 || t.Year() > 9999 {
		return time.Time{}, fmt.Errorf("%s: %q is not a time such as 2026-03-01T00:00:00 (UTC, cluster time)", field, truncate(s, 40))
	}
	return t, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func reportQuery(from, to time.Time, groupBy []string, team string) url.Values {
	v := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}, "group_by": {strings.Join(groupBy, ",")}}
	if team != "" {
		v.Set("team", team)
	}
	return v
}

func (p *Portal) chargeback(w http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	d := &chargebackData{Admin: s.who.Role == api.RoleAdmin, GroupBy: q["group_by"]}
	if len(d.GroupBy) == 1 && strings.Contains(d.GroupBy[0], ",") {
		d.GroupBy = strings.Split(d.GroupBy[0], ",")
	}
	if len(d.GroupBy) == 0 {
		d.GroupBy = []string{"team", "project"}
	}
	if d.Admin {
		d.Team = q.Get("team")
		var teams []api.Team
		if err := p.as(r, s, http.MethodGet, api.Prefix+"/teams", nil, &teams); err != nil {
			return err
		}
		for _, t := range teams {
			d.Teams = append(d.Teams, t.Name)
		}
	}
	from, to, err := p.period(q)
	now := p.cfg.World.Clock().Now.UTC().Truncate(time.Second)
	for _, pr := range []struct {
		name string
		d    time.Duration
	}{{"last 24 hours", 24 * time.Hour}, {"last 7 days", 7 * 24 * time.Hour}, {"last 30 days", 30 * 24 * time.Hour}} {
		d.Presets = append(d.Presets, preset{Name: pr.name, Href: "/chargeback?" + reportQuery(now.Add(-pr.d), now, d.GroupBy, d.Team).Encode()})
	}
	d.From, d.To = from.Format(localTime), to.Format(localTime)
	if err != nil {
		d.Error = err.Error()
		p.render(w, http.StatusBadRequest, "chargeback", p.view(s, "chargeback", "Chargeback", d))
		return nil
	}
	rq := reportQuery(from, to, d.GroupBy, d.Team)
	if err := p.as(r, s, http.MethodGet, api.Prefix+"/reports/chargeback?"+rq.Encode(), nil, &d.Report); err != nil {
		ae, ok := err.(*apiError)
		if !ok || ae.Status != http.StatusBadRequest {
			return err
		}
		d.Error = ae.Msg
		p.render(w, http.StatusBadRequest, "chargeback", p.view(s, "chargeback", "Chargeback", d))
		return nil
	}
	d.CSV = "/chargeback.csv?" + rq.Encode()
	d.Chart = chargebackChart(d.Report)
	p.render(w, http.StatusOK, "chargeback", p.view(s, "chargeback", "Chargeback", d))
	return nil
}

// rowLabel names a report row by its grouping fields.
func rowLabel(row api.ReportRow, groupBy []string) string {
	var parts []string
	for _, g := range groupBy {
		v := map[string]string{"team": row.Team, "project": row.Project, "user": row.User, "model": row.Model, "tier": row.Tier, "class": row.Class}[g]
		parts = append(parts, v)
	}
	return strings.Join(parts, " / ")
}

func chargebackChart(rep api.Report) template.HTML {
	// 620 wide: drawn at about its own size in half of a laptop's screen,
	// so that its 12 px labels stay readable.
	c := svgchart.BarChart{Title: "Cost (" + rep.Currency + ") and GPU-hours", Width: 620}
	for _, row := range rep.Rows {
		c.Bars = append(c.Bars, svgchart.Bar{Label: rowLabel(row, rep.GroupBy), Value: float64(row.CostMicros) / 1e6,
			Note: row.Cost + " " + rep.Currency + " · " + row.GPUHours + " GPU-h"})
	}
	if len(c.Bars) == 0 {
		return ""
	}
	var b bytes.Buffer
	_ = c.Write(&b)
	return template.HTML(b.String()) // svgchart escapes every text it writes
}

// chargebackCSV downloads the API's CSV for the period, as the user.
func (p *Portal) chargebackCSV(w http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	from, to, err := p.period(q)
	if err != nil {
		return &apiError{Status: http.StatusBadRequest, Msg: err.Error()}
	}
	groupBy := strings.Split(q.Get("group_by"), ",")
	if q.Get("group_by") == "" {
		groupBy = []string{"team", "project"}
	}
	rq := reportQuery(from, to, groupBy, q.Get("team"))
	rq.Set("format", "csv")
	rec, err := p.raw(r.Context(), s.token, http.MethodGet, api.Prefix+"/reports/chargeback?"+rq.Encode(), nil)
	if err != nil {
		return err
	}
	name := "chargeback-" + from.Format("20060102T150405Z") + "-" + to.Format("20060102T150405Z") + ".csv"
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Content-Length", strconv.Itoa(rec.body.Len()))
	_, _ = w.Write(rec.body.Bytes())
	return nil
}
