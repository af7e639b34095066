package portal

import (
	"net/http"
	"net/url"

	"partita.dev/partita/internal/api"
)

// teamData is one team: its quota, what it holds, and its jobs.
type teamData struct {
	Team     api.Team
	Teams    []string // for an admin: every team, to pick one
	Use      teamUse
	Active   jobsTable // not finished, newest first
	Finished jobsTable // the latest finished
	CanLead  bool
	Me       string
	Member   bool
	Bar      quotaBar
}

// jobsTable is a list of jobs with the actions the viewer may take (the
// "jobs" template).
type jobsTable struct {
	Jobs     []api.Job
	CanLead  bool
	Member   bool
	Me, Back string
	Classes  []string
	CSRF     string
}

// quotaBar draws held against guarantee and burst, in the SVG's units.
type quotaBar struct {
	HeldW, GuaranteeX, Width float64
	Over                     bool
}

func (p *Portal) teamPage(w http.ResponseWriter, r *http.Request, s *session) error {
	d, err := p.teamData(r, s)
	if err != nil {
		return err
	}
	title := "My team"
	if d.Team.Name != "" {
		title = "Team " + d.Team.Name
	}
	p.render(w, http.StatusOK, "team", p.view(s, "team", title, d))
	return nil
}

func (p *Portal) teamFragment(w http.ResponseWriter, r *http.Request, s *session) error {
	d, err := p.teamData(r, s)
	if err != nil {
		return err
	}
	p.fragment(w, "team", "team-live", p.view(s, "team", "", d))
	return nil
}

func (p *Portal) teamData(r *http.Request, s *session) (*teamData, error) {
	d := &teamData{CanLead: s.who.Role == api.RoleAdmin || s.who.Role == api.RoleLead, Me: s.who.User, Member: s.who.Role == api.RoleMember}
	name := s.who.Team
	if s.who.Role == api.RoleAdmin {
		var teams []api.Team
		if err := p.as(r, s, http.MethodGet, api.Prefix+"/teams", nil, &teams); err != nil {
			return nil, err
		}
		for _, t := range teams {
			d.Teams = append(d.Teams, t.Name)
		}
		name = r.URL.Query().Get("team")
		if name == "" && len(teams) > 0 {
			name = teams[0].Name
		}
	}
	if name == "" {
		return d, nil
	}
	if err := p.as(r, s, http.MethodGet, api.Prefix+"/teams/"+url.PathEscape(name), nil, &d.Team); err != nil {
		return nil, err
	}
	q := "?team=" + url.QueryEscape(name)
	var active, done api.JobList
	if err := p.as(r, s, http.MethodGet, api.Prefix+"/jobs"+q+"&state=queued,admitted,running,preempted&limit=200", nil, &active); err != nil {
		return nil, err
	}
	if err := p.as(r, s, http.MethodGet, api.Prefix+"/jobs"+q+"&state=succeeded,failed,cancelled&limit=10", nil, &done); err != nil {
		return nil, err
	}
	back := "/team"
	if s.who.Role == api.RoleAdmin {
		back += q
	}
	d.Active = jobsTable{Jobs: active.Jobs, CanLead: d.CanLead, Member: d.Member, Me: s.who.User, Back: back, Classes: d.Team.Classes, CSRF: s.csrf}
	d.Finished = jobsTable{Jobs: done.Jobs, Me: s.who.User, Back: back, CSRF: s.csrf}
	uses, _, err := p.teamUses(r)
	if err != nil {
		return nil, err
	}
	for _, u := range uses {
		if u.Team == name {
			d.Use = u
		}
	}
	scale := max(d.Use.Burst, d.Use.Held, 1)
	d.Bar = quotaBar{Width: 600, HeldW: d.Use.Held / scale * 600, GuaranteeX: d.Use.Guarantee / scale * 600, Over: d.Use.Held > d.Use.Guarantee}
	return d, nil
}
