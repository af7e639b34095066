package policies

import (
	"testing"

	"partita.dev/partita/internal/engine/frag"
)

func mixOf(counts map[frag.Shape]int) *frag.Distribution {
	var shapes []frag.Shape
	for s, n := range counts {
		for range n {
			shapes = append(shapes, s)
		}
	}
	return frag.Typicals(shapes, 1, nil)
}

// TestHorizonForStopsBeforePairingTips: the horizon is 0.9 of the one
// where a second 470 would rather open a GPU (530 room) than pair (60
// left): ln(60/1060)/ln q, q the tasks that cannot use the 530 room.
func TestHorizonForStopsBeforePairingTips(t *testing.T) {
	s470 := frag.Shape{Milli: 470, Num: 1}
	s810 := frag.Shape{Milli: 810, Num: 1}
	s320 := frag.Shape{Milli: 320, Num: 1}
	whole := frag.Shape{Milli: 1000, Num: 1}
	pair := frag.Shape{Milli: 1000, Num: 2}
	cpuOnly := frag.Shape{CPUMilli: 4000}
	tests := []struct {
		name string
		mix  map[frag.Shape]int
		want int
	}{
		// q = .6: tip 5.62, 0.9 of it 5.06
		{"share-heavy", map[frag.Shape]int{s470: 4, s810: 3, whole: 2, cpuOnly: 1}, 5},
		// q = .8 (whole GPUs, 2-GPU tasks and CPU-only ones count): tip 12.87
		{"whole-GPU heavy", map[frag.Shape]int{s470: 2, whole: 5, pair: 2, cpuOnly: 1}, 11},
		// the most frequent share in (333, 500] decides, not the 320: q = .4,
		// tip 3.13
		{"320 more frequent", map[frag.Shape]int{s320: 5, s470: 1, s810: 1, whole: 3}, 2},
		{"no share that pairs", map[frag.Shape]int{s320: 5, s810: 1, whole: 3}, 5},
	}
	for _, tt := range tests {
		if got := horizonFor(mixOf(tt.mix)); got != tt.want {
			t.Errorf("%s: horizonFor = %d, want %d", tt.name, got, tt.want)
		}
	}
}
