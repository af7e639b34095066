//! The project's own `exp` and `ln`. Go's `math.Exp`/`math.Log` are
//! assembly on amd64 and Rust's call the platform's libm: the two differ in
//! the last bit for about one input in ten. Every number the builds compare,
//! and every random draw that goes through `exp` or `ln`, uses these: plain
//! IEEE double arithmetic, each operation correctly rounded, so any
//! language that neither fuses `a*b+c` nor reorders gets the same bits.
//! `docs/determinism.md` specifies them; the Go build's `internal/fmath` is
//! the same code.
//!
//! The algorithms are FreeBSD msun's `e_exp.c` and `e_log.c` (as in Go's
//! pure-Go fallbacks), under 1 ulp of error. Rust never fuses on its own.
//! The constants are written as their bits, the decimal beside them.

const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000); // 6.93147180369123816490e-01
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76); // 1.90821492927058770002e-10
const LOG2_E: f64 = f64::from_bits(0x3ff7_1547_652b_82fe); // 1.44269504088896338700e+00

/// e raised to `x`.
pub fn exp(x: f64) -> f64 {
    const OVERFLOW: f64 = f64::from_bits(0x4086_2e42_fefa_39ef); // 7.09782712893383973096e+02
    const UNDERFLOW: f64 = f64::from_bits(0xc087_4910_d52d_3051); // -7.45133219101941108420e+02
    const NEAR_ZERO: f64 = 1.0 / (1u64 << 28) as f64;
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x == f64::NEG_INFINITY {
        return 0.0;
    }
    if x > OVERFLOW {
        return f64::INFINITY;
    }
    if x < UNDERFLOW {
        return 0.0;
    }
    if -NEAR_ZERO < x && x < NEAR_ZERO {
        return 1.0 + x;
    }
    // Reduce: x = k*ln2 + r with |r| <= ln2/2, r kept as hi - lo.
    let k: i64 = if x < 0.0 {
        (LOG2_E * x - 0.5) as i64
    } else {
        (LOG2_E * x + 0.5) as i64
    };
    let hi = x - k as f64 * LN2_HI;
    let lo = k as f64 * LN2_LO;
    expmulti(hi, lo, k)
}

fn expmulti(hi: f64, lo: f64, k: i64) -> f64 {
    const P1: f64 = f64::from_bits(0x3fc5_5555_5555_5555); // 1.66666666666666657415e-01
    const P2: f64 = f64::from_bits(0xbf66_c16c_16be_bd93); // -2.77777777770155933842e-03
    const P3: f64 = f64::from_bits(0x3f11_566a_af25_de2c); // 6.61375632143793436117e-05
    const P4: f64 = f64::from_bits(0xbebb_bd41_c5d2_6bf1); // -1.65339022054652515390e-06
    const P5: f64 = f64::from_bits(0x3e66_3769_72be_a4d0); // 4.13813679705723846039e-08
    let r = hi - lo;
    let t = r * r;
    let c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
    let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    ldexp(y, k)
}

/// The natural logarithm of `x`.
pub fn ln(x: f64) -> f64 {
    const L1: f64 = f64::from_bits(0x3fe5_5555_5555_5593); // 6.666666666666735130e-01
    const L2: f64 = f64::from_bits(0x3fd9_9999_9997_fa04); // 3.999999999940941908e-01
    const L3: f64 = f64::from_bits(0x3fd2_4924_9422_9359); // 2.857142874366239149e-01
    const L4: f64 = f64::from_bits(0x3fcc_71c5_1d8e_78af); // 2.222219843214978396e-01
    const L5: f64 = f64::from_bits(0x3fc7_4664_96cb_03de); // 1.818357216161805012e-01
    const L6: f64 = f64::from_bits(0x3fc3_9a09_d078_c69f); // 1.531383769920937332e-01
    const L7: f64 = f64::from_bits(0x3fc2_f112_df3e_5244); // 1.479819860511658591e-01
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    // Reduce: x = 2**k * (1+f) with sqrt(2)/2 <= 1+f < sqrt(2).
    let (mut f1, mut ki) = frexp(x);
    if f1 < std::f64::consts::SQRT_2 / 2.0 {
        f1 *= 2.0;
        ki -= 1;
    }
    let f = f1 - 1.0;
    let k = ki as f64;
    let s = f / (2.0 + f);
    let s2 = s * s;
    let s4 = s2 * s2;
    let t1 = s2 * (L1 + s4 * (L3 + s4 * (L5 + s4 * L7)));
    let t2 = s4 * (L2 + s4 * (L4 + s4 * L6));
    let r = t1 + t2;
    let hfsq = 0.5 * f * f;
    k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)
}

/// `ln(x) * (1/ln 10)`, as Go's `math.Log10` computes it.
pub fn log10(x: f64) -> f64 {
    ln(x) * (1.0 / std::f64::consts::LN_10)
}

/// The double nearest to 10**n: the decimal string `1e<n>` read back, so
/// that every language gets the same bits.
pub fn pow10(n: i32) -> f64 {
    format!("1e{n}").parse().expect("1e<n> is a number")
}

/// Scales a subnormal `x` into the normal range: `x = y * 2**exp`.
fn normalize(x: f64) -> (f64, i64) {
    if x.abs() < f64::MIN_POSITIVE {
        (x * (1u64 << 52) as f64, -52)
    } else {
        (x, 0)
    }
}

/// Splits `f` into a fraction in [0.5, 1) and a power of two; ±0, ±inf
/// and NaN give themselves and 0. (Go's `math.Frexp`.)
pub fn frexp(f: f64) -> (f64, i64) {
    if f == 0.0 || !f.is_finite() {
        return (f, 0);
    }
    let (f, mut exp) = normalize(f);
    let mut x = f.to_bits();
    exp += ((x >> 52) & 0x7ff) as i64 - 1022;
    x &= !(0x7ff << 52);
    x |= 1022 << 52;
    (f64::from_bits(x), exp)
}

/// `frac × 2**exp`, rounding once when the result is subnormal. (Go's
/// `math.Ldexp`.)
pub fn ldexp(frac: f64, exp: i64) -> f64 {
    if frac == 0.0 || !frac.is_finite() {
        return frac;
    }
    let (frac, e) = normalize(frac);
    let mut exp = exp + e;
    let mut x = frac.to_bits();
    exp += ((x >> 52) & 0x7ff) as i64 - 1023;
    if exp < -1075 {
        return 0.0_f64.copysign(frac); // underflow
    }
    if exp > 1023 {
        return f64::INFINITY.copysign(frac); // overflow
    }
    let mut m = 1.0;
    if exp < -1022 {
        // Subnormal: a normal number, then one rounding multiply.
        exp += 53;
        m = 1.0 / (1u64 << 53) as f64;
    }
    x &= !(0x7ff << 52);
    x |= ((exp + 1023) as u64) << 52;
    m * f64::from_bits(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bit patterns of docs/determinism.md; the Go build tests the same.
    #[test]
    fn vectors() {
        type Case = (&'static str, fn(f64) -> f64, f64, u64);
        let cases: &[Case] = &[
            ("ln", ln, 0.5, 0xbfe62e42fefa39ef),
            ("ln", ln, 2.0, 0x3fe62e42fefa39ef),
            ("ln", ln, 10.0, 0x40026bb1bbb55516),
            ("ln", ln, 0.001, 0xc01ba18a998fffa0),
            ("ln", ln, 123.456, 0x401343774f3e2362),
            ("ln", ln, 1e300, 0x4085963447f87fb5),
            ("ln", ln, 5e-324, 0xc0874385446d71c3),
            ("ln", ln, 0.9999999999999999, 0xbca0000000000000),
            ("exp", exp, -1.0, 0x3fd78b56362cef38),
            ("exp", exp, 0.5, 0x3ffa61298e1e069c),
            ("exp", exp, 1.0, 0x4005bf0a8b145769),
            ("exp", exp, 2.5, 0x40285d6fd931e0bb),
            ("exp", exp, -700.0, 0x00d14f2b0fb9307f),
            ("exp", exp, 700.0, 0x7f0d945df4f8ec8e),
            ("exp", exp, -745.0, 0x0000000000000001),
            ("exp", exp, 1e-9, 0x3ff000000044b830),
            ("exp", exp, 3.7, 0x4044394144eeec81),
        ];
        for &(name, f, x, want) in cases {
            assert_eq!(f(x).to_bits(), want, "{name}({x}) = {}", f(x));
        }
    }

    #[test]
    fn special_values() {
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert!(ln(-1.0).is_nan());
        assert_eq!(ln(f64::INFINITY), f64::INFINITY);
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp(710.0), f64::INFINITY);
        assert_eq!(exp(-746.0), 0.0);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(pow10(-2), 0.01);
        assert_eq!(pow10(23), 1e23);
    }

    /// Within two ulps of the platform's libm (each within about one ulp of
    /// the truth) over many normal inputs.
    #[test]
    fn close_to_the_platform() {
        let ulps = |a: f64, b: f64| (a.to_bits() as i64 - b.to_bits() as i64).abs();
        let mut r = crate::random::Rand::new(1);
        for _ in 0..200_000 {
            let x = f64::from_bits(r.next_u64() >> 1);
            if x.is_finite() && x >= f64::MIN_POSITIVE {
                assert!(
                    ulps(ln(x), x.ln()) <= 2,
                    "ln({x}) = {} against {}",
                    ln(x),
                    x.ln()
                );
            }
            let y = (r.float64() - 0.5) * 1400.0;
            assert!(
                ulps(exp(y), y.exp()) <= 2,
                "exp({y}) = {} against {}",
                exp(y),
                y.exp()
            );
        }
    }

    #[test]
    fn frexp_and_ldexp_round_trip() {
        for x in [1.0, -3.5, 5e-324, 2.2250738585072014e-308, f64::MAX, 0.1] {
            let (f, e) = frexp(x);
            assert!((0.5..1.0).contains(&f.abs()), "frexp({x}) = {f}");
            assert_eq!(ldexp(f, e), x);
        }
    }
}
