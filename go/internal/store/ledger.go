package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// LedgerEntry is one row of the usage ledger: a hold of one GPU or MIG
// slice by one task begins or ends. Share is in 1/7000 GPU (accounting
// explains the unit).
type LedgerEntry struct {
	Seq     int64
	Hold    string // pairs a begin with its end; unique per kind
	Kind    string // "begin" or "end"
	At      time.Duration
	Job     string
	Task    string
	Team    string
	Project string
	User    string
	Class   string
	Node    string
	GPU     int
	Model   string
	Tier    string
	Slice   string
	Share   int64
}

// Ledger kinds.
const (
	Begin = "begin"
	End   = "end"
)

func (s *Store) insertLedger(tx *sql.Tx, entries []LedgerEntry) error {
	for _, e := range entries {
		_, err := s.stmt(tx, qInsertLedger).Exec(
			e.Hold, e.Kind, int64(e.At), e.Job, e.Task, e.Team, e.Project, e.User, e.Class, e.Node, e.GPU, e.Model, e.Tier, e.Slice, e.Share)
		if err != nil {
			return fmt.Errorf("ledger %s %s: %w", e.Kind, e.Hold, err)
		}
	}
	return nil
}

func (s *Store) closeHolds(tx *sql.Tx, c CloseHolds) error {
	_, err := s.stmt(tx, qCloseHolds).Exec(int64(c.At), c.Job)
	if err != nil {
		return fmt.Errorf("ledger: close holds of %s: %w", c.Job, err)
	}
	return nil
}

const ledgerColumns = `seq, hold, kind, at, job, task, team, project, user, class, node, gpu, model, tier, slice, share`

func scanLedger(r scanner) (LedgerEntry, error) {
	var e LedgerEntry
	var at int64
	err := r.Scan(&e.Seq, &e.Hold, &e.Kind, &at, &e.Job, &e.Task, &e.Team, &e.Project, &e.User, &e.Class, &e.Node, &e.GPU, &e.Model, &e.Tier, &e.Slice, &e.Share)
	e.At = time.Duration(at)
	return e, err
}

// LedgerFilter selects ledger entries: After a seq, of a team, up to
// Limit (default 1000, at most 10000).
type LedgerFilter struct {
	After int64
	Team  string
	Limit int
}

// Ledger lists entries in order.
func (s *Store) Ledger(ctx context.Context, f LedgerFilter) ([]LedgerEntry, error) {
	if f.Limit <= 0 || f.Limit > 10000 {
		f.Limit = min(max(f.Limit, 1000), 10000)
	}
	q := `SELECT ` + ledgerColumns + ` FROM ledger WHERE seq > ?`
	args := []any{f.After}
	if f.Team != "" {
		q += ` AND team = ?`
		args = append(args, f.Team)
	}
	q += fmt.Sprintf(` ORDER BY seq LIMIT %d`, f.Limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LedgerEntry
	for rows.Next() {
		e, err := scanLedger(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Hold is a begin entry and, when the hold has ended, the time it ended.
type Hold struct {
	LedgerEntry // the begin
	End         time.Duration
	Open        bool // no end yet: the hold goes on
}

// Holds lists the holds that overlap [from, to) in cluster time, of one
// team when team is not empty, in ledger order.
func (s *Store) Holds(ctx context.Context, from, to time.Duration, team string) ([]Hold, error) {
	q := `SELECT b.seq, b.hold, b.kind, b.at, b.job, b.task, b.team, b.project, b.user, b.class, b.node, b.gpu,
			b.model, b.tier, b.slice, b.share, e.at
		FROM ledger b LEFT JOIN ledger e ON e.hold = b.hold AND e.kind = 'end'
		WHERE b.kind = 'begin' AND b.at < ? AND (e.at IS NULL OR e.at > ?)`
	args := []any{int64(to), int64(from)}
	if team != "" {
		q += ` AND b.team = ?`
		args = append(args, team)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY b.seq`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Hold
	for rows.Next() {
		var h Hold
		var at int64
		var end sql.NullInt64
		e := &h.LedgerEntry
		if err := rows.Scan(&e.Seq, &e.Hold, &e.Kind, &at, &e.Job, &e.Task, &e.Team, &e.Project, &e.User, &e.Class,
			&e.Node, &e.GPU, &e.Model, &e.Tier, &e.Slice, &e.Share, &end); err != nil {
			return nil, err
		}
		e.At = time.Duration(at)
		h.End, h.Open = time.Duration(end.Int64), !end.Valid
		out = append(out, h)
	}
	return out, rows.Err()
}
