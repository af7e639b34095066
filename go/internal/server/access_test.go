package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"partita.dev/partita/internal/api"
)

// users of the matrix: one per role in team search, two in team research
// (who must never reach search's jobs), and no token at all.
var matrixUsers = []string{"admin", "lead-s", "member-s", "viewer-s", "lead-r", "member-r", ""}

func roleOf(user string) string {
	switch {
	case user == "admin":
		return api.RoleAdmin
	case strings.HasPrefix(user, "lead"):
		return api.RoleLead
	case strings.HasPrefix(user, "member"):
		return api.RoleMember
	case strings.HasPrefix(user, "viewer"):
		return api.RoleViewer
	}
	return ""
}

func teamOf(user string) string {
	if strings.HasSuffix(user, "-r") {
		return "research"
	}
	return "search"
}

var uniq atomic.Int64

// fixture says how to call a route as a user: its path and body.
func (e *env) fixture(rt route, user string) (path string, body any) {
	path = rt.path
	n := uniq.Add(1)
	if strings.Contains(path, "/jobs/{id}") {
		// A fresh job of team search, submitted by member-s, so that
		// cancelling it works once for each caller allowed to.
		j := e.submit("member-s", smallJob("search"))
		path = strings.Replace(path, "{id}", j.ID, 1)
	}
	if strings.Contains(path, "/tokens/{id}") {
		_, secret := e.call("admin", "POST", api.Prefix+"/users/member-s/tokens", map[string]any{})
		var tok api.NewToken
		_ = json.Unmarshal(secret, &tok)
		path = strings.Replace(path, "{id}", tok.ID, 1)
	}
	path = strings.Replace(path, "{team}", "search", 1)
	path = strings.Replace(path, "{user}", "member-s", 1)
	switch rt.method + " " + rt.path {
	case "POST " + api.Prefix + "/jobs", "POST " + api.Prefix + "/jobs/preview":
		body = smallJob(teamOf(user))
	case "PATCH " + api.Prefix + "/jobs/{id}":
		body = api.JobPatch{Class: "best-effort"}
	case "POST " + api.Prefix + "/teams":
		g := 0.0
		body = api.TeamRequest{Name: fmt.Sprintf("team-%d", n), GuaranteedGPUs: &g}
	case "PATCH " + api.Prefix + "/teams/{team}":
		w := 2.0
		body = api.TeamRequest{Weight: &w}
	case "POST " + api.Prefix + "/teams/{team}/projects":
		body = api.ProjectRequest{Name: fmt.Sprintf("p-%d", n)}
	case "POST " + api.Prefix + "/users":
		body = api.UserRequest{Name: fmt.Sprintf("u-%d", n), Role: api.RoleViewer, Team: "search"}
	case "POST " + api.Prefix + "/users/{user}/tokens":
		body = api.TokenRequest{Description: "matrix"}
	}
	return path, body
}

// crossTeam routes reach one job or team of search: research's users get
// 404, as if it did not exist.
func crossTeam(rt route) bool {
	return strings.Contains(rt.path, "/jobs/{id}") || strings.Contains(rt.path, "/teams/{team}")
}

// TestAccessMatrix calls every route as every role, with and without a
// token, and checks the outcome: 401 without a token, 403 for a role the
// route does not allow, 404 for another team's job or team, success
// otherwise.
func TestAccessMatrix(t *testing.T) {
	e := newEnv(t, 60)
	e.t = t
	for _, rt := range e.srv.routes() {
		for _, user := range matrixUsers {
			name := fmt.Sprintf("%s %s as %s", rt.method, rt.path, orNone(user))
			path, body := e.fixture(rt, user)
			status, data := e.call(user, rt.method, path, body)
			want := rt.status
			switch {
			case rt.roles == nil:
			case user == "":
				want = http.StatusUnauthorized
			case !allowed(rt.roles, roleOf(user)):
				want = http.StatusForbidden
			case crossTeam(rt) && teamOf(user) == "research":
				want = http.StatusNotFound
			}
			if status != want {
				t.Errorf("%s: %d %s; want %d", name, status, truncate(data), want)
			}
			if want == http.StatusNotFound && (strings.Contains(string(data), `"state"`) || strings.Contains(string(data), `"guaranteed_gpus"`)) {
				t.Errorf("%s: the 404 carries the data: %s", name, truncate(data))
			}
		}
	}
}

func orNone(user string) string {
	if user == "" {
		return "no token"
	}
	return user
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// TestListingsNeverShowAnotherTeamsJobs: research's users list jobs,
// the queue, the cluster, reports and the ledger without ever seeing a
// job of search, and asking for search by name is answered 404.
func TestListingsNeverShowAnotherTeamsJobs(t *testing.T) {
	e := newEnv(t, 600)
	e.t = t
	secret := e.submit("member-s", api.SubmitRequest{Tasks: 2, Gang: 2, GPU: api.GPURequest{Count: 4}, Duration: "10h"})
	queued := e.submit("member-s", api.SubmitRequest{Tasks: 2, Gang: 2, GPU: api.GPURequest{Count: 4}, Duration: "1h"})
	e.waitState(secret.ID, api.StateRunning, 10e9)
	for _, path := range []string{"/jobs", "/queue", "/cluster", "/reports/usage", "/reports/chargeback?format=csv", "/ledger", "/ledger?format=csv", "/teams"} {
		for _, user := range []string{"member-r", "lead-r"} {
			status, data := e.call(user, "GET", api.Prefix+path, nil)
			if status != http.StatusOK {
				t.Errorf("GET %s as %s: %d %s", path, user, status, truncate(data))
			}
			for _, leak := range []string{secret.ID, queued.ID, `"search"`, "search,"} {
				if strings.Contains(string(data), leak) {
					t.Errorf("GET %s as %s shows %s: %s", path, user, leak, truncate(data))
				}
			}
		}
	}
	for _, path := range []string{"/jobs?team=search", "/queue?team=search", "/reports/usage?team=search", "/ledger?team=search", "/teams/search"} {
		if status, data := e.call("member-r", "GET", api.Prefix+path, nil); status != http.StatusNotFound {
			t.Errorf("GET %s as member-r: %d %s; want 404", path, status, truncate(data))
		}
	}
	if status, _ := e.call("other-s", "POST", api.Prefix+"/jobs/"+queued.ID+"/cancel", nil); status != http.StatusForbidden {
		t.Errorf("a member cancelled a teammate's job: %d; want 403", status)
	}
}

// TestRevokedTokenStopsAtOnce: the server caches principals; revoking
// must clear the cache.
func TestRevokedTokenStopsAtOnce(t *testing.T) {
	e := newEnv(t, 60)
	e.t = t
	if status, _ := e.call("member-s", "GET", api.Prefix+"/whoami", nil); status != 200 {
		t.Fatalf("whoami: %d", status)
	}
	status, data := e.call("admin", "GET", api.Prefix+"/tokens", nil)
	var toks []api.Token
	if status != 200 || json.Unmarshal(data, &toks) != nil {
		t.Fatalf("tokens: %d %s", status, data)
	}
	for _, tok := range toks {
		if tok.User == "member-s" {
			if status, data := e.call("admin", "DELETE", api.Prefix+"/tokens/"+tok.ID, nil); status != 200 {
				t.Fatalf("revoke: %d %s", status, data)
			}
		}
	}
	if status, _ := e.call("member-s", "GET", api.Prefix+"/whoami", nil); status != http.StatusUnauthorized {
		t.Fatalf("a revoked token still works: %d", status)
	}
}
