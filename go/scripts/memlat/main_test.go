package main

import (
	"testing"

	"partita.dev/partita/internal/random"
)

func TestTheSlotsFormOneCycle(t *testing.T) {
	for _, n := range []int{1, 2, 3, 1000, 4096} {
		next := cycle(n, random.New(int64(n)))
		seen := make([]bool, n)
		p := 0
		for i := 0; i < n; i++ {
			if seen[p] {
				t.Fatalf("n=%d: slot %d visited twice after %d loads: more than one cycle", n, p, i)
			}
			seen[p] = true
			p = next[p]
		}
		if p != 0 {
			t.Fatalf("n=%d: after %d loads at slot %d, not back at 0", n, n, p)
		}
	}
}

func TestChaseFollowsTheLinks(t *testing.T) {
	next := []int{2, 0, 1} // 0 → 2 → 1 → 0
	for steps, want := range []int{0, 2, 1, 0, 2} {
		if got := chase(next, steps); got != want {
			t.Errorf("chase(%d) = %d, want %d", steps, got, want)
		}
	}
}
