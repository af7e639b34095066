package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// Placement is one MIG GPU instance: a profile at a start memory slice.
// Its text form is "3g.40gb@4".
type Placement struct {
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

// String is the text form ParsePlacement reads.
func (p Placement) String() string {
	return p.Profile + "@" + strconv.Itoa(p.Start)
}

// ParsePlacement reads "<profile>@<start>", e.g. "3g.40gb@4". It checks
// syntax only: whether the profile exists on a model is Validate's job. A
// profile name is letters, digits and '.', '+', '-', '_' (so it never holds
// the ',' and '@' of the text forms); a start is a memory-slice index, 0-7.
func ParsePlacement(s string) (Placement, error) {
	text := strings.TrimSpace(s)
	name, startText, ok := strings.Cut(text, "@")
	if !ok || name == "" || startText == "" {
		return Placement{}, fmt.Errorf("placement %q: want <profile>@<start>, e.g. 3g.40gb@4", s)
	}
	if !isProfileName(name) {
		return Placement{}, fmt.Errorf("placement %q: profile %q may hold only letters, digits, '.', '+', '-' and '_'", s, name)
	}
	start, ok := parseStart(startText)
	if !ok {
		return Placement{}, fmt.Errorf("placement %q: start %q is not a memory-slice index from 0 to %d", s, startText, MemorySlices-1)
	}
	return Placement{Profile: name, Start: start}, nil
}

func isProfileName(s string) bool {
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		case r == '.', r == '+', r == '-', r == '_':
		default:
			return false
		}
	}
	return true
}

// parseStart accepts plain decimal digits only (no sign, no spaces), so
// that the text form has one spelling per value, give or take leading zeros.
func parseStart(s string) (int, bool) {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		n = n*10 + int(r-'0')
		if n >= MemorySlices {
			return 0, false
		}
	}
	return n, true
}

// Layout is the set of MIG instances on one GPU.
type Layout []Placement

// String is the text form ParseLayout reads: placements joined by ",".
func (l Layout) String() string {
	var b strings.Builder
	for i, p := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// ParseLayout reads comma-separated placements, "3g.40gb@0,2g.20gb@4";
// spaces around each are ignored. An empty (or all-blank) string is the
// empty layout.
func ParseLayout(s string) (Layout, error) {
	if strings.TrimSpace(s) == "" {
		return Layout{}, nil
	}
	parts := strings.Split(s, ",")
	l := make(Layout, 0, len(parts))
	for i, part := range parts {
		if strings.TrimSpace(part) == "" {
			return nil, fmt.Errorf("layout %q: placement %d is empty", s, i+1)
		}
		p, err := ParsePlacement(part)
		if err != nil {
			return nil, fmt.Errorf("layout %q: %w", s, err)
		}
		l = append(l, p)
	}
	return l, nil
}

// Contains reports whether the layout has an instance at placement p.
func (l Layout) Contains(p Placement) bool {
	for _, q := range l {
		if q == p {
			return true
		}
	}
	return false
}
