package portal

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"partita.dev/partita/internal/api"
)

// Sessions. Signing in with an API token creates a server-side session:
// the browser holds only a random 256-bit session ID in a cookie that is
// HttpOnly (no script reads it), SameSite=Strict (no other site's page
// sends it) and Secure when the portal is reached over TLS (directly, or
// through a proxy that sets X-Forwarded-Proto: https; the cookie is then
// named __Host-partita_session, which browsers bind to this host and path
// /). The server keeps the token and the session's CSRF secret in memory,
// keyed by the ID's SHA-256; a restart signs everyone out.
//
// CSRF: every form carries the session's CSRF token in a hidden field and
// every POST is refused unless it matches (compared in constant time);
// the sign-in form, which has no session yet, uses a double-submit cookie
// instead. On top of that, POSTs go through net/http's
// CrossOriginProtection (Sec-Fetch-Site and Origin checks), and the API
// itself takes no cookies at all, only bearer tokens.

const (
	cookieName       = "partita_session"
	secureCookieName = "__Host-partita_session"
	signinCookie     = "partita_signin"
	maxSessions      = 10000
)

type session struct {
	key     string // SHA-256 of the ID
	token   string // the API token
	who     api.Whoami
	csrf    string
	created time.Time
	seen    time.Time
	flash   *flash // shown once, on the next page
}

type flash struct {
	Error bool
	Text  string
}

type sessions struct {
	mu        sync.Mutex
	byKey     map[string]*session
	ttl, idle time.Duration
	now       func() time.Time
}

func newSessions(ttl, idle time.Duration) *sessions {
	return &sessions{byKey: map[string]*session{}, ttl: ttl, idle: idle, now: time.Now}
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return string(sum[:])
}

// create starts a session and returns its ID, for the cookie.
func (s *sessions) create(token string, who api.Whoami) string {
	id := randomToken()
	now := s.now()
	sess := &session{key: hashID(id), token: token, who: who, csrf: randomToken(), created: now, seen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byKey) >= maxSessions {
		s.sweep(now)
	}
	if len(s.byKey) >= maxSessions {
		// Still full: drop the least recently seen.
		var oldest *session
		for _, x := range s.byKey {
			if oldest == nil || x.seen.Before(oldest.seen) {
				oldest = x
			}
		}
		delete(s.byKey, oldest.key)
	}
	s.byKey[sess.key] = sess
	return id
}

// sweep drops expired sessions; called with the lock held.
func (s *sessions) sweep(now time.Time) {
	for k, x := range s.byKey {
		if s.expired(x, now) {
			delete(s.byKey, k)
		}
	}
}

func (s *sessions) expired(x *session, now time.Time) bool {
	return now.Sub(x.created) > s.ttl || now.Sub(x.seen) > s.idle
}

// get finds a live session by its ID and marks it seen.
func (s *sessions) get(id string) *session {
	if id == "" {
		return nil
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.byKey[hashID(id)]
	if x == nil {
		return nil
	}
	if s.expired(x, now) {
		delete(s.byKey, x.key)
		return nil
	}
	x.seen = now
	return x
}

func (s *sessions) drop(x *session) {
	s.mu.Lock()
	delete(s.byKey, x.key)
	s.mu.Unlock()
}

// setFlash and takeFlash pass a message to the next page.
func (s *sessions) setFlash(x *session, f flash) {
	s.mu.Lock()
	x.flash = &f
	s.mu.Unlock()
}

func (s *sessions) takeFlash(x *session) *flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := x.flash
	x.flash = nil
	return f
}

// secure reports whether the browser reached us over TLS.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func sessionCookieName(r *http.Request) string {
	if secure(r) {
		return secureCookieName
	}
	return cookieName
}

func (p *Portal) setSessionCookie(w http.ResponseWriter, r *http.Request, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookieName(r), Value: id, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
}

// current is the request's session, or nil.
func (p *Portal) current(r *http.Request) *session {
	c, err := r.Cookie(sessionCookieName(r))
	if err != nil {
		return nil
	}
	return p.sessions.get(c.Value)
}

// checkCSRF compares the form's csrf field with want.
func checkCSRF(r *http.Request, want string) bool {
	got := r.PostFormValue("csrf")
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

var crossOrigin = http.NewCrossOriginProtection()

// handler is a page or action of a signed-in user.
type handler func(w http.ResponseWriter, r *http.Request, s *session) error

// authed wraps a handler: it needs a session (pages redirect to sign-in,
// fragments answer 401), POSTs need the session's CSRF token and must
// come from this origin; errors become error pages.
func (p *Portal) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		headers(w)
		s := p.current(r)
		if s == nil {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/fragments/") && r.URL.Path != "/submit/preview" && r.URL.Path != "/chargeback.csv" {
				http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			p.errorPage(w, r, nil, http.StatusUnauthorized, "You are not signed in, or your session has ended.")
			return
		}
		if r.Method == http.MethodPost {
			if err := crossOrigin.Check(r); err != nil {
				p.errorPage(w, r, s, http.StatusForbidden, "Refused a cross-origin request.")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if !checkCSRF(r, s.csrf) {
				p.errorPage(w, r, s, http.StatusForbidden, "The form's CSRF token is missing or wrong: reload the page and try again.")
				return
			}
		}
		if err := h(w, r, s); err != nil {
			p.fail(w, r, s, err)
		}
	}
}

// fail answers an error: a revoked token ends the session.
func (p *Portal) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusUnauthorized:
			if s != nil {
				p.sessions.drop(s)
			}
			p.setSessionCookie(w, r, "", -1)
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/fragments/") {
				http.Redirect(w, r, "/signin?expired=1", http.StatusSeeOther)
				return
			}
			p.errorPage(w, r, nil, http.StatusUnauthorized, "Your token is no longer valid; sign in again.")
			return
		case http.StatusNotFound:
			p.errorPage(w, r, s, http.StatusNotFound, ae.Msg)
			return
		case http.StatusForbidden:
			p.errorPage(w, r, s, http.StatusForbidden, ae.Msg)
			return
		}
		if ae.Status < 500 {
			p.errorPage(w, r, s, ae.Status, ae.Msg)
			return
		}
	}
	p.cfg.Log.Error("portal", "method", r.Method, "path", r.URL.Path, "err", err)
	p.errorPage(w, r, s, http.StatusInternalServerError, "Something went wrong; the server log says what.")
}

// headers are set on every page: a strict content security policy (only
// this origin's script and styles; no inline script), no framing, no
// sniffing, no caching of pages that show a user's data.
func headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// signInForm shows the token form, with a fresh double-submit CSRF
// cookie.
func (p *Portal) signInForm(w http.ResponseWriter, r *http.Request) {
	headers(w)
	if p.current(r) != nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	msg := ""
	if r.URL.Query().Get("expired") != "" {
		msg = "Your session ended; sign in again."
	}
	p.renderSignIn(w, r, http.StatusOK, msg)
}

func (p *Portal) renderSignIn(w http.ResponseWriter, r *http.Request, status int, msg string) {
	csrf := randomToken()
	http.SetCookie(w, &http.Cookie{Name: signinCookie, Value: csrf, Path: "/signin", MaxAge: 3600,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	p.render(w, status, "signin", &view{Title: "Sign in", CSRF: csrf, Data: signInData{Error: msg, Next: safeNext(r.FormValue("next"))}})
}

type signInData struct {
	Error, Next string
}

// signIn checks the token against the API (GET /whoami) and starts a
// session.
func (p *Portal) signIn(w http.ResponseWriter, r *http.Request) {
	headers(w)
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := crossOrigin.Check(r); err != nil {
		p.errorPage(w, r, nil, http.StatusForbidden, "Refused a cross-origin request.")
		return
	}
	c, err := r.Cookie(signinCookie)
	if err != nil || !checkCSRF(r, c.Value) {
		p.renderSignIn(w, r, http.StatusForbidden, "The form expired; try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		p.renderSignIn(w, r, http.StatusBadRequest, "Paste an API token (pt_…).")
		return
	}
	var who api.Whoami
	if err := p.call(r.Context(), token, http.MethodGet, api.Prefix+"/whoami", nil, &who); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			p.renderSignIn(w, r, http.StatusUnauthorized, "That token is not valid, or it was revoked.")
			return
		}
		p.fail(w, r, nil, err)
		return
	}
	id := p.sessions.create(token, who)
	p.setSessionCookie(w, r, id, int(p.cfg.SessionTTL.Seconds()))
	http.SetCookie(w, &http.Cookie{Name: signinCookie, Path: "/signin", MaxAge: -1, HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (p *Portal) signOut(w http.ResponseWriter, r *http.Request, s *session) error {
	p.sessions.drop(s)
	p.setSessionCookie(w, r, "", -1)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
	return nil
}

// safeNext keeps a redirect target on this site: an absolute path (and
// query), never another host. Browsers drop tabs and newlines from a URL
// and read "\" as "/", so "/\evil" and "/<tab>/evil" are "//evil", another
// host: any control character or backslash refuses the target, as does
// anything net/url does not read as a bare path.
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || len(next) > 2048 {
		return "/"
	}
	for i := 0; i < len(next); i++ {
		if c := next[i]; c < ' ' || c == 0x7f || c == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return "/"
	}
	return next
}
