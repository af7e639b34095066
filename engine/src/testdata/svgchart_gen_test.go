package svgchart

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"partita.dev/partita/internal/fmath"
)

// TestGenGolden writes the charts that the Rust port's golden tests draw
// again (engine/src/svgchart.rs). To make them anew, from the repository root:
//
//	cp engine/src/testdata/svgchart_gen_test.go go/internal/svgchart/zz_gen_test.go
//	(cd go && SVGOUT=$PWD/../engine/src/testdata/svgchart go test -run TestGenGolden -count=1 ./internal/svgchart)
//	rm go/internal/svgchart/zz_gen_test.go
//
// It is not part of the Go build (the go tool skips testdata folders).
func TestGenGolden(t *testing.T) {
	dir := os.Getenv("SVGOUT")
	if dir == "" {
		t.Skip("SVGOUT not set")
	}
	save := func(name string, render func(*bytes.Buffer) error) {
		var b bytes.Buffer
		if err := render(&b); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	line := func(name string, c Chart) { save(name, func(b *bytes.Buffer) error { return c.Write(b) }) }
	bars := func(name string, c BarChart) { save(name, func(b *bytes.Buffer) error { return c.Write(b) }) }

	line("escaped.svg", Chart{Title: "a <title> & more", XLabel: "x", YLabel: "y", Series: []Series{
		{Name: "one", Points: []Point{{0, 1}, {1, 2}, {2, 3}}},
		{Name: "two", Points: []Point{{0, 3}, {2, 1}}, Dashed: true},
	}})
	line("clipped.svg", Chart{XMin: 0, XMax: 10, YMin: 0, YMax: 1, Series: []Series{{Name: "s", Points: []Point{{-5, 0.5}, {5, 9}, {20, 0.5}}}}})

	// A fill-like chart: nine policies (the palette wraps), curves 0..130.
	var fill []Series
	names := []string{"random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd", "partita", "it's \"quoted\"", "ninth"}
	for i, n := range names {
		s := Series{Name: n, Dashed: i%3 == 2}
		for x := 0; x <= 130; x += 5 {
			y := 100 * (1 - fmath.Exp(-float64(x)/(40+7*float64(i))))
			s.Points = append(s.Points, Point{float64(x), math.Round(y*100) / 100})
		}
		fill = append(fill, s)
	}
	fill[3].Color = "#123456"
	line("fill.svg", Chart{Title: "Allocated GPU % vs arrived workload", XLabel: "arrived workload (% of GPUs)", YLabel: "allocated GPUs (%)", XMin: 0, XMax: 130, YMin: 0, YMax: 100, Series: fill})
	line("fit-to-data.svg", Chart{Title: "fit", Series: fill[:3]})

	line("fractional.svg", Chart{Title: "fractional", Width: 500, Height: 300, Series: []Series{
		{Name: "f", Points: []Point{{0.2, 0.013}, {0.5, 0.021}, {0.9, 0.0171}}},
	}})
	line("negative.svg", Chart{Title: "neg", Series: []Series{
		{Name: "n", Points: []Point{{-3.5, -120}, {-1, 35}, {2.25, -7}, {7, 0}}},
	}})
	line("huge.svg", Chart{Title: "huge", Series: []Series{
		{Name: "h", Points: []Point{{0, 0}, {1e6, 3.3e7}, {2.5e6, 1.2e8}}},
	}})
	line("tiny.svg", Chart{Title: "tiny", Series: []Series{
		{Name: "t", Points: []Point{{1e-4, 3e-7}, {2e-4, 1e-6}, {7e-4, 1.5e-6}}},
	}})
	line("decimal-steps.svg", Chart{Title: "steps", XMin: 0.1, XMax: 0.7, YMin: 1.05, YMax: 1.95, Series: []Series{
		{Name: "d", Points: []Point{{0.1, 1.1}, {0.3, 1.5}, {0.7, 1.9}}},
	}})
	line("flat.svg", Chart{Title: "flat", Series: []Series{{Name: "one point", Points: []Point{{3, 3}}}}})
	line("empty.svg", Chart{})
	line("week.svg", Chart{Title: "GPUs in use over the week", XLabel: "hours", YLabel: "GPUs", XMax: 168, YMax: 1000, Series: []Series{
		{Name: "inference", Points: []Point{{0, 100}, {24, 640.5}, {48, 333.25}, {168, 999.95}}},
		{Name: "training", Points: []Point{{0, 0}, {84, 512}, {168, 1000}}, Dashed: true},
	}})
	line("nan-inf.svg", Chart{Title: "nan", Series: []Series{
		{Name: "x", Points: []Point{{0, 1}, {1, math.NaN()}, {2, 3}}},
	}})
	line("inf.svg", Chart{Title: "inf", Series: []Series{
		{Name: "x", Points: []Point{{0, 1}, {1, math.Inf(1)}, {2, 3}}},
	}})
	line("neg-zero.svg", Chart{Title: "-0", Series: []Series{
		{Name: "z", Points: []Point{{math.Copysign(0, -1), math.Copysign(0, -1)}, {0, 0}, {1, -0.5}}},
	}})

	bars("bars.svg", BarChart{Title: "cost <USD>", Width: 600, Bars: []Bar{
		{Label: "search / chat", Value: 10, Note: "10 USD"},
		{Label: "ads & co", Value: 5, Note: "5 USD"},
		{Label: "idle", Value: 0, Note: "0"},
	}})
	bars("bars-wide.svg", BarChart{Title: "GPU-hours by team", Bars: []Bar{
		{Label: "a team with a very long name indeed, longer than 28", Value: 1234.5, Note: "1,234.5 GPU-h"},
		{Label: "équipe «ünïcødé» très longue, vraiment", Value: 0.001, Note: "0.001"},
		{Label: "negative", Value: -3, Note: "-3"},
		{Label: "it's", Value: 617.25, Note: `"half"`},
		{Label: "b", Value: 1}, {Label: "c", Value: 2}, {Label: "d", Value: 3}, {Label: "e", Value: 4}, {Label: "f", Value: 5},
	}})
	bars("bars-zero.svg", BarChart{Title: "nothing", Bars: []Bar{{Label: "z", Value: 0}, {Label: "y", Value: -1}}})
	bars("bars-empty.svg", BarChart{})
	bars("bars-inf.svg", BarChart{Title: "inf", Bars: []Bar{{Label: "i", Value: math.Inf(1)}, {Label: "n", Value: math.NaN()}, {Label: "o", Value: 1}}})
}
