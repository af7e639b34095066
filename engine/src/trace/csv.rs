//! The record reader: Go's `encoding/csv` `Reader.Read` with the settings
//! the Go build uses (comma `,`, no comments, strict quotes, any number of
//! fields), ported line for line.
//!
//! We keep our own reader instead of the `csv` crate because the error
//! texts must be the Go build's, line numbers included, and they come from
//! the details of this reader: which physical line a quoted field that
//! spans lines is blamed on, that `\r\n` inside quotes reads as `\n`, that
//! blank lines are skipped but a line of spaces is a record, that a `\r`
//! just before the end of the input is dropped. Matching another parser
//! to all of that would take more code than this port.

use super::Cause;

/// A syntax error: the line Go's `csv.ParseError` names, and its cause
/// ([`Cause::BareQuote`] or [`Cause::Quote`]).
#[derive(Debug)]
pub(super) struct SyntaxError {
    pub line: usize,
    pub cause: Cause,
}

/// One physical line: its bytes without the line end, and whether a
/// `\n` (or `\r\n`, which reads as `\n`) ended it.
#[derive(Clone, Copy)]
struct Line<'a> {
    text: &'a [u8],
    newline: bool,
}

impl Line<'_> {
    /// Go's `len(line)`, the line end counted.
    fn len(&self) -> usize {
        self.text.len() + usize::from(self.newline)
    }

    /// Drops the first `n` bytes of the text.
    fn advance(&mut self, n: usize) {
        self.text = &self.text[n..];
    }
}

/// Reads records from text held in memory.
pub(super) struct Reader<'a> {
    data: &'a [u8],
    /// Offset of the first byte not read yet.
    at: usize,
    /// Lines read so far, the empty read at the end included (Go's
    /// `numLine`).
    num_line: usize,
    /// The current record's fields, unescaped, one after another.
    buf: Vec<u8>,
    /// `ends[i]` is where field i ends in `buf`.
    ends: Vec<usize>,
    /// `lines[i]` is the line on which field i starts.
    lines: Vec<usize>,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader {
            data,
            at: 0,
            num_line: 0,
            buf: Vec::new(),
            ends: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// The number of fields of the current record.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Field `i` of the current record.
    pub fn field(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.buf[start..self.ends[i]]
    }

    /// The line on which field `i` of the current record starts.
    pub fn field_line(&self, i: usize) -> usize {
        self.lines[i]
    }

    /// Go's `readLine`: the next line, or `None` at the end of the input.
    fn read_line(&mut self) -> Option<Line<'a>> {
        // Go counts the read that finds the end too.
        self.num_line += 1;
        let rest = &self.data[self.at..];
        if rest.is_empty() {
            return None;
        }
        match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                self.at += i + 1;
                let text = match rest[..i].strip_suffix(b"\r") {
                    Some(text) => text,
                    None => &rest[..i],
                };
                Some(Line {
                    text,
                    newline: true,
                })
            }
            None => {
                self.at = self.data.len();
                // Go drops one \r before the end of the input.
                let text = rest.strip_suffix(b"\r").unwrap_or(rest);
                Some(Line {
                    text,
                    newline: false,
                })
            }
        }
    }

    /// Go's `readRecord`: reads the next record and returns true, or false
    /// at the end of the input. Blank lines are skipped.
    pub fn read(&mut self) -> Result<bool, SyntaxError> {
        let mut line = loop {
            match self.read_line() {
                None => return Ok(false),
                Some(l) if l.text.is_empty() => continue,
                Some(l) => break l,
            }
        };
        self.buf.clear();
        self.ends.clear();
        self.lines.clear();
        let mut pos_line = self.num_line;
        loop {
            if line.text.first() != Some(&b'"') {
                // A field without quotes runs to the next comma or the end
                // of the line, and may not hold a quote.
                let end = line.text.iter().position(|&b| b == b',' || b == b'"');
                let comma = match end {
                    Some(i) if line.text[i] == b'"' => {
                        return Err(SyntaxError {
                            line: self.num_line,
                            cause: Cause::BareQuote,
                        });
                    }
                    end => end,
                };
                let field = &line.text[..comma.unwrap_or(line.text.len())];
                self.buf.extend_from_slice(field);
                self.ends.push(self.buf.len());
                self.lines.push(pos_line);
                match comma {
                    Some(i) => line.advance(i + 1),
                    None => return Ok(true),
                }
                continue;
            }
            // A quoted field: "" is a quote, and it may span lines.
            let field_line = pos_line;
            line.advance(1);
            loop {
                if let Some(i) = line.text.iter().position(|&b| b == b'"') {
                    self.buf.extend_from_slice(&line.text[..i]);
                    line.advance(i + 1);
                    match line.text.first() {
                        Some(b'"') => {
                            self.buf.push(b'"');
                            line.advance(1);
                        }
                        Some(b',') => {
                            line.advance(1);
                            self.ends.push(self.buf.len());
                            self.lines.push(field_line);
                            break;
                        }
                        None => {
                            self.ends.push(self.buf.len());
                            self.lines.push(field_line);
                            return Ok(true);
                        }
                        Some(_) => {
                            return Err(SyntaxError {
                                line: self.num_line,
                                cause: Cause::Quote,
                            });
                        }
                    }
                } else if line.len() > 0 {
                    // The line ends inside the quotes: its end is part of
                    // the field, and the field goes on on the next line.
                    self.buf.extend_from_slice(line.text);
                    if line.newline {
                        self.buf.push(b'\n');
                    }
                    line = match self.read_line() {
                        Some(next) => {
                            if next.len() > 0 {
                                pos_line += 1;
                            }
                            next
                        }
                        None => Line {
                            text: b"",
                            newline: false,
                        },
                    };
                } else {
                    // The input ends inside the quotes.
                    return Err(SyntaxError {
                        line: pos_line,
                        cause: Cause::Quote,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record's fields, each with the line it starts on.
    type Record = Vec<(String, usize)>;

    /// Every record of `data`, or the error's line and text.
    fn records(data: &str) -> Result<Vec<Record>, (usize, String)> {
        let mut r = Reader::new(data.as_bytes());
        let mut out = Vec::new();
        loop {
            match r.read() {
                Ok(false) => return Ok(out),
                Ok(true) => out.push(
                    (0..r.len())
                        .map(|i| {
                            (
                                String::from_utf8_lossy(r.field(i)).into_owned(),
                                r.field_line(i),
                            )
                        })
                        .collect(),
                ),
                Err(e) => return Err((e.line, e.cause.to_string())),
            }
        }
    }

    fn rec(fields: &[(&str, usize)]) -> Record {
        fields.iter().map(|&(f, l)| (f.to_string(), l)).collect()
    }

    // The expected values are what Go 1.26.8's encoding/csv returns
    // (Read, then FieldPos(i) for the lines).
    #[test]
    fn reads_like_encoding_csv() {
        assert_eq!(records(""), Ok(vec![]));
        assert_eq!(records("\n\r\n\n"), Ok(vec![]));
        assert_eq!(
            records("a,b\n\nc,\"d\"\n"),
            Ok(vec![rec(&[("a", 1), ("b", 1)]), rec(&[("c", 3), ("d", 3)])])
        );
        assert_eq!(
            records("a,\"x\r\n\r\ny\"\"z\",b\r\nc"),
            Ok(vec![
                rec(&[("a", 1), ("x\n\ny\"z", 1), ("b", 3)]),
                rec(&[("c", 4)])
            ])
        );
        // A \r before the end of the input is dropped, one elsewhere kept.
        assert_eq!(records("a\rb,c\r"), Ok(vec![rec(&[("a\rb", 1), ("c", 1)])]));
        assert_eq!(records("\r"), Ok(vec![]));
        assert_eq!(records(" \n"), Ok(vec![rec(&[(" ", 1)])]));
        assert_eq!(records("a,"), Ok(vec![rec(&[("a", 1), ("", 1)])]));
        assert_eq!(records("\"\""), Ok(vec![rec(&[("", 1)])]));
        assert_eq!(records("\"a\nb\""), Ok(vec![rec(&[("a\nb", 1)])]));
    }

    #[test]
    fn reports_quote_errors_on_the_lines_go_names() {
        let bare = r#"bare " in non-quoted-field"#.to_string();
        let quote = r#"extraneous or missing " in quoted-field"#.to_string();
        assert_eq!(records("a\nb\"c\n"), Err((2, bare.clone())));
        assert_eq!(records("\"a\nb\",c\"\n"), Err((2, bare)));
        assert_eq!(records("\"a\"b\n"), Err((1, quote.clone())));
        assert_eq!(records("x\n\"a\nb\n"), Err((3, quote.clone())));
        assert_eq!(records("x\n\"a\nb\n\n"), Err((4, quote.clone())));
        assert_eq!(records("\"abc"), Err((1, quote.clone())));
        assert_eq!(records("\"a\n\"x\n"), Err((2, quote)));
    }
}
