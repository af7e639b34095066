//! Go's `%q`, which the engine's error messages use for names: error texts
//! are compared with the Go build's, and Rust's `{:?}` spells some
//! differently (`"\u{1}"` for `"\x01"`). (Go's float forms are in
//! `crate::numfmt`.)

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

#[cfg(test)]
mod tests {
    use super::*;

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
