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

// TestRoomHorizonsCountSliversLostAtOnce: 810s leave 190 rooms faster
// than the 160s fill them (40 against 36 of the 95 typical tasks; the
// five rare shares fall outside), so a room of at
// most 190 gets no horizon, though the 160 would fill it tightly (30
// left) and the fourth round's rule alone gives it twice the horizon;
// the 200 room keeps that (40 left).
func TestRoomHorizonsCountSliversLostAtOnce(t *testing.T) {
	var shapes []frag.Shape
	for milli, n := range map[int]int{810: 40, 160: 36, 1000: 14, 470: 5, 50: 1, 60: 1, 70: 1, 80: 1, 90: 1} {
		for range n {
			shapes = append(shapes, frag.Shape{Milli: milli, Num: 1})
		}
	}
	d := frag.Typicals(shapes, frag.DefaultThreshold, nil)
	h := horizonFor(d)
	rooms := roomHorizons(d, h)
	for _, l := range []int{0, 30, 160, 190} {
		if rooms[l] != 0 {
			t.Errorf("room %d: horizon %d, want 0 (a sliver)", l, rooms[l])
		}
	}
	if rooms[200] != 2*h {
		t.Errorf("room 200: horizon %d, want %d (twice h)", rooms[200], 2*h)
	}
	if rooms[469] != h {
		t.Errorf("room 469: horizon %d, want %d", rooms[469], h)
	}
}
