package scenario

import (
	"errors"
	"strings"
	"testing"
)

// base is a small valid scenario; tests edit one line of it at a time, so
// the line numbers in expected errors refer to this text.
const base = `name: t
duration: 24h
nodes:
  - group: h100
    count: 2
    gpu: H100-80GB
    gpus: 8
    mig: true
    cpu: 192
    memory: 2Ti
    leaves: [leaf-a, leaf-b]
teams:
  - name: search
    guaranteed_gpus: 8
    burst_gpus: 16
  - name: research
    guaranteed_gpus: 4
workloads:
  - name: chat
    team: search
    class: production
    profile: llm-7b-bf16
    arrival: {process: poisson, rate_per_hour: 30}
    duration: {dist: exponential, mean: 2h}
    replicas: 2
  - name: train
    team: research
    class: batch
    profile: pretrain-13b-worker
    arrival: {process: fixed, at: [0s, 10m]}
    duration: {dist: fixed, value: 1h}
    gang: {sizes: [4, 8], weights: [0.5, 0.5]}
    checkpoint_every: 30m
`

// edit replaces old, which must occur exactly once in text, with new.
func edit(t testing.TB, text, old, new string) string {
	t.Helper()
	if n := strings.Count(text, old); n != 1 {
		t.Fatalf("%q occurs %d times in the scenario, want once", old, n)
	}
	return strings.Replace(text, old, new, 1)
}

func parse(t testing.TB, text string) *Scenario {
	t.Helper()
	s, err := Parse(strings.NewReader(text), "t.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

// wantError checks err is an *Error with exactly the message want.
func wantError(t testing.TB, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %q", want)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error is %T (%v), want *Error", err, err)
	}
	if err.Error() != want {
		t.Fatalf("error\n got  %q\n want %q", err.Error(), want)
	}
}
