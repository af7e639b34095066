package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"
)

func setMeta(tx *sql.Tx, key, value string) error {
	_, err := tx.Exec(`INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	return err
}

// Meta reads a meta value; ok is false when it is not set.
func (s *Store) Meta(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := s.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}

// SetMeta writes a meta value.
func (s *Store) SetMeta(ctx context.Context, key, value string) error {
	return s.Do(ctx, func(tx *sql.Tx) error { return setMeta(tx, key, value) })
}

// Clock is the cluster clock as stored: Epoch is the wall time of cluster
// time zero, Now the cluster time of the last change. Cluster time stands
// still while the server is down, so a restart resumes from Now.
type Clock struct {
	Epoch time.Time
	Now   time.Duration
}

// LoadClock reads the clock, starting it at wall time now on a new
// database. Now is at least the time of the last event and ledger entry,
// so time never runs backwards across a crash.
func (s *Store) LoadClock(ctx context.Context, now time.Time) (Clock, error) {
	var c Clock
	v, ok, err := s.Meta(ctx, "epoch")
	if err != nil {
		return c, err
	}
	if !ok {
		c.Epoch = now
		return c, s.SetMeta(ctx, "epoch", strconv.FormatInt(now.UnixNano(), 10))
	}
	ns, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return c, err
	}
	c.Epoch = time.Unix(0, ns).UTC()
	var last int64
	err = s.r.QueryRowContext(ctx, `SELECT max(
		coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'clock'), 0),
		coalesce((SELECT max(at) FROM events), 0),
		coalesce((SELECT max(at) FROM ledger), 0),
		coalesce((SELECT max(submitted_at) FROM jobs), 0))`).Scan(&last)
	c.Now = time.Duration(last)
	return c, err
}
