// Package random is Partita's own random number generator and the ways it
// draws from distributions. Every random draw of the Go build goes through
// it, and the Rust engine's random.rs is the same algorithm, so that both
// builds make the same decisions from the same seed. docs/determinism.md
// specifies it, with the test vectors both builds test against.
//
// The generator is xoshiro256** (Blackman and Vigna, 2018) seeded by four
// outputs of SplitMix64 from the seed. It is not cryptographic.
package random

import (
	"math"
	"math/bits"

	"partita.dev/partita/internal/fmath"
)

// Rand is one stream of random numbers. It is not safe for concurrent use.
type Rand struct {
	s [4]uint64
}

// New returns the stream of seed (its two's-complement bits as a uint64).
func New(seed int64) *Rand {
	r := &Rand{}
	x := uint64(seed)
	for i := range r.s {
		x += 0x9e3779b97f4a7c15
		r.s[i] = splitmix64(x)
	}
	return r
}

// splitmix64 is SplitMix64's output function of its state x.
func splitmix64(x uint64) uint64 {
	z := x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Uint64 returns the next 64 random bits.
func (r *Rand) Uint64() uint64 {
	s := &r.s
	out := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return out
}

// Uint64n returns a uniform number in [0, n) by Lemire's multiply-and-
// reject method (no modulo bias). It panics if n is 0.
func (r *Rand) Uint64n(n uint64) uint64 {
	if n == 0 {
		panic("random: Uint64n(0)")
	}
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		threshold := -n % n // 2**64 mod n
		for lo < threshold {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// Intn returns a uniform int in [0, n). It panics if n <= 0.
func (r *Rand) Intn(n int) int {
	if n <= 0 {
		panic("random: Intn of a number <= 0")
	}
	return int(r.Uint64n(uint64(n)))
}

// Float64 returns a uniform number in [0, 1): the top 53 bits of a draw,
// times 2**-53.
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) * 0x1p-53
}

// ExpFloat64 returns an exponentially distributed number with rate 1, by
// inversion: -ln(1 - U).
func (r *Rand) ExpFloat64() float64 {
	return -fmath.Log(1 - r.Float64())
}

// NormFloat64 returns a standard normal number by Marsaglia's polar method:
// u = 2U1-1 and v = 2U2-1 until 0 < s = u*u + v*v < 1, then
// u * sqrt(-2 ln(s) / s). The second normal of the pair is not kept, so a
// draw depends on nothing but the stream.
func (r *Rand) NormFloat64() float64 {
	for {
		u := 2*r.Float64() - 1
		v := 2*r.Float64() - 1
		s := float64(u*u) + float64(v*v)
		if s < 1 && s != 0 {
			return u * math.Sqrt(-2*fmath.Log(s)/s)
		}
	}
}

// Shuffle permutes n elements by Fisher-Yates: for i from n-1 down to 1,
// swap(i, Intn(i+1)).
func (r *Rand) Shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, r.Intn(i+1))
	}
}

// Perm returns a random permutation of 0..n-1: the identity, shuffled.
func (r *Rand) Perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r.Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p
}
