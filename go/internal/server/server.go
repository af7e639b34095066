// Package server is the standalone server's HTTP API under /api/v1, its
// OpenAPI document, /healthz and Prometheus /metrics. The routes live in
// one table (routes.go) that registers the handlers, checks roles and
// generates the OpenAPI document, so the three cannot drift apart.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"partita.dev/partita/internal/accounting"
	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/standalone"
	"partita.dev/partita/internal/store"
)

// MaxBody is the largest request body accepted: job specs are a few
// hundred bytes; anything near this is a mistake or an attack.
const MaxBody = 64 << 10

// Config assembles a server.
type Config struct {
	Store  *store.Store
	World  *standalone.World
	Prices *accounting.Prices
	Log    *slog.Logger
}

// Server serves the API.
type Server struct {
	store    *store.Store
	world    *standalone.World
	prices   *accounting.Prices
	log      *slog.Logger
	metrics  *Metrics
	mux      *http.ServeMux
	patterns []string // every pattern registered on mux, in order

	authMu sync.Mutex
	auth   map[string]store.Principal // by token hash; cleared on any user or token change

	teamsMu sync.RWMutex
	teams   map[string]*teamInfo
}

type teamInfo struct {
	store.Team
	projects map[string]bool
}

// New builds a server; its Observer must be given to the world too
// (Metrics), so build the world with NewMetrics first.
func New(ctx context.Context, c Config, m *Metrics) (*Server, error) {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{store: c.Store, world: c.World, prices: c.Prices, log: c.Log, metrics: m, mux: http.NewServeMux(), auth: map[string]store.Principal{}}
	if err := s.loadTeams(ctx); err != nil {
		return nil, err
	}
	m.attach(c.World)
	for _, rt := range s.routes() {
		s.handle(rt)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, api.Error{Error: fmt.Sprintf("no route %s %s (see %s/openapi.json)", r.Method, r.URL.Path, api.Prefix)})
	})
	return s, nil
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// loadTeams caches the teams and their projects: every submission checks
// them, and they change only through this server.
func (s *Server) loadTeams(ctx context.Context) error {
	teams, err := s.store.Teams(ctx)
	if err != nil {
		return err
	}
	projects, err := s.store.Projects(ctx, "")
	if err != nil {
		return err
	}
	m := map[string]*teamInfo{}
	for _, t := range teams {
		m[t.Name] = &teamInfo{Team: t, projects: map[string]bool{}}
	}
	for _, p := range projects {
		if t := m[p.Team]; t != nil {
			t.projects[p.Name] = true
		}
	}
	s.teamsMu.Lock()
	s.teams = m
	s.teamsMu.Unlock()
	s.world.SetTeams(teams)
	s.metrics.knowTeams(teams)
	return nil
}

// team returns a copy of a cached team.
func (s *Server) team(name string) (teamInfo, bool) {
	s.teamsMu.RLock()
	defer s.teamsMu.RUnlock()
	t, ok := s.teams[name]
	if !ok {
		return teamInfo{}, false
	}
	return *t, true
}

// call is one request being served.
type call struct {
	s   *Server
	w   http.ResponseWriter
	r   *http.Request
	who store.Principal
	rt  *route
}

// httpError is an error with its status and the field at fault.
type httpError struct {
	status int
	field  string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, field, format string, args ...any) error {
	return &httpError{status: status, field: field, msg: fmt.Sprintf(format, args...)}
}

func badRequest(field, format string, args ...any) error {
	return errorf(http.StatusBadRequest, field, format, args...)
}

// notFound is the answer for anything the caller may not see: the same as
// for what does not exist, so that it tells nothing.
func notFound(what, id string) error {
	return errorf(http.StatusNotFound, "", "%s %q not found", what, id)
}

func (c *call) json(status int, v any) error {
	writeJSON(c.w, status, v)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail writes an error answer; errors that are not httpErrors are
// internal: logged, and answered without detail.
func (c *call) fail(err error) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		writeJSON(c.w, he.status, api.Error{Error: he.msg, Field: he.field})
	case errors.Is(err, store.ErrNotFound):
		writeJSON(c.w, http.StatusNotFound, api.Error{Error: err.Error()})
	case errors.Is(err, store.ErrConflict):
		writeJSON(c.w, http.StatusConflict, api.Error{Error: err.Error()})
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeJSON(c.w, http.StatusServiceUnavailable, api.Error{Error: "request cancelled or timed out"})
	default:
		c.s.log.Error("internal error", "method", c.r.Method, "path", c.r.URL.Path, "err", err)
		writeJSON(c.w, http.StatusInternalServerError, api.Error{Error: "internal error; see the server log"})
	}
}

// handle registers a route: authentication, the role check, a timeout,
// metrics, then the handler.
func (s *Server) handle(rt route) {
	pattern := rt.method + " " + rt.path
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		c := &call{s: s, w: sw, r: r, rt: &rt}
		if err := c.serve(); err != nil {
			c.fail(err)
		}
		s.metrics.request(pattern, sw.status, time.Since(began))
	})
}

func (c *call) serve() error {
	ctx, cancel := context.WithTimeout(c.r.Context(), 30*time.Second)
	defer cancel()
	c.r = c.r.WithContext(ctx)
	if c.rt.roles != nil {
		who, err := c.s.authenticate(c.r)
		if err != nil {
			c.w.Header().Set("WWW-Authenticate", `Bearer realm="partita"`)
			return err
		}
		c.who = who
		if !allowed(c.rt.roles, who.Role) {
			return errorf(http.StatusForbidden, "", "role %s may not %s %s (allowed: %v)", who.Role, c.rt.method, c.rt.path, c.rt.roles)
		}
	}
	return c.rt.handler(c)
}

func allowed(roles []string, role string) bool {
	for _, r := range roles {
		if r == role {
			return true
		}
	}
	return false
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
