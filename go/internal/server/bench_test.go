package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"partita.dev/partita/internal/api"
)

// BenchmarkSubmit measures acknowledged submissions through the HTTP API
// of an in-process server (real SQLite file, real world loop), from
// GOMAXPROCS×4 parallel clients. `partita bench api` does the same
// against a running server.
func BenchmarkSubmit(b *testing.B) {
	e := newEnv(b, 60)
	var n atomic.Int64
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	hc := &http.Client{Transport: tr}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body, _ := json.Marshal(api.SubmitRequest{Team: "research", GPU: api.GPURequest{MIG: "1g.10gb"}, Duration: "2m", Class: "best-effort", IdempotencyKey: fmt.Sprint(n.Add(1))})
			req, _ := http.NewRequest("POST", e.http.URL+api.Prefix+"/jobs", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+e.tokens["admin"])
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Fatalf("submit: %d", resp.StatusCode)
			}
		}
	})
}
