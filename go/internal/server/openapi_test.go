package server

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"partita.dev/partita/internal/api"
)

func (e *env) document() map[string]any {
	e.t.Helper()
	status, data := e.call("", "GET", api.Prefix+"/openapi.json", nil)
	if status != 200 {
		e.t.Fatalf("openapi.json: %d", status)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		e.t.Fatal(err)
	}
	return doc
}

// TestOpenAPIMatchesTheMux: every pattern registered on the mux is in the
// document and every operation of the document is registered.
func TestOpenAPIMatchesTheMux(t *testing.T) {
	e := newEnv(t, 60)
	e.t = t
	doc := e.document()
	var documented []string
	for path, ops := range doc["paths"].(map[string]any) {
		for method := range ops.(map[string]any) {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	registered := append([]string(nil), e.srv.patterns...)
	sort.Strings(documented)
	sort.Strings(registered)
	if strings.Join(documented, "\n") != strings.Join(registered, "\n") {
		t.Fatalf("document and mux differ:\ndocumented:\n%s\n\nregistered:\n%s", strings.Join(documented, "\n"), strings.Join(registered, "\n"))
	}
	// And the mux answers each: an unregistered route gets "no route".
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		path = strings.NewReplacer("{id}", "x", "{team}", "search", "{user}", "nobody").Replace(path)
		status, data := e.call("admin", method, path, nil)
		if strings.Contains(string(data), "no route") || status == http.StatusMethodNotAllowed {
			t.Errorf("%s is documented but the mux does not route it: %d %s", op, status, truncate(data))
		}
	}
	if status, data := e.call("admin", "GET", api.Prefix+"/nothing-here", nil); status != 404 || !strings.Contains(string(data), "no route") {
		t.Errorf("an unknown path: %d %s; want 404 no route", status, data)
	}
}

// TestWalkOpenAPI calls every operation of the document as admin with
// the access matrix's fixtures and checks that the answer's status is one
// the document lists and its JSON has the documented schema's required
// fields.
func TestWalkOpenAPI(t *testing.T) {
	e := newEnv(t, 60)
	e.t = t
	doc := e.document()
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, rt := range e.srv.routes() {
		op := doc["paths"].(map[string]any)[rt.path].(map[string]any)[strings.ToLower(rt.method)].(map[string]any)
		path, body := e.fixture(rt, "admin")
		status, data := e.call("admin", rt.method, path, body)
		resp, ok := op["responses"].(map[string]any)[strconv.Itoa(status)].(map[string]any)
		if !ok {
			t.Errorf("%s %s: status %d is not documented (%s)", rt.method, rt.path, status, truncate(data))
			continue
		}
		content, _ := resp["content"].(map[string]any)
		js, ok := content["application/json"].(map[string]any)
		if !ok {
			continue
		}
		checkSchema(t, rt.method+" "+rt.path, js["schema"].(map[string]any), schemas, data)
	}
}

// checkSchema checks the top level of a JSON answer: an object has the
// required properties and no others, an array holds objects that do.
func checkSchema(t *testing.T, name string, schema, schemas map[string]any, data []byte) {
	t.Helper()
	resolve := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			return schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
		}
		return s
	}
	schema = resolve(schema)
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Errorf("%s: answer is not JSON: %v", name, err)
		return
	}
	objects := []any{v}
	if schema["type"] == "array" {
		arr, ok := v.([]any)
		if !ok {
			t.Errorf("%s: want an array, got %s", name, truncate(data))
			return
		}
		objects, schema = arr, resolve(schema["items"].(map[string]any))
	}
	if schema["type"] != "object" || schema["properties"] == nil {
		return
	}
	props := schema["properties"].(map[string]any)
	for _, o := range objects {
		m, ok := o.(map[string]any)
		if !ok {
			t.Errorf("%s: want an object, got %v", name, o)
			continue
		}
		for _, r := range schema["required"].([]any) {
			if _, ok := m[r.(string)]; !ok {
				t.Errorf("%s: required field %s is missing", name, r)
			}
		}
		for k := range m {
			if _, ok := props[k]; !ok {
				t.Errorf("%s: field %s is not in the schema", name, k)
			}
		}
	}
}
