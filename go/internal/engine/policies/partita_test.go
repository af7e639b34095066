package policies_test

import (
	"fmt"
	"testing"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
)

// TestPartitaLeavesTheRoomBesideA650ForA320: the expected tasks are, of
// ten, one 470, one 650, one 320, three 230 shares and four whole GPUs. A
// 230 arrives; "a650" holds a 650 (350 left), "a470" a 470 (530 left), and
// ties would go to "a650" (rank 0).
//
// FGD looks one task ahead: the 350 beside the 650 is lost to 60 % of
// tasks, so filling it (120 left, lost to all) gains 350·.6 − 120 = 90,
// scoring 52, against 530·.5 − 300·.7 = 55 (score 51) beside the 470.
// Partita's horizon for this mix is 3 (the 470's room, 530, is lost to
// half the tasks: ⌊0.9·ln(60/1060)/ln .5⌋): the 350 room is lost only if
// three tasks in a row cannot use it (.6³), so filling it with a 230 turns
// 75.6 into 120 (score 48), and the 530 room 66 into 300·.7³ = 103 (score
// 49). The 230 goes beside the 470; the 650 waits for the 320.
func TestPartitaLeavesTheRoomBesideA650ForA320(t *testing.T) {
	cfg := mixConfig(map[int]int{470: 1, 650: 1, 320: 1, 230: 3, 1000: 4}, nil)
	st := twoShares(t, 650, 470)
	for policy, want := range map[string]string{"fgd": "a650", "partita": "a470"} {
		if got := placedShare(t, policy, cfg, st, 230); got != want {
			t.Errorf("%s placed the 230 on %s, want %s", policy, got, want)
		}
	}
}

// TestPartitaKeepsTheRoomBesideA650OverTwiceTheHorizon: of 100 expected
// tasks, 62 whole GPUs, 13 810s, nine 470s, four 320s, three 650s, two
// 230s, two 460s, and five rare shares (50..90) that fall outside the 95 %
// of typical tasks. The 470's room (530) is lost to 78/95 of them, so the
// horizon is 13 (⌊0.9·ln(60/1060)/ln .821⌋). A 230 arrives; "a650" holds a
// 650 (350 left, rank 0), "a230" a 230 (770 left).
//
// Over 13 arrivals the 350 room is lost with chance (89/95)¹³: 150 milli,
// so filling it (120 left, lost for good) gains 30 and scores 50, against
// 49 beside the 230. But the most frequent share that fits 350 is the
// 320, which leaves 30, no more than two 470s leave (60): the room gets
// twice the horizon, 64 milli over 26 arrivals, and filling it scores 48.
// The 230 goes beside the 230.
func TestPartitaKeepsTheRoomBesideA650OverTwiceTheHorizon(t *testing.T) {
	cfg := mixConfig(map[int]int{1000: 62, 810: 13, 470: 9, 320: 4, 650: 3, 230: 2, 460: 2, 50: 1, 60: 1, 70: 1, 80: 1, 90: 1}, nil)
	if got := placedShare(t, "partita", cfg, twoShares(t, 650, 230), 230); got != "a230" {
		t.Errorf("partita placed the 230 on %s, want a230", got)
	}
}

// TestPartitaFillsTheSliverBesideAn810First: of 100 expected tasks, 40
// 810s, 36 160s, 14 whole GPUs, five 470s, and five rare shares that fall
// outside the 95 % of typical tasks. A 160 arrives; "a470" holds a 470
// (530 left, rank 0), "a810" an 810 (190 left).
//
// The horizon is 4 (the 530 room is lost to 54/95 of tasks), and the 190
// room, which the 160 fills leaving 30, gets 8: the fragment expects the
// sliver filled anyway, so filling it now (4 milli of fragment to 30)
// scores 49, and the 470's room (530 to 370, 55 milli of fragment to 55)
// 50. But the 810s leave more slivers than the 160s can fill, and what
// the 160 takes beside the 470 is room a 470 could use: partita puts it
// in the sliver.
func TestPartitaFillsTheSliverBesideAn810First(t *testing.T) {
	cfg := mixConfig(map[int]int{810: 40, 160: 36, 1000: 14, 470: 5, 50: 1, 60: 1, 70: 1, 80: 1, 90: 1}, nil)
	if got := placedShare(t, "partita", cfg, twoShares(t, 470, 810), 160); got != "a810" {
		t.Errorf("partita placed the 160 on %s, want a810", got)
	}
}

// TestPartitaTakesANearPerfectFitFirst: the mix of
// TestPartitaKeepsTheRoomBesideA650OverTwiceTheHorizon, with 8 cores for
// a whole GPU and 4 for every share. A 320 (1 core) arrives; "tight" has
// a free GPU but only 5 cores (rank 0), so no whole GPU fits there and
// most of its GPU counts as stranded; "a650" holds a 650 (350 left,
// rank 1).
//
// The fragment favours "tight" (54 against 50): a light 320 there frees
// more stranded GPU than it closes elsewhere. But beside the 650 the 320
// leaves 30, no more than two 470s leave (60): a fit as tight as the
// pairing the horizon keeps, so partita takes it before asking the
// fragment, and the 350 room does not wait for a 320 that may not come.
func TestPartitaTakesANearPerfectFitFirst(t *testing.T) {
	cfg := mixConfig(map[int]int{1000: 62, 810: 13, 470: 9, 320: 4, 650: 3, 230: 2, 460: 2, 50: 1, 60: 1, 70: 1, 80: 1, 90: 1}, func(milli int) int64 {
		if milli == 1000 {
			return 8000
		}
		return 4000
	})
	st := world(t, node("tight").cpu(5000).gpus(1, "V100-16GB"), node("a650").gpus(1, "V100-16GB"))
	allocateOn(t, st, "a650", running("x").share(0, 650))

	a, err := placeOne(t, mustPolicy(t, "partita", cfg), st, task("t").cpu(1000).share(320))
	if err != nil {
		t.Fatal(err)
	}
	if a.Node != "a650" {
		t.Errorf("partita placed the 320 on %s, want a650", a.Node)
	}
}

// mixConfig is the policy configuration for a mix of one-GPU tasks:
// counts[milli] tasks of each size, all typical, each with cpu(milli)
// millicores (none when cpu is nil).
// twoShares is two one-GPU nodes, "aF" (rank 0) running a share of F
// milli and "aS" one of S.
func twoShares(t *testing.T, first, second int) *cluster.State {
	t.Helper()
	a, b := fmt.Sprintf("a%d", first), fmt.Sprintf("a%d", second)
	st := world(t, node(a).gpus(1, "V100-16GB"), node(b).gpus(1, "V100-16GB"))
	allocateOn(t, st, a, running("x").share(0, first))
	allocateOn(t, st, b, running("y").share(0, second))
	return st
}

// placedShare is the node policy places a share of milli on.
func placedShare(t *testing.T, policy string, cfg policies.Config, st *cluster.State, milli int) string {
	t.Helper()
	a, err := placeOne(t, mustPolicy(t, policy, cfg), st, task("t").share(milli))
	if err != nil {
		t.Fatal(err)
	}
	return a.Node
}

func mixConfig(counts map[int]int, cpu func(milli int) int64) policies.Config {
	var shapes []frag.Shape
	for milli, n := range counts {
		s := frag.Shape{Milli: milli, Num: 1}
		if cpu != nil {
			s.CPUMilli = cpu(milli)
		}
		for range n {
			shapes = append(shapes, s)
		}
	}
	return policies.Config{Typical: frag.Typicals(shapes, 1, canonical), Shapes: shapes, Canonical: canonical}
}
