package scenario

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is every error Parse, Load, Validate, Nodes and Jobs return about a
// scenario: it names the file, the line when known, and the field.
type Error struct {
	File  string // as given to Parse; "" for a scenario built in code
	Line  int    // 1-based; 0 when unknown
	Field string // path such as "nodes[2].gpus"; "" for the whole file
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.File == "" {
		b.WriteString("scenario")
	}
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// maxIndexDepth bounds how deep the position index follows the document.
// The schema is at most five levels deep (workloads[0].arrival.at[3]);
// a deeper document is refused by the strict decode anyway, and following
// it would cost memory quadratic in its depth.
const maxIndexDepth = 8

// position is where a key or value sits in the file.
type position struct {
	line, column int
	path         string
	text         string    // the key, or the scalar value
	kind         yaml.Kind // of the value
}

// maxIndexEntries bounds the index: merge keys can make a small file
// stand for an exponentially large tree.
const maxIndexEntries = 100_000

// index maps field paths to lines and back, so that errors found while
// decoding (which know only a line) or while validating (which know only a
// path) can name both. It also tells which fields the file gives, so that
// a missing field can be told from a zero one.
type index struct {
	lines  map[string]int // path -> line of its key, or of the item in a list
	keys   []position
	values []position
}

func newIndex(root *yaml.Node) *index {
	ix := &index{lines: map[string]int{}}
	ix.walk(root, "", 0)
	return ix
}

func (ix *index) walk(n *yaml.Node, path string, depth int) {
	if n == nil || depth > maxIndexDepth || len(ix.values) >= maxIndexEntries {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			ix.walk(c, path, depth)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.ShortTag() == "!!merge" {
				ix.merge(v, path, depth)
				continue
			}
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			ix.record(p, k, v)
			ix.walk(v, p, depth+1)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			ix.record(p, item, item)
			ix.walk(item, p, depth+1)
		}
	}
}

// merge indexes the fields a merge key (<<: *defaults) brings into the
// mapping at path, as the decoder will see them.
func (ix *index) merge(v *yaml.Node, path string, depth int) {
	// Bounded as walk is: an alias can name the sequence it sits in
	// (`<<: &a [*a]`), which recursed until the stack overflowed.
	if v == nil || depth > maxIndexDepth || len(ix.values) >= maxIndexEntries {
		return
	}
	switch v.Kind {
	case yaml.AliasNode:
		ix.merge(v.Alias, path, depth+1)
	case yaml.MappingNode:
		ix.walk(v, path, depth)
	case yaml.SequenceNode:
		for _, item := range v.Content {
			ix.merge(item, path, depth+1)
		}
	}
}

func (ix *index) record(path string, key, value *yaml.Node) {
	if _, dup := ix.lines[path]; !dup {
		ix.lines[path] = key.Line
	}
	ix.keys = append(ix.keys, position{key.Line, key.Column, path, key.Value, key.Kind})
	ix.values = append(ix.values, position{value.Line, value.Column, path, value.Value, value.Kind})
}

// lineOf is the line of path, or of its nearest ancestor in the file (a
// missing field is reported at its parent).
func lineOf(lines map[string]int, path string) int {
	for path != "" {
		if l, ok := lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}

var (
	yamlLineRE   = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	unknownRE    = regexp.MustCompile(`^line (\d+): field (.*) not found in type (.*)$`)
	cannotReadRE = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.*)$")
	duplicateRE  = regexp.MustCompile(`^line (\d+): mapping key "(.*)" already defined at line (\d+)$`)
)

// syntaxError turns an error of the YAML parser into an *Error.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Err: errors.New(m[2])}
	}
	return &Error{File: file, Err: errors.New(strings.TrimPrefix(msg, "yaml: "))}
}

// decodeError turns an error of the strict decode into an *Error naming the
// field. The decoder reports only lines, so the field is found by matching
// the key or value text on that line against the index.
func (ix *index) decodeError(file string, err error) *Error {
	var le *leafError
	if errors.As(err, &le) {
		return &Error{File: file, Line: le.line, Field: ix.find(ix.values, le.line, le.column, ""), Err: le.err}
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return syntaxError(file, err)
	}
	msg := te.Errors[0]
	if m := unknownRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		field := ix.find(ix.keys, line, 0, m[2])
		known := strings.Join(knownFields[m[3]], ", ")
		return &Error{File: file, Line: line, Field: field, Err: fmt.Errorf("unknown field (known here: %s)", known)}
	}
	if m := duplicateRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		field := ix.find(ix.keys, line, 0, m[2])
		return &Error{File: file, Line: line, Field: field, Err: fmt.Errorf("given twice (first at line %s)", m[3])}
	}
	if m := cannotReadRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		field := ix.findValue(line, m[2], strings.TrimSuffix(m[3], "..."))
		return &Error{File: file, Line: line, Field: field, Err: fmt.Errorf("%s is not %s", found(m[2], ix.value(field, m[3])), wanted(m[4]))}
	}
	return &Error{File: file, Err: errors.New(msg)}
}

// find is the path of the position at line (and column, when not 0) whose
// text is text (any text when "").
func (ix *index) find(ps []position, line, column int, text string) string {
	for _, p := range ps {
		if p.line == line && (column == 0 || p.column == column) && (text == "" || p.text == text) {
			return p.path
		}
	}
	return ""
}

// findValue is the path of the value at line with the decoder's tag and
// (shortened) text.
func (ix *index) findValue(line int, tag, prefix string) string {
	kind := yaml.ScalarNode
	switch tag {
	case "!!map":
		kind = yaml.MappingNode
	case "!!seq":
		kind = yaml.SequenceNode
	}
	for _, p := range ix.values {
		if p.line == line && p.kind == kind && strings.HasPrefix(p.text, prefix) {
			return p.path
		}
	}
	return ""
}

// value is the full text of the value at path (the decoder shortens it).
func (ix *index) value(path, short string) string {
	for _, p := range ix.values {
		if p.path == path && path != "" {
			return p.text
		}
	}
	return short
}

// found describes a value the decoder could not read.
func found(tag, value string) string {
	switch tag {
	case "!!map":
		return "a mapping"
	case "!!seq":
		return "a list"
	}
	return strconv.Quote(value)
}

// wanted describes a Go type in the words of the schema.
func wanted(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "scenario.raw"):
		return "a mapping"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "text"
	}
	return "a " + goType
}

// knownFields lists the YAML field names of every raw type, keyed by the
// type's name as the decoder prints it ("scenario.rawNodeGroup").
var knownFields = func() map[string][]string {
	out := map[string][]string{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || out[t.String()] != nil {
			return
		}
		var names []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				names = append(names, name)
			}
			visit(f.Type)
		}
		out[t.String()] = names
	}
	visit(reflect.TypeFor[rawScenario]())
	return out
}()
