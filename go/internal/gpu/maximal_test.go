package gpu

import (
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestMaximalLayoutsAreValidSortedAndMaximal(t *testing.T) {
	for _, name := range migModels {
		m := Lookup(name)
		layouts := m.MaximalLayouts()
		seen := map[string]bool{}
		for _, l := range layouts {
			if err := m.Validate(l); err != nil {
				t.Errorf("%s: %s is invalid: %v", name, l, err)
			}
			if !slices.IsSortedFunc(l, func(a, b Placement) int { return a.Start - b.Start }) {
				t.Errorf("%s: %s is not sorted by start", name, l)
			}
			if seen[l.String()] {
				t.Errorf("%s: %s is listed twice", name, l)
			}
			seen[l.String()] = true
			for _, p := range m.Profiles {
				if p.MediaExt {
					continue
				}
				free, err := m.FreePlacements(l, p.Name)
				if err != nil || len(free) > 0 {
					t.Errorf("%s: %s is not maximal: %s still fits at %v (err %v)", name, l, p.Name, free, err)
				}
				for _, pl := range l {
					if strings.HasSuffix(pl.Profile, "+me") {
						t.Errorf("%s: %s holds a +me profile", name, l)
					}
				}
			}
		}
	}
}

func TestMaximalLayoutsAreDeterministic(t *testing.T) {
	m := Lookup("H100-80GB")
	a, b := m.MaximalLayouts(), m.MaximalLayouts()
	if !slices.EqualFunc(a, b, func(x, y Layout) bool { return slices.Equal(x, y) }) {
		t.Fatal("two calls of MaximalLayouts disagree")
	}
	if len(a) == 0 || a[len(a)-1].String() != "7g.80gb@0" {
		t.Fatalf("the last layout is %v, want the whole GPU, which sorts last", a[len(a)-1])
	}
	a[0][0].Profile = "changed"
	if m.MaximalLayouts()[0][0].Profile == "changed" {
		t.Fatal("MaximalLayouts returns shared slices")
	}
}

func TestMaximalLayoutsIsNilWithoutMIG(t *testing.T) {
	for _, name := range []string{"T4", "G2", "unknown-gpu"} {
		if got := Lookup(name).MaximalLayouts(); got != nil {
			t.Errorf("%s: MaximalLayouts = %v, want nil", name, got)
		}
	}
}

// bruteForceMaximal enumerates every subset of every (profile, start) of the
// reference geometry, without the package's code, and keeps the valid
// subsets no further instance can join. It returns them as sorted strings.
func bruteForceMaximal(model string) []string {
	type cand struct {
		name           string
		start, compute int
		mask           uint32
		kind, maxCount int
	}
	var cands []cand
	for ki, k := range referenceKinds {
		if k.mediaExt {
			continue
		}
		for _, s := range k.starts {
			var mask uint32
			for i := s; i < s+k.width; i++ {
				mask |= 1 << i
			}
			cands = append(cands, cand{k.names[model], s, k.compute, mask, ki, k.maxPerGPU})
		}
	}
	valid := func(set uint32) bool {
		var mem uint32
		compute := 0
		count := map[int]int{}
		for i, c := range cands {
			if set&(1<<i) == 0 {
				continue
			}
			if mem&c.mask != 0 {
				return false
			}
			mem |= c.mask
			compute += c.compute
			count[c.kind]++
			if count[c.kind] > c.maxCount {
				return false
			}
		}
		return mem < 1<<8 && compute <= 7
	}
	var out []string
	for set := uint32(0); set < 1<<len(cands); set++ {
		if !valid(set) {
			continue
		}
		maximal := true
		for i := range cands {
			if set&(1<<i) == 0 && valid(set|1<<i) {
				maximal = false
				break
			}
		}
		if !maximal {
			continue
		}
		var parts []string
		for i, c := range cands {
			if set&(1<<i) != 0 {
				parts = append(parts, c.name+"@"+string(rune('0'+c.start)))
			}
		}
		sort.Slice(parts, func(a, b int) bool {
			return parts[a][strings.Index(parts[a], "@"):] < parts[b][strings.Index(parts[b], "@"):]
		})
		out = append(out, strings.Join(parts, ","))
	}
	sort.Strings(out)
	return out
}

func TestMaximalLayoutsMatchBruteForce(t *testing.T) {
	for _, name := range migModels {
		var got []string
		for _, l := range Lookup(name).MaximalLayouts() {
			got = append(got, l.String())
		}
		sort.Strings(got)
		want := bruteForceMaximal(name)
		if !slices.Equal(got, want) {
			t.Errorf("%s: MaximalLayouts gives %d layouts, brute force %d\n got: %v\nwant: %v", name, len(got), len(want), got, want)
		}
		t.Logf("%s: %d maximal layouts", name, len(got))
	}
}

// randomLayout grows a layout on m by picking, at random, among every
// placement FreePlacements offers for every profile, until none is left.
func randomLayout(t *testing.T, m *Model, rng *rand.Rand) Layout {
	var l Layout
	for {
		var options []Placement
		for _, p := range m.Profiles {
			free, err := m.FreePlacements(l, p.Name)
			if err != nil {
				t.Fatalf("%s: FreePlacements(%s, %s): %v", m.Name, l, p.Name, err)
			}
			options = append(options, free...)
		}
		if len(options) == 0 {
			return l
		}
		l = append(l, options[rng.IntN(len(options))])
		if err := m.Validate(l); err != nil {
			t.Fatalf("%s: a layout built from FreePlacements is invalid: %s: %v", m.Name, l, err)
		}
	}
}

func TestRandomLayoutsBuiltFromFreePlacementsValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 7))
	for _, name := range migModels {
		m := Lookup(name)
		maximal := map[string]bool{}
		for _, l := range m.MaximalLayouts() {
			maximal[l.String()] = true
		}
		for range 500 {
			l := randomLayout(t, m, rng)
			shuffled := slices.Clone(l)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if err := m.Validate(shuffled); err != nil {
				t.Fatalf("%s: %s is valid in one order but not in another: %v", name, l, err)
			}
			if strings.Contains(l.String(), "+me") {
				continue
			}
			slices.SortFunc(l, func(a, b Placement) int { return a.Start - b.Start })
			if !maximal[l.String()] {
				t.Fatalf("%s: %s has no room left but is not among the maximal layouts", name, l)
			}
		}
	}
}

// FreePlacements must offer exactly the placements Validate accepts.
func TestFreePlacementsAgreesWithValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range migModels {
		m := Lookup(name)
		for range 200 {
			full := randomLayout(t, m, rng)
			used := full[:rng.IntN(len(full)+1)]
			for _, p := range m.Profiles {
				free, err := m.FreePlacements(used, p.Name)
				if err != nil {
					t.Fatal(err)
				}
				for start := -1; start <= MemorySlices; start++ {
					pl := Placement{Profile: p.Name, Start: start}
					accepted := m.Validate(append(slices.Clone(used), pl)) == nil
					if offered := slices.Contains(free, pl); offered != accepted {
						t.Fatalf("%s: used %s: %s offered %v, Validate accepts %v", name, used, pl, offered, accepted)
					}
				}
			}
		}
	}
}
