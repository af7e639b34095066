package server

import (
	"bytes"
	"errors"
	"testing"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/store"
	"partita.dev/partita/internal/workload"
)

// checkRefusal fails unless err is a 4xx naming what is wrong.
func checkRefusal(t *testing.T, err error) {
	var he *httpError
	if !errors.As(err, &he) || he.status < 400 || he.status > 499 || he.msg == "" {
		t.Fatalf("refusal %v is not a 4xx with a message", err)
	}
}

// FuzzSubmitRequest: any body is either refused with a 4xx or becomes a
// job that validates against the cluster and fits its team's burst.
func FuzzSubmitRequest(f *testing.F) {
	for _, seed := range []string{
		`{"gpu":{"count":1},"duration":"1h"}`,
		`{"replicas":3,"gpu":{"profile":"llm-7b-bf16"},"cpu":"500m","memory":"8Gi"}`,
		`{"tasks":2,"gang":2,"gpu":{"mig":"3g.40gb","models":["H100-80GB"]},"checkpoint_every":"10m"}`,
		`{"gpu":{"memory":"20Gi","compute":0.25},"class":"production","project":"chat"}`,
		`{"gpu":{"milli":250},"idempotency_key":"k"}`,
		`{"team":"research","gpu":{"count":99}}`, `[]`, `{"gpu":{"count":1e30}}`, `{"cpu":"1e309"}`,
	} {
		f.Add([]byte(seed))
	}
	e := newEnv(f, 60)
	who := store.Principal{User: "member-s", Role: api.RoleMember, Team: "search"}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req api.SubmitRequest
		if err := decodeJSON(bytes.NewReader(body), &req); err != nil {
			checkRefusal(t, err)
			return
		}
		rec, err := e.srv.buildJob(who, req)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		rec.ID = "job-fuzz"
		nameTasks(rec)
		j := workload.Job{ID: rec.ID, Team: rec.Team, Tasks: rec.Spec.Tasks, GangSize: rec.Spec.Gang}
		if err := j.Validate(e.world.Capacity()); err != nil {
			t.Fatalf("accepted %s but the job is invalid: %v", body, err)
		}
		if team, _ := e.srv.team(rec.Team); j.GPUMilli() > team.BurstMilli || rec.Team != "search" {
			t.Fatalf("accepted %s beyond the team's burst or for another team", body)
		}
	})
}

// FuzzTeamRequest: a team request is refused with a 4xx or gives a team
// whose burst is at least its guarantee, within the cluster.
func FuzzTeamRequest(f *testing.F) {
	for _, seed := range []string{`{"name":"x","guaranteed_gpus":2,"burst_gpus":4,"weight":2,"classes":["batch"]}`, `{"guaranteed_gpus":-1}`, `{"classes":[]}`, `{"weight":0}`} {
		f.Add([]byte(seed))
	}
	e := newEnv(f, 60)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req api.TeamRequest
		if err := decodeJSON(bytes.NewReader(body), &req); err != nil {
			checkRefusal(t, err)
			return
		}
		tm := store.Team{Name: "fuzz", Weight: 1, Classes: []string{"batch"}}
		if err := e.srv.applyTeam(&tm, req); err != nil {
			checkRefusal(t, err)
			return
		}
		if tm.BurstMilli < tm.GuaranteeMilli || tm.BurstMilli > int64(e.world.GPUs())*1000 || tm.Weight <= 0 || len(tm.Classes) == 0 {
			t.Fatalf("accepted %s as %+v", body, tm)
		}
	})
}

// FuzzQuantities: CPU and memory quantities parse to positive whole
// amounts or are refused, never panic.
func FuzzQuantities(f *testing.F) {
	for _, s := range []string{"4", "0.5", "500m", "32Gi", "1.5Ti", "512Mi", "1e3", "-1", "NaN", "0.0001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := parseCPU(s); err == nil && v <= 0 {
			t.Fatalf("cpu %q parsed to %d", s, v)
		} else if err != nil {
			checkRefusal(t, err)
		}
		if v, err := parseMemory("memory", s); err == nil && v <= 0 {
			t.Fatalf("memory %q parsed to %d", s, v)
		} else if err != nil {
			checkRefusal(t, err)
		}
	})
}
