package gpu

import (
	"slices"
	"testing"
)

func FuzzParsePlacement(f *testing.F) {
	for _, s := range []string{"3g.40gb@4", "1g.10gb+me@0", " 2g.20gb@02 ", "@", "3g@8", "a@b@c", "3g.40gb@-1", "é@1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePlacement(s)
		if err != nil {
			return
		}
		text := p.String()
		q, err := ParsePlacement(text)
		if err != nil || q != p || q.String() != text {
			t.Fatalf("%q parsed as %+v, whose text %q parses as %+v (%v)", s, p, text, q, err)
		}
		if p.Start < 0 || p.Start >= MemorySlices {
			t.Fatalf("%q parsed with start %d outside the GPU", s, p.Start)
		}
	})
}

func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"", "4g.40gb@0,3g.40gb@4", " 1g.10gb@0 , 1g.10gb@1", ",", "a@1,,b@2", "x@9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLayout(s)
		if err != nil {
			return
		}
		text := l.String()
		m, err := ParseLayout(text)
		if err != nil || !slices.Equal(l, m) || m.String() != text {
			t.Fatalf("%q parsed as %v, whose text %q parses as %v (%v)", s, l, text, m, err)
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		"4g.40gb@0,3g.40gb@4", "3g.40gb@0,3g.40gb@4", "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4",
		"4g.40gb@0,2g.20gb@4,1g.10gb@6", "2g.20gb@6", "4g.40gb@4", "1g.10gb+me@0,1g.10gb+me@1",
		"1g.5gb@0,1g.10gb@2", "7g.141gb@0",
	} {
		f.Add(s, uint8(2))
	}
	models := Catalog()
	f.Fuzz(func(t *testing.T, s string, which uint8) {
		l, err := ParseLayout(s)
		if err != nil {
			return
		}
		m := models[int(which)%len(models)]
		if err := m.Validate(l); err != nil {
			return
		}
		// A valid layout stays valid through its text form and in any order,
		// and everything FreePlacements offers keeps it valid.
		back, err := ParseLayout(l.String())
		if err != nil || m.Validate(back) != nil {
			t.Fatalf("%s: valid %s does not survive its text form: %v", m.Name, l, err)
		}
		r := slices.Clone(l)
		slices.Reverse(r)
		if err := m.Validate(r); err != nil {
			t.Fatalf("%s: %s valid, reversed invalid: %v", m.Name, l, err)
		}
		for _, p := range m.Profiles {
			free, err := m.FreePlacements(l, p.Name)
			if err != nil {
				t.Fatalf("%s: FreePlacements(%s, %s): %v", m.Name, l, p.Name, err)
			}
			for _, pl := range free {
				if err := m.Validate(append(slices.Clone(l), pl)); err != nil {
					t.Fatalf("%s: %s offered for %s but: %v", m.Name, pl, l, err)
				}
			}
		}
	})
}
