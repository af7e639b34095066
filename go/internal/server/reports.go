package server

import (
	"encoding/csv"
	"net/http"
	"strconv"
	"time"

	"partita.dev/partita/internal/accounting"
	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/store"
)

// wantsCSV reads format=csv|json (default json).
func (c *call) wantsCSV() (bool, error) {
	switch f := c.r.URL.Query().Get("format"); f {
	case "", "json":
		return false, nil
	case "csv":
		return true, nil
	default:
		return false, badRequest("format", "format: %q is not json or csv", f)
	}
}

// period reads from and to (RFC 3339) into cluster time; to defaults to
// now, from to 30 days (of cluster time) before to.
func (s *Server) period(c *call) (from, to time.Duration, err error) {
	q := c.r.URL.Query()
	to = s.world.Now()
	if v := q.Get("to"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return 0, 0, badRequest("to", "to: %q is not an RFC 3339 time such as 2026-03-01T00:00:00Z", v)
		}
		to = s.world.Since(t)
	}
	from = to - 30*24*time.Hour
	if v := q.Get("from"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return 0, 0, badRequest("from", "from: %q is not an RFC 3339 time such as 2026-03-01T00:00:00Z", v)
		}
		from = s.world.Since(t)
	}
	if to <= from {
		return 0, 0, badRequest("to", "to: must be after from")
	}
	return from, to, nil
}

// usageReport serves a report grouped by def unless group_by says
// otherwise.
func (s *Server) usageReport(def string) func(*call) error {
	return func(c *call) error {
		q := c.r.URL.Query()
		team, err := c.scopeTeam(q.Get("team"))
		if err != nil {
			return err
		}
		g := q.Get("group_by")
		if g == "" {
			g = def
		}
		groupBy, err := accounting.ParseGroupBy(g)
		if err != nil {
			return badRequest("group_by", "%v", err)
		}
		asCSV, err := c.wantsCSV()
		if err != nil {
			return err
		}
		from, to, err := s.period(c)
		if err != nil {
			return err
		}
		holds, err := s.store.Holds(c.r.Context(), from, to, team)
		if err != nil {
			return err
		}
		r := accounting.Build(holds, from, to, s.world.Now(), groupBy, s.prices)
		r.From, r.To = s.world.Time(from), s.world.Time(to)
		if asCSV {
			c.w.Header().Set("Content-Type", "text/csv; charset=utf-8")
			return accounting.WriteCSV(c.w, r)
		}
		return c.json(http.StatusOK, r)
	}
}

func (s *Server) ledger(c *call) error {
	q := c.r.URL.Query()
	team, err := c.scopeTeam(q.Get("team"))
	if err != nil {
		return err
	}
	after, err := c.queryInt("after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := c.queryInt("limit", 1000, 1, 10000)
	if err != nil {
		return err
	}
	asCSV, err := c.wantsCSV()
	if err != nil {
		return err
	}
	entries, err := s.store.Ledger(c.r.Context(), store.LedgerFilter{After: int64(after), Team: team, Limit: limit})
	if err != nil {
		return err
	}
	out := api.Ledger{Entries: make([]api.LedgerEntry, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, api.LedgerEntry{Seq: e.Seq, Hold: e.Hold, Kind: e.Kind, Time: s.world.Time(e.At), Job: e.Job, Task: e.Task,
			Team: e.Team, Project: e.Project, User: e.User, Class: e.Class, Node: e.Node, GPU: e.GPU, Model: e.Model, Tier: e.Tier, Slice: e.Slice, Share: e.Share})
	}
	if len(entries) == limit {
		out.Next = strconv.FormatInt(entries[len(entries)-1].Seq, 10)
	}
	if asCSV {
		return writeLedgerCSV(c.w, out.Entries)
	}
	return c.json(http.StatusOK, out)
}

func writeLedgerCSV(w http.ResponseWriter, entries []api.LedgerEntry) error {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"seq", "hold", "kind", "time", "job", "task", "team", "project", "user", "class", "node", "gpu", "model", "tier", "slice", "share"})
	for _, e := range entries {
		_ = cw.Write([]string{strconv.FormatInt(e.Seq, 10), e.Hold, e.Kind, e.Time.Format(time.RFC3339Nano), e.Job, e.Task, e.Team, e.Project, e.User, e.Class,
			e.Node, strconv.Itoa(e.GPU), e.Model, e.Tier, e.Slice, strconv.FormatInt(e.Share, 10)})
	}
	cw.Flush()
	return cw.Error()
}

func (s *Server) priceTable(c *call) error {
	return c.json(http.StatusOK, s.prices.Table())
}
