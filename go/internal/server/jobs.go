package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/store"
	"partita.dev/partita/internal/workload"
)

// submit: decode, check, store (group-committed: on disk before the
// answer), then hand to the world. A replay of an idempotency key gets the
// stored job with 200 and Idempotent-Replayed: true.
func (s *Server) submit(c *call) error {
	var req api.SubmitRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	if h := c.r.Header.Get("Idempotency-Key"); h != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != h {
			return badRequest("idempotency_key", "idempotency_key: %q differs from the Idempotency-Key header %q", req.IdempotencyKey, h)
		}
		req.IdempotencyKey = h
	}
	rec, err := s.buildJob(c.who, req)
	if err != nil {
		return err
	}
	if rec.ID, err = newID("job-", 8); err != nil {
		return err
	}
	nameTasks(rec)
	s.world.Prepare(rec)
	events := []store.Event{
		{Job: rec.ID, At: rec.SubmittedAt, State: "submitted", Reason: "by " + c.who.User},
		{Job: rec.ID, At: rec.SubmittedAt, State: api.StateQueued, Reason: "in team " + rec.Team + "'s queue"},
	}
	stored, replayed, err := s.store.Submit(c.r.Context(), rec, events)
	if err != nil {
		return err
	}
	if replayed {
		c.w.Header().Set("Idempotent-Replayed", "true")
		cur, _, err := s.current(c, stored.ID)
		if err != nil {
			return err
		}
		return c.json(http.StatusOK, s.jobView(cur))
	}
	// The view is taken first: from Add on, the record is the world's.
	view := s.jobView(stored)
	if err := s.world.Add(stored); err != nil {
		return err
	}
	s.metrics.submitted(rec.Team)
	c.w.Header().Set("Location", api.Prefix+"/jobs/"+rec.ID)
	return c.json(http.StatusCreated, view)
}

// visibleJob loads a job the caller may see; any other is not found.
func (s *Server) visibleJob(c *call) (*store.Job, *api.QueueSlot, error) {
	id := c.r.PathValue("id")
	j, slot, err := s.current(c, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && !c.sees(j.Team) {
		return nil, nil, notFound("job", id)
	}
	return j, slot, err
}

func (s *Server) getJob(c *call) error {
	j, slot, err := s.visibleJob(c)
	if err != nil {
		return err
	}
	evs, err := s.store.Events(c.r.Context(), j.ID)
	if err != nil {
		return err
	}
	v := s.jobView(j)
	v.Queue = slot
	v.Events = eventViews(s, evs)
	return c.json(http.StatusOK, v)
}

func (s *Server) listJobs(c *call) error {
	q := c.r.URL.Query()
	team, err := c.scopeTeam(q.Get("team"))
	if err != nil {
		return err
	}
	f := store.JobFilter{Team: team, Project: q.Get("project"), User: q.Get("user"), Class: q.Get("class")}
	if v := q.Get("state"); v != "" {
		for _, st := range strings.Split(v, ",") {
			if !contains(api.States(), st) {
				return badRequest("state", "state: %q is not one of %s", st, strings.Join(api.States(), ", "))
			}
			f.States = append(f.States, st)
		}
	}
	if f.Class != "" {
		if _, err := workload.ParseClass(f.Class); err != nil {
			return badRequest("class", "class: %v", err)
		}
	}
	if f.Limit, err = c.queryInt("limit", 100, 1, 1000); err != nil {
		return err
	}
	after, err := c.queryInt("after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	f.Before = int64(after)
	jobs, err := s.store.Jobs(c.r.Context(), f)
	if err != nil {
		return err
	}
	out := api.JobList{Jobs: make([]api.Job, 0, len(jobs))}
	for _, j := range jobs {
		if !api.Terminal(j.State) {
			if cur, ok := s.world.Record(j.ID); ok {
				j = cur
			}
		}
		v := s.jobView(j)
		if j.State == api.StateQueued {
			if why := s.world.WaitReason(j.ID); why != "" {
				v.Reason = why
			}
		}
		out.Jobs = append(out.Jobs, v)
	}
	if len(jobs) == f.Limit {
		out.Next = strconv.FormatInt(jobs[len(jobs)-1].Seq, 10)
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) cancelJob(c *call) error {
	j, _, err := s.visibleJob(c)
	if err != nil {
		return err
	}
	if c.who.Role == api.RoleMember && j.User != c.who.User {
		return errorf(http.StatusForbidden, "", "job %s: a member may cancel only their own jobs (it is %s's)", j.ID, j.User)
	}
	if api.Terminal(j.State) {
		return errorf(http.StatusConflict, "", "job %s is already %s", j.ID, j.State)
	}
	reason := "cancelled by " + c.who.User
	found, err := s.world.Cancel(c.r.Context(), j.ID, reason)
	if err != nil {
		return err
	}
	if !found {
		// Stored but not taken up by the world yet, or finished meanwhile.
		state, cancelled, err := s.store.CancelQueued(c.r.Context(), j.ID, s.world.Now(), reason)
		if err != nil {
			return err
		}
		if !cancelled {
			s.world.Forget(j.ID)
			return errorf(http.StatusConflict, "", "job %s is already %s", j.ID, state)
		}
	}
	cur, err := s.store.Job(c.r.Context(), j.ID)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, s.jobView(cur))
}

// requeueJob puts a job that holds resources back in its team's queue at
// once; a queued job is answered as it is.
func (s *Server) requeueJob(c *call) error {
	j, _, err := s.visibleJob(c)
	if err != nil {
		return err
	}
	if api.Terminal(j.State) {
		return errorf(http.StatusConflict, "", "job %s is already %s; submit it again instead", j.ID, j.State)
	}
	found, err := s.world.Requeue(c.r.Context(), j.ID, c.who.User)
	if err != nil {
		return err
	}
	if !found {
		return errorf(http.StatusConflict, "", "job %s is being taken up or has just finished; retry", j.ID)
	}
	cur, slot, err := s.current(c, j.ID)
	if err != nil {
		return err
	}
	v := s.jobView(cur)
	v.Queue = slot
	return c.json(http.StatusOK, v)
}

func (s *Server) patchJob(c *call) error {
	j, _, err := s.visibleJob(c)
	if err != nil {
		return err
	}
	var p api.JobPatch
	if err := c.decode(&p); err != nil {
		return err
	}
	if p.Class == "" {
		return badRequest("class", "class: required")
	}
	team, ok := s.team(j.Team)
	if !ok {
		return notFound("team", j.Team)
	}
	class, err := teamClass(team, p.Class, "class")
	if err != nil {
		return err
	}
	if api.Terminal(j.State) {
		return errorf(http.StatusConflict, "", "job %s is already %s", j.ID, j.State)
	}
	found, err := s.world.SetClass(c.r.Context(), j.ID, class, c.who.User)
	if err != nil {
		return err
	}
	if !found {
		return errorf(http.StatusConflict, "", "job %s is being taken up or has just finished; retry", j.ID)
	}
	cur, _, err := s.current(c, j.ID)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, s.jobView(cur))
}

func (s *Server) queue(c *call) error {
	team, err := c.scopeTeam(c.r.URL.Query().Get("team"))
	if err != nil {
		return err
	}
	if team != "" {
		if _, ok := s.team(team); !ok {
			return notFound("team", team)
		}
	}
	return c.json(http.StatusOK, s.world.Queue(team))
}

func (s *Server) cluster(c *call) error {
	team := c.who.Team
	if c.who.Role == api.RoleAdmin {
		team = ""
	}
	return c.json(http.StatusOK, s.world.Cluster(team))
}

func (s *Server) healthz(c *call) error {
	if _, err := s.store.Pragma(c.r.Context(), "journal_mode"); err != nil {
		return errorf(http.StatusServiceUnavailable, "", "store: %v", err)
	}
	return c.json(http.StatusOK, api.Health{Status: "ok", World: "virtual", Clock: s.world.Clock()})
}

func whoami(c *call) error {
	return c.json(http.StatusOK, api.Whoami{User: c.who.User, Role: c.who.Role, Team: c.who.Team, TokenID: c.who.TokenID})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
