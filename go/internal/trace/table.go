package trace

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// column is one known header of a file kind.
type column struct {
	name     string
	required bool
}

// table walks the rows of one CSV file whose columns are located by header
// name. It owns the position bookkeeping so that every error the row
// parsers build carries the file, line and column.
type table struct {
	file  string
	cr    *csv.Reader
	cols  []column // the known columns of this file kind
	pos   []int    // pos[c] is the field index of cols[c], -1 when absent
	width int      // number of header fields; every row must match
	rec   []string // the current row

	// rowsHint is an upper bound on the number of rows for pre-sizing.
	rowsHint int
}

const utf8BOM = "\xef\xbb\xbf"

// newTable reads and checks the header. cols lists the columns of the
// file kind; the ids the row parsers use are indexes into it.
//
// The whole input is read into memory first. Trace files are a few
// hundred kilobytes, and knowing the size lets rowsHint pre-size the result
// and the duplicate-name map, which took about a third of the read time
// when they grew by doubling.
func newTable(r io.Reader, file string, cols []column) (*table, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, &ParseError{File: file, Err: err}
	}
	// Files saved by spreadsheet tools start with a BOM, which would
	// otherwise end up glued to the first header name.
	data = bytes.TrimPrefix(data, []byte(utf8BOM))
	br := bytes.NewReader(data)
	cr := csv.NewReader(br)
	// Field counts are checked here, not by encoding/csv, so the error can
	// say which counts were expected. The strings of a record are fresh on
	// every Read even with ReuseRecord; only the slice is reused.
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true

	t := &table{file: file, cr: cr, cols: cols, rowsHint: rowsHint(data)}
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{File: file, Err: errNoHeader}
	}
	if err != nil {
		return nil, t.csvError(err)
	}
	if err := t.locate(header); err != nil {
		return nil, err
	}
	return t, nil
}

// minRowBytes is the shortest possible row of either file kind: a
// one-letter name, four one-digit numbers (or three and an empty model),
// the commas and the newline.
const minRowBytes = 9

// rowsHint bounds the number of rows in data. Counting newlines alone
// would let a file of blank lines demand a huge allocation, so the count
// is also capped by what the bytes could hold.
func rowsHint(data []byte) int {
	return min(bytes.Count(data, []byte("\n")), len(data)/minRowBytes)
}

// locate fills pos from the header fields, rejecting duplicate, unknown and
// missing columns.
func (t *table) locate(header []string) error {
	t.width = len(header)
	t.pos = make([]int, len(t.cols))
	for c := range t.pos {
		t.pos[c] = -1
	}
	headerLine, _ := t.cr.FieldPos(0)
	seen := make(map[string]int, len(header))
	var unknown []string
	for i, name := range header {
		if first, dup := seen[name]; dup {
			return &ParseError{File: t.file, Line: headerLine,
				Err: fmt.Errorf("duplicate column %q (fields %d and %d)", name, first+1, i+1)}
		}
		seen[name] = i
		c := t.columnID(name)
		if c < 0 {
			unknown = append(unknown, fmt.Sprintf("%q", name))
			continue
		}
		t.pos[c] = i
	}
	if len(unknown) > 0 {
		return &ParseError{File: t.file, Line: headerLine,
			Err: fmt.Errorf("unknown columns %s (known: %s)", strings.Join(unknown, ", "), t.knownNames())}
	}
	var missing []string
	for c, col := range t.cols {
		if col.required && t.pos[c] < 0 {
			missing = append(missing, col.name)
		}
	}
	if len(missing) > 0 {
		return &ParseError{File: t.file, Line: headerLine,
			Err: fmt.Errorf("missing required columns %s", strings.Join(missing, ", "))}
	}
	return nil
}

func (t *table) columnID(name string) int {
	for c, col := range t.cols {
		if col.name == name {
			return c
		}
	}
	return -1
}

func (t *table) knownNames() string {
	names := make([]string, len(t.cols))
	for c, col := range t.cols {
		names[c] = col.name
	}
	return strings.Join(names, ", ")
}

// next reads the following row into t.rec. It returns false at the end of
// the input. encoding/csv skips empty lines, which covers the trailing
// newline; they carry no row, so skipping them loses nothing.
func (t *table) next() (bool, error) {
	rec, err := t.cr.Read()
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, t.csvError(err)
	}
	t.rec = rec
	if len(rec) != t.width {
		return false, &ParseError{File: t.file, Line: t.line(),
			Err: fmt.Errorf("row has %d fields, header has %d", len(rec), t.width)}
	}
	return true, nil
}

// line is the line on which the current row starts.
func (t *table) line() int {
	l, _ := t.cr.FieldPos(0)
	return l
}

// csvError turns an encoding/csv syntax error into a ParseError so that
// callers see one error type with one position format.
func (t *table) csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: t.file, Line: pe.Line, Err: pe.Err}
	}
	return &ParseError{File: t.file, Err: err}
}

// cell is the text of column c in the current row; "" when absent.
func (t *table) cell(c int) string {
	if t.pos[c] < 0 {
		return ""
	}
	return t.rec[t.pos[c]]
}

// cellError builds the error for column c of the current row. The line is
// that of the cell itself, which differs from the row's first line only
// when an earlier quoted cell spans lines.
func (t *table) cellError(c int, err error) *ParseError {
	line, _ := t.cr.FieldPos(t.pos[c])
	return &ParseError{File: t.file, Line: line, Column: t.cols[c].name, Value: t.cell(c), Err: err}
}

// count parses a required non-negative integer column.
func (t *table) count(c int) (int64, error) {
	n, err := parseCount(t.cell(c))
	if err != nil {
		return 0, t.cellError(c, err)
	}
	return n, nil
}

// smallCount is count for columns stored in an int.
func (t *table) smallCount(c int) (int, error) {
	n, err := t.count(c)
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt {
		return 0, t.cellError(c, errOutOfRange)
	}
	return int(n), nil
}

// optCount parses an optional non-negative integer column: absent or empty
// reads as (0, false).
func (t *table) optCount(c int) (int64, bool, error) {
	if t.cell(c) == "" {
		return 0, false, nil
	}
	n, err := t.count(c)
	if err != nil {
		return 0, false, err
	}
	return n, true, nil
}

// text checks a free-text column. Surrounding white space is rejected
// rather than trimmed: in a hand-edited file it usually means "a, b", and
// a model named " T4" would silently never match a node's "T4". Control
// characters (a newline inside a quoted cell, say) and invalid UTF-8 are
// rejected so that names print as one readable token in logs and reports.
func (t *table) text(c int) (string, error) {
	s := t.cell(c)
	if err := checkText(s); err != nil {
		return "", t.cellError(c, err)
	}
	return s, nil
}

func checkText(s string) error {
	if strings.TrimSpace(s) != s {
		return errSpaces
	}
	if !utf8.ValidString(s) {
		return errBadUTF8
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return errControl
	}
	return nil
}

// parseCount accepts only plain decimal digits: no sign, no spaces, no
// fraction, no exponent. The trace writes every number that way, so
// anything else is a corrupted cell, not an alternative spelling.
func parseCount(s string) (int64, error) {
	if s == "" {
		return 0, errEmptyCell
	}
	neg := s[0] == '-'
	digits := s
	if neg {
		digits = s[1:]
	}
	if digits == "" {
		return 0, errNotInteger
	}
	var n int64
	overflow := false
	// Scan every byte even after an overflow, so that a long garbage cell
	// is reported as not an integer rather than as out of range.
	for i := 0; i < len(digits); i++ {
		d := int64(digits[i]) - '0'
		if d < 0 || d > 9 {
			return 0, errNotInteger
		}
		if overflow || n > (math.MaxInt64-d)/10 {
			overflow = true
			continue
		}
		n = n*10 + d
	}
	switch {
	case neg:
		// "-0" too: harmless in value, but not how the trace writes zero.
		return 0, errNegative
	case overflow:
		return 0, errOutOfRange
	}
	return n, nil
}
