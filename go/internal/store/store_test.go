package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"partita.dev/partita/internal/workload"
)

func open(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func newJob(id, team, key, hash string) *Job {
	return &Job{
		ID: id, Team: team, Project: "default", User: "u", Class: "batch", State: "queued",
		Spec:    Spec{Tasks: []workload.Task{{Name: id + "-0", GPU: workload.Demand{Kind: workload.WholeGPUs, Count: 1}}}, Duration: time.Hour},
		Request: []byte(`{}`), IdemKey: key, IdemHash: hash, SubmittedAt: time.Second,
		Runtime: Runtime{RunSince: -1},
	}
}

func TestOpenSetsWALAndFullSync(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1"} {
		got, err := s.Pragma(ctx, pragma)
		if err != nil || got != want {
			t.Errorf("PRAGMA %s = %q, %v; want %q", pragma, got, err, want)
		}
	}
}

func TestSubmitIsIdempotentPerTeamAndKey(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	first, replayed, err := s.Submit(ctx, newJob("j1", "a", "k", "h1"), nil)
	if err != nil || replayed || first.Seq == 0 {
		t.Fatalf("first submit: %v replayed=%v seq=%d", err, replayed, first.Seq)
	}
	again, replayed, err := s.Submit(ctx, newJob("j2", "a", "k", "h1"), nil)
	if err != nil || !replayed || again.ID != "j1" {
		t.Fatalf("same key, same body: got %v replayed=%v err=%v; want j1 replayed", again, replayed, err)
	}
	if _, _, err := s.Submit(ctx, newJob("j3", "a", "k", "h2"), nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("same key, other body: err = %v; want ErrConflict", err)
	}
	if _, replayed, err := s.Submit(ctx, newJob("j4", "b", "k", "h2"), nil); err != nil || replayed {
		t.Fatalf("same key in another team: err=%v replayed=%v; want a new job", err, replayed)
	}
	counts, _ := s.CountJobs(ctx)
	if counts["queued"] != 2 {
		t.Fatalf("stored %v; want 2 queued jobs", counts)
	}
}

func TestConcurrentSubmitsAreGroupCommittedAndAllStored(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := s.Submit(ctx, newJob(fmt.Sprintf("j%d", i), "a", "", ""), []Event{{Job: fmt.Sprintf("j%d", i), State: "queued"}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	counts, _ := s.CountJobs(ctx)
	if counts["queued"] != 200 {
		t.Fatalf("stored %v; want 200 queued", counts)
	}
}

func TestRefusedChangeDoesNotUndoItsBatch(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	bad := s.Enqueue(func(tx *sql.Tx) error { return errors.New("refused") })
	good := s.Enqueue(s.ApplyFunc(&Batch{Events: []Event{{Job: "x", State: "queued", Reason: "r"}}}))
	if err := s.Wait(ctx, bad); err == nil {
		t.Fatal("refused change reported nil")
	}
	if err := s.Wait(ctx, good); err != nil {
		t.Fatal(err)
	}
	ev, _ := s.Events(ctx, "x")
	if len(ev) != 1 {
		t.Fatalf("events = %v; want the good change's one", ev)
	}
}

func TestLedgerAndEventsAreAppendOnly(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	e := LedgerEntry{Hold: "h", Kind: Begin, Job: "j", Task: "t", Team: "a", Node: "n", Model: "H100-80GB", Tier: "reserved", Share: 7000}
	if err := s.Apply(ctx, &Batch{Ledger: []LedgerEntry{e}, Events: []Event{{Job: "j", State: "running"}}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE ledger SET share = 1`, `DELETE FROM ledger`, `UPDATE events SET reason = 'x'`, `DELETE FROM events`} {
		if err := s.Do(ctx, func(tx *sql.Tx) error { _, err := tx.Exec(q); return err }); err == nil {
			t.Errorf("%s: allowed; want refused", q)
		}
	}
	if err := s.Apply(ctx, &Batch{Ledger: []LedgerEntry{e}}); err == nil {
		t.Error("a second begin of one hold was stored")
	}
}

func TestReopenKeepsEverythingAndClockResumes(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := s.LoadClock(ctx, start)
	if err != nil || !c.Epoch.Equal(start) || c.Now != 0 {
		t.Fatalf("new clock = %+v, %v", c, err)
	}
	now := 90 * time.Minute
	if _, _, err := s.Submit(ctx, newJob("j1", "a", "", ""), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, &Batch{Clock: &now, Events: []Event{{Job: "j1", At: 2 * time.Hour, State: "running"}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err = s.LoadClock(ctx, start.Add(time.Hour))
	if err != nil || !c.Epoch.Equal(start) || c.Now != 2*time.Hour {
		t.Fatalf("reopened clock = %+v, %v; want epoch kept and now at the last event (2h)", c, err)
	}
	jobs, err := s.ActiveJobs(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].Spec.Tasks[0].GPU.Count != 1 || jobs[0].Runtime.RunSince != -1 {
		t.Fatalf("active jobs after reopen = %+v, %v", jobs, err)
	}
}

func TestAuthenticateRefusesRevokedTokens(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	if err := s.PutTeam(ctx, Team{Name: "a", Classes: []string{"batch"}, Weight: 1}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.AddUser(ctx, User{Name: "ann", Role: "member", Team: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddToken(ctx, Token{ID: "t1", User: "ann"}, "secret"); err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(ctx, "secret")
	if err != nil || p.User != "ann" || p.Team != "a" || p.Role != "member" {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	if _, err := s.Authenticate(ctx, "other"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("wrong secret: %v", err)
	}
	if err := s.RevokeToken(ctx, "t1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "secret"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoked token: %v", err)
	}
}

// TestBatchedSubmissionsKeepKeysApart: submissions written in one batch
// check their keys against each other too: one job per key, conflicts
// refused, the others stored.
func TestBatchedSubmissionsKeepKeysApart(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	type result struct {
		id       string
		replayed bool
		err      error
	}
	results := make([]result, 60)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key, hash := fmt.Sprintf("k%d", i%3), "h"
			if i%3 == 2 && i > 2 {
				hash = fmt.Sprintf("h%d", i) // a conflict with the first of its key
			}
			j, replayed, err := s.Submit(ctx, newJob(fmt.Sprintf("j%d", i), "a", key, hash), []Event{{Job: fmt.Sprintf("j%d", i), State: "queued"}})
			results[i] = result{replayed: replayed, err: err}
			if j != nil {
				results[i].id = j.ID
			}
		}()
	}
	wg.Wait()
	counts, _ := s.CountJobs(ctx)
	if counts["queued"] != 3 {
		t.Fatalf("stored %v; want one job per key", counts)
	}
	byKey := map[int]string{}
	for i, r := range results {
		if r.err != nil {
			if !errors.Is(r.err, ErrConflict) {
				t.Errorf("submission %d: %v", i, r.err)
			}
			continue
		}
		if prev, ok := byKey[i%3]; ok && prev != r.id {
			t.Errorf("key k%d gave jobs %s and %s", i%3, prev, r.id)
		}
		byKey[i%3] = r.id
	}
	jobs, _ := s.Jobs(ctx, JobFilter{})
	for _, j := range jobs {
		if got, err := s.Job(ctx, j.ID); err != nil || got.Seq != j.Seq {
			t.Errorf("job %s: seq %d, read back %+v %v", j.ID, j.Seq, got, err)
		}
	}
}
