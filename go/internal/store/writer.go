package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// op is one change: run inside the batch's transaction, under its own
// savepoint.
type op struct {
	run  func(tx *sql.Tx) error
	done chan error
}

// maxBatch bounds one transaction, so that a flood of submissions still
// commits (and answers) every few milliseconds.
const maxBatch = 512

// ErrClosed is returned for changes made after Close.
var ErrClosed = errors.New("store is closed")

// Do runs fn in the writer's next transaction and waits until it is
// committed (nil) or refused. fn must only use tx and must not block.
func (s *Store) Do(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.Wait(ctx, s.Enqueue(fn))
}

// Enqueue queues fn and returns at once; the channel gets fn's outcome
// after the commit. Changes commit in the order they are enqueued, which
// lets a caller fix the order under its own lock and wait outside it.
func (s *Store) Enqueue(fn func(tx *sql.Tx) error) <-chan error {
	o := &op{run: fn, done: make(chan error, 1)}
	select {
	case <-s.quit:
		o.done <- ErrClosed
	case s.ops <- o:
	}
	return o.done
}

// Wait waits for an enqueued change. On ctx's end it stops waiting; the
// change may still commit.
func (s *Store) Wait(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) writer() {
	defer close(s.done)
	for {
		var first *op
		select {
		case first = <-s.ops:
		case <-s.quit:
			s.drain()
			return
		}
		s.commit(s.gather(first))
	}
}

// gather takes what else is waiting, up to maxBatch.
func (s *Store) gather(first *op) []*op {
	batch := []*op{first}
	for len(batch) < maxBatch {
		select {
		case o := <-s.ops:
			batch = append(batch, o)
		default:
			return batch
		}
	}
	return batch
}

// drain commits what was queued before Close.
func (s *Store) drain() {
	for {
		select {
		case o := <-s.ops:
			s.commit(s.gather(o))
		default:
			return
		}
	}
}

// commit runs a batch in one transaction and answers every op after the
// commit: an op's own error if it was refused, the commit's if that
// failed, nil otherwise.
func (s *Store) commit(batch []*op) {
	errs := make([]error, len(batch))
	err := s.runBatch(batch, errs)
	for i, o := range batch {
		if err != nil {
			errs[i] = err
		}
		o.done <- errs[i]
	}
}

// runBatch runs the batch's ops in one transaction. Most batches have no
// refused op, so the first try runs them bare; if one is refused, the
// transaction is rolled back and the batch run again with each op under
// a savepoint (SQLite's statement journal costs more than the ops
// themselves, so it is kept for the rare batch that needs it). Ops only
// touch their tx, so running one twice is safe.
func (s *Store) runBatch(batch []*op, errs []error) error {
	ok, err := s.tryBatch(batch, errs, false)
	if err != nil || ok {
		return err
	}
	_, err = s.tryBatch(batch, errs, true)
	return err
}

func (s *Store) tryBatch(batch []*op, errs []error, saved bool) (bool, error) {
	tx, err := s.w.Begin()
	if err != nil {
		return false, fmt.Errorf("store: begin: %w", err)
	}
	for i, o := range batch {
		if saved {
			errs[i] = runSaved(tx, o.run)
			continue
		}
		if errs[i] = runBare(tx, o.run); errs[i] != nil {
			_ = tx.Rollback()
			return false, nil
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("store: commit: %w", err)
	}
	return true, nil
}

func runBare(tx *sql.Tx, fn func(*sql.Tx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: change panicked: %v", r)
		}
	}()
	return fn(tx)
}

// runSaved runs fn under a savepoint, rolling back only fn's changes when
// it fails.
func runSaved(tx *sql.Tx, fn func(*sql.Tx) error) (err error) {
	if _, err := tx.Exec("SAVEPOINT op"); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: change panicked: %v", r)
		}
		if err != nil {
			_, _ = tx.Exec("ROLLBACK TO op")
		}
		_, _ = tx.Exec("RELEASE op")
	}()
	return fn(tx)
}
