package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"partita.dev/partita/internal/api"
)

// The OpenAPI 3 document is generated from the route table and the api
// types, so it describes exactly the handlers that are registered.

var (
	docOnce  sync.Once
	docBytes []byte
)

func (s *Server) openAPIHandler(c *call) error {
	docOnce.Do(func() { docBytes, _ = json.MarshalIndent(s.OpenAPI(), "", "  ") })
	c.w.Header().Set("Content-Type", "application/json")
	_, err := c.w.Write(docBytes)
	return err
}

// OpenAPI builds the document.
func (s *Server) OpenAPI() map[string]any {
	g := &schemaGen{schemas: map[string]any{}}
	paths := map[string]map[string]any{}
	for _, rt := range s.routes() {
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = g.operation(rt)
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":   "Partita API",
			"version": api.Version,
			"description": "The standalone server of Partita, a GPU-cluster orchestrator. Authenticate with `Authorization: Bearer <token>`; " +
				"x-roles lists the roles an operation allows. Times are cluster time (RFC 3339); on the virtual cluster it runs --speed times the wall clock.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":         g.schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

func (g *schemaGen) operation(rt route) map[string]any {
	op := map[string]any{"summary": rt.summary, "operationId": operationID(rt)}
	var params []any
	for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	for _, q := range rt.query {
		params = append(params, map[string]any{"name": q.name, "in": "query", "required": false, "description": q.desc, "schema": map[string]any{"type": "string"}})
	}
	if rt.method == "POST" && rt.path == api.Prefix+"/jobs" {
		params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false, "schema": map[string]any{"type": "string"}})
	}
	if params != nil {
		op["parameters"] = params
	}
	if rt.body != nil {
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.body))}}}
	}
	op["responses"] = g.responses(rt)
	if rt.roles != nil {
		op["security"] = []any{map[string]any{"bearer": []any{}}}
		op["x-roles"] = rt.roles
	}
	return op
}

func operationID(rt route) string {
	p := strings.TrimPrefix(rt.path, api.Prefix)
	p = pathParam.ReplaceAllString(p, "by-$1")
	return strings.ToLower(rt.method) + strings.ReplaceAll(strings.ReplaceAll(p, "/", "-"), ".", "-")
}

func (g *schemaGen) responses(rt route) map[string]any {
	ok := map[string]any{"description": "success"}
	switch {
	case rt.resp != nil:
		content := map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.resp))}}
		if rt.csv {
			content["text/csv"] = map[string]any{"schema": map[string]any{"type": "string"}}
		}
		ok["content"] = content
	default:
		ok["content"] = map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}
	}
	out := map[string]any{strconv.Itoa(rt.status): ok}
	if rt.method == "POST" && rt.path == api.Prefix+"/jobs" {
		out["200"] = map[string]any{"description": "an idempotent replay: the job first submitted with this key", "content": ok["content"]}
	}
	errRef := map[string]any{"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(api.Error{}))}}
	codes := []string{"500", "503"}
	if rt.roles != nil {
		codes = append(codes, "400", "401", "403", "404")
	}
	if rt.method != "GET" {
		codes = append(codes, "409")
	}
	if rt.body != nil {
		codes = append(codes, "413", "415")
	}
	for _, code := range codes {
		out[code] = map[string]any{"description": statusName(code), "content": errRef}
	}
	return out
}

// schemaGen builds JSON schemas from Go types; named structs become
// components.
type schemaGen struct{ schemas map[string]any }

var timeType = reflect.TypeOf(time.Time{})

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t.Kind() == reflect.Pointer:
		return g.schema(t.Elem())
	case t.Kind() == reflect.Struct:
		name := t.Name()
		if _, done := g.schemas[name]; !done {
			g.schemas[name] = nil // breaks cycles
			g.schemas[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	case t.Kind() == reflect.Slice:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case t.Kind() == reflect.Map:
		return map[string]any{"type": "object"}
	case t.Kind() == reflect.String:
		return map[string]any{"type": "string"}
	case t.Kind() == reflect.Bool:
		return map[string]any{"type": "boolean"}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return map[string]any{"type": "integer"}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return map[string]any{"type": "number"}
	}
	return map[string]any{}
}

// object describes a struct's JSON fields; embedded structs are
// flattened, as encoding/json does.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	g.fields(t, props, &required)
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if required != nil {
		o["required"] = required
	}
	return o
}

func (g *schemaGen) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			g.fields(f.Type, props, required)
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = g.schema(f.Type)
		if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
			*required = append(*required, name)
		}
	}
}

func statusName(code string) string {
	n, _ := strconv.Atoi(code)
	return http.StatusText(n)
}
