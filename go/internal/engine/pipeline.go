package engine

import (
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/random"
)

// The placement pipeline for one task, in order:
//
//  1. Rewrite (optional): a policy may change what is asked (stock
//     Kubernetes turns a 0.3-GPU share into one whole GPU).
//  2. Filter: the shared Fit filter, then the policy's own filters. A node
//     that fails any filter is out, with a Reason.
//  3. Score: the policy rates each feasible node (higher wins) and may say
//     which device it rated (a Hint).
//  4. Select: the best score wins; ties go to the lower node Rank. A policy
//     may replace this step (random placement).
//  5. Pick: the policy's picker turns the winner and its hint into grants:
//     which GPUs, which share, which MIG instance.

// Filter rules nodes out.
type Filter interface {
	Name() string
	// Filter reports whether the node may take the request, and if not why.
	Filter(n *cluster.Node, r *Request) (bool, Reason)
}

// Scorer rates a node that passed every filter.
type Scorer interface {
	Name() string
	// Score returns the node's score (higher is better; any int64 range,
	// documented by each scorer) and the device it rated, if any.
	Score(n *cluster.Node, r *Request) (int64, Hint)
}

// Hint names the device a scorer rated, so the picker places the task
// where the score was earned. The zero Hint names nothing.
type Hint struct {
	Set   bool
	GPU   int           // the GPU (the first one, for several)
	Slice gpu.Placement // the MIG instance, when the request takes one
}

// Picker chooses devices on the winning node.
type Picker interface {
	Pick(n *cluster.Node, r *Request, h Hint, rng *random.Rand) ([]cluster.Grant, bool)
}

// Selector replaces "best score, then lowest rank" (step 4). feasible
// holds node positions in State order; it returns one of them.
type Selector interface {
	Select(st *cluster.State, feasible []int, rng *random.Rand) int
}

// Rewriter changes a request before placement (step 1). It must return a
// new Request, never change r.
type Rewriter interface {
	Rewrite(r *Request) *Request
}

// Adjuster sees the whole snapshot once per placement and shifts the
// cached node scores by what only the whole cluster shows (how scarce
// empty nodes are, say). It runs outside the cache, so it must be cheap.
type Adjuster interface {
	Prepare(st *cluster.State, r *Request)
	Adjust(n *cluster.Node, r *Request, score int64, h Hint) int64
}

// Policy is a placement policy: a named set of pipeline stages.
type Policy struct {
	Name     string
	Rewriter Rewriter // optional
	Filters  []Filter // run after the shared Fit filter
	Scorer   Scorer   // nil: every node scores 0
	Picker   Picker   // nil: DefaultPicker
	Selector Selector // optional
	Adjuster Adjuster // optional
	// Volatile is set when scores depend on more than the node and the
	// request (cluster-wide state, randomness), which turns the cache off.
	Volatile bool
}
