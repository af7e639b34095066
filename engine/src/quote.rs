//! Go's `strconv.Quote` (the `%q` verb on a string): error texts name a
//! value in quotes exactly as the Go build's do (Rust's `{:?}` spells some
//! characters differently, `"\u{1}"` for `"\x01"`), invalid UTF-8
//! included. The one place the engine and the application quote a value.

use std::fmt::Write;

mod isprint;

use isprint::{IS_NOT_PRINT16, IS_NOT_PRINT32, IS_PRINT16, IS_PRINT32};

/// `s` quoted as Go's `%q` writes it.
pub fn quote(s: &str) -> String {
    go_quote(s.as_bytes())
}

/// `s` in double quotes with Go's escapes: `\"`, `\\`, the C escapes,
/// `\xNN` for other control bytes and for bytes that are not valid UTF-8,
/// `\uNNNN` or `\UNNNNNNNN` for runes that are not printable.
pub fn go_quote(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for chunk in s.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_rune(&mut out, c);
        }
        // Go decodes an invalid sequence one byte at a time, each one
        // printed as \x.
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out.push('"');
    out
}

fn push_rune(out: &mut String, c: char) {
    if c == '"' || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if is_print(c) {
        out.push(c);
        return;
    }
    let escaped = match c {
        '\u{07}' => "\\a",
        '\u{08}' => "\\b",
        '\u{0c}' => "\\f",
        '\n' => "\\n",
        '\r' => "\\r",
        '\t' => "\\t",
        '\u{0b}' => "\\v",
        _ => "",
    };
    if !escaped.is_empty() {
        out.push_str(escaped);
        return;
    }
    let r = u32::from(c);
    let _ = if r < 0x20 || r == 0x7f {
        write!(out, "\\x{r:02x}")
    } else if r < 0x10000 {
        write!(out, "\\u{r:04x}")
    } else {
        write!(out, "\\U{r:08x}")
    };
}

/// Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols
/// and the ASCII space, by Go's Unicode tables.
pub(crate) fn is_print(c: char) -> bool {
    let r = u32::from(c);
    if r <= 0xff {
        return (0x20..=0x7e).contains(&r) || ((0xa1..=0xff).contains(&r) && r != 0xad);
    }
    if let Ok(r) = u16::try_from(r) {
        return in_ranges(IS_PRINT16, r) && IS_NOT_PRINT16.binary_search(&r).is_err();
    }
    if !in_ranges(IS_PRINT32, r) {
        return false;
    }
    if r >= 0x20000 {
        return true;
    }
    // Below 0x20000 the exceptions are stored as 16-bit offsets.
    let offset = (r - 0x10000) as u16;
    IS_NOT_PRINT32.binary_search(&offset).is_err()
}

/// Whether `r` lies in one of the inclusive ranges `[lo, hi]` that
/// `pairs` lists one after the other.
fn in_ranges<T: Ord + Copy>(pairs: &[T], r: T) -> bool {
    // The first entry not below r ends or starts the only range that can
    // hold r.
    let i = pairs.partition_point(|&x| x < r);
    i < pairs.len() && pairs[i & !1] <= r && r <= pairs[i | 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_go() {
        // Expected texts printed by Go 1.26.8's fmt.Sprintf("%q", s).
        let cases: &[(&[u8], &str)] = &[
            (b"", r#""""#),
            (b"abc", r#""abc""#),
            (b"a\"b\\c", r#""a\"b\\c""#),
            (b"a\nb\tc\r\x07\x08\x0c\x0b", r#""a\nb\tc\r\a\b\f\v""#),
            (b"\x00\x1f\x7f", r#""\x00\x1f\x7f""#),
            (b"\xff\xfe", r#""\xff\xfe""#),
            (b"caf\xc3\xa9", "\"caf\u{e9}\""),
            (b"\xc3", r#""\xc3""#),
            ("\u{a0}\u{ad}\u{85}".as_bytes(), r#""\u00a0\u00ad\u0085""#),
            ("\u{2028}\u{feff}".as_bytes(), r#""\u2028\ufeff""#),
            ("\u{fffd}".as_bytes(), "\"\u{fffd}\""),
            ("\u{1f600}".as_bytes(), "\"\u{1f600}\""),
            ("\u{e0001}".as_bytes(), r#""\U000e0001""#),
            ("\u{10ffff}".as_bytes(), r#""\U0010ffff""#),
            (b"\xed\xa0\x80", r#""\xed\xa0\x80""#),
        ];
        for (input, want) in cases {
            assert_eq!(go_quote(input), *want, "quoting {input:?}");
        }
    }

    #[test]
    fn is_print_edges() {
        assert!(is_print(' '));
        assert!(!is_print('\u{85}'));
        assert!(is_print('\u{377}'));
        assert!(!is_print('\u{378}'));
        assert!(!is_print('\u{38b}'));
        assert!(!is_print('\u{1000c}'));
        assert!(is_print('\u{10000}'));
        assert!(is_print('\u{20000}'));
        assert!(!is_print('\u{e0001}'));
    }
}
