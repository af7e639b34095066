// Package svgchart draws simple line and bar charts as standalone SVG, so
// reports and the portal need no JavaScript charting library and no CDN.
package svgchart

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"partita.dev/partita/internal/fmath"
)

// Point is one (x, y) value.
type Point struct{ X, Y float64 }

// Series is one named line.
type Series struct {
	Name   string
	Points []Point
	Dashed bool
	Color  string // "" picks the next colour of Palette
}

// Chart is a line chart. Zero XMax/YMax mean "fit the data".
type Chart struct {
	Title, XLabel, YLabel  string
	XMin, XMax, YMin, YMax float64
	Width, Height          int
	Series                 []Series
}

// Palette is colour-blind friendly (Okabe-Ito).
var Palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}

const (
	marginLeft   = 60
	marginRight  = 170
	marginTop    = 40
	marginBottom = 50
)

func (c *Chart) bounds() {
	if c.Width == 0 {
		c.Width = 760
	}
	if c.Height == 0 {
		c.Height = 420
	}
	if c.XMax > c.XMin && c.YMax > c.YMin {
		return
	}
	first := true
	for _, s := range c.Series {
		for _, p := range s.Points {
			if first {
				c.XMin, c.XMax, c.YMin, c.YMax = p.X, p.X, p.Y, p.Y
				first = false
			}
			c.XMin, c.XMax = math.Min(c.XMin, p.X), math.Max(c.XMax, p.X)
			c.YMin, c.YMax = math.Min(c.YMin, p.Y), math.Max(c.YMax, p.Y)
		}
	}
	if c.XMax == c.XMin {
		c.XMax = c.XMin + 1
	}
	if c.YMax == c.YMin {
		c.YMax = c.YMin + 1
	}
}

// Write renders the chart.
func (c Chart) Write(w io.Writer) error {
	c.bounds()
	plotW := float64(c.Width - marginLeft - marginRight)
	plotH := float64(c.Height - marginTop - marginBottom)
	x := func(v float64) float64 { return marginLeft + (v-c.XMin)/(c.XMax-c.XMin)*plotW }
	y := func(v float64) float64 { return marginTop + plotH - (v-c.YMin)/(c.YMax-c.YMin)*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", c.Width, c.Height, c.Width, c.Height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", marginLeft, html.EscapeString(c.Title))
	for _, t := range ticks(c.XMin, c.XMax) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, x(t), marginTop, x(t), marginTop+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(t), marginTop+plotH+16, fmtTick(t))
	}
	for _, t := range ticks(c.YMin, c.YMax) {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, marginLeft, y(t), marginLeft+plotW, y(t))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginLeft-6, y(t)+4, fmtTick(t))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", marginLeft, marginTop, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", marginLeft+plotW/2, c.Height-10, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(16,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginTop+plotH/2, html.EscapeString(c.YLabel))
	for i, s := range c.Series {
		color := s.Color
		if color == "" {
			color = Palette[i%len(Palette)]
		}
		var pts []string
		for _, p := range s.Points {
			if p.X < c.XMin || p.X > c.XMax {
				continue
			}
			py := math.Max(c.YMin, math.Min(c.YMax, p.Y))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.X), y(py)))
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"><title>%s</title></polyline>`+"\n", color, dash, strings.Join(pts, " "), html.EscapeString(s.Name))
		ly := marginTop + 10 + 18*i
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"%s/>`, marginLeft+plotW+12, ly, marginLeft+plotW+36, ly, color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", marginLeft+plotW+42, ly+4, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// ticks returns about six round values between lo and hi.
func ticks(lo, hi float64) []float64 {
	span := hi - lo
	step := fmath.Pow10(int(math.Floor(fmath.Log10(span / 5))))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 7 {
			step *= m
			break
		}
	}
	var out []float64
	for t := math.Ceil(lo/step) * step; t <= hi+step*1e-9; t += step {
		out = append(out, t)
	}
	return out
}

func fmtTick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}
