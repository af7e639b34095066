// Package fmath holds the project's own exp and ln. Go's math.Exp and
// math.Log are assembly on amd64 (with an FMA path chosen at run time) and
// Rust's call the platform's libm: the two differ in the last bit for about
// one input in ten. Every number Partita compares between builds, and every
// random draw that goes through exp or ln, uses these instead: plain IEEE
// double arithmetic (each operation correctly rounded), so any language
// that neither fuses a*b+c nor reorders gives the same bits.
// docs/determinism.md specifies them; the Rust engine's fmath.rs is the
// same code.
//
// The algorithms are FreeBSD msun's e_exp.c and e_log.c (as in Go's pure-Go
// fallbacks), under 1 ulp of error. Every product that meets a sum is
// written float64(a*b) so that no compiler may fuse it into an FMA (the Go
// spec allows fusing x*y+z unless the product is converted explicitly).
package fmath

import (
	"math"
	"strconv"
)

const (
	ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
	ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
	log2e = 1.44269504088896338700e+00
	// Ln10Inv is 1/ln(10) as Go's math.Log10 multiplies by it.
	ln10Inv = 1 / math.Ln10
)

// Exp returns e**x.
func Exp(x float64) float64 {
	const (
		overflow  = 7.09782712893383973096e+02
		underflow = -7.45133219101941108420e+02
		nearZero  = 1.0 / (1 << 28)
	)
	switch {
	case x != x || x > math.MaxFloat64:
		return x
	case x < -math.MaxFloat64:
		return 0
	case x > overflow:
		return math.Inf(1)
	case x < underflow:
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}
	// Reduce: x = k*ln2 + r with |r| <= ln2/2, r kept as hi - lo.
	var k int
	switch {
	case x < 0:
		k = int(float64(log2e*x) - 0.5)
	case x > 0:
		k = int(float64(log2e*x) + 0.5)
	}
	hi := x - float64(float64(k)*ln2Hi)
	lo := float64(k) * ln2Lo
	return expmulti(hi, lo, k)
}

func expmulti(hi, lo float64, k int) float64 {
	const (
		p1 = 1.66666666666666657415e-01  // 0x3fc5555555555555
		p2 = -2.77777777770155933842e-03 // 0xbf66c16c16bebd93
		p3 = 6.61375632143793436117e-05  // 0x3f11566aaf25de2c
		p4 = -1.65339022054652515390e-06 // 0xbebbbd41c5d26bf1
		p5 = 4.13813679705723846039e-08  // 0x3e66376972bea4d0
	)
	r := hi - lo
	t := r * r
	c := r - float64(t*(p1+float64(t*(p2+float64(t*(p3+float64(t*(p4+float64(t*p5)))))))))
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return Ldexp(y, k)
}

// Log returns the natural logarithm of x.
func Log(x float64) float64 {
	const (
		l1 = 6.666666666666735130e-01 // 0x3fe5555555555593
		l2 = 3.999999999940941908e-01 // 0x3fd999999997fa04
		l3 = 2.857142874366239149e-01 // 0x3fd2492494229359
		l4 = 2.222219843214978396e-01 // 0x3fcc71c51d8e78af
		l5 = 1.818357216161805012e-01 // 0x3fc7466496cb03de
		l6 = 1.531383769920937332e-01 // 0x3fc39a09d078c69f
		l7 = 1.479819860511658591e-01 // 0x3fc2f112df3e5244
	)
	switch {
	case x != x || x > math.MaxFloat64:
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	}
	// Reduce: x = 2**k * (1+f) with sqrt(2)/2 <= 1+f < sqrt(2).
	f1, ki := Frexp(x)
	if f1 < math.Sqrt2/2 {
		f1 *= 2
		ki--
	}
	f := f1 - 1
	k := float64(ki)
	s := f / (2 + f)
	s2 := s * s
	s4 := s2 * s2
	t1 := s2 * (l1 + float64(s4*(l3+float64(s4*(l5+float64(s4*l7))))))
	t2 := s4 * (l2 + float64(s4*(l4+float64(s4*l6))))
	R := t1 + t2
	hfsq := float64(0.5*f) * f
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+R)) + float64(k*ln2Lo))) - f)
}

// Log10 returns Log(x) / ln(10), computed as Log(x) * (1/ln(10)).
func Log10(x float64) float64 { return Log(x) * ln10Inv }

// Pow10 returns the double nearest to 10**n (the decimal string "1en"
// read back), so that it is the same in every language.
func Pow10(n int) float64 {
	v, _ := strconv.ParseFloat("1e"+strconv.Itoa(n), 64)
	return v
}

// normalize scales a subnormal x into the normal range: x = y * 2**exp.
func normalize(x float64) (y float64, exp int) {
	if math.Abs(x) < 0x1p-1022 {
		return x * (1 << 52), -52
	}
	return x, 0
}

// Frexp splits x into a fraction in [0.5, 1) and a power of two; ±0, ±Inf
// and NaN return themselves and 0. (Go's math.Frexp, written out.)
func Frexp(f float64) (frac float64, exp int) {
	if f == 0 || f != f || f > math.MaxFloat64 || f < -math.MaxFloat64 {
		return f, 0
	}
	f, exp = normalize(f)
	x := math.Float64bits(f)
	exp += int((x>>52)&0x7ff) - 1022
	x &^= 0x7ff << 52
	x |= 1022 << 52
	return math.Float64frombits(x), exp
}

// Ldexp returns frac × 2**exp, rounding once when the result is subnormal.
// (Go's math.Ldexp, written out.)
func Ldexp(frac float64, exp int) float64 {
	if frac == 0 || frac != frac || frac > math.MaxFloat64 || frac < -math.MaxFloat64 {
		return frac
	}
	frac, e := normalize(frac)
	exp += e
	x := math.Float64bits(frac)
	exp += int((x>>52)&0x7ff) - 1023
	if exp < -1075 {
		return math.Copysign(0, frac) // underflow
	}
	if exp > 1023 { // overflow
		return math.Copysign(math.Inf(1), frac)
	}
	m := 1.0
	if exp < -1022 { // subnormal: a normal number, then one rounding multiply
		exp += 53
		m = 0x1p-53
	}
	x &^= 0x7ff << 52
	x |= uint64(exp+1023) << 52
	return m * math.Float64frombits(x)
}
