package fmath_test

import (
	"math"
	"testing"

	. "partita.dev/partita/internal/fmath"
	"partita.dev/partita/internal/random"
)

// Bit patterns of docs/determinism.md; the Rust engine tests the same.
func TestVectors(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(float64) float64
		x    float64
		want uint64
	}{
		{"Log", Log, 0.5, 0xbfe62e42fefa39ef},
		{"Log", Log, 2, 0x3fe62e42fefa39ef},
		{"Log", Log, 10, 0x40026bb1bbb55516},
		{"Log", Log, 0.001, 0xc01ba18a998fffa0},
		{"Log", Log, 123.456, 0x401343774f3e2362},
		{"Log", Log, 1e300, 0x4085963447f87fb5},
		{"Log", Log, 5e-324, 0xc0874385446d71c3},
		{"Log", Log, 0.9999999999999999, 0xbca0000000000000},
		{"Exp", Exp, -1, 0x3fd78b56362cef38},
		{"Exp", Exp, 0.5, 0x3ffa61298e1e069c},
		{"Exp", Exp, 1, 0x4005bf0a8b145769},
		{"Exp", Exp, 2.5, 0x40285d6fd931e0bb},
		{"Exp", Exp, -700, 0x00d14f2b0fb9307f},
		{"Exp", Exp, 700, 0x7f0d945df4f8ec8e},
		{"Exp", Exp, -745, 0x0000000000000001},
		{"Exp", Exp, 1e-9, 0x3ff000000044b830},
		{"Exp", Exp, 3.7, 0x4044394144eeec81},
	} {
		if got := math.Float64bits(c.f(c.x)); got != c.want {
			t.Errorf("%s(%v) = %016x, want %016x", c.name, c.x, got, c.want)
		}
	}
}

func TestSpecialValues(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		name    string
		got     float64
		want    float64
		wantNaN bool
	}{
		{name: "Log(0)", got: Log(0), want: math.Inf(-1)},
		{name: "Log(-1)", got: Log(-1), wantNaN: true},
		{name: "Log(+Inf)", got: Log(inf), want: inf},
		{name: "Log(1)", got: Log(1), want: 0},
		{name: "Exp(0)", got: Exp(0), want: 1},
		{name: "Exp(+Inf)", got: Exp(inf), want: inf},
		{name: "Exp(-Inf)", got: Exp(-inf), want: 0},
		{name: "Exp(710)", got: Exp(710), want: inf},
		{name: "Exp(-746)", got: Exp(-746), want: 0},
		{name: "Exp(NaN)", got: Exp(math.NaN()), wantNaN: true},
		{name: "Pow10(-2)", got: Pow10(-2), want: 0.01},
		{name: "Pow10(23)", got: Pow10(23), want: 1e23},
	} {
		if c.wantNaN != math.IsNaN(c.got) || (!c.wantNaN && c.got != c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// The project's functions stay within two ulps of Go's (both within
// one ulp of the truth) over many normal inputs. (On subnormal inputs
// amd64's math.Log is wrong: it gives -708.63 for 1.31e-308, whose log is
// -708.92. The vector for 5e-324 checks ours there.)
func TestWithinAnUlpOfTheLibrary(t *testing.T) {
	ulps := func(a, b float64) int64 {
		d := int64(math.Float64bits(a)) - int64(math.Float64bits(b))
		if d < 0 {
			d = -d
		}
		return d
	}
	r := random.New(1)
	for range 200000 {
		x := math.Float64frombits(r.Uint64() >> 1) // any positive double
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0x1p-1022 {
			continue
		}
		if d := ulps(Log(x), math.Log(x)); d > 2 {
			t.Fatalf("Log(%v) = %v, math.Log %v: %d ulps apart", x, Log(x), math.Log(x), d)
		}
		y := (r.Float64() - 0.5) * 1400
		if d := ulps(Exp(y), math.Exp(y)); d > 2 {
			t.Fatalf("Exp(%v) = %v, math.Exp %v: %d ulps apart", y, Exp(y), math.Exp(y), d)
		}
	}
}

func TestFrexpAndLdexpRoundTrip(t *testing.T) {
	for _, x := range []float64{1, -3.5, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1} {
		f, e := Frexp(x)
		if math.Abs(f) < 0.5 || math.Abs(f) >= 1 {
			t.Errorf("Frexp(%v) fraction %v not in [0.5, 1)", x, f)
		}
		if back := Ldexp(f, e); back != x {
			t.Errorf("Ldexp(Frexp(%v)) = %v", x, back)
		}
	}
}
