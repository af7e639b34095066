package svgchart

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// Bar is one labelled value of a bar chart; Note is written after the bar
// (the value in words, say).
type Bar struct {
	Label string
	Value float64
	Note  string
}

// BarChart is a horizontal bar chart, one bar a row, largest value full
// width. Width 0 means 760.
type BarChart struct {
	Title string
	Width int
	Bars  []Bar
}

const (
	barLabelW = 190
	barNoteW  = 230
	barRowH   = 24
	barTop    = 30
)

// Write renders the chart.
func (c BarChart) Write(w io.Writer) error {
	if c.Width == 0 {
		c.Width = 760
	}
	height := barTop + barRowH*len(c.Bars) + 10
	maxV := 0.0
	for _, b := range c.Bars {
		maxV = max(maxV, b.Value)
	}
	plotW := float64(c.Width - barLabelW - barNoteW)
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", c.Width, height, c.Width, height)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="4" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(c.Title))
	for i, b := range c.Bars {
		y := barTop + i*barRowH
		wd := 0.0
		if maxV > 0 && b.Value > 0 {
			wd = max(b.Value/maxV*plotW, 1)
		}
		fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="end">%s</text>`, barLabelW-8, y+15, html.EscapeString(ellipsis(b.Label, 28)))
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`, barLabelW, y+3, wd, barRowH-6,
			Palette[i%len(Palette)], html.EscapeString(b.Label+": "+b.Note))
		fmt.Fprintf(&s, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(barLabelW)+wd+6, y+15, html.EscapeString(b.Note))
	}
	s.WriteString("</svg>\n")
	_, err := io.WriteString(w, s.String())
	return err
}

func ellipsis(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
