package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// decode reads the body as exactly one JSON value into v, refusing
// unknown fields, bodies over MaxBody and trailing data. Errors name the
// field.
func (c *call) decode(v any) error {
	if ct := c.r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errorf(http.StatusUnsupportedMediaType, "", "Content-Type %q: send application/json", ct)
		}
	}
	body := http.MaxBytesReader(c.w, c.r.Body, MaxBody)
	return decodeJSON(body, v)
}

// decodeJSON is decode without the HTTP parts, for the fuzz tests.
func decodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("", "body: more than one JSON value; send one object")
	}
	return nil
}

func describeJSONError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var big *http.MaxBytesError
	switch {
	case errors.As(err, &big):
		return errorf(http.StatusRequestEntityTooLarge, "", "body: larger than %d bytes", big.Limit)
	case errors.Is(err, io.EOF):
		return badRequest("", "body: empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "body: JSON ends too soon")
	case errors.As(err, &syn):
		return badRequest("", "body: invalid JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return badRequest("", "body: a JSON %s where an object was expected", typ.Value)
		}
		return badRequest(field, "%s: a JSON %s is not a valid %s", field, typ.Value, jsonKind(typ.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badRequest(name, "%s: unknown field", name)
	}
	return badRequest("", "body: %v", err)
}

// jsonKind names a Go kind as JSON users know it.
func jsonKind(kind string) string {
	switch kind {
	case "int", "int64", "int32", "uint", "uint64":
		return "integer"
	case "float64", "float32":
		return "number"
	case "slice":
		return "array"
	case "struct", "map", "ptr":
		return "object"
	case "bool":
		return "boolean"
	}
	return kind
}

// queryInt reads an optional integer query parameter within [lo, hi].
func (c *call) queryInt(name string, def, lo, hi int) (int, error) {
	v := c.r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || fmt.Sprint(n) != v || n < lo || n > hi {
		return 0, badRequest(name, "%s: %q must be a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}
