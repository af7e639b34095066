package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/api"
)

// TestRequeueReleasesAndQueuesAgain: a lead's requeue puts a running job
// back in its queue with an event, closes its ledger holds, and it runs
// again; a member may not; a queued job is left as it is.
func TestRequeueReleasesAndQueuesAgain(t *testing.T) {
	e := newEnv(t, 60)
	e.t = t
	j := e.submit("member-s", api.SubmitRequest{GPU: api.GPURequest{Count: 1}, Duration: "10h", CheckpointEvery: "1m"})
	e.waitState(j.ID, api.StateRunning, 10*time.Second)
	if status, data := e.call("member-s", "POST", api.Prefix+"/jobs/"+j.ID+"/requeue", nil); status != http.StatusForbidden {
		t.Fatalf("member requeue: %d %s; want 403", status, data)
	}
	if status, data := e.call("lead-r", "POST", api.Prefix+"/jobs/"+j.ID+"/requeue", nil); status != http.StatusNotFound {
		t.Fatalf("another team's lead: %d %s; want 404", status, data)
	}
	status, data := e.call("lead-s", "POST", api.Prefix+"/jobs/"+j.ID+"/requeue", nil)
	if status != http.StatusOK {
		t.Fatalf("lead requeue: %d %s", status, data)
	}
	got := e.job("admin", j.ID)
	requeued := false
	for _, ev := range got.Events {
		if ev.State == "requeued" && strings.Contains(ev.Reason, "requeued by lead-s") {
			requeued = true
		}
	}
	if !requeued {
		t.Fatalf("no requeued event: %+v", got.Events)
	}
	again := e.waitState(j.ID, api.StateRunning, 10*time.Second)
	if again.Attempts != 2 {
		t.Errorf("attempts %d; want 2", again.Attempts)
	}
	// Every hold of the first run has ended: begins exceed ends by the
	// hold of the second run only (one GPU), once the world's last batch
	// is stored.
	open := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if open = openHolds(e, j.ID); open == 1 {
			return
		}
	}
	t.Errorf("%d holds open after requeue and restart; want 1", open)
}

func openHolds(e *env, job string) int {
	_, body := e.call("admin", "GET", api.Prefix+"/ledger", nil)
	var l api.Ledger
	if err := json.Unmarshal(body, &l); err != nil {
		e.t.Fatal(err)
	}
	open := 0
	for _, le := range l.Entries {
		if le.Job != job {
			continue
		}
		if le.Kind == "begin" {
			open++
		} else {
			open--
		}
	}
	return open
}

// TestPreviewChecksLikeSubmitAndStoresNothing: a preview gives the
// resolved request and the slice per model, or the same field error a
// submission would get, and no job is created.
func TestPreviewChecksLikeSubmitAndStoresNothing(t *testing.T) {
	e := newEnv(t, 60)
	e.t = t
	status, data := e.call("member-s", "POST", api.Prefix+"/jobs/preview",
		api.SubmitRequest{Replicas: 2, GPU: api.GPURequest{Memory: "14Gi", Compute: 0.2}, Image: "vllm/vllm-openai:v0.6"})
	if status != http.StatusOK {
		t.Fatalf("preview: %d %s", status, data)
	}
	var p api.JobPreview
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if p.Team != "search" || p.Class != "batch" || p.Project != "default" || p.Tasks != 2 || len(p.Options) != 1 {
		t.Fatalf("preview %+v", p)
	}
	// 14 GiB + 10% = 15.4 GiB: more than 1g.10gb, fits 1g.20gb (1/7 compute < 0.2), so 2g.20gb.
	if o := p.Options[0]; o.Model != "H100-80GB" || o.MIG != "2g.20gb" || !o.Fits {
		t.Errorf("option %+v; want 2g.20gb on H100-80GB", o)
	}
	status, data = e.call("member-s", "POST", api.Prefix+"/jobs/preview", api.SubmitRequest{GPU: api.GPURequest{Count: 9}})
	var ae api.Error
	_ = json.Unmarshal(data, &ae)
	if status != http.StatusBadRequest || ae.Field != "gpu" {
		t.Errorf("9 GPUs: %d %s; want 400 on gpu", status, data)
	}
	status, data = e.call("member-s", "POST", api.Prefix+"/jobs/preview", api.SubmitRequest{Image: "a b", GPU: api.GPURequest{Count: 1}})
	_ = json.Unmarshal(data, &ae)
	if status != http.StatusBadRequest || ae.Field != "image" {
		t.Errorf("image with a space: %d %s; want 400 on image", status, data)
	}
	_, data = e.call("admin", "GET", api.Prefix+"/jobs", nil)
	var list api.JobList
	_ = json.Unmarshal(data, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("previews stored %d jobs", len(list.Jobs))
	}
	j := e.submit("member-s", api.SubmitRequest{GPU: api.GPURequest{Count: 1}, Image: "pytorch/pytorch:2.5", Command: "python train.py --epochs 3"})
	if got := e.job("member-s", j.ID); got.Image != "pytorch/pytorch:2.5" || got.Command != "python train.py --epochs 3" {
		t.Errorf("image %q command %q", got.Image, got.Command)
	}
}
