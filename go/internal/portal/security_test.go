package portal_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"partita.dev/partita/internal/api"
)

// The portal's security at the HTTP level, without a browser: what the
// cookies say, which POSTs are refused, where redirects may go, what
// signing out ends and what a team may see. Each refusal is checked
// against a request that succeeds, so that a test cannot pass because
// nothing works.

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// page is an answer with its body read.
type page struct {
	*http.Response
	body string
}

// do sends a request with c (which keeps cookies and follows no
// redirects); extra headers come as name, value pairs.
func (e *env) do(c *http.Client, method, path string, form url.Values, hdr ...string) page {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return page{resp, string(data)}
}

// csrfOf is the CSRF token a page's forms carry.
func (e *env) csrfOf(p page) string {
	e.t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		e.t.Fatalf("no CSRF field on %s (%d):\n%.600s", p.Request.URL, p.StatusCode, p.body)
	}
	return m[1]
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// signInHTTP signs user in through the sign-in form as a browser would
// (the form's double-submit cookie and field) and returns the client
// holding the session cookie, the session's CSRF token and the answer to
// the form.
func (e *env) signInHTTP(user, next string) (*http.Client, string, page) {
	e.t.Helper()
	c := e.client()
	form := e.do(c, "GET", "/signin", nil)
	if form.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /signin: %d", form.StatusCode)
	}
	resp := e.do(c, "POST", "/signin", url.Values{"csrf": {e.csrfOf(form)}, "token": {e.tokens[user]}, "next": {next}})
	if resp.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("sign in as %s: %d, want 303:\n%.600s", user, resp.StatusCode, resp.body)
	}
	team := e.do(c, "GET", "/team", nil)
	if team.StatusCode != http.StatusOK || !strings.Contains(team.body, `id="whoami">`+user+`<`) {
		e.t.Fatalf("GET /team after signing in as %s: %d", user, team.StatusCode)
	}
	return c, e.csrfOf(team), resp
}

func TestSessionCookieIsHttpOnlyAndStrict(t *testing.T) {
	e := newEnv(t)

	t.Run("plain HTTP", func(t *testing.T) {
		c := e.client()
		form := e.do(c, "GET", "/signin", nil)
		sc := cookieNamed(form.Response, "partita_signin")
		if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Path != "/signin" {
			t.Errorf("the sign-in form's CSRF cookie: %+v; want HttpOnly, SameSite=Strict, Path=/signin", sc)
		}
		resp := e.do(c, "POST", "/signin", url.Values{"csrf": {e.csrfOf(form)}, "token": {e.tokens["lead-s"]}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in: %d", resp.StatusCode)
		}
		s := cookieNamed(resp.Response, "partita_session")
		if s == nil {
			t.Fatalf("no session cookie; Set-Cookie: %q", resp.Header.Values("Set-Cookie"))
		}
		if !s.HttpOnly || s.SameSite != http.SameSiteStrictMode || s.Path != "/" || s.MaxAge <= 0 || len(s.Value) < 43 {
			t.Errorf("session cookie %+v; want HttpOnly, SameSite=Strict, Path=/, a lifetime and a 256-bit value", s)
		}
		if s.Secure {
			t.Errorf("session cookie is Secure over plain HTTP: the browser would never send it back")
		}
		if strings.Contains(s.Value, e.tokens["lead-s"]) || strings.Contains(e.tokens["lead-s"], s.Value) {
			t.Errorf("the session cookie carries the API token")
		}
		if gone := cookieNamed(resp.Response, "partita_signin"); gone == nil || gone.MaxAge >= 0 {
			t.Errorf("the sign-in CSRF cookie is not removed after signing in: %+v", gone)
		}
	})

	// Behind a TLS proxy the cookie is Secure and __Host- prefixed. The
	// cookie jar sends no Secure cookie over http://, so this client
	// carries the sign-in cookie itself.
	t.Run("behind TLS", func(t *testing.T) {
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		form := e.do(c, "GET", "/signin", nil, "X-Forwarded-Proto", "https")
		sc := cookieNamed(form.Response, "partita_signin")
		if sc == nil || !sc.Secure || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode {
			t.Fatalf("the sign-in form's CSRF cookie over TLS: %+v; want Secure, HttpOnly, SameSite=Strict", sc)
		}
		resp := e.do(c, "POST", "/signin", url.Values{"csrf": {e.csrfOf(form)}, "token": {e.tokens["lead-s"]}},
			"X-Forwarded-Proto", "https", "Cookie", sc.Name+"="+sc.Value)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in over TLS: %d", resp.StatusCode)
		}
		s := cookieNamed(resp.Response, "__Host-partita_session")
		if s == nil || !s.Secure || !s.HttpOnly || s.SameSite != http.SameSiteStrictMode || s.Path != "/" || s.Domain != "" {
			t.Fatalf("session cookie over TLS: %+v; want __Host-partita_session, Secure, HttpOnly, SameSite=Strict, Path=/, no Domain (Set-Cookie %q)", s, resp.Header.Values("Set-Cookie"))
		}
		ok := e.do(c, "GET", "/team", nil, "X-Forwarded-Proto", "https", "Cookie", s.Name+"="+s.Value)
		if ok.StatusCode != http.StatusOK {
			t.Errorf("GET /team with the __Host- cookie: %d", ok.StatusCode)
		}
	})
}

func TestSignInRefused(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name   string
		token  string
		csrf   func(form page) string
		status int
		says   string
	}{
		{name: "a token that was never issued", token: "pt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", status: http.StatusUnauthorized, says: "not valid"},
		{name: "garbage", token: "'; DROP TABLE tokens; --", status: http.StatusUnauthorized, says: "not valid"},
		{name: "no token", token: "", status: http.StatusBadRequest, says: "Paste an API token"},
		{name: "a good token without the form's CSRF field", token: "admin", csrf: func(page) string { return "" }, status: http.StatusForbidden, says: "form expired"},
		{name: "a good token with a wrong CSRF field", token: "admin", csrf: func(page) string { return "x" + strings.Repeat("A", 42) }, status: http.StatusForbidden, says: "form expired"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := e.client()
			form := e.do(cl, "GET", "/signin", nil)
			csrf := e.csrfOf(form)
			if c.csrf != nil {
				csrf = c.csrf(form)
			}
			token := c.token
			if tk, ok := e.tokens[token]; ok {
				token = tk
			}
			resp := e.do(cl, "POST", "/signin", url.Values{"csrf": {csrf}, "token": {token}})
			if resp.StatusCode != c.status {
				t.Errorf("status %d, want %d", resp.StatusCode, c.status)
			}
			if !strings.Contains(resp.body, `id="signin-error"`) || !strings.Contains(resp.body, c.says) {
				t.Errorf("the answer does not show the error %q:\n%.800s", c.says, resp.body)
			}
			for _, ck := range resp.Cookies() {
				if strings.Contains(ck.Name, "partita_session") {
					t.Errorf("a refused sign-in set a session cookie: %+v", ck)
				}
			}
			if got := e.do(cl, "GET", "/team", nil); got.StatusCode != http.StatusSeeOther || !strings.HasPrefix(got.Header.Get("Location"), "/signin") {
				t.Errorf("after a refused sign-in GET /team answers %d %s; want 303 to /signin", got.StatusCode, got.Header.Get("Location"))
			}
		})
	}
	// The same form with the right token and field signs in.
	e.signInHTTP("admin", "")
}

// TestPostsNeedTheSessionsCSRFToken posts every action without the
// session's token, with a wrong one, another session's, the right one in
// the query string instead of the form, and the right one from another
// site, and checks through the API that nothing changed; then the right
// token does change the job.
func TestPostsNeedTheSessionsCSRFToken(t *testing.T) {
	e := newEnv(t)
	job := e.submit("lead-s", api.SubmitRequest{Project: "default", Name: "victim", Class: "batch", GPU: api.GPURequest{Count: 1}, Duration: "10h"})
	c, csrf, _ := e.signInHTTP("lead-s", "")
	_, otherCSRF, _ := e.signInHTTP("lead-s", "")
	if otherCSRF == csrf {
		t.Fatal("two sessions share a CSRF token")
	}
	jobsOfSearch := func() int {
		var l api.JobList
		e.apiJSON("admin", "GET", api.Prefix+"/jobs?team=search&limit=200", nil, &l)
		return len(l.Jobs)
	}
	before := jobsOfSearch()
	submit := url.Values{"kind": {"inference"}, "project": {"default"}, "name": {"forged"}, "class": {"production"}, "gpu_mode": {"count"},
		"gpu_count": {"1"}, "tasks": {"1"}, "gang": {"0"}, "duration": {"1h"}}
	actions := []struct {
		path string
		form url.Values
	}{
		{"/jobs/" + job.ID + "/priority", url.Values{"class": {"production"}}},
		{"/jobs/" + job.ID + "/cancel", url.Values{}},
		{"/jobs/" + job.ID + "/requeue", url.Values{}},
		{"/submit", submit},
		{"/signout", url.Values{}},
	}
	with := func(f url.Values, token string) url.Values {
		out := url.Values{}
		for k, v := range f {
			out[k] = v
		}
		if token != "" {
			out.Set("csrf", token)
		}
		return out
	}
	for _, a := range actions {
		for _, bad := range []struct {
			name  string
			path  string
			form  url.Values
			hdr   []string
			wants string
		}{
			{name: "no token", path: a.path, form: with(a.form, ""), wants: "CSRF token is missing or wrong"},
			{name: "a wrong token", path: a.path, form: with(a.form, strings.Repeat("A", 43)), wants: "CSRF token is missing or wrong"},
			{name: "another session's token", path: a.path, form: with(a.form, otherCSRF), wants: "CSRF token is missing or wrong"},
			{name: "the token in the query string", path: a.path + "?csrf=" + url.QueryEscape(csrf), form: with(a.form, ""), wants: "CSRF token is missing or wrong"},
			{name: "the right token from another site", path: a.path, form: with(a.form, csrf), hdr: []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}, wants: "cross-origin"},
		} {
			resp := e.do(c, "POST", bad.path, bad.form, bad.hdr...)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.body, bad.wants) {
				t.Errorf("POST %s with %s: %d, want 403 saying %q:\n%.600s", a.path, bad.name, resp.StatusCode, bad.wants, resp.body)
			}
		}
	}

	var after api.Job
	e.apiJSON("admin", "GET", api.Prefix+"/jobs/"+job.ID, nil, &after)
	if after.Class != "batch" || after.State == api.StateCancelled {
		t.Errorf("after the refused posts the job is %s, %s; want batch and not cancelled", after.Class, after.State)
	}
	for _, ev := range after.Events {
		if ev.State == "priority" || ev.State == "requeued" || ev.State == api.StateCancelled {
			t.Errorf("a refused post left an event: %+v", ev)
		}
	}
	if n := jobsOfSearch(); n != before {
		t.Errorf("team search has %d jobs after the refused submits, %d before", n, before)
	}
	if still := e.do(c, "GET", "/team", nil); still.StatusCode != http.StatusOK {
		t.Errorf("the session ended on a refused sign-out: GET /team %d", still.StatusCode)
	}

	// The right token, from this site, is obeyed.
	resp := e.do(c, "POST", "/jobs/"+job.ID+"/priority", with(url.Values{"class": {"production"}}, csrf), "Sec-Fetch-Site", "same-origin", "Origin", e.url)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST priority with the session's token: %d:\n%.600s", resp.StatusCode, resp.body)
	}
	e.apiJSON("admin", "GET", api.Prefix+"/jobs/"+job.ID, nil, &after)
	if after.Class != "production" {
		t.Errorf("class after the accepted post: %s; want production", after.Class)
	}
}

// browserTarget is where a browser goes for a Location header: it drops
// tabs and newlines, trims C0 controls and spaces, and reads "\" as "/"
// (the WHATWG URL parser, for http and https).
func browserTarget(base *url.URL, loc string) (*url.URL, error) {
	loc = strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' })
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(loc)
	u, err := url.Parse(loc)
	if err != nil {
		return nil, err
	}
	return base.ResolveReference(u), nil
}

func TestRedirectsStayOnThisSite(t *testing.T) {
	e := newEnv(t)
	base, _ := url.Parse(e.url)
	job := e.submit("lead-s", api.SubmitRequest{Project: "default", Name: "target", Class: "batch", GPU: api.GPURequest{Count: 1}, Duration: "10h"})
	attacks := []string{
		"//evil.example", "//evil.example/", "https://evil.example", "http://evil.example/queue", "https:evil.example", "https:/evil.example",
		`/\evil.example`, `\\evil.example`, `\/evil.example`, "/\t/evil.example", "/\n/evil.example", "/\r/evil.example", " //evil.example",
		"\t//evil.example", "///evil.example", "/../../evil.example", "javascript:alert(1)", "/%2F%2Fevil.example", "//user@evil.example",
		"/.//evil.example",
	}
	check := func(t *testing.T, where, next string, resp page) {
		t.Helper()
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%s with %q: %d, want 303", where, next, resp.StatusCode)
			return
		}
		loc := resp.Header.Get("Location")
		u, err := browserTarget(base, loc)
		if err != nil || u.Host != base.Host || u.Scheme != base.Scheme {
			t.Errorf("%s with %q redirects to %q: a browser goes to %v (%v)", where, next, loc, u, err)
		}
	}
	lead, csrf, _ := e.signInHTTP("lead-s", "")
	for _, next := range attacks {
		_, _, resp := e.signInHTTP("lead-s", next)
		check(t, "POST /signin", next, resp)
		check(t, "GET /signin signed in", next, e.do(lead, "GET", "/signin?next="+url.QueryEscape(next), nil))
		check(t, "POST priority with back", next, e.do(lead, "POST", "/jobs/"+job.ID+"/priority", url.Values{"csrf": {csrf}, "class": {"batch"}, "back": {next}}))
	}

	// A path on this site is kept, query and all: signing in after a
	// redirect to the sign-in page lands where the user was going.
	resp := e.do(e.client(), "GET", "/queue?team=search", nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/signin?next="+url.QueryEscape("/queue?team=search") {
		t.Errorf("GET /queue signed out: %d %q", resp.StatusCode, loc)
	}
	if _, _, resp := e.signInHTTP("lead-s", "/queue?team=search"); resp.Header.Get("Location") != "/queue?team=search" {
		t.Errorf("signing in with next=/queue?team=search goes to %q", resp.Header.Get("Location"))
	}
	back := e.do(lead, "POST", "/jobs/"+job.ID+"/priority", url.Values{"csrf": {csrf}, "class": {"batch"}, "back": {"/team"}})
	if back.Header.Get("Location") != "/team" {
		t.Errorf("an action with back=/team goes to %q", back.Header.Get("Location"))
	}
}

func TestSignOutEndsTheSession(t *testing.T) {
	e := newEnv(t)
	c, csrf, _ := e.signInHTTP("lead-s", "")
	u, _ := url.Parse(e.url)
	var id string
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "partita_session" {
			id = ck.Value
		}
	}
	if id == "" {
		t.Fatal("no session cookie in the jar")
	}
	// replay sends the old cookie from a fresh client, as a thief would.
	replay := func(method, path string, form url.Values) page {
		return e.do(&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
			method, path, form, "Cookie", "partita_session="+id)
	}
	if got := replay("GET", "/team", nil); got.StatusCode != http.StatusOK {
		t.Fatalf("the session cookie from another client before signing out: %d; want 200", got.StatusCode)
	}

	out := e.do(c, "POST", "/signout", url.Values{"csrf": {csrf}})
	if out.StatusCode != http.StatusSeeOther || out.Header.Get("Location") != "/signin" {
		t.Errorf("POST /signout: %d %q; want 303 to /signin", out.StatusCode, out.Header.Get("Location"))
	}
	if ck := cookieNamed(out.Response, "partita_session"); ck == nil || ck.MaxAge >= 0 || ck.Value != "" {
		t.Errorf("sign-out does not clear the cookie: %+v", ck)
	}

	// The session is gone on the server: the old cookie no longer works.
	if got := replay("GET", "/team", nil); got.StatusCode != http.StatusSeeOther || !strings.HasPrefix(got.Header.Get("Location"), "/signin") {
		t.Errorf("GET /team with the old cookie: %d %q; want 303 to /signin", got.StatusCode, got.Header.Get("Location"))
	}
	for _, path := range []string{"/fragments/queue", "/fragments/overview", "/fragments/team", "/chargeback.csv", "/submit/preview?gpu_mode=count&gpu_count=1"} {
		if got := replay("GET", path, nil); got.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with the old cookie: %d; want 401", path, got.StatusCode)
		}
	}
	job := e.submit("lead-s", api.SubmitRequest{Project: "default", Class: "batch", GPU: api.GPURequest{Count: 1}, Duration: "1h"})
	if got := replay("POST", "/jobs/"+job.ID+"/cancel", url.Values{"csrf": {csrf}}); got.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST cancel with the old cookie and CSRF token: %d; want 401", got.StatusCode)
	}
	var j api.Job
	e.apiJSON("admin", "GET", api.Prefix+"/jobs/"+job.ID, nil, &j)
	if j.State == api.StateCancelled {
		t.Error("a signed-out session cancelled a job")
	}
	if got := e.do(c, "GET", "/", nil); got.StatusCode != http.StatusSeeOther {
		t.Errorf("GET / after signing out: %d; want 303 to /signin", got.StatusCode)
	}
}

// TestPagesShowOnlyTheViewersTeam signs in as research's lead and reads
// every page and fragment, asking for team search where a page takes a
// team: no job of search or ads may appear. Research's own jobs do, and
// search's lead sees search's: the check is not vacuous.
func TestPagesShowOnlyTheViewersTeam(t *testing.T) {
	e := newEnv(t)
	waiting := e.seed()
	jobsOf := func(team string) []api.Job {
		var l api.JobList
		e.apiJSON("admin", "GET", api.Prefix+"/jobs?team="+team+"&limit=200", nil, &l)
		if len(l.Jobs) == 0 {
			t.Fatalf("team %s has no jobs", team)
		}
		return l.Jobs
	}
	search, ads, research := jobsOf("search"), jobsOf("ads"), jobsOf("research")
	pages := []string{
		"/", "/fragments/overview", "/queue", "/queue?team=search", "/fragments/queue", "/fragments/queue?team=search",
		"/team", "/team?team=search", "/fragments/team", "/fragments/team?team=search", "/submit", "/submit?team=search",
		"/submit/preview?team=search&project=default&kind=inference&gpu_mode=count&gpu_count=1&tasks=1&gang=0&duration=1h",
		"/chargeback", "/chargeback?team=search&group_by=team,project,user", "/chargeback.csv?team=search&group_by=team,project,user",
		"/jobs/" + research[0].ID,
	}
	read := func(user string) string {
		c, _, _ := e.signInHTTP(user, "")
		var all strings.Builder
		for _, p := range pages {
			resp := e.do(c, "GET", p, nil)
			if resp.StatusCode >= 500 {
				t.Errorf("%s: GET %s: %d", user, p, resp.StatusCode)
			}
			all.WriteString(resp.body)
		}
		for _, j := range append(append([]api.Job{}, search...), ads...) {
			resp := e.do(c, "GET", "/jobs/"+j.ID, nil)
			switch {
			case resp.StatusCode == http.StatusNotFound:
				// The ID was asked for, so the page may repeat it, but
				// nothing else of the job.
				if strings.Contains(resp.body, j.Name) || !strings.Contains(resp.body, `id="error-message"`) {
					t.Errorf("%s: GET /jobs/%s (team %s) tells more than not found:\n%.600s", user, j.ID, j.Team, resp.body)
				}
			case user == "lead-r" || j.Team != "search":
				t.Errorf("%s: GET /jobs/%s (team %s): %d, want 404", user, j.ID, j.Team, resp.StatusCode)
			default:
				all.WriteString(resp.body)
			}
		}
		return all.String()
	}

	seen := read("lead-r")
	for _, j := range append(append([]api.Job{}, search...), ads...) {
		if strings.Contains(seen, j.ID) {
			t.Errorf("research's lead sees job %s (%s) of team %s", j.ID, j.Name, j.Team)
		}
	}
	// (Other seeded names, such as chat-7b, are also names of workload
	// profiles, which every team sees.)
	for _, name := range []string{"ranker-pretrain", "ranker-eval"} {
		if strings.Contains(seen, name) {
			t.Errorf("research's lead sees a job named %s", name)
		}
	}
	for _, j := range research {
		if !strings.Contains(seen, j.ID) {
			t.Errorf("research's lead does not see its own team's job %s (%s)", j.ID, j.Name)
		}
	}
	if own := read("lead-s"); !strings.Contains(own, waiting.ID) || !strings.Contains(own, search[len(search)-1].ID) {
		t.Errorf("search's lead does not see search's jobs %s and %s", waiting.ID, search[len(search)-1].ID)
	}
}
