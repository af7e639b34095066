//! Partita's own random number generator and the ways it draws from
//! distributions. Every random draw of the engine goes through it, and the
//! Go build's `internal/random` is the same algorithm, so both builds make
//! the same decisions from the same seed. `docs/determinism.md` specifies
//! it, with the test vectors both builds test against.
//!
//! The generator is xoshiro256** (Blackman and Vigna, 2018) seeded by four
//! outputs of SplitMix64 from the seed. It is not cryptographic. We write
//! our own rather than take `rand_xoshiro` so that the distributions (and
//! not only the bits) are specified once for two languages.

use crate::fmath;

/// One stream of random numbers.
#[derive(Clone, Debug)]
pub struct Rand {
    s: [u64; 4],
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function of its state `x`.
fn splitmix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rand {
    /// The stream of `seed` (its two's-complement bits as a `u64`).
    pub fn new(seed: i64) -> Rand {
        let mut x = seed as u64;
        let mut s = [0; 4];
        for word in &mut s {
            x = x.wrapping_add(GOLDEN_GAMMA);
            *word = splitmix64(x);
        }
        Rand { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// A uniform number in `[0, n)` by Lemire's multiply-and-reject method
    /// (no modulo bias). Panics if `n` is 0.
    pub fn below_u64(&mut self, n: u64) -> u64 {
        assert!(n > 0, "random: below_u64(0)");
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n; // 2**64 mod n
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// A uniform index in `[0, n)` (Go's `Intn`). Panics if `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        self.below_u64(n as u64) as usize
    }

    /// A uniform number in `[0, 1)`: the top 53 bits of a draw, times 2**-53.
    pub fn float64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// An exponentially distributed number with rate 1, by inversion:
    /// `-ln(1 - U)`.
    pub fn exp_float64(&mut self) -> f64 {
        -fmath::ln(1.0 - self.float64())
    }

    /// A standard normal number by Marsaglia's polar method: `u = 2U1-1`,
    /// `v = 2U2-1` until `0 < s = u*u + v*v < 1`, then
    /// `u * sqrt(-2 ln(s) / s)`. The pair's second normal is not kept.
    pub fn norm_float64(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.float64() - 1.0;
            let v = 2.0 * self.float64() - 1.0;
            let s = u * u + v * v;
            if s < 1.0 && s != 0.0 {
                return u * (-2.0 * fmath::ln(s) / s).sqrt();
            }
        }
    }

    /// Permutes `items` by Fisher-Yates: for `i` from `n-1` down to 1, swap
    /// `i` with `below(i+1)`.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// A random permutation of `0..n`: the identity, shuffled.
    pub fn perm(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        self.shuffle(&mut p);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The vectors of docs/determinism.md; the Go build tests the same ones.

    #[test]
    fn splitmix64_matches_its_published_vector() {
        // Java's SplittableRandom(1234567).nextLong().
        assert_eq!(
            splitmix64(1234567u64.wrapping_add(GOLDEN_GAMMA)),
            6457827717110365317
        );
    }

    #[test]
    fn next_u64_vectors() {
        let cases: [(i64, [u64; 3]); 4] = [
            (
                0,
                [
                    11091344671253066420,
                    13793997310169335082,
                    1900383378846508768,
                ],
            ),
            (
                1,
                [
                    12966619160104079557,
                    9600361134598540522,
                    10590380919521690900,
                ],
            ),
            (
                42,
                [
                    1546998764402558742,
                    6990951692964543102,
                    12544586762248559009,
                ],
            ),
            (
                -7,
                [
                    17511466064979161794,
                    15461944981646629852,
                    8317729841091847865,
                ],
            ),
        ];
        for (seed, want) in cases {
            let mut r = Rand::new(seed);
            let got = [r.next_u64(), r.next_u64(), r.next_u64()];
            assert_eq!(got, want, "seed {seed}");
        }
    }

    #[test]
    fn draw_vectors() {
        let mut r = Rand::new(42);
        let mut got: Vec<usize> = (0..5).map(|_| r.below(10)).collect();
        got.push(r.below(1000003));
        assert_eq!(got, [0, 3, 6, 9, 9, 769741]);
        assert_eq!(Rand::new(42).perm(8), [7, 1, 6, 3, 5, 4, 2, 0]);
        let mut r = Rand::new(1);
        assert_eq!(r.float64(), 0.7029218331588505);
        assert_eq!(r.exp_float64(), 0.7348792139125746);
        assert_eq!(r.norm_float64(), 1.302090250702661);
    }

    #[test]
    fn below_is_unbiased_at_the_rejection_edge() {
        // n = 3 * 2**62: a quarter of all draws must be rejected. Uniform,
        // a third of the results are below 2**62; a bare modulo gives half.
        let mut r = Rand::new(3);
        let n = 3u64 << 62;
        let low = (0..20_000)
            .map(|_| r.below_u64(n))
            .inspect(|&v| assert!(v < n))
            .filter(|&v| v < 1 << 62)
            .count();
        assert!(
            (6400..=6930).contains(&low),
            "{low} of 20000 below 2**62, want about 6667"
        );
    }

    #[test]
    #[should_panic(expected = "below_u64(0)")]
    fn below_zero_panics() {
        Rand::new(1).below(0);
    }

    #[test]
    fn distributions_have_their_moments() {
        let mut r = Rand::new(5);
        let n = 200_000.0;
        let (mut sf, mut se, mut sn, mut sn2) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..200_000 {
            let f = r.float64();
            assert!((0.0..1.0).contains(&f));
            sf += f;
            se += r.exp_float64();
            let x = r.norm_float64();
            sn += x;
            sn2 += x * x;
        }
        let near =
            |got: f64, want: f64, tol: f64| assert!((got - want).abs() <= tol, "{got} vs {want}");
        near(sf / n, 0.5, 0.005);
        near(se / n, 1.0, 0.01);
        near(sn / n, 0.0, 0.01);
        near(sn2 / n - (sn / n) * (sn / n), 1.0, 0.02);
    }

    #[test]
    fn perm_is_a_permutation() {
        let mut r = Rand::new(11);
        for n in 0..20 {
            let mut p = r.perm(n);
            p.sort_unstable();
            assert_eq!(p, (0..n).collect::<Vec<_>>());
        }
    }
}
