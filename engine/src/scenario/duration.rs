//! Go's `time.Duration` as scenario files and their errors write it:
//! `time.ParseDuration` ("168h", "1h30m", "90s", "1.5h", "-2h") and
//! `Duration.String` ("168h0m0s", "1m30s", "1.5ms"). Durations are
//! nanoseconds in an i64, as in Go.

/// One second in nanoseconds.
pub const SECOND: i64 = 1_000_000_000;
/// One minute in nanoseconds.
pub const MINUTE: i64 = 60 * SECOND;
/// One hour in nanoseconds.
pub const HOUR: i64 = 60 * MINUTE;

const UNITS: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000), // U+00B5
    ("μs", 1_000), // U+03BC
    ("ms", 1_000_000),
    ("s", SECOND as u64),
    ("m", MINUTE as u64),
    ("h", HOUR as u64),
];

/// Go's `time.ParseDuration`: a signed sequence of decimal numbers, each
/// with an optional fraction and a unit. None where Go returns an error.
pub fn parse_duration(text: &str) -> Option<i64> {
    const LIMIT: u64 = 1 << 63;
    let mut s = text.as_bytes();
    let mut neg = false;
    if let Some(&c) = s.first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Some(0);
    }
    if s.is_empty() {
        return None;
    }
    let mut d: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return None;
        }
        // The integer part.
        let mut v: u64 = 0;
        let mut i = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            if v > LIMIT / 10 {
                return None;
            }
            v = v * 10 + u64::from(s[i] - b'0');
            if v > LIMIT {
                return None;
            }
            i += 1;
        }
        let pre = i > 0;
        s = &s[i..];
        // The fraction: digits past what a u64 holds are read and dropped.
        let (mut f, mut scale) = (0u64, 1f64);
        let mut post = false;
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let mut i = 0;
            let mut overflow = false;
            while i < s.len() && s[i].is_ascii_digit() {
                if !overflow {
                    if f > (LIMIT - 1) / 10 {
                        overflow = true;
                    } else {
                        let y = f * 10 + u64::from(s[i] - b'0');
                        if y > LIMIT {
                            overflow = true;
                        } else {
                            f = y;
                            scale *= 10.0;
                        }
                    }
                }
                i += 1;
            }
            post = i > 0;
            s = &s[i..];
        }
        if !pre && !post {
            return None;
        }
        // The unit.
        let end = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if end == 0 {
            return None;
        }
        let unit = std::str::from_utf8(&s[..end]).ok()?;
        let (_, unit) = UNITS.iter().find(|(name, _)| *name == unit)?;
        s = &s[end..];
        if v > LIMIT / unit {
            return None;
        }
        v *= unit;
        if f > 0 {
            // As Go: float64 is nanosecond-accurate for fractions of hours.
            v += (f as f64 * (*unit as f64 / scale)) as u64;
            if v > LIMIT {
                return None;
            }
        }
        d += v;
        if d > LIMIT {
            return None;
        }
    }
    if neg {
        return Some((d as i64).wrapping_neg());
    }
    if d > LIMIT - 1 {
        return None;
    }
    Some(d as i64)
}

/// Go's `Duration.String`: "72h3m0.5s", "1m30s", "1.5ms", "0s".
pub fn format_duration(d: i64) -> String {
    let neg = d < 0;
    let mut u = d.unsigned_abs();
    // Built backwards, as Go does.
    let mut out: Vec<u8> = Vec::new();
    let frac = |out: &mut Vec<u8>, v: u64, prec: usize| -> u64 {
        let mut v = v;
        let mut print = false;
        for _ in 0..prec {
            let digit = v % 10;
            print = print || digit != 0;
            if print {
                out.push(b'0' + digit as u8);
            }
            v /= 10;
        }
        if print {
            out.push(b'.');
        }
        v
    };
    let int = |out: &mut Vec<u8>, v: u64| {
        out.extend(v.to_string().bytes().rev());
    };
    if u < SECOND as u64 {
        let prec;
        out.push(b's');
        if u == 0 {
            return "0s".to_string();
        } else if u < 1_000 {
            prec = 0;
            out.push(b'n');
        } else if u < 1_000_000 {
            prec = 3;
            // "µ" (U+00B5) backwards.
            out.extend_from_slice(&[0xb5, 0xc2]);
        } else {
            prec = 6;
            out.push(b'm');
        }
        u = frac(&mut out, u, prec);
        int(&mut out, u);
    } else {
        out.push(b's');
        u = frac(&mut out, u, 9);
        int(&mut out, u % 60);
        u /= 60;
        if u > 0 {
            out.push(b'm');
            int(&mut out, u % 60);
            u /= 60;
            if u > 0 {
                out.push(b'h');
                int(&mut out, u);
            }
        }
    }
    if neg {
        out.push(b'-');
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// A duration without trailing zero units, as scenario errors write one:
/// "24h", "1h30m", "90s" is "1m30s".
pub fn human(d: i64) -> String {
    let mut s = format_duration(d);
    if s.ends_with("m0s") {
        s.truncate(s.len() - 2);
    }
    if s.ends_with("h0m") {
        s.truncate(s.len() - 2);
    }
    s
}

/// Go's `Duration.Seconds`: whole seconds plus the fraction, each
/// converted apart so that long durations keep their nanoseconds.
pub fn seconds(d: i64) -> f64 {
    let sec = d / SECOND;
    let nsec = d % SECOND;
    sec as f64 + nsec as f64 / 1e9
}

/// Go's `Duration.Hours`.
pub fn hours(d: i64) -> f64 {
    let hour = d / HOUR;
    let nsec = d % HOUR;
    hour as f64 + nsec as f64 / (60.0 * 60.0 * 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        for (text, want) in [
            ("168h", Some(168 * HOUR)),
            ("1h30m", Some(HOUR + 30 * MINUTE)),
            ("90s", Some(90 * SECOND)),
            ("1.5h", Some(HOUR + 30 * MINUTE)),
            ("-2h", Some(-2 * HOUR)),
            ("+5m", Some(5 * MINUTE)),
            ("0", Some(0)),
            ("-0", Some(0)),
            ("0s", Some(0)),
            ("1µs", Some(1000)),
            ("1μs", Some(1000)),
            ("1us2ns", Some(1002)),
            (".5s", Some(SECOND / 2)),
            ("1.s", Some(SECOND)),
            ("2562047h47m16.854775807s", Some(i64::MAX)),
            ("-2562047h47m16.854775808s", Some(i64::MIN)),
            ("2562047h47m16.854775808s", None),
            ("9223372036854775808ns", None),
            ("", None),
            ("3600", None),
            ("7d", None),
            ("1h 30m", None),
            (".s", None),
            ("-", None),
            ("1e3s", None),
        ] {
            assert_eq!(parse_duration(text), want, "{text:?}");
        }
    }

    #[test]
    fn formats_as_go_does() {
        for (d, want) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (3 * SECOND + SECOND / 2, "3.5s"),
            (90 * SECOND, "1m30s"),
            (24 * HOUR, "24h0m0s"),
            (-30 * MINUTE, "-30m0s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(format_duration(d), want, "{d}");
        }
        assert_eq!(human(24 * HOUR), "24h");
        assert_eq!(human(90 * MINUTE), "1h30m");
        assert_eq!(human(90 * SECOND), "1m30s");
        assert_eq!(human(0), "0s");
        assert_eq!(human(-SECOND), "-1s");
    }
}
