// Package store is the standalone server's durable state: an embedded
// SQLite database (the pure-Go modernc.org/sqlite driver) in WAL mode.
//
// Durability model. Every change goes through one writer goroutine that
// gathers whatever changes are waiting into one transaction (group
// commit), commits it with synchronous=FULL (the WAL is fsynced at every
// commit), and only then answers each caller. So a caller that got nil
// back (a job the API acknowledged, a ledger entry) is on disk and
// survives kill -9 and power loss alike; fsyncs are shared between
// concurrent callers instead of weakened. Each change runs under its own
// savepoint, so one refused change (an idempotency conflict) does not undo
// the others of its batch.
//
// The events and ledger tables are append-only: triggers refuse UPDATE and
// DELETE on them.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// FileName is the database's name inside the data directory.
const FileName = "partita.db"

// Store is an open database.
type Store struct {
	path   string
	w      *sql.DB // one connection: the writer's
	r      *sql.DB // readers; WAL lets them run beside the writer
	ck     *sql.DB // checkpoints, off the writer's path
	ops    chan *op
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
	ckDone chan struct{}

	stmts map[string]*sql.Stmt // the writer's prepared statements, fixed at Open
}

// Statements the writer runs for every submission and world batch. They
// are prepared once, at Open: SQLite spends more parsing a small INSERT
// than running it. (They cannot be prepared later: the writer's one
// connection is then inside a transaction.)
const (
	qSelectIdem   = `SELECT id, idem_hash FROM jobs WHERE team = ? AND idem_key = ?`
	qInsertJob    = `INSERT INTO jobs (id, team, project, user, name, class, state, reason, spec, request, idem_key, idem_hash, submitted_at, started_at, finished_at, attempts, runtime) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qInsertEvent  = `INSERT INTO events (job, at, state, reason) VALUES (?, ?, ?, ?)`
	qUpdateJob    = `UPDATE jobs SET class = ?, state = ?, reason = ?, started_at = ?, finished_at = ?, attempts = ?, runtime = ? WHERE id = ?`
	qInsertLedger = `INSERT INTO ledger (hold, kind, at, job, task, team, project, user, class, node, gpu, model, tier, slice, share) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qCloseHolds   = `INSERT INTO ledger (hold, kind, at, job, task, team, project, user, class, node, gpu, model, tier, slice, share)
		SELECT hold, 'end', max(?, at), job, task, team, project, user, class, node, gpu, model, tier, slice, share
		FROM ledger b WHERE b.job = ? AND b.kind = 'begin'
		AND NOT EXISTS (SELECT 1 FROM ledger e WHERE e.hold = b.hold AND e.kind = 'end') ORDER BY b.seq`
)

func (s *Store) prepare() error {
	for _, q := range []string{qSelectIdem, qInsertJob, qInsertEvent, qUpdateJob, qInsertLedger, qCloseHolds} {
		st, err := s.w.Prepare(q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		s.stmts[q] = st
	}
	return nil
}

// stmt is the prepared statement of query, for use in tx.
func (s *Store) stmt(tx *sql.Tx, query string) *sql.Stmt {
	return tx.Stmt(s.stmts[query])
}

// ErrNotFound is returned for a missing row.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a change contradicts what is stored (an
// idempotency key reused with another body, a name already taken).
var ErrConflict = errors.New("conflict")

// Open opens (creating if need be) the database in dir and starts its
// writer. Close stops it.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	if err := migrate(w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	ck, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	ck.SetMaxOpenConns(1)
	s := &Store{path: path, w: w, r: r, ck: ck, ops: make(chan *op, 4096), quit: make(chan struct{}), done: make(chan struct{}), ckDone: make(chan struct{}), stmts: map[string]*sql.Stmt{}}
	if err := s.prepare(); err != nil {
		_ = errors.Join(w.Close(), r.Close(), ck.Close())
		return nil, err
	}
	go s.writer()
	go s.checkpointer()
	return s, nil
}

// checkpointer copies the WAL into the database file every second. The
// writer's automatic checkpoints are off: run inside a commit, they made
// every thousandth commit (and every caller waiting on it) slow. A
// passive checkpoint waits for no one and blocks no one.
func (s *Store) checkpointer() {
	defer close(s.ckDone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			_, _ = s.ck.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
			return
		case <-t.C:
			_, _ = s.ck.Exec("PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

// dsn sets the pragmas on every connection: WAL, synchronous=FULL (see
// the package comment), a busy timeout for readers meeting a checkpoint,
// and foreign keys.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "wal_autocheckpoint(0)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close waits for queued changes, then closes the database. Closing
// twice is harmless.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		close(s.quit)
		<-s.done
		<-s.ckDone
		err = errors.Join(s.r.Close(), s.w.Close(), s.ck.Close())
	})
	return err
}

// Pragma reads one pragma's value, for tests and /healthz.
func (s *Store) Pragma(ctx context.Context, name string) (string, error) {
	var v string
	err := s.w.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
	return v, err
}

const schema = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS teams (
  name TEXT PRIMARY KEY, guarantee_milli INTEGER NOT NULL, burst_milli INTEGER NOT NULL,
  weight REAL NOT NULL, classes TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS projects (
  team TEXT NOT NULL REFERENCES teams(name), name TEXT NOT NULL, created_at INTEGER NOT NULL,
  PRIMARY KEY (team, name));
CREATE TABLE IF NOT EXISTS users (
  name TEXT PRIMARY KEY, role TEXT NOT NULL, team TEXT REFERENCES teams(name), created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES users(name), hash BLOB NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, revoked_at INTEGER);
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
  team TEXT NOT NULL, project TEXT NOT NULL, user TEXT NOT NULL, name TEXT NOT NULL DEFAULT '',
  class TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',
  spec TEXT NOT NULL, request TEXT NOT NULL, idem_key TEXT, idem_hash TEXT,
  submitted_at INTEGER NOT NULL, started_at INTEGER NOT NULL DEFAULT 0, finished_at INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0, runtime TEXT NOT NULL DEFAULT '{}');
CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem ON jobs(team, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_team_seq ON jobs(team, seq);
CREATE INDEX IF NOT EXISTS jobs_state_seq ON jobs(state, seq);
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL, at INTEGER NOT NULL,
  state TEXT NOT NULL, reason TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_job ON events(job, seq);
CREATE TABLE IF NOT EXISTS ledger (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, hold TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('begin', 'end')), at INTEGER NOT NULL,
  job TEXT NOT NULL, task TEXT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL,
  user TEXT NOT NULL, class TEXT NOT NULL, node TEXT NOT NULL, gpu INTEGER NOT NULL,
  model TEXT NOT NULL, tier TEXT NOT NULL, slice TEXT NOT NULL, share INTEGER NOT NULL CHECK (share > 0),
  UNIQUE (hold, kind));
CREATE INDEX IF NOT EXISTS ledger_at ON ledger(kind, at);
CREATE INDEX IF NOT EXISTS ledger_job ON ledger(job, kind);
CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger
  BEGIN SELECT RAISE(ABORT, 'ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS ledger_no_delete BEFORE DELETE ON ledger
  BEGIN SELECT RAISE(ABORT, 'ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
  BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
  BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
`

// migrate creates the schema. There is one version so far; meta's
// schema_version says which a file has, for the migrations to come.
func migrate(db *sql.DB) error {
	if _, err := db.Exec(schema); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	_, err := db.Exec(`INSERT INTO meta(key, value) VALUES ('schema_version', '1') ON CONFLICT(key) DO NOTHING`)
	return err
}
