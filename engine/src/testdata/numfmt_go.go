// Prints, for each value, Go's formatting with the verbs that the Rust
// port's numfmt mirrors: one line "bits<TAB>verb<TAB>expected" each.
// It made numfmt_go_curated.tsv and numfmt_go_random.tsv beside it:
//
//	mkdir /tmp/numgen && cp numfmt_go.go /tmp/numgen/main.go && cd /tmp/numgen
//	go mod init numgen
//	go run . curated | awk '!seen[$0]++' > numfmt_go_curated.tsv
//	go run . random 7 150 > numfmt_go_random.tsv
//
// It is not part of the Go build (the go tool skips testdata folders).
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
)

func round2(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 2, 64), 64)
	return v
}

func main() {
	mode := os.Args[1]
	var vals []float64
	add := func(v ...float64) { vals = append(vals, v...) }
	if mode == "curated" {
		add(0, math.Copysign(0, -1), 1, -1, 30, 100, 1e6, 1e20, 1e21, 1e22, 123456789.0, 123456789012345678901234.0)
		add(0.1, 0.2, 0.1+0.2, 0.3, 1.0/3, 2.0/3, -2.0/3, 13.370000000000001, 13.37, 0.5, 1.5, 2.5, -0.5, -1.5, 0.125, 0.375, 0.625, 0.045, 0.055, 0.025, 0.015, 1.005, 2.675, 1.125, 8.5, 9.5)
		add(1e-5, 1e-6, 1e-7, 9.99e-7, 1.0000001e-6, 5e-324, math.SmallestNonzeroFloat64*3, 2.2250738585072014e-308, math.MaxFloat64, -math.MaxFloat64, 1e100, 1e-100, 1.5e300, 1.23e-300)
		add(999999999999999999999.0, 1e21-1, math.Nextafter(1e21, 0), math.Nextafter(1e-6, 0), math.Nextafter(1e-6, 1), 1e15, 1e16, 1e17, 123456.7, 1234567.0, 12345678.9, 0.0001, 0.00012345, 0.00001234)
		add(9.95, 9.995, 99.5, 0.95, 0.995, 0.0995, 995, 9995, 1e5, 1e5+0.5, 99999.5, 999999.5, 0.05, 0.15, 0.25, 0.35, 0.45, 0.65, 0.85, 5.5, 6.5, 7.25, 42, 168, 1.3, 0.2+0.7, 99.99, 99.995, 100.005)
		add(math.Pi, math.E, -math.Pi, 1<<53, 1<<53+2, 1<<63, 4503599627370496.5, 0.1*3, 1.1*1.1, 1/98.0, 0.000009999, 33.333333333333336, 66.66666666666667, 12.34999999999, 2.345, 2.355, -2.345, 100.0/3)
		// Halfway between the two shortest forms: Go takes the even one.
		for _, bits := range []uint64{0x431cbb53379bbc25, 0xc311e46c464b3115, 0xc308484f530e87ca, 0x4313937211dbda95, 0x4307351b51bf70a2} {
			add(math.Float64frombits(bits))
		}
		add(2097152.25, 2097152.75, 2021816359382793.25, 2021816359382793.75)
		add(math.Inf(1), math.Inf(-1), math.NaN())
		// tick-like values: k*step
		for _, step := range []float64{0.1, 0.2, 0.05, 0.02, 0.01, 0.5, 2, 5, 20, 50} {
			for k := -3; k <= 12; k++ {
				add(math.Ceil(0.3/step)*step + float64(k)*step)
			}
		}
	} else {
		seed, _ := strconv.Atoi(os.Args[2])
		n, _ := strconv.Atoi(os.Args[3])
		r := rand.New(rand.NewSource(int64(seed)))
		for len(vals) < n {
			switch r.Intn(5) {
			case 0: // any finite bit pattern
				v := math.Float64frombits(r.Uint64())
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				add(v)
			case 1: // a plain magnitude
				add((r.Float64() - 0.5) * math.Pow(10, float64(r.Intn(40)-20)))
			case 2: // decimals with few digits (ties for rounding)
				add(float64(r.Intn(200000)-100000) / math.Pow(10, float64(r.Intn(6))))
			case 3: // quotients, like averages
				add(float64(r.Intn(100000)) / float64(1+r.Intn(1000)))
			case 4: // near the JSON cutoffs
				base := []float64{1e-6, 1e21}[r.Intn(2)]
				add(base * (1 + (r.Float64()-0.5)*1e-3))
			}
		}
	}
	for _, v := range vals {
		b := math.Float64bits(v)
		p := func(verb, s string) { fmt.Printf("%016x\t%s\t%s\n", b, verb, s) }
		p("f-1", strconv.FormatFloat(v, 'f', -1, 64))
		if j, err := json.Marshal(v); err != nil {
			p("json", "error")
		} else {
			p("json", string(j))
		}
		if j, err := json.Marshal(float32(v)); err != nil {
			p("json32", "error")
		} else {
			p("json32", string(j))
		}
		p("v", fmt.Sprintf("%v", v))
		p("g", fmt.Sprintf("%g", v))
		p(".0g", fmt.Sprintf("%.0g", v))
		p(".1g", fmt.Sprintf("%.1g", v))
		p(".2g", fmt.Sprintf("%.2g", v))
		p(".3g", fmt.Sprintf("%.3g", v))
		p(".17g", fmt.Sprintf("%.17g", v))
		p(".20g", fmt.Sprintf("%.20g", v))
		p(".0f", fmt.Sprintf("%.0f", v))
		p(".1f", fmt.Sprintf("%.1f", v))
		p(".2f", fmt.Sprintf("%.2f", v))
		p("+.2f", fmt.Sprintf("%+.2f", v))
		p("round2", strconv.FormatFloat(round2(v), 'f', -1, 64))
	}
}
