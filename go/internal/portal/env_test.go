package portal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/accounting"
	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/portal"
	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/server"
	"partita.dev/partita/internal/standalone"
	"partita.dev/partita/internal/store"
)

// env is the real server, as `partita serve` assembles it: the demo
// cluster, a real SQLite file in a temporary directory, the API and the
// portal, with one user per role in team search and a lead of research.
type env struct {
	t      testing.TB
	url    string
	store  *store.Store
	world  *standalone.World
	tokens map[string]string // user -> secret
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse(bytes.NewReader(standalone.DemoYAML), "demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	teams, projects := server.ScenarioTeams(sc)
	admin, err := server.Bootstrap(ctx, st, dir, teams, projects)
	if err != nil {
		t.Fatal(err)
	}
	m := server.NewMetrics()
	w, err := standalone.New(ctx, st, standalone.Options{Scenario: sc, Speed: 60, Observer: m, MinCycleGap: 10 * time.Millisecond, Tick: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(ctx, server.Config{Store: st, World: w, Prices: accounting.DefaultPrices()}, m)
	if err != nil {
		t.Fatal(err)
	}
	p, err := portal.New(portal.Config{API: srv.Handler(), World: w, Store: st, SampleEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	go p.Run(ctx)
	hs := httptest.NewServer(p.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done; st.Close() })
	e := &env{t: t, url: hs.URL, store: st, world: w, tokens: map[string]string{"admin": admin}}
	for _, u := range []store.User{
		{Name: "lead-s", Role: api.RoleLead, Team: "search"}, {Name: "member-s", Role: api.RoleMember, Team: "search"},
		{Name: "viewer-s", Role: api.RoleViewer, Team: "search"}, {Name: "lead-r", Role: api.RoleLead, Team: "research"},
	} {
		if err := st.AddUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		_, secret, err := server.IssueToken(ctx, st, u.Name, "test")
		if err != nil {
			t.Fatal(err)
		}
		e.tokens[u.Name] = secret
	}
	return e
}

// api calls the API as user and returns the status and body.
func (e *env) api(user, method, path string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+e.tokens[user])
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (e *env) apiJSON(user, method, path string, body, out any) {
	e.t.Helper()
	status, data := e.api(user, method, path, body)
	if status >= 300 {
		e.t.Fatalf("%s %s as %s: %d %s", method, path, user, status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

func (e *env) submit(user string, req api.SubmitRequest) api.Job {
	e.t.Helper()
	var j api.Job
	e.apiJSON(user, "POST", api.Prefix+"/jobs", req, &j)
	return j
}

// waitFor polls the API until the job satisfies ok.
func (e *env) waitFor(id string, what string, ok func(api.Job) bool) api.Job {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var j api.Job
		e.apiJSON("admin", "GET", api.Prefix+"/jobs/"+id, nil, &j)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s is %s (%s); waited 30 s for it to be %s", id, j.State, j.Reason, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) waitRunning(id string) api.Job {
	e.t.Helper()
	return e.waitFor(id, "running", func(j api.Job) bool { return j.State == api.StateRunning })
}

// seed runs a mixed workload on the demo cluster: training gangs on whole
// GPUs first (so that they find whole nodes), then inference on MIG
// slices; team search ends up at its burst limit of 32 GPUs, with one more
// job of its own waiting for quota.
func (e *env) seed() (waiting api.Job) {
	e.t.Helper()
	var ids []string
	for _, r := range []api.SubmitRequest{
		{Team: "search", Project: "default", Name: "ranker-pretrain", Class: "batch", Tasks: 3, Gang: 3, GPU: api.GPURequest{Count: 8}, Duration: "10h", CheckpointEvery: "30m"},
		{Team: "research", Project: "pretrain", Name: "lm-13b", Class: "batch", Tasks: 2, Gang: 2, GPU: api.GPURequest{Count: 8}, Duration: "10h", CheckpointEvery: "30m"},
	} {
		ids = append(ids, e.submit("admin", r).ID)
	}
	for _, id := range ids {
		e.waitRunning(id)
	}
	ids = ids[:0]
	for _, r := range []api.SubmitRequest{
		{Team: "search", Project: "chat", Name: "chat-7b", Class: "production", Replicas: 3, GPU: api.GPURequest{Profile: "llm-7b-bf16"}, Duration: "10h", Image: "registry.example/vllm:0.6"},
		{Team: "search", Project: "embeddings", Name: "embed", Class: "production", Replicas: 4, GPU: api.GPURequest{Profile: "embed-335m"}, Duration: "10h"},
		{Team: "ads", Project: "creative", Name: "sdxl", Class: "production", Replicas: 2, GPU: api.GPURequest{Profile: "diffusion-sdxl"}, Duration: "10h"},
		{Team: "ads", Project: "transcribe", Name: "whisper", Class: "production", Replicas: 3, GPU: api.GPURequest{Profile: "speech-whisper-large"}, Duration: "10h"},
		{Team: "research", Project: "notebooks", Name: "notebook", Class: "best-effort", Replicas: 2, GPU: api.GPURequest{MIG: "1g.10gb"}, Duration: "10h"},
	} {
		ids = append(ids, e.submit("admin", r).ID)
	}
	for _, id := range ids {
		e.waitRunning(id)
	}
	w := e.submit("lead-s", api.SubmitRequest{Project: "default", Name: "ranker-eval", Class: "batch", GPU: api.GPURequest{Count: 8}, Duration: "2h"})
	return e.waitFor(w.ID, "waiting in the queue", func(j api.Job) bool {
		return j.Queue != nil && j.Queue.Position == 1 && j.Queue.Reason != "" && !strings.HasPrefix(j.Queue.Reason, "submitted")
	})
}

// client is a cookie-keeping HTTP client that follows no redirects.
func (e *env) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
