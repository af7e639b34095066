package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/client"
)

func init() {
	// bench's subcommand table is a package variable: adding to it here
	// keeps bench.go untouched.
	benchCommands["api"] = runBenchAPI
}

// apiBenchResult is what `partita bench api` measures.
type apiBenchResult struct {
	Server      string  `json:"server"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Submitted   int     `json:"submitted"`
	Errors      int     `json:"errors"`
	PerSecond   float64 `json:"submissions_per_second"`
	P50ms       float64 `json:"p50_ms"`
	P90ms       float64 `json:"p90_ms"`
	P99ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
}

func runBenchAPI(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench api", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "server address (default $PARTITA_SERVER or http://127.0.0.1:8080)")
	token := fs.String("token", "", "API token (default $PARTITA_TOKEN or ./partita-data/admin.token)")
	concurrency := fs.Int("concurrency", 32, "clients submitting at once")
	duration := fs.Duration("duration", 10*time.Second, "how long to submit")
	team := fs.String("team", "research", "team to submit to")
	jobDuration := fs.String("job-duration", "2m", "each job's run time on the virtual cluster")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := client.Resolve(*server, *token)
	if err != nil {
		fmt.Fprintln(stderr, "bench api:", err)
		return 2
	}
	if *concurrency < 1 || *duration <= 0 {
		fmt.Fprintln(stderr, "bench api: --concurrency and --duration must be positive")
		return 2
	}
	r := loadAPI(c, *concurrency, *duration, *team, *jobDuration)
	if *asJSON {
		_ = printJSON(stdout, r)
	} else {
		fmt.Fprintf(stdout, "bench api: %d clients for %.1fs against %s: %d submissions acknowledged, %d errors: %.0f/s; latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
			r.Concurrency, r.Seconds, r.Server, r.Submitted, r.Errors, r.PerSecond, r.P50ms, r.P90ms, r.P99ms, r.MaxMs)
	}
	if r.Submitted == 0 {
		return 1
	}
	return 0
}

// loadAPI submits small jobs (a 1g.10gb slice each, with a fresh
// idempotency key) from n clients for d and measures each request's
// latency, acknowledged (201) or not.
func loadAPI(c *client.Client, n int, d time.Duration, team, jobDuration string) apiBenchResult {
	tr := &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	lat := make([][]time.Duration, n)
	errs := make([]int, n)
	var wg sync.WaitGroup
	begin := time.Now()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				body, _ := json.Marshal(api.SubmitRequest{Team: team, GPU: api.GPURequest{MIG: "1g.10gb"}, CPU: "1", Memory: "2Gi", Duration: jobDuration, Class: "best-effort",
					IdempotencyKey: fmt.Sprintf("bench-%d-%d-%d", begin.UnixNano(), w, i)})
				t0 := time.Now()
				status := post(hc, c, body)
				if ctx.Err() != nil && status == 0 {
					return // cut off by the end of the run
				}
				if status == http.StatusCreated {
					lat[w] = append(lat[w], time.Since(t0))
				} else {
					errs[w]++
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	var all []time.Duration
	r := apiBenchResult{Server: c.Base, Concurrency: n, Seconds: elapsed.Seconds()}
	for w := range n {
		all = append(all, lat[w]...)
		r.Errors += errs[w]
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	r.Submitted = len(all)
	r.PerSecond = float64(len(all)) / elapsed.Seconds()
	if len(all) > 0 {
		q := func(p float64) float64 { return float64(all[min(len(all)-1, int(p*float64(len(all))))]) / 1e6 }
		r.P50ms, r.P90ms, r.P99ms, r.MaxMs = q(0.50), q(0.90), q(0.99), float64(all[len(all)-1])/1e6
	}
	return r
}

func post(hc *http.Client, c *client.Client, body []byte) int {
	req, err := http.NewRequest("POST", c.Base+api.Prefix+"/jobs", bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
