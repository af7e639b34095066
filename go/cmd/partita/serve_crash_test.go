package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"partita.dev/partita/internal/api"
)

// subprocess is a `partita serve` subprocess.
type subprocess struct {
	cmd   *exec.Cmd
	base  string
	token string
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

func startServer(t *testing.T, bin, data string) *subprocess {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--speed", "600")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case base := <-found:
		tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
		if err != nil {
			t.Fatal(err)
		}
		return &subprocess{cmd: cmd, base: base, token: strings.TrimSpace(string(tok))}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not say where it listens")
	}
	return nil
}

func (s *subprocess) do(method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		_ = json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

func buildPartita(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "partita")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// crashJobs is how many acknowledged jobs TestKillNineLosesNoAcknowledgedJob
// waits for before the kill; the clients submit on until it lands.
const crashJobs = 600

// crashJob is the i-th job of submitter w: short jobs of several shapes,
// so that at the kill some are queued, some admitted, some running.
func crashJob(w, i int) api.SubmitRequest {
	shapes := []api.GPURequest{{MIG: "1g.10gb"}, {MIG: "3g.40gb"}, {Count: 1}, {Memory: "20Gi", Compute: 0.2}}
	return api.SubmitRequest{Team: "research", Class: "best-effort", GPU: shapes[(w+i)%len(shapes)], Duration: fmt.Sprintf("%dm", 5+i%20),
		IdempotencyKey: fmt.Sprintf("crash-%d-%d", w, i)}
}

// TestKillNineLosesNoAcknowledgedJob starts `partita serve`, submits from
// eight clients at once, kills the server with SIGKILL mid-flight,
// restarts it on the same data directory and checks that every
// acknowledged job is there exactly once (resubmitting its idempotency
// key gives the same job), that jobs holding resources were put back,
// and that every ledger hold closes once the jobs have run.
func TestKillNineLosesNoAcknowledgedJob(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs it")
	}
	bin := buildPartita(t)
	data := t.TempDir()
	srv := startServer(t, bin, data)
	acked := map[string]api.SubmitRequest{} // job ID -> request
	var mu sync.Mutex
	ctx, stop := context.WithCancel(context.Background())
	// The kill comes after enough jobs, not after a fixed time: a fast
	// machine acknowledged over 5,000 in 1.5 s, more work than the
	// virtual cluster runs in the minute checkRecovered allows.
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				req := crashJob(w, i)
				var j api.Job
				if status, err := srv.do("POST", api.Prefix+"/jobs", req, &j); err == nil && status == http.StatusCreated {
					mu.Lock()
					acked[j.ID] = req
					if len(acked) >= crashJobs {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
				}
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(10 * time.Second):
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	stop()
	wg.Wait()
	if len(acked) < 50 {
		t.Fatalf("only %d jobs acknowledged before the kill; the test needs more", len(acked))
	}
	srv = startServer(t, bin, data)
	checkAcknowledged(t, srv, acked)
	checkRecovered(t, srv, acked)
	_ = srv.cmd.Process.Signal(syscall.SIGTERM)
}

func checkAcknowledged(t *testing.T, srv *subprocess, acked map[string]api.SubmitRequest) {
	t.Helper()
	seen := map[string]int{}
	for after := ""; ; {
		var l api.JobList
		if status, err := srv.do("GET", api.Prefix+"/jobs?limit=1000"+after, nil, &l); err != nil || status != 200 {
			t.Fatalf("list: %d %v", status, err)
		}
		for _, j := range l.Jobs {
			seen[j.ID]++
		}
		if l.Next == "" {
			break
		}
		after = "&after=" + l.Next
	}
	for id, req := range acked {
		if seen[id] != 1 {
			t.Errorf("acknowledged job %s is listed %d times after the restart", id, seen[id])
		}
		var j api.Job
		if status, err := srv.do("POST", api.Prefix+"/jobs", req, &j); err != nil || status != http.StatusOK || j.ID != id {
			t.Errorf("resubmitting %s's key %s: %d %v job %s; want 200 and the same job", id, req.IdempotencyKey, status, err, j.ID)
		}
	}
	t.Logf("%d jobs acknowledged before the kill, %d stored", len(acked), len(seen))
}

// checkRecovered: jobs that held resources at the restart still hold them
// where they were, and once everything has run no ledger hold is open.
func checkRecovered(t *testing.T, srv *subprocess, acked map[string]api.SubmitRequest) {
	t.Helper()
	var l api.JobList
	srv.do("GET", api.Prefix+"/jobs?limit=1000&state=running,admitted", nil, &l)
	for _, j := range l.Jobs {
		for _, task := range j.Tasks {
			if task.Placement == nil && j.State == api.StateRunning {
				t.Errorf("job %s is running after the restart but task %s has no placement", j.ID, task.Name)
			}
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var open api.JobList
		srv.do("GET", api.Prefix+"/jobs?limit=1&state=queued,admitted,running,preempted", nil, &open)
		if len(open.Jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs still unfinished a minute after the restart: %s is %s (%s)", open.Jobs[0].ID, open.Jobs[0].State, open.Jobs[0].Reason)
		}
		time.Sleep(200 * time.Millisecond)
	}
	holds := map[string]int{}
	for after := "0"; ; {
		var led api.Ledger
		srv.do("GET", api.Prefix+"/ledger?limit=10000&after="+after, nil, &led)
		for _, e := range led.Entries {
			holds[e.Hold] += map[string]int{"begin": 1, "end": -1}[e.Kind]
			if holds[e.Hold] < 0 {
				t.Errorf("hold %s ends before it begins", e.Hold)
			}
		}
		if led.Next == "" {
			break
		}
		after = led.Next
	}
	for h, n := range holds {
		if n != 0 {
			t.Errorf("hold %s is still open after every job finished", h)
		}
	}
	t.Logf("%d ledger holds, all closed", len(holds))
}
