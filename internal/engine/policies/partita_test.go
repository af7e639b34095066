package policies_test

import (
	"testing"

	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
)

// TestPartitaOpensAGPURatherThanLeaveASliver: half the expected tasks are
// 470-milli shares, half 810. A 470 arrives; "paired" holds a 470 (530
// left), "fresh" is a whole GPU, and ties would go to "paired" (rank 0).
//
// Over one arrival (FGD's view) the 530 room is half lost (810s do not
// fit), so pairing (a 60 sliver) gains: 265 → 60 scores 55, a fresh GPU
// 0 → 265 scores 43. Over partita's horizon of five, the room is lost only
// if five 810s come in a row (1/32): pairing turns 16.6 into 60 (score
// 48), the fresh GPU 0 into 16.6 (score 49): partita opens the GPU.
func TestPartitaOpensAGPURatherThanLeaveASliver(t *testing.T) {
	shapes := []frag.Shape{{Milli: 470, Num: 1}, {Milli: 810, Num: 1}}
	cfg := policies.Config{Typical: frag.Typicals(shapes, 1, canonical), Shapes: shapes, Canonical: canonical}
	st := world(t, node("paired").gpus(1, "V100-16GB"), node("fresh").gpus(1, "V100-16GB"))
	allocateOn(t, st, "paired", running("a").share(0, 470))

	a, err := placeOne(t, mustPolicy(t, "partita", cfg), st, task("t").share(470))
	if err != nil {
		t.Fatal(err)
	}
	if a.Node != "fresh" {
		t.Fatalf("partita placed the 470 on %s, want fresh", a.Node)
	}
	// FGD, over one arrival, pairs.
	a, err = placeOne(t, mustPolicy(t, "fgd", cfg), st, task("t").share(470))
	if err != nil {
		t.Fatal(err)
	}
	if a.Node != "paired" {
		t.Fatalf("fgd placed the 470 on %s, want paired", a.Node)
	}
}
