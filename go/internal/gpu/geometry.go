package gpu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// usage is what a valid layout occupies on its GPU. It is small and kept on
// the stack, so checking a layout allocates nothing unless it is invalid.
type usage struct {
	mask    uint8 // bit i set when memory slice i is taken
	compute int   // compute slices taken
	me      int   // index in the layout of the +me instance; -1 when none
}

// Validate checks that the instances of l can share one GPU of model m: each
// profile exists and starts where it may, no two memory ranges overlap, the
// compute slices add up to at most ComputeSlices, at most one instance owns
// the media engines (+me), and no profile is used more often than its
// MaxPerGPU. The error names the offending instance. An empty layout is
// valid on every model, MIG or not.
func (m *Model) Validate(l Layout) error {
	_, err := m.usage(l)
	return err
}

func (m *Model) usage(l Layout) (usage, error) {
	u := usage{me: -1}
	if len(l) == 0 {
		return u, nil
	}
	if !m.MIG {
		return u, m.errNoMIG()
	}
	// Every accepted instance takes at least one memory slice, so this loop
	// fails on an overlap within MemorySlices+1 rounds, however long l is.
	for i, pl := range l {
		p := m.find(pl.Profile)
		if p == nil {
			_, err := m.Profile(pl.Profile)
			return u, fmt.Errorf("%s: %w", pl, err)
		}
		if !p.CanStart(pl.Start) {
			return u, fmt.Errorf("%s: start %d not allowed (allowed: %s)", pl, pl.Start, joinInts(p.Starts))
		}
		mask := p.Mask(pl.Start)
		if u.mask&mask != 0 {
			return u, fmt.Errorf("%s overlaps %s", pl, l[m.firstOverlap(l[:i], mask)])
		}
		if p.MediaExt && u.me >= 0 {
			return u, fmt.Errorf("%s: at most one +me instance per GPU, and %s already has the media engines", pl, l[u.me])
		}
		if n := countProfile(l[:i], pl.Profile); n >= p.MaxPerGPU {
			return u, fmt.Errorf("%s: at most %d %s per GPU", pl, p.MaxPerGPU, p.Name)
		}
		if u.compute+p.Compute > ComputeSlices {
			return u, fmt.Errorf("%s: compute slices would add up to %d, more than %d", pl, u.compute+p.Compute, ComputeSlices)
		}
		u.mask |= mask
		u.compute += p.Compute
		if p.MediaExt {
			u.me = i
		}
	}
	return u, nil
}

// firstOverlap is the index in l (already validated) of the first instance
// whose memory meets mask. Only error paths call it.
func (m *Model) firstOverlap(l Layout, mask uint8) int {
	for i, pl := range l {
		if m.find(pl.Profile).Mask(pl.Start)&mask != 0 {
			return i
		}
	}
	return 0
}

func countProfile(l Layout, name string) int {
	n := 0
	for _, pl := range l {
		if pl.Profile == name {
			n++
		}
	}
	return n
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}

// fits reports whether one more instance of p at start keeps a valid layout
// with usage u valid; count is how many instances of p it already holds.
func (u usage) fits(p *Profile, start, count int) bool {
	return p.CanStart(start) &&
		u.mask&p.Mask(start) == 0 &&
		u.compute+p.Compute <= ComputeSlices &&
		!(p.MediaExt && u.me >= 0) &&
		count < p.MaxPerGPU
}

// FreePlacements lists, by start, every placement of profile want that can
// join the valid layout used. It is empty (nil) when want does not fit; the
// error is for a bad used layout or an unknown profile.
func (m *Model) FreePlacements(used Layout, want string) ([]Placement, error) {
	u, err := m.usage(used)
	if err != nil {
		return nil, fmt.Errorf("used layout: %w", err)
	}
	p, err := m.Profile(want)
	if err != nil {
		return nil, err
	}
	count := countProfile(used, p.Name)
	var out []Placement
	for start := 0; start < MemorySlices; start++ {
		if u.fits(p, start, count) {
			if out == nil {
				out = make([]Placement, 0, len(p.Starts))
			}
			out = append(out, Placement{Profile: p.Name, Start: start})
		}
	}
	return out, nil
}

// MaximalLayouts lists every valid layout without +me profiles to which no
// further non-+me instance can be added: the ways to carve up a whole GPU.
// Each layout is sorted by start (two instances never share a start); the
// list is in lexicographic order of (start, profile in catalog order). It is
// nil for a model without MIG. Each call builds a fresh list.
func (m *Model) MaximalLayouts() []Layout {
	if !m.MIG {
		return nil
	}
	s := &layoutSearch{m: m, counts: make([]int, len(m.Profiles))}
	s.walk(0, usage{me: -1})
	return s.out
}

// layoutSearch visits every valid non-+me layout exactly once, adding
// instances in increasing start order, and keeps the maximal ones.
type layoutSearch struct {
	m      *Model
	cur    Layout
	counts []int // instances of each profile in cur, by index in m.Profiles
	out    []Layout
}

func (s *layoutSearch) walk(from int, u usage) {
	if s.maximal(u) {
		s.out = append(s.out, slices.Clone(s.cur))
		return
	}
	for start := from; start < MemorySlices; start++ {
		for i := range s.m.Profiles {
			p := &s.m.Profiles[i]
			if p.MediaExt || !u.fits(p, start, s.counts[i]) {
				continue
			}
			s.cur = append(s.cur, Placement{Profile: p.Name, Start: start})
			s.counts[i]++
			s.walk(start+1, usage{mask: u.mask | p.Mask(start), compute: u.compute + p.Compute, me: -1})
			s.counts[i]--
			s.cur = s.cur[:len(s.cur)-1]
		}
	}
}

// maximal reports whether no non-+me instance fits anywhere, before or after
// the starts the walk has reached.
func (s *layoutSearch) maximal(u usage) bool {
	for i := range s.m.Profiles {
		p := &s.m.Profiles[i]
		if p.MediaExt {
			continue
		}
		for start := 0; start < MemorySlices; start++ {
			if u.fits(p, start, s.counts[i]) {
				return false
			}
		}
	}
	return true
}
