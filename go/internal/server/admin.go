package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/profiles"
	"partita.dev/partita/internal/store"
	"partita.dev/partita/internal/workload"
)

// nameRE is what team, project and user names look like: they appear in
// job IDs, labels and reports.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,38}[a-z0-9]$|^[a-z]$`)

func checkName(field, name string) error {
	if !nameRE.MatchString(name) {
		return badRequest(field, "%s: %q must be lower-case letters, digits and '-', start with a letter, at most 40 long", field, name)
	}
	return nil
}

func (s *Server) teamView(t teamInfo) api.Team {
	v := api.Team{Name: t.Name, GuaranteedGPUs: float64(t.GuaranteeMilli) / 1000, BurstGPUs: float64(t.BurstMilli) / 1000, Weight: t.Weight, Classes: t.Classes}
	for p := range t.projects {
		v.Projects = append(v.Projects, p)
	}
	sort.Strings(v.Projects)
	return v
}

func (s *Server) listTeams(c *call) error {
	s.teamsMu.RLock()
	var out []api.Team
	for _, t := range s.teams {
		if c.sees(t.Name) {
			out = append(out, s.teamView(*t))
		}
	}
	s.teamsMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if out == nil {
		out = []api.Team{}
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) visibleTeam(c *call) (teamInfo, error) {
	name := c.r.PathValue("team")
	t, ok := s.team(name)
	if !ok || !c.sees(name) {
		return t, notFound("team", name)
	}
	return t, nil
}

func (s *Server) getTeam(c *call) error {
	t, err := s.visibleTeam(c)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, s.teamView(t))
}

func (s *Server) createTeam(c *call) error {
	var req api.TeamRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	if err := checkName("name", req.Name); err != nil {
		return err
	}
	t := store.Team{Name: req.Name, Weight: 1, Classes: classNames(workload.Classes())}
	if err := s.applyTeam(&t, req); err != nil {
		return err
	}
	if err := s.store.PutTeam(c.r.Context(), t, true); err != nil {
		return err
	}
	if err := s.loadTeams(c.r.Context()); err != nil {
		return err
	}
	ti, _ := s.team(t.Name)
	return c.json(http.StatusCreated, s.teamView(ti))
}

func (s *Server) patchTeam(c *call) error {
	t, err := s.visibleTeam(c)
	if err != nil {
		return err
	}
	var req api.TeamRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	if req.Name != "" && req.Name != t.Name {
		return badRequest("name", "name: a team cannot be renamed")
	}
	st := t.Team
	if err := s.applyTeam(&st, req); err != nil {
		return err
	}
	if err := s.store.PutTeam(c.r.Context(), st, false); err != nil {
		return err
	}
	if err := s.loadTeams(c.r.Context()); err != nil {
		return err
	}
	ti, _ := s.team(t.Name)
	return c.json(http.StatusOK, s.teamView(ti))
}

// applyTeam checks a team request's fields and sets them on t. The burst
// defaults to the whole cluster, and the guarantees of all teams may not
// add up to more than the cluster.
func (s *Server) applyTeam(t *store.Team, req api.TeamRequest) error {
	gpus := float64(s.world.GPUs())
	if t.BurstMilli == 0 {
		t.BurstMilli = int64(gpus * 1000)
	}
	for _, f := range []struct {
		name string
		v    *float64
		out  *int64
	}{{"guaranteed_gpus", req.GuaranteedGPUs, &t.GuaranteeMilli}, {"burst_gpus", req.BurstGPUs, &t.BurstMilli}} {
		if f.v == nil {
			continue
		}
		if !(*f.v >= 0 && *f.v <= gpus) {
			return badRequest(f.name, "%s: %v must be from 0 to the cluster's %v GPUs", f.name, *f.v, gpus)
		}
		*f.out = int64(math.Round(*f.v * 1000))
	}
	if t.BurstMilli < t.GuaranteeMilli {
		return badRequest("burst_gpus", "burst_gpus: %v is below guaranteed_gpus %v", float64(t.BurstMilli)/1000, float64(t.GuaranteeMilli)/1000)
	}
	if req.Weight != nil {
		if !(*req.Weight > 0 && *req.Weight <= 1000) {
			return badRequest("weight", "weight: %v must be above 0 and at most 1000", *req.Weight)
		}
		t.Weight = *req.Weight
	}
	if req.Classes != nil {
		if err := checkClasses(req.Classes); err != nil {
			return err
		}
		t.Classes = req.Classes
	}
	return s.checkGuarantees(*t, gpus)
}

func checkClasses(classes []string) error {
	if len(classes) == 0 {
		return badRequest("classes", "classes: empty; give at least one of production, batch, best-effort")
	}
	seen := map[string]bool{}
	for i, c := range classes {
		if _, err := workload.ParseClass(c); err != nil {
			return badRequest("classes", "classes[%d]: %v", i, err)
		}
		if seen[c] {
			return badRequest("classes", "classes[%d]: %s is given twice", i, c)
		}
		seen[c] = true
	}
	return nil
}

func (s *Server) checkGuarantees(t store.Team, gpus float64) error {
	s.teamsMu.RLock()
	defer s.teamsMu.RUnlock()
	total := t.GuaranteeMilli
	for name, o := range s.teams {
		if name != t.Name {
			total += o.GuaranteeMilli
		}
	}
	if float64(total) > gpus*1000 {
		return badRequest("guaranteed_gpus", "guaranteed_gpus: the teams' guarantees would add up to %v GPUs, more than the cluster's %v", float64(total)/1000, gpus)
	}
	return nil
}

func classNames(cs []workload.Class) []string {
	var out []string
	for i := len(cs) - 1; i >= 0; i-- {
		out = append(out, cs[i].String())
	}
	return out
}

func (s *Server) listProjects(c *call) error {
	t, err := s.visibleTeam(c)
	if err != nil {
		return err
	}
	ps, err := s.store.Projects(c.r.Context(), t.Name)
	if err != nil {
		return err
	}
	out := []api.Project{}
	for _, p := range ps {
		out = append(out, api.Project{Team: p.Team, Name: p.Name, CreatedAt: p.CreatedAt})
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) createProject(c *call) error {
	t, err := s.visibleTeam(c)
	if err != nil {
		return err
	}
	var req api.ProjectRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	if err := checkName("name", req.Name); err != nil {
		return err
	}
	if err := s.store.AddProject(c.r.Context(), t.Name, req.Name); err != nil {
		return err
	}
	if err := s.loadTeams(c.r.Context()); err != nil {
		return err
	}
	return c.json(http.StatusCreated, api.Project{Team: t.Name, Name: req.Name, CreatedAt: time.Now().UTC()})
}

func (s *Server) listUsers(c *call) error {
	us, err := s.store.Users(c.r.Context())
	if err != nil {
		return err
	}
	out := []api.User{}
	for _, u := range us {
		out = append(out, api.User{Name: u.Name, Role: u.Role, Team: u.Team, CreatedAt: u.CreatedAt})
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) createUser(c *call) error {
	var req api.UserRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	if err := checkName("name", req.Name); err != nil {
		return err
	}
	if !contains(api.Roles(), req.Role) {
		return badRequest("role", "role: %q is not one of %s", req.Role, strings.Join(api.Roles(), ", "))
	}
	switch {
	case req.Role == api.RoleAdmin && req.Team != "":
		return badRequest("team", "team: an admin belongs to no team")
	case req.Role != api.RoleAdmin && req.Team == "":
		return badRequest("team", "team: required for role %s", req.Role)
	}
	if _, ok := s.team(req.Team); req.Team != "" && !ok {
		return badRequest("team", "team: %q does not exist", req.Team)
	}
	u := store.User{Name: req.Name, Role: req.Role, Team: req.Team, CreatedAt: time.Now().UTC()}
	if err := s.store.AddUser(c.r.Context(), u); err != nil {
		return err
	}
	return c.json(http.StatusCreated, api.User{Name: u.Name, Role: u.Role, Team: u.Team, CreatedAt: u.CreatedAt})
}

func (s *Server) createToken(c *call) error {
	var req api.TokenRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	if len(req.Description) > maxNameLen {
		return badRequest("description", "description: %d characters; at most %d", len(req.Description), maxNameLen)
	}
	user := c.r.PathValue("user")
	t, secret, err := IssueToken(c.r.Context(), s.store, user, req.Description)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("user", user)
	}
	if err != nil {
		return err
	}
	s.forgetTokens()
	return c.json(http.StatusCreated, api.NewToken{Token: tokenView(t), Secret: secret})
}

func tokenView(t store.Token) api.Token {
	v := api.Token{ID: t.ID, User: t.User, Description: t.Description, CreatedAt: t.CreatedAt}
	if !t.RevokedAt.IsZero() {
		r := t.RevokedAt
		v.RevokedAt = &r
	}
	return v
}

func (s *Server) listTokens(c *call) error {
	ts, err := s.store.Tokens(c.r.Context())
	if err != nil {
		return err
	}
	out := []api.Token{}
	for _, t := range ts {
		out = append(out, tokenView(t))
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) revokeToken(c *call) error {
	id := c.r.PathValue("id")
	if err := s.store.RevokeToken(c.r.Context(), id, time.Now().UTC()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound("token", id)
		}
		return err
	}
	s.forgetTokens()
	ts, err := s.store.Tokens(c.r.Context())
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.ID == id {
			return c.json(http.StatusOK, tokenView(t))
		}
	}
	return fmt.Errorf("token %s vanished", id)
}

func listProfiles(c *call) error {
	out := []api.Profile{}
	for _, p := range profiles.All() {
		out = append(out, api.Profile{Name: p.Name, Kind: string(p.Kind), PeakMemoryMiB: p.PeakMemoryMiB, Compute: p.Compute, GPUs: p.GPUs, CPUMilli: p.CPUMilli, HostMemoryMiB: p.HostMemoryMiB, Basis: p.Derivation.Basis})
	}
	return c.json(http.StatusOK, out)
}
