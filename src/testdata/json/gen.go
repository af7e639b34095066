// Prints the JSON that the Rust port's output tests (src/output.rs) expect:
// the same values encoded as the Go CLI encodes them. From this folder:
//
//	go mod init jsongen && go run . DIR
//
// writes DIR/sample_indent.json (json.Encoder, SetIndent("", "  ")),
// DIR/sample_compact.json (json.Marshal) and DIR/nan_error.txt.
package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
)

type Placement struct {
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

type Inner struct {
	Name  string  `json:"name"`
	Share float64 `json:"share"`
}

type Sample struct {
	Text       string             `json:"text"`
	Escapes    string             `json:"escapes"`
	Controls   string             `json:"controls"`
	Unicode    string             `json:"unicode"`
	Ints       []int64            `json:"ints"`
	Uint       uint64             `json:"uint"`
	Floats     []float64          `json:"floats"`
	Float32s   []float32          `json:"float32s"`
	Yes        bool               `json:"yes"`
	No         bool               `json:"no"`
	NilSlice   []string           `json:"nil_slice"`
	EmptySlice []string           `json:"empty_slice"`
	EmptyMap   map[string]int     `json:"empty_map"`
	NilMap     map[string]int     `json:"nil_map"`
	Seeds      map[string]float64 `json:"seeds"`
	Omitted    map[string]int     `json:"omitted,omitempty"`
	OmitStr    string             `json:"omit_str,omitempty"`
	Kept       []string           `json:"kept,omitempty"`
	Nested     map[string]Inner   `json:"nested"`
	Pointer    *Inner             `json:"pointer"`
	NilPointer *Inner             `json:"nil_pointer"`
	Layouts    [][]Placement      `json:"layouts"`
	Empties    [][]int            `json:"empties"`
	Any        []any              `json:"any"`
	Key        map[string]string  `json:"<key>&"`
}

// pointOne is a variable so that pointOne+0.2 is float64 arithmetic
// (0.30000000000000004), not an exact constant.
var pointOne = 0.1

func sample() Sample {
	return Sample{
		Text:       "plain",
		Escapes:    `<script>alert("x & y")</script> \ / 'q'`,
		Controls:   "nul\x00 bel\x07 bs\b tab\t lf\n vt\v ff\f cr\r esc\x1b us\x1f del\x7f",
		Unicode:    "é ü 日本 🙂 \u2028 \u2029 \u00a0 \ufeff",
		Ints:       []int64{0, -1, 42, math.MaxInt64, math.MinInt64},
		Uint:       math.MaxUint64,
		Floats:     []float64{0, math.Copysign(0, -1), 30, 1.5, -2.25, pointOne + 0.2, 13.370000000000001, 1e-6, 1e-7, 9.99e-7, 1e20, 1e21, 1.5e300, 5e-324, 123456789, 1e-100, -1e21, 2021816359382793.25},
		Float32s:   []float32{0.1, 1e-7, 3.4e38, 16777216, 1.5},
		Yes:        true,
		NilSlice:   nil,
		EmptySlice: []string{},
		EmptyMap:   map[string]int{},
		Seeds:      map[string]float64{"9": 9.5, "10": 10, "42": 42.25, "100": 0, "-1": -1, "a": 1, "B": 2},
		Kept:       []string{"x"},
		Nested:     map[string]Inner{"b": {"bee", 0.5}, "a": {"ay <&>", 1}},
		Pointer:    &Inner{"p", 2.5},
		Layouts:    [][]Placement{{{"3g.40gb", 0}, {"2g.20gb", 4}}, {{"7g.80gb", 0}}},
		Empties:    [][]int{{}, nil, {1}},
		Any:        []any{nil, 1.0, "s", true, map[string]any{}, []any{}},
		Key:        map[string]string{"<k>": "&v"},
	}
}

func main() {
	dir := os.Args[1]
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(sample()); err != nil {
		panic(err)
	}
	must(os.WriteFile(filepath.Join(dir, "sample_indent.json"), b.Bytes(), 0o644))
	c, err := json.Marshal(sample())
	must(err)
	must(os.WriteFile(filepath.Join(dir, "sample_compact.json"), c, 0o644))
	var msgs []byte
	for _, v := range []any{math.NaN(), math.Inf(1), []float64{1, math.Inf(-1)}, map[string]any{"x": Inner{"n", math.NaN()}}} {
		var nb bytes.Buffer
		e := json.NewEncoder(&nb)
		e.SetIndent("", "  ")
		err := e.Encode(v)
		msgs = append(msgs, err.Error()...)
		msgs = append(msgs, '\n')
		if nb.Len() != 0 {
			panic("wrote on error")
		}
	}
	must(os.WriteFile(filepath.Join(dir, "nan_error.txt"), msgs, 0o644))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
