// Package portal is the self-service web portal that `partita serve`
// serves at /: sign-in with an API token, the cluster overview, queues,
// job submission with a live preview, the team page where leads change
// priorities, job timelines and chargeback.
//
// The portal is a client of the API: every page is built from the same
// /api/v1 calls the CLI makes, sent in-process to the API's handler with
// the signed-in user's token, so roles and team scoping are exactly the
// API's (a member's priority change is refused by the API, and the
// portal shows the API's answer). Only what the API has no endpoint for
// is read from the world directly: utilization over time (sampled into a
// ring in memory) and the GPUs each team holds (as /metrics shows them).
//
// Pages are html/template, the CSS and the one small script are embedded
// (no CDN, no external fonts), charts are server-rendered SVG. See
// session.go for cookies and CSRF.
package portal

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"partita.dev/partita/internal/standalone"
	"partita.dev/partita/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config assembles a portal.
type Config struct {
	// API is the API's handler (server.Handler): the portal sends it
	// every call, and serves /api/, /healthz and /metrics through it.
	API   http.Handler
	World *standalone.World // utilization samples, GPUs held per team, the clock
	Store *store.Store      // teams' guarantees, for who borrows from whom
	Log   *slog.Logger
	// SampleEvery is the wall time between utilization samples (default
	// 5 s); Samples how many are kept (default 720: an hour).
	SampleEvery time.Duration
	Samples     int
	// SessionTTL is how long a sign-in lasts (default 12 h); a session
	// unused for SessionIdle (default 2 h) ends sooner.
	SessionTTL, SessionIdle time.Duration
}

// Portal serves the web pages.
type Portal struct {
	cfg      Config
	pages    *pages
	sessions *sessions
	samples  *samples
	mux      *http.ServeMux
	assetVer string // a hash of the static files, for cache busting
}

// New builds a portal; call Run to sample utilization.
func New(c Config) (*Portal, error) {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = 5 * time.Second
	}
	if c.Samples <= 0 {
		c.Samples = 720
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = 2 * time.Hour
	}
	pg, err := parsePages()
	if err != nil {
		return nil, err
	}
	p := &Portal{cfg: c, pages: pg, sessions: newSessions(c.SessionTTL, c.SessionIdle), samples: newSamples(c.Samples), assetVer: assetVersion()}
	p.sample()
	p.routes()
	return p, nil
}

// Run samples utilization until ctx ends.
func (p *Portal) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.sample()
		}
	}
}

func (p *Portal) sample() {
	st := p.cfg.World.Stats()
	p.samples.add(sample{At: p.cfg.World.Clock().Now, Allocated: st.Utilization.Allocated, Useful: st.Utilization.Useful,
		Queued: st.Utilization.QueuedJobs, Running: st.Utilization.RunningJobs})
}

// Handler serves the portal, and the API under /api/, /healthz and
// /metrics.
func (p *Portal) Handler() http.Handler { return p.mux }

func (p *Portal) routes() {
	m := http.NewServeMux()
	m.Handle("/api/", p.cfg.API)
	m.Handle("/healthz", p.cfg.API)
	m.Handle("/metrics", p.cfg.API)
	static, _ := fs.Sub(staticFS, "static")
	files := http.FileServerFS(static)
	m.Handle("GET /static/", http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})))

	m.HandleFunc("GET /signin", p.signInForm)
	m.HandleFunc("POST /signin", p.signIn)
	m.HandleFunc("POST /signout", p.authed(p.signOut))

	m.HandleFunc("GET /{$}", p.authed(p.overview))
	m.HandleFunc("GET /fragments/overview", p.authed(p.overviewFragment))
	m.HandleFunc("GET /queue", p.authed(p.queuePage))
	m.HandleFunc("GET /fragments/queue", p.authed(p.queueFragment))
	m.HandleFunc("GET /submit", p.authed(p.submitForm))
	m.HandleFunc("POST /submit", p.authed(p.submit))
	m.HandleFunc("GET /submit/preview", p.authed(p.preview))
	m.HandleFunc("GET /team", p.authed(p.teamPage))
	m.HandleFunc("GET /fragments/team", p.authed(p.teamFragment))
	m.HandleFunc("GET /jobs/{id}", p.authed(p.jobPage))
	m.HandleFunc("POST /jobs/{id}/priority", p.authed(p.setPriority))
	m.HandleFunc("POST /jobs/{id}/cancel", p.authed(p.cancel))
	m.HandleFunc("POST /jobs/{id}/requeue", p.authed(p.requeue))
	m.HandleFunc("GET /chargeback", p.authed(p.chargeback))
	m.HandleFunc("GET /chargeback.csv", p.authed(p.chargebackCSV))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		p.errorPage(w, r, nil, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
	})
	p.mux = m
}

// assetVersion hashes the static files, so that their URLs change when
// they do and browsers may cache them.
func assetVersion() string {
	h := sha256.New()
	_ = fs.WalkDir(staticFS, "static", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := staticFS.ReadFile(path)
			h.Write([]byte(path))
			h.Write(data)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}
