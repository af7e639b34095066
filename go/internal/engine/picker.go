package engine

import (
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// DefaultPicker is the device choice of the FGD protocol's "best" method,
// extended to MIG:
//   - whole GPUs: the lowest-index fully free GPUs;
//   - a share: the hinted GPU, else the GPU with the least room that still
//     fits (ties to the lowest index);
//   - a MIG instance: the hinted one, else the first free instance of the
//     profile, else the first place one can be created.
type DefaultPicker struct{}

var _ Picker = DefaultPicker{}

func (DefaultPicker) Pick(n *cluster.Node, r *Request, h Hint, _ *random.Rand) ([]cluster.Grant, bool) {
	switch r.Kind {
	case workload.NoGPU:
		return nil, true
	case workload.WholeGPUs:
		return LowestFreeGPUs(n, r)
	}
	if h.Set {
		return hinted(n, r, h)
	}
	if grants, ok := existingSlice(n, r); ok {
		return grants, true
	}
	best, bestFree := -1, 0
	for i := range n.GPUs {
		g := &n.GPUs[i]
		u, code := need(r, g)
		if code != "" || !hosts(g, u) {
			continue
		}
		if u.profile != nil {
			return sliceGrant(g, u), true
		}
		if best < 0 || g.Free() < bestFree {
			best, bestFree = i, g.Free()
		}
	}
	if best < 0 {
		return nil, false
	}
	u, _ := need(r, &n.GPUs[best])
	return []cluster.Grant{{GPU: best, Milli: u.milli}}, true
}

// LowestFreeGPUs grants the lowest-index fully free GPUs a whole-GPU
// request may use.
func LowestFreeGPUs(n *cluster.Node, r *Request) ([]cluster.Grant, bool) {
	grants := make([]cluster.Grant, 0, r.Count)
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if _, code := need(r, g); code != "" || g.MIG || g.Cordoned() || g.Used() != 0 {
			continue
		}
		grants = append(grants, cluster.Grant{GPU: i, Milli: 1000})
		if len(grants) == r.Count {
			return grants, true
		}
	}
	return nil, false
}

// hinted grants the device a scorer named.
func hinted(n *cluster.Node, r *Request, h Hint) ([]cluster.Grant, bool) {
	if h.GPU < 0 || h.GPU >= len(n.GPUs) {
		return nil, false
	}
	g := &n.GPUs[h.GPU]
	u, code := need(r, g)
	if code != "" || !hosts(g, u) {
		return nil, false
	}
	if u.profile == nil {
		return []cluster.Grant{{GPU: h.GPU, Milli: u.milli}}, true
	}
	s := h.Slice
	return []cluster.Grant{{GPU: h.GPU, Slice: &s}}, true
}

// existingSlice grants the first free MIG instance of the profile r takes,
// on any GPU of n: using one that exists needs no reconfiguration.
func existingSlice(n *cluster.Node, r *Request) ([]cluster.Grant, bool) {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		p := r.ProfileOn(g)
		if p == nil || g.Cordoned() {
			continue
		}
		for _, s := range g.Slices() {
			if s.Task == "" && s.Profile == p.Name {
				pl := s.Placement
				return []cluster.Grant{{GPU: i, Slice: &pl}}, true
			}
		}
	}
	return nil, false
}

// sliceGrant grants the first place for u's profile on g.
func sliceGrant(g *cluster.GPU, u unit) []cluster.Grant {
	s := slicesFor(g, u.profile)[0]
	return []cluster.Grant{{GPU: g.Index, Slice: &s}}
}

// RandomPicker is the FGD protocol's "random" GPU choice: a share goes to
// a GPU drawn uniformly among those that fit, fully free ones included.
// Whole GPUs and MIG instances are picked as DefaultPicker does.
type RandomPicker struct{}

var _ Picker = RandomPicker{}

func (RandomPicker) Pick(n *cluster.Node, r *Request, h Hint, rng *random.Rand) ([]cluster.Grant, bool) {
	if r.Kind != workload.Fraction {
		return DefaultPicker{}.Pick(n, r, h, rng)
	}
	var fit []int
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if u, code := need(r, g); code == "" && hosts(g, u) {
			fit = append(fit, i)
		}
	}
	if len(fit) == 0 {
		return nil, false
	}
	i := fit[rng.Intn(len(fit))]
	return []cluster.Grant{{GPU: i, Milli: r.Milli}}, true
}
