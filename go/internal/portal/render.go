package portal

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"partita.dev/partita/internal/api"
)

// view is what every page template gets.
type view struct {
	Title string
	Nav   string // the active item of the menu
	Who   *api.Whoami
	CSRF  string
	Flash *flash
	Asset string
	Clock api.Clock
	Data  any
}

// pages holds one template set per page: the layout, the shared parts
// and the page's own file.
type pages struct {
	byName map[string]*template.Template
}

var pageNames = []string{"signin", "error", "overview", "queue", "submit", "team", "job", "chargeback"}

func parsePages() (*pages, error) {
	pg := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/base.html", "templates/parts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("portal: template %s: %w", name, err)
		}
		pg.byName[name] = t
	}
	return pg, nil
}

// view fills in what every page shows for a signed-in user.
func (p *Portal) view(s *session, nav, title string, data any) *view {
	v := &view{Title: title, Nav: nav, Data: data, Asset: p.assetVer, Clock: p.cfg.World.Clock()}
	if s != nil {
		who := s.who
		v.Who, v.CSRF, v.Flash = &who, s.csrf, p.sessions.takeFlash(s)
	}
	return v
}

// render writes a whole page; the template runs into a buffer first, so
// that a failure is an error page, never half a page.
func (p *Portal) render(w http.ResponseWriter, status int, page string, v *view) {
	if v.Asset == "" {
		v.Asset = p.assetVer
	}
	if v.Clock.Now.IsZero() {
		v.Clock = p.cfg.World.Clock()
	}
	p.execute(w, status, page, "base", v)
}

// fragment writes one named template of a page, for live updates.
func (p *Portal) fragment(w http.ResponseWriter, page, name string, v *view) {
	p.execute(w, http.StatusOK, page, name, v)
}

func (p *Portal) execute(w http.ResponseWriter, status int, page, name string, v *view) {
	var b bytes.Buffer
	if err := p.pages.byName[page].ExecuteTemplate(&b, name, v); err != nil {
		p.cfg.Log.Error("portal: render", "page", page, "template", name, "err", err)
		http.Error(w, "internal error rendering the page; see the server log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// errorPage shows a message with its status.
func (p *Portal) errorPage(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	headers(w)
	if strings.HasPrefix(r.URL.Path, "/fragments/") || r.URL.Path == "/submit/preview" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(msg))
		return
	}
	p.render(w, status, "error", p.view(s, "", http.StatusText(status), errorData{Status: status, Message: msg}))
}

type errorData struct {
	Status  int
	Message string
}

var funcs = template.FuncMap{
	"gpus":     fmtGPUs,
	"pct":      func(f float64) string { return strconv.Itoa(int(math.Round(f*100))) + "%" },
	"when":     fmtTime,
	"whenp":    func(t *time.Time) string { return fmtTimePtr(t) },
	"waitwall": fmtWait,
	"mib":      fmtMiB,
	"cpu":      fmtCPU,
	"short":    shortID,
	"lower":    strings.ToLower,
	"join":     strings.Join,
	"has":      func(list []string, s string) bool { return contains(list, s) },
	"add":      func(a, b int) int { return a + b },
	"f1":       func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"f2":       func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"lead":     func(w *api.Whoami) bool { return w != nil && (w.Role == api.RoleAdmin || w.Role == api.RoleLead) },
	"submitter": func(w *api.Whoami) bool {
		return w != nil && w.Role != api.RoleViewer
	},
	"terminal": api.Terminal,
}

// fmtGPUs writes a GPU amount with at most two decimals: 8, 0.43, 2.5.
func fmtGPUs(f float64) string {
	return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
}

// fmtTime writes a cluster time in UTC, to the second.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("Jan 2 15:04:05")
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return fmtTime(*t)
}

// fmtWait writes a wait in wall-clock time, roughly.
func fmtWait(secs *float64) string {
	if secs == nil {
		return ""
	}
	d := time.Duration(*secs * float64(time.Second))
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("in %d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d.Minutes()))
	}
	return fmt.Sprintf("in %.1f h", d.Hours())
}

func fmtMiB(m int64) string {
	if m >= 1024 && m%1024 == 0 {
		return strconv.FormatInt(m/1024, 10) + " GiB"
	}
	if m >= 1024 {
		return strconv.FormatFloat(float64(m)/1024, 'f', 1, 64) + " GiB"
	}
	return strconv.FormatInt(m, 10) + " MiB"
}

func fmtCPU(milli int64) string {
	if milli%1000 == 0 {
		return strconv.FormatInt(milli/1000, 10)
	}
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

// shortID is a job ID without its prefix's repetition: the last 6 hex.
func shortID(id string) string {
	if len(id) > 6 {
		return id[len(id)-6:]
	}
	return id
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
