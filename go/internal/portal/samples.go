package portal

import (
	"sync"
	"time"
)

// sample is the cluster's utilization at one cluster time.
type sample struct {
	At                time.Time
	Allocated, Useful float64 // shares of all GPUs
	Queued, Running   int
}

// samples is a ring of the latest utilization samples, kept in memory:
// the chart starts afresh when the server does.
type samples struct {
	mu   sync.Mutex
	ring []sample
	next int
	full bool
}

func newSamples(n int) *samples { return &samples{ring: make([]sample, n)} }

func (s *samples) add(x sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.next] = x
	s.next = (s.next + 1) % len(s.ring)
	if s.next == 0 {
		s.full = true
	}
}

// all returns the samples, oldest first.
func (s *samples) all() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.full {
		return append([]sample(nil), s.ring[:s.next]...)
	}
	return append(append([]sample(nil), s.ring[s.next:]...), s.ring[:s.next]...)
}
