package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/store"
)

// TokenFile is where the first start writes the admin token, mode 0600.
const TokenFile = "admin.token"

// authenticate reads "Authorization: Bearer <token>".
func (s *Server) authenticate(r *http.Request) (store.Principal, error) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		return store.Principal{}, errorf(http.StatusUnauthorized, "", "missing token: send Authorization: Bearer <token>")
	}
	key := string(store.HashToken(secret))
	s.authMu.Lock()
	p, hit := s.auth[key]
	s.authMu.Unlock()
	if hit {
		return p, nil
	}
	p, err := s.store.Authenticate(r.Context(), secret)
	if errors.Is(err, store.ErrNotFound) {
		return p, errorf(http.StatusUnauthorized, "", "invalid or revoked token")
	}
	if err != nil {
		return p, err
	}
	s.authMu.Lock()
	if len(s.auth) > 10000 {
		clear(s.auth)
	}
	s.auth[key] = p
	s.authMu.Unlock()
	return p, nil
}

// forgetTokens drops cached principals after a user or token change, so
// that a revoked token stops working at once.
func (s *Server) forgetTokens() {
	s.authMu.Lock()
	clear(s.auth)
	s.authMu.Unlock()
}

// sees reports whether the caller may see a team's data.
func (c *call) sees(team string) bool {
	return c.who.Role == api.RoleAdmin || c.who.Team == team
}

// scopeTeam is the team a listing is limited to: the caller's own, or
// for an admin the one asked for ("" for all). Asking for another team is
// answered as if it did not exist.
func (c *call) scopeTeam(asked string) (string, error) {
	if c.who.Role == api.RoleAdmin {
		return asked, nil
	}
	if asked != "" && asked != c.who.Team {
		return "", notFound("team", asked)
	}
	return c.who.Team, nil
}

// NewSecret makes a token: 32 random bytes, URL-safe, with a prefix that
// makes it recognisable in logs and secret scanners.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "pt_" + base64.RawURLEncoding.EncodeToString(b), nil
}

func newID(prefix string, n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(b), nil
}

// IssueToken creates a token for a user and returns its secret.
func IssueToken(ctx context.Context, s *store.Store, user, description string) (store.Token, string, error) {
	secret, err := NewSecret()
	if err != nil {
		return store.Token{}, "", err
	}
	id, err := newID("tok_", 6)
	if err != nil {
		return store.Token{}, "", err
	}
	t := store.Token{ID: id, User: user, Description: description, CreatedAt: time.Now().UTC()}
	return t, secret, s.AddToken(ctx, t, secret)
}

// Bootstrap prepares a new data directory: the teams of the cluster file
// with their projects, and an admin user whose token is written to
// DATA_DIR/admin.token (mode 0600) and returned, to be printed once. On a
// directory already set up it does nothing and returns "".
func Bootstrap(ctx context.Context, s *store.Store, dataDir string, teams []store.Team, projects map[string][]string) (string, error) {
	n, err := s.CountUsers(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	existing, err := s.Teams(ctx)
	if err != nil {
		return "", err
	}
	if len(existing) == 0 {
		for _, t := range teams {
			if err := s.PutTeam(ctx, t, true); err != nil {
				return "", err
			}
			for _, p := range projects[t.Name] {
				if err := s.AddProject(ctx, t.Name, p); err != nil && !errors.Is(err, store.ErrConflict) {
					return "", err
				}
			}
		}
	}
	if err := s.AddUser(ctx, store.User{Name: "admin", Role: api.RoleAdmin, CreatedAt: time.Now().UTC()}); err != nil {
		return "", err
	}
	_, secret, err := IssueToken(ctx, s, "admin", "created on first start")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, TokenFile)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return secret, nil
}

// ScenarioTeams are the teams a new store starts with, and their
// projects: one per workload of the scenario, plus default.
func ScenarioTeams(sc *scenario.Scenario) ([]store.Team, map[string][]string) {
	var teams []store.Team
	projects := map[string][]string{}
	for _, t := range sc.Teams {
		st := store.Team{Name: t.Name, GuaranteeMilli: int64(t.GuaranteedGPUs) * 1000, BurstMilli: int64(t.BurstGPUs) * 1000, Weight: t.Weight}
		for _, c := range t.Classes {
			st.Classes = append(st.Classes, c.String())
		}
		teams = append(teams, st)
	}
	for _, w := range sc.Workloads {
		projects[w.Team] = append(projects[w.Team], w.Name)
	}
	return teams, projects
}
