package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/workload"
)

// Job is a stored job. Times are cluster time: the duration since the
// cluster's epoch (Clock).
type Job struct {
	Seq         int64
	ID          string
	Team        string
	Project     string
	User        string
	Name        string
	Class       string
	State       string
	Reason      string
	Spec        Spec
	Request     []byte // the canonical submit request, as JSON
	IdemKey     string
	IdemHash    string
	SubmittedAt time.Duration
	StartedAt   time.Duration // the last admission; valid when Attempts > 0
	FinishedAt  time.Duration // valid in a terminal state
	Attempts    int
	Runtime     Runtime
}

// Spec is what the job asks for, fixed at submission.
type Spec struct {
	Tasks           []workload.Task `json:"tasks"`
	Gang            int             `json:"gang,omitempty"`
	Duration        time.Duration   `json:"duration,omitempty"` // 0: until cancelled
	FailAfter       time.Duration   `json:"fail_after,omitempty"`
	CheckpointEvery time.Duration   `json:"checkpoint_every,omitempty"`
}

// Runtime is what a world needs to recover a job that holds resources:
// where its tasks are and how far its clock has run.
type Runtime struct {
	Placed    []*cluster.Assignment `json:"placed,omitempty"`
	ReadyAt   []time.Duration       `json:"ready_at,omitempty"`
	RunSince  time.Duration         `json:"run_since"` // -1: its clock is not running
	Remaining time.Duration         `json:"remaining"` // run time left when RunSince was set
	Epoch     int                   `json:"epoch"`     // bumps when the job stops holding resources
	Grace     time.Duration         `json:"grace_until,omitempty"`
	QueuedAt  time.Duration         `json:"queued_at"`
}

// Event is one transition of a job.
type Event struct {
	Seq    int64
	Job    string
	At     time.Duration
	State  string
	Reason string
}

// JobUpdate is a job's new mutable state.
type JobUpdate struct {
	ID         string
	Class      string
	State      string
	Reason     string
	StartedAt  time.Duration
	FinishedAt time.Duration
	Attempts   int
	Runtime    Runtime
}

// Batch is what a world changes at once: jobs, their events, ledger
// entries and the clock, committed together. Ledger begins come first,
// then Close ends holds.
type Batch struct {
	Jobs   []JobUpdate
	Events []Event
	Ledger []LedgerEntry // begins
	Close  []CloseHolds
	Clock  *time.Duration
}

// CloseHolds ends every open hold of a job at At: each gets an end entry
// that copies its begin, so an end never disagrees with its begin.
type CloseHolds struct {
	Job string
	At  time.Duration
}

// Empty reports whether the batch changes nothing.
func (b *Batch) Empty() bool {
	return len(b.Jobs) == 0 && len(b.Events) == 0 && len(b.Ledger) == 0 && len(b.Close) == 0 && b.Clock == nil
}

// Submit stores a new job with its first events. With an idempotency key
// already used in the team it returns the stored job and replayed true
// when the hashes match, ErrConflict when they do not.
func (s *Store) Submit(ctx context.Context, j *Job, events []Event) (stored *Job, replayed bool, err error) {
	err = s.Do(ctx, func(tx *sql.Tx) error {
		if j.IdemKey != "" {
			var id, hash string
			err := s.stmt(tx, qSelectIdem).QueryRow(j.Team, j.IdemKey).Scan(&id, &hash)
			switch {
			case err == nil && hash == j.IdemHash:
				stored, err = getJob(tx, id)
				replayed = true
				return err
			case err == nil:
				return fmt.Errorf("idempotency_key %q: %w: used before with another request (job %s)", j.IdemKey, ErrConflict, id)
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		if err := s.insertJob(tx, j); err != nil {
			return err
		}
		stored = j
		return s.insertEvents(tx, events)
	})
	return stored, replayed, err
}

func (s *Store) insertJob(tx *sql.Tx, j *Job) error {
	spec, err := json.Marshal(j.Spec)
	if err != nil {
		return err
	}
	rt, err := json.Marshal(j.Runtime)
	if err != nil {
		return err
	}
	res, err := s.stmt(tx, qInsertJob).Exec(
		j.ID, j.Team, j.Project, j.User, j.Name, j.Class, j.State, j.Reason, spec, j.Request,
		nullable(j.IdemKey), nullable(j.IdemHash), int64(j.SubmittedAt), int64(j.StartedAt), int64(j.FinishedAt), j.Attempts, rt)
	if err != nil {
		return fmt.Errorf("insert job %s: %w", j.ID, err)
	}
	j.Seq, err = res.LastInsertId()
	return err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Store) insertEvents(tx *sql.Tx, events []Event) error {
	for _, e := range events {
		if _, err := s.stmt(tx, qInsertEvent).Exec(e.Job, int64(e.At), e.State, e.Reason); err != nil {
			return fmt.Errorf("event of %s: %w", e.Job, err)
		}
	}
	return nil
}

// ApplyFunc returns the change that applies a batch, for Enqueue.
func (s *Store) ApplyFunc(b *Batch) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		for _, u := range b.Jobs {
			if err := s.updateJob(tx, u); err != nil {
				return err
			}
		}
		if err := s.insertEvents(tx, b.Events); err != nil {
			return err
		}
		if err := s.insertLedger(tx, b.Ledger); err != nil {
			return err
		}
		for _, c := range b.Close {
			if err := s.closeHolds(tx, c); err != nil {
				return err
			}
		}
		if b.Clock != nil {
			return setMeta(tx, "clock", fmt.Sprint(int64(*b.Clock)))
		}
		return nil
	}
}

// Apply commits a batch and waits for it.
func (s *Store) Apply(ctx context.Context, b *Batch) error {
	return s.Do(ctx, s.ApplyFunc(b))
}

func (s *Store) updateJob(tx *sql.Tx, u JobUpdate) error {
	rt, err := json.Marshal(u.Runtime)
	if err != nil {
		return err
	}
	res, err := s.stmt(tx, qUpdateJob).Exec(u.Class, u.State, u.Reason, int64(u.StartedAt), int64(u.FinishedAt), u.Attempts, rt, u.ID)
	if err != nil {
		return fmt.Errorf("update job %s: %w", u.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("update job %s: %w", u.ID, ErrNotFound)
	}
	return nil
}

// CancelQueued cancels a job that is still queued in the store (one a
// world has not taken up yet). It returns the job's state after the call
// and whether this call cancelled it.
func (s *Store) CancelQueued(ctx context.Context, id string, at time.Duration, reason string) (string, bool, error) {
	var state string
	var cancelled bool
	err := s.Do(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRow(`SELECT state FROM jobs WHERE id = ?`, id).Scan(&state); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("job %s: %w", id, ErrNotFound)
			}
			return err
		}
		if state != "queued" {
			return nil
		}
		if _, err := tx.Exec(`UPDATE jobs SET state = 'cancelled', reason = ?, finished_at = ? WHERE id = ?`, reason, int64(at), id); err != nil {
			return err
		}
		state, cancelled = "cancelled", true
		return s.insertEvents(tx, []Event{{Job: id, At: at, State: "cancelled", Reason: reason}})
	})
	return state, cancelled, err
}

// queryer is what reads need: a *sql.DB or a *sql.Tx.
type queryer interface {
	QueryRow(query string, args ...any) *sql.Row
	Query(query string, args ...any) (*sql.Rows, error)
}

const jobColumns = `seq, id, team, project, user, name, class, state, reason, spec, request,
	coalesce(idem_key, ''), coalesce(idem_hash, ''), submitted_at, started_at, finished_at, attempts, runtime`

type scanner interface{ Scan(dest ...any) error }

func scanJob(r scanner) (*Job, error) {
	var j Job
	var spec, rt []byte
	var sub, start, fin int64
	if err := r.Scan(&j.Seq, &j.ID, &j.Team, &j.Project, &j.User, &j.Name, &j.Class, &j.State, &j.Reason, &spec, &j.Request,
		&j.IdemKey, &j.IdemHash, &sub, &start, &fin, &j.Attempts, &rt); err != nil {
		return nil, err
	}
	j.SubmittedAt, j.StartedAt, j.FinishedAt = time.Duration(sub), time.Duration(start), time.Duration(fin)
	if err := json.Unmarshal(spec, &j.Spec); err != nil {
		return nil, fmt.Errorf("job %s: spec: %w", j.ID, err)
	}
	if err := json.Unmarshal(rt, &j.Runtime); err != nil {
		return nil, fmt.Errorf("job %s: runtime: %w", j.ID, err)
	}
	return &j, nil
}

func getJob(q queryer, id string) (*Job, error) {
	j, err := scanJob(q.QueryRow(`SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return j, err
}

// Job reads one job.
func (s *Store) Job(ctx context.Context, id string) (*Job, error) {
	return getJob(dbq{ctx, s.r}, id)
}

// JobFilter selects jobs; empty fields select all.
type JobFilter struct {
	Team, Project, User, Class string
	States                     []string
	Before                     int64 // only jobs with Seq below; 0: no bound
	Limit                      int   // default 100, at most 1000
}

// Jobs lists jobs, newest first.
func (s *Store) Jobs(ctx context.Context, f JobFilter) ([]*Job, error) {
	var where []string
	var args []any
	add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
	if f.Team != "" {
		add("team = ?", f.Team)
	}
	if f.Project != "" {
		add("project = ?", f.Project)
	}
	if f.User != "" {
		add("user = ?", f.User)
	}
	if f.Class != "" {
		add("class = ?", f.Class)
	}
	if f.Before > 0 {
		add("seq < ?", f.Before)
	}
	if len(f.States) > 0 {
		where = append(where, "state IN (?"+strings.Repeat(", ?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	q := `SELECT ` + jobColumns + ` FROM jobs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = min(max(f.Limit, 100), 1000)
	}
	q += fmt.Sprintf(" ORDER BY seq DESC LIMIT %d", f.Limit)
	return queryJobs(dbq{ctx, s.r}, q, args...)
}

func queryJobs(q queryer, query string, args ...any) ([]*Job, error) {
	rows, err := q.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// ActiveJobs lists every job not finished, oldest first: what a world
// recovers on start.
func (s *Store) ActiveJobs(ctx context.Context) ([]*Job, error) {
	return queryJobs(dbq{ctx, s.r}, `SELECT `+jobColumns+` FROM jobs WHERE state NOT IN ('succeeded', 'failed', 'cancelled') ORDER BY seq`)
}

// Events lists a job's events in order.
func (s *Store) Events(ctx context.Context, job string) ([]Event, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT seq, job, at, state, reason FROM events WHERE job = ? ORDER BY seq`, job)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at int64
		if err := rows.Scan(&e.Seq, &e.Job, &at, &e.State, &e.Reason); err != nil {
			return nil, err
		}
		e.At = time.Duration(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// CountJobs counts jobs by state, for tests and metrics.
func (s *Store) CountJobs(ctx context.Context) (map[string]int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT state, count(*) FROM jobs GROUP BY state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

// dbq adapts a *sql.DB with a context to queryer.
type dbq struct {
	ctx context.Context
	db  *sql.DB
}

func (d dbq) QueryRow(q string, args ...any) *sql.Row { return d.db.QueryRowContext(d.ctx, q, args...) }
func (d dbq) Query(q string, args ...any) (*sql.Rows, error) {
	return d.db.QueryContext(d.ctx, q, args...)
}
