//! The two bits of Go's `fmt` that the engine's error messages need: `%q`
//! for names and `%v`/`%g` for floats. Error texts are compared with the Go
//! build's, and Rust's `{:?}` and `{}` spell both differently (`"\u{1}"`
//! for `"\x01"`, `inf` for `+Inf`, `1000000` for `1e+06`).

use std::fmt::Write;

/// `s` quoted as Go's `%q` (strconv.Quote) writes it: printable characters
/// as they are, `"` and `\` escaped, the C escapes for the usual controls,
/// `\xNN` for other ASCII controls and `\uNNNN` for other non-printable
/// characters.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c < ' ' || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if !is_go_printable(c) => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint` outside ASCII: the C1
/// controls, the spaces other than U+0020 and the format and separator
/// characters Go escapes. Names in this project are ASCII; this keeps odd
/// input readable in an error rather than byte-exact in every corner.
fn is_go_printable(c: char) -> bool {
    !matches!(c,
        '\u{80}'..='\u{a0}' | '\u{ad}' | '\u{2000}'..='\u{200f}' | '\u{2028}'..='\u{202f}'
        | '\u{205f}'..='\u{206f}' | '\u{3000}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// `x` as Go's `%v` (and `%g`) writes a float64: the shortest digits that
/// read back as `x`, in `%e` form when the decimal exponent is below -4 or
/// at least 6 (strconv's 'g' at precision -1), else in `%f` form; `NaN`,
/// `+Inf`, `-Inf`.
pub(crate) fn fmt_g(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits as Go's
    // strconv: "d.ddde<exp>".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} always writes an exponent");
    let exp: i32 = exp.parse().expect("{:e} writes a decimal exponent");
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exp.abs());
        return out;
    }
    // The decimal point goes after `point` digits.
    let point = exp + 1;
    let n = digits.len() as i32;
    if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(&digits);
    } else if point >= n {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (point - n) as usize));
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmt_g_writes_what_go_percent_v_writes() {
        // Each pair is Go's fmt.Sprintf("%v", x) for that float64.
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-0.1, "-0.1"),
            (1.5, "1.5"),
            (0.5, "0.5"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.000123, "0.000123"),
            (1.0 / 3.0, "0.3333333333333333"),
            (3.0 / 7.0, "0.42857142857142855"),
            (1e21, "1e+21"),
            (1.5e-300, "1.5e-300"),
            (123456.0, "123456"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
        ];
        for &(x, want) in cases {
            assert_eq!(fmt_g(x), want, "fmt_g({x:?})");
        }
    }

    #[test]
    fn quote_writes_what_go_percent_q_writes() {
        let cases: &[(&str, &str)] = &[
            ("", r#""""#),
            ("3g.40gb", r#""3g.40gb""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("tab\there\n", r#""tab\there\n""#),
            ("\u{1}\u{7f}", r#""\x01\x7f""#),
            ("é@1", r#""é@1""#),
            ("\u{a0}", r#""\u00a0""#),
        ];
        for &(s, want) in cases {
            assert_eq!(quote(s), want, "quote({s:?})");
        }
    }
}
