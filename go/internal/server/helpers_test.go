package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/accounting"
	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/standalone"
	"partita.dev/partita/internal/store"
)

// testCluster: two nodes of four H100s; two teams; research may not run
// production work.
const testCluster = `
name: test
duration: 1h
nodes:
  - group: h100
    count: 2
    gpu: H100-80GB
    gpus: 4
    mig: true
    cpu: 64
    memory: 512Gi
teams:
  - name: search
    guaranteed_gpus: 4
    burst_gpus: 8
  - name: research
    guaranteed_gpus: 2
    burst_gpus: 8
    classes: [batch, best-effort]
`

// env is a running server on a real SQLite file with one user per role.
type env struct {
	t      *testing.T
	srv    *Server
	http   *httptest.Server
	store  *store.Store
	world  *standalone.World
	tokens map[string]string // user -> secret
}

func newEnv(t testing.TB, speed float64) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse(strings.NewReader(testCluster), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	teams, _ := ScenarioTeams(sc)
	admin, err := Bootstrap(ctx, st, dir, teams, map[string][]string{"search": {"chat"}})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	w, err := standalone.New(ctx, st, standalone.Options{Scenario: sc, Speed: speed, Observer: m, MinCycleGap: 5 * time.Millisecond, Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, Config{Store: st, World: w, Prices: accounting.DefaultPrices()}, m)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	hs := httptest.NewServer(s.Handler())
	e := &env{srv: s, http: hs, store: st, world: w, tokens: map[string]string{"admin": admin}}
	if tt, ok := t.(*testing.T); ok {
		e.t = tt
	}
	t.Cleanup(func() { hs.Close(); cancel(); <-done; st.Close() })
	for _, u := range []store.User{
		{Name: "lead-s", Role: api.RoleLead, Team: "search"}, {Name: "member-s", Role: api.RoleMember, Team: "search"},
		{Name: "other-s", Role: api.RoleMember, Team: "search"}, {Name: "viewer-s", Role: api.RoleViewer, Team: "search"},
		{Name: "lead-r", Role: api.RoleLead, Team: "research"}, {Name: "member-r", Role: api.RoleMember, Team: "research"},
	} {
		if err := st.AddUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		_, secret, err := IssueToken(ctx, st, u.Name, "test")
		if err != nil {
			t.Fatal(err)
		}
		e.tokens[u.Name] = secret
	}
	return e
}

// call sends a request as user ("" for none) with a JSON body (a string
// is sent as it is) and returns the status and body.
func (e *env) call(user, method, path string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.http.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+e.tokens[user])
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// submit submits a job as user and returns it.
func (e *env) submit(user string, req api.SubmitRequest) api.Job {
	e.t.Helper()
	status, body := e.call(user, "POST", api.Prefix+"/jobs", req)
	if status != http.StatusCreated {
		e.t.Fatalf("submit as %s: %d %s", user, status, body)
	}
	var j api.Job
	if err := json.Unmarshal(body, &j); err != nil {
		e.t.Fatal(err)
	}
	return j
}

func (e *env) job(user, id string) api.Job {
	e.t.Helper()
	status, body := e.call(user, "GET", api.Prefix+"/jobs/"+id, nil)
	if status != http.StatusOK {
		e.t.Fatalf("get %s as %s: %d %s", id, user, status, body)
	}
	var j api.Job
	if err := json.Unmarshal(body, &j); err != nil {
		e.t.Fatal(err)
	}
	return j
}

// waitState polls a job until it reaches state or the deadline passes.
func (e *env) waitState(id, state string, within time.Duration) api.Job {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		j := e.job("admin", id)
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s is %s (%s) after %v; want %s", id, j.State, j.Reason, within, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func smallJob(team string) api.SubmitRequest {
	return api.SubmitRequest{Team: team, GPU: api.GPURequest{MIG: "1g.10gb"}, Duration: "1h"}
}
