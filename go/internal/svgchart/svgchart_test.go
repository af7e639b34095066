package svgchart

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestChartIsWellFormedSVGWithEveryLineAndLegend(t *testing.T) {
	c := Chart{Title: "a <title> & more", XLabel: "x", YLabel: "y", Series: []Series{
		{Name: "one", Points: []Point{{0, 1}, {1, 2}, {2, 3}}},
		{Name: "two", Points: []Point{{0, 3}, {2, 1}}, Dashed: true},
	}}
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	lines := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not well-formed XML: %v\n%s", err, b.String())
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 2 {
		t.Errorf("%d polylines, want 2", lines)
	}
	out := b.String()
	for _, want := range []string{"a &lt;title&gt; &amp; more", ">one<", ">two<", `stroke-dasharray="6 4"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestPointsOutsideTheAxesAreClippedNotDrawnOutside(t *testing.T) {
	c := Chart{XMin: 0, XMax: 10, YMin: 0, YMax: 1, Series: []Series{{Name: "s", Points: []Point{{-5, 0.5}, {5, 9}, {20, 0.5}}}}}
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	// One point left inside (x=5), its y clamped to the top of the plot.
	i := strings.Index(b.String(), `points="`)
	pts := strings.Fields(strings.SplitN(b.String()[i+8:], `"`, 2)[0])
	if len(pts) != 1 || !strings.HasSuffix(pts[0], ",40.0") {
		t.Errorf("points %v, want one point at the top edge (y=40.0)", pts)
	}
}

func TestTicksAreRoundAndCoverTheRange(t *testing.T) {
	for _, tc := range []struct{ lo, hi float64 }{{0, 1}, {50, 130}, {0, 168}, {0.2, 0.9}} {
		ts := ticks(tc.lo, tc.hi)
		if len(ts) < 3 || len(ts) > 11 {
			t.Errorf("ticks(%g, %g) = %v: want 3..11 ticks", tc.lo, tc.hi, ts)
		}
		for _, v := range ts {
			if v < tc.lo-1e-9 || v > tc.hi+1e-9 {
				t.Errorf("ticks(%g, %g): %g outside", tc.lo, tc.hi, v)
			}
		}
	}
}
