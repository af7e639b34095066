//! The rows of one CSV file whose columns are located by header name, and
//! the cell checks both kinds of list share. It owns the position
//! bookkeeping so that every error the row parsers build carries the file,
//! line and column.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;

use super::csv;
use super::{Cause, ParseError};

/// One known header of a kind of file.
pub(super) struct Column {
    pub name: &'static str,
    pub required: bool,
}

/// The rows of one file. Column ids are indexes into the kind's columns.
pub(super) struct Table<'a> {
    file: &'a str,
    csv: csv::Reader<'a>,
    cols: &'static [Column],
    /// `pos[c]` is the field index of `cols[c]`, `None` when absent.
    pos: Vec<Option<usize>>,
    /// The number of header fields; every row must have as many.
    width: usize,
    /// An upper bound on the number of rows, to size the results.
    pub rows_hint: usize,
}

const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// The shortest possible row of either kind of file: a one-letter name,
/// four one-digit numbers (or three and an empty model), the commas and
/// the newline.
const MIN_ROW_BYTES: usize = 9;

impl<'a> Table<'a> {
    /// Reads and checks the header of `data`; `file` names it in errors.
    pub fn new(data: &'a [u8], file: &'a str, cols: &'static [Column]) -> Result<Self, ParseError> {
        // Files saved by spreadsheet tools start with a BOM, which would
        // otherwise end up glued to the first header name.
        let data = data.strip_prefix(UTF8_BOM).unwrap_or(data);
        // Counting newlines alone would let a file of blank lines ask for
        // a huge allocation, so the count is also capped by what the bytes
        // could hold.
        let newlines = data.iter().filter(|&&b| b == b'\n').count();
        let rows_hint = newlines.min(data.len() / MIN_ROW_BYTES);
        let mut t = Table {
            file,
            csv: csv::Reader::new(data),
            cols,
            pos: vec![None; cols.len()],
            width: 0,
            rows_hint,
        };
        match t.csv.read() {
            Ok(true) => {}
            Ok(false) => return Err(t.error(0, Cause::NoHeader)),
            Err(e) => return Err(t.error(e.line, e.cause)),
        }
        t.locate()?;
        Ok(t)
    }

    /// Fills `pos` from the header fields, rejecting duplicate, unknown and
    /// missing columns.
    fn locate(&mut self) -> Result<(), ParseError> {
        self.width = self.csv.len();
        let header_line = self.csv.field_line(0);
        let mut seen: BTreeMap<&[u8], usize> = BTreeMap::new();
        let mut unknown = Vec::new();
        for i in 0..self.width {
            let name = self.csv.field(i);
            if let Some(&first) = seen.get(name) {
                let cause = Cause::DuplicateColumn {
                    name: name.to_vec(),
                    first: first + 1,
                    second: i + 1,
                };
                return Err(self.error(header_line, cause));
            }
            seen.insert(name, i);
            match self.cols.iter().position(|c| c.name.as_bytes() == name) {
                Some(c) => self.pos[c] = Some(i),
                None => unknown.push(name.to_vec()),
            }
        }
        if !unknown.is_empty() {
            let known = self.cols.iter().map(|c| c.name).collect();
            let cause = Cause::UnknownColumns {
                names: unknown,
                known,
            };
            return Err(self.error(header_line, cause));
        }
        let missing: Vec<&'static str> = self
            .cols
            .iter()
            .zip(&self.pos)
            .filter(|(col, pos)| col.required && pos.is_none())
            .map(|(col, _)| col.name)
            .collect();
        if !missing.is_empty() {
            let cause = Cause::MissingColumns { names: missing };
            return Err(self.error(header_line, cause));
        }
        Ok(())
    }

    /// Moves to the next row; false at the end of the input. Blank lines
    /// carry no row, so skipping them (the trailing newline, say) loses
    /// nothing.
    pub fn next(&mut self) -> Result<bool, ParseError> {
        match self.csv.read() {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => return Err(self.error(e.line, e.cause)),
        }
        if self.csv.len() != self.width {
            let cause = Cause::FieldCount {
                got: self.csv.len(),
                want: self.width,
            };
            return Err(self.error(self.line(), cause));
        }
        Ok(true)
    }

    /// The line on which the current row starts.
    pub fn line(&self) -> usize {
        self.csv.field_line(0)
    }

    /// An error not tied to a cell.
    fn error(&self, line: usize, cause: Cause) -> ParseError {
        ParseError {
            file: self.file.to_string(),
            line,
            column: None,
            value: Vec::new(),
            cause,
        }
    }

    /// The text of column `c` in the current row; empty when absent.
    pub fn cell(&self, c: usize) -> &[u8] {
        match self.pos[c] {
            Some(i) => self.csv.field(i),
            None => b"",
        }
    }

    /// The error for column `c` of the current row. The line is that of
    /// the cell itself, which differs from the row's first line only when
    /// an earlier quoted cell spans lines.
    pub fn cell_error(&self, c: usize, cause: Cause) -> ParseError {
        let line = match self.pos[c] {
            Some(i) => self.csv.field_line(i),
            None => self.line(),
        };
        ParseError {
            file: self.file.to_string(),
            line,
            column: Some(self.cols[c].name),
            value: self.cell(c).to_vec(),
            cause,
        }
    }

    /// A required non-negative integer column.
    pub fn count(&self, c: usize) -> Result<i64, ParseError> {
        parse_count(self.cell(c)).map_err(|cause| self.cell_error(c, cause))
    }

    /// `count` for columns held in a `usize` (Go's `int`).
    pub fn small_count(&self, c: usize) -> Result<usize, ParseError> {
        let n = self.count(c)?;
        usize::try_from(n).map_err(|_| self.cell_error(c, Cause::OutOfRange))
    }

    /// An optional non-negative integer column: absent or empty reads as
    /// `None`.
    pub fn opt_count(&self, c: usize) -> Result<Option<i64>, ParseError> {
        if self.cell(c).is_empty() {
            return Ok(None);
        }
        self.count(c).map(Some)
    }

    /// A free-text column, checked by [`check_text`].
    pub fn text(&self, c: usize) -> Result<&str, ParseError> {
        check_text(self.cell(c)).map_err(|cause| self.cell_error(c, cause))
    }
}

/// Checks a text cell. Surrounding white space is rejected rather than
/// trimmed: in a hand-edited file it usually means "a, b", and a model
/// named " T4" would silently never match a node's "T4". Control
/// characters (a newline inside a quoted cell, say) and invalid UTF-8 are
/// rejected so that names print as one readable token in logs and reports.
/// The checks run in the Go build's order, so a cell with several faults
/// names the same one.
pub(super) fn check_text(s: &[u8]) -> Result<&str, Cause> {
    if starts_with_space(s) || ends_with_space(s) {
        return Err(Cause::Spaces);
    }
    let s = std::str::from_utf8(s).map_err(|_| Cause::BadUtf8)?;
    let control = if s.is_ascii() {
        s.bytes().any(|b| b.is_ascii_control())
    } else {
        s.chars().any(char::is_control)
    };
    if control {
        return Err(Cause::Control);
    }
    Ok(s)
}

// Go's unicode.IsSpace and Rust's char::is_whitespace are both Unicode's
// White_Space property. The text may still be invalid UTF-8 here: like Go's
// strings.TrimSpace, only a whole, valid space rune at either end counts.

fn starts_with_space(s: &[u8]) -> bool {
    match s.first() {
        None => false,
        Some(&b) if b.is_ascii() => char::from(b).is_whitespace(),
        Some(_) => (2..=s.len().min(4)).any(|n| one_char(&s[..n]).is_some_and(char::is_whitespace)),
    }
}

fn ends_with_space(s: &[u8]) -> bool {
    match s.last() {
        None => false,
        Some(&b) if b.is_ascii() => char::from(b).is_whitespace(),
        Some(_) => (2..=s.len().min(4))
            .any(|n| one_char(&s[s.len() - n..]).is_some_and(char::is_whitespace)),
    }
}

/// The character `s` encodes, if it is exactly one valid UTF-8 character.
fn one_char(s: &[u8]) -> Option<char> {
    let mut chars = std::str::from_utf8(s).ok()?.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some(c)
}

/// Parses plain decimal digits only: no sign, no spaces, no fraction, no
/// exponent. The trace writes every number that way, so anything else is a
/// corrupted cell, not an alternative spelling.
pub(super) fn parse_count(s: &[u8]) -> Result<i64, Cause> {
    if s.is_empty() {
        return Err(Cause::EmptyCell);
    }
    let (negative, digits) = match s.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    if digits.is_empty() {
        return Err(Cause::NotInteger);
    }
    let mut n: i64 = 0;
    let mut overflow = false;
    // Every byte is scanned even after an overflow, so that a long garbage
    // cell is reported as not an integer rather than as out of range.
    for &b in digits {
        if !b.is_ascii_digit() {
            return Err(Cause::NotInteger);
        }
        let d = i64::from(b - b'0');
        match n.checked_mul(10).and_then(|n| n.checked_add(d)) {
            Some(next) if !overflow => n = next,
            _ => overflow = true,
        }
    }
    if negative {
        // "-0" too: harmless in value, but not how the trace writes zero.
        return Err(Cause::Negative);
    }
    if overflow {
        return Err(Cause::OutOfRange);
    }
    Ok(n)
}

/// All of `r`, read for the list named `file`; a read error becomes that
/// list's error.
pub(super) fn read_all(mut r: impl Read, file: &str) -> Result<Vec<u8>, ParseError> {
    let mut data = Vec::new();
    r.read_to_end(&mut data).map_err(|e| ParseError {
        file: file.to_string(),
        line: 0,
        column: None,
        value: Vec::new(),
        cause: Cause::Read(e),
    })?;
    Ok(data)
}

/// The rows of a list with `columns`, each read by `row`, in file order.
/// No two rows may share a name: `name` gives a row's name and line, and
/// a second use of a name is an error in column `name_column`.
pub(super) fn parse_rows<T>(
    data: &[u8],
    file: &str,
    columns: &'static [Column],
    name_column: usize,
    row: impl Fn(&Table) -> Result<T, ParseError>,
    name: impl Fn(&T) -> (&str, usize),
) -> Result<Vec<T>, ParseError> {
    let mut t = Table::new(data, file, columns)?;
    let mut rows = Vec::with_capacity(t.rows_hint);
    // Only looked up, never iterated: the order of the result is the file's.
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(t.rows_hint);
    while t.next()? {
        let r = row(&t)?;
        let (n, line) = name(&r);
        if let Some(&first) = seen.get(n) {
            return Err(t.cell_error(name_column, Cause::DuplicateName { first }));
        }
        seen.insert(n.to_string(), line);
        rows.push(r);
    }
    Ok(rows)
}
