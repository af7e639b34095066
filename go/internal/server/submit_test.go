package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"partita.dev/partita/internal/accounting"
	"partita.dev/partita/internal/api"
)

// TestBadSubmissionsNameTheField: each malformed request gets a 4xx whose
// message and field name what is wrong.
func TestBadSubmissionsNameTheField(t *testing.T) {
	e := newEnv(t, 60)
	e.t = t
	for _, c := range []struct {
		name   string
		user   string
		body   string
		status int
		field  string
	}{
		{"unknown field", "member-s", `{"gpu":{"count":1},"colour":"red"}`, 400, "colour"},
		{"unknown nested field", "member-s", `{"gpu":{"count":1,"vram":3}}`, 400, "vram"},
		{"wrong type", "member-s", `{"gpu":{"count":"one"}}`, 400, "gpu.count"},
		{"tasks and replicas", "member-s", `{"tasks":2,"replicas":2,"gpu":{"count":1}}`, 400, "replicas"},
		{"negative tasks", "member-s", `{"tasks":-1,"gpu":{"count":1}}`, 400, "tasks"},
		{"partial gang", "member-s", `{"tasks":4,"gang":2,"gpu":{"count":1}}`, 400, "gang"},
		{"two GPU demands", "member-s", `{"gpu":{"count":1,"mig":"1g.10gb"}}`, 400, "gpu"},
		{"compute without memory", "member-s", `{"gpu":{"compute":0.5}}`, 400, "gpu.compute"},
		{"unknown profile", "member-s", `{"gpu":{"profile":"llm-9b"}}`, 400, "gpu.profile"},
		{"unknown MIG profile", "member-s", `{"gpu":{"mig":"9g.99gb"}}`, 400, "gpu"},
		{"too many GPUs for a node", "member-s", `{"gpu":{"count":8}}`, 400, "gpu"},
		{"more than the team's burst", "member-s", `{"tasks":3,"gang":3,"gpu":{"count":4}}`, 400, "gpu"},
		{"memory without a unit", "member-s", `{"memory":"32","gpu":{"count":1}}`, 400, "memory"},
		{"bad cpu", "member-s", `{"cpu":"lots","gpu":{"count":1}}`, 400, "cpu"},
		{"cpu larger than a node", "member-s", `{"cpu":"100","gpu":{"count":1}}`, 400, "cpu"},
		{"bad duration", "member-s", `{"gpu":{"count":1},"duration":"forever"}`, 400, "duration"},
		{"negative duration", "member-s", `{"gpu":{"count":1},"duration":"-1h"}`, 400, "duration"},
		{"unknown class", "member-s", `{"class":"urgent","gpu":{"count":1}}`, 400, "class"},
		{"class the team may not use", "member-r", `{"class":"production","gpu":{"count":1}}`, 400, "class"},
		{"unknown project", "member-s", `{"project":"nope","gpu":{"count":1}}`, 400, "project"},
		{"another team", "member-s", `{"team":"research","gpu":{"count":1}}`, 403, "team"},
		{"admin without a team", "admin", `{"gpu":{"count":1}}`, 400, "team"},
		{"unknown model", "member-s", `{"gpu":{"count":1,"models":["Z100"]}}`, 400, "gpu.models"},
		{"not an object", "member-s", `[1,2]`, 400, ""},
		{"two objects", "member-s", `{"gpu":{"count":1}} {}`, 400, ""},
		{"empty body", "member-s", ``, 400, ""},
		{"truncated", "member-s", `{"gpu":{"count":1}`, 400, ""},
		{"oversized", "member-s", `{"name":"` + strings.Repeat("x", MaxBody) + `"}`, 413, ""},
	} {
		status, data := e.call(c.user, "POST", api.Prefix+"/jobs", c.body)
		var ae api.Error
		_ = json.Unmarshal(data, &ae)
		if status != c.status || ae.Field != c.field || ae.Error == "" {
			t.Errorf("%s: %d field %q %q; want %d field %q", c.name, status, ae.Field, ae.Error, c.status, c.field)
		}
	}
	req, _ := http.NewRequest("POST", e.http.URL+api.Prefix+"/jobs", strings.NewReader(`gpu=1`))
	req.Header.Set("Authorization", "Bearer "+e.tokens["member-s"])
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := e.http.Client().Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a form body: %v %v; want 415", resp.StatusCode, err)
	}
}

// TestIdempotencyKey: the same key and body give the same job, never two,
// even when sent at once; the same key with another body is a conflict.
func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t, 60)
	e.t = t
	req := smallJob("search")
	req.IdempotencyKey = "nightly-42"
	first := e.submit("member-s", req)
	status, data := e.call("member-s", "POST", api.Prefix+"/jobs", req)
	var again api.Job
	_ = json.Unmarshal(data, &again)
	if status != http.StatusOK || again.ID != first.ID {
		t.Fatalf("replay: %d %s; want 200 with job %s", status, truncate(data), first.ID)
	}
	other := req
	other.Duration = "2h"
	if status, data := e.call("member-s", "POST", api.Prefix+"/jobs", other); status != http.StatusConflict {
		t.Fatalf("same key, other body: %d %s; want 409", status, truncate(data))
	}
	// Twenty concurrent submissions with one new key make one job.
	req.IdempotencyKey = "burst"
	ids := make([]string, 20)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, data := e.call("member-s", "POST", api.Prefix+"/jobs", req)
			var j api.Job
			_ = json.Unmarshal(data, &j)
			if status != 200 && status != 201 {
				t.Errorf("concurrent submit: %d %s", status, data)
			}
			ids[i] = j.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent submissions with one key made jobs %v", ids)
		}
	}
	// The header works as the field does.
	hreq, _ := http.NewRequest("POST", e.http.URL+api.Prefix+"/jobs", strings.NewReader(`{"gpu":{"mig":"1g.10gb"},"duration":"1h"}`))
	hreq.Header.Set("Authorization", "Bearer "+e.tokens["member-s"])
	hreq.Header.Set("Idempotency-Key", "nightly-42")
	resp, err := e.http.Client().Do(hreq)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("header key replay: %v %v", resp.StatusCode, err)
	}
}

// TestLifecycleAndChargebackReconcile: jobs run their duration through
// the API; the chargeback report's rows add up to its total and the total
// to the ledger, exactly.
func TestLifecycleAndChargebackReconcile(t *testing.T) {
	e := newEnv(t, 3600) // an hour of cluster time per wall second
	e.t = t
	var ids []string
	for i, g := range []api.GPURequest{{MIG: "1g.10gb"}, {MIG: "3g.40gb"}, {Count: 2}, {Memory: "20Gi", Compute: 0.3}, {Profile: "notebook-small"}} {
		req := smallJob("search")
		req.GPU, req.Duration = g, fmt.Sprintf("%dm", 20+10*i)
		ids = append(ids, e.submit("member-s", req).ID)
	}
	ids = append(ids, e.submit("member-r", api.SubmitRequest{GPU: api.GPURequest{Count: 1}, Duration: "30m"}).ID)
	for _, id := range ids {
		j := e.waitState(id, api.StateSucceeded, 20*time.Second)
		var states []string
		for _, ev := range j.Events {
			states = append(states, ev.State)
		}
		if got := strings.Join(states, " "); !strings.HasPrefix(got, "submitted queued admitted") || !strings.HasSuffix(got, "running succeeded") {
			t.Errorf("job %s events: %s", id, got)
		}
	}
	status, data := e.call("admin", "GET", api.Prefix+"/reports/chargeback?group_by=team,project,model,tier", nil)
	var r api.Report
	if status != 200 || json.Unmarshal(data, &r) != nil {
		t.Fatalf("report: %d %s", status, truncate(data))
	}
	var sumG, sumC int64
	for _, row := range r.Rows {
		sumG += row.MicroGPUHours
		sumC += row.CostMicros
	}
	holds, err := e.store.Holds(t.Context(), -time.Hour, e.world.Since(r.To), "")
	if err != nil {
		t.Fatal(err)
	}
	var ledG, ledC int64
	for _, h := range holds {
		g, c := accounting.Usage(h, e.world.Since(r.From), e.world.Since(r.To), e.world.Since(r.To), accounting.DefaultPrices())
		ledG += g
		ledC += c
	}
	if sumG != r.Total.MicroGPUHours || sumC != r.Total.CostMicros || ledG != sumG || ledC != sumC || sumG == 0 {
		t.Fatalf("rows %d/%d, total %d/%d, ledger %d/%d: must agree exactly and be above 0", sumG, sumC, r.Total.MicroGPUHours, r.Total.CostMicros, ledG, ledC)
	}
	// The 1g.10gb job held 1/7 GPU for 20 minutes, after 30 s creating its
	// instance (held, and charged, from the start).
	for _, h := range holds {
		if h.Job == ids[0] && (h.Share != 1000 || h.Open || h.End-h.At != 20*time.Minute+30*time.Second) {
			t.Errorf("hold of the 1g job: %+v", h)
		}
	}
	if status, data := e.call("member-s", "GET", api.Prefix+"/reports/usage?format=csv", nil); status != 200 || !strings.Contains(string(data), "TOTAL") {
		t.Errorf("usage CSV: %d %s", status, truncate(data))
	}
}

// TestMetricsShowTheQueueAndUsage scrapes /metrics.
func TestMetricsShowTheQueueAndUsage(t *testing.T) {
	e := newEnv(t, 600)
	e.t = t
	first := e.submit("member-s", api.SubmitRequest{Tasks: 2, Gang: 2, GPU: api.GPURequest{Count: 4}, Duration: "10h"})
	e.submit("member-s", api.SubmitRequest{Tasks: 2, Gang: 2, GPU: api.GPURequest{Count: 4}, Duration: "10h"})
	e.waitState(first.ID, api.StateRunning, 10*time.Second)
	status, data := e.call("", "GET", "/metrics", nil)
	if status != 200 {
		t.Fatalf("metrics: %d", status)
	}
	for _, want := range []string{`partita_queue_depth{class="batch",team="search"} 1`, `partita_team_gpus{team="search"} 8`, "partita_job_wait_seconds_bucket", "partita_gpu_utilization{kind=\"allocated\"} 1", "partita_preemptions_total", "partita_api_request_seconds_bucket"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
