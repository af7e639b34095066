package portal

import (
	"net/http"
	"net/url"

	"partita.dev/partita/internal/api"
)

// jobData is one job with its timeline and what the viewer may do to it.
type jobData struct {
	Job       api.Job
	Classes   []string // the team's classes, for a lead's priority form
	CanCancel bool
	CanLead   bool // change priority, requeue
}

func (p *Portal) jobPage(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	var d jobData
	if err := p.as(r, s, http.MethodGet, api.Prefix+"/jobs/"+url.PathEscape(id), nil, &d.Job); err != nil {
		return err
	}
	lead := s.who.Role == api.RoleAdmin || s.who.Role == api.RoleLead
	live := !api.Terminal(d.Job.State)
	d.CanLead = lead && live
	d.CanCancel = live && (lead || s.who.Role == api.RoleMember && d.Job.User == s.who.User)
	if d.CanLead {
		var t api.Team
		if err := p.as(r, s, http.MethodGet, api.Prefix+"/teams/"+url.PathEscape(d.Job.Team), nil, &t); err != nil {
			return err
		}
		d.Classes = t.Classes
	}
	p.render(w, http.StatusOK, "job", p.view(s, "", "Job "+d.Job.ID, d))
	return nil
}

// The actions: each calls the API as the user and comes back to the page
// it was posted from with the API's answer, so a refusal (a member
// changing a priority: 403) shows as the API words it.

func (p *Portal) setPriority(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	class := r.PostFormValue("class")
	err := p.as(r, s, http.MethodPatch, api.Prefix+"/jobs/"+url.PathEscape(id), api.JobPatch{Class: class}, nil)
	return p.after(w, r, s, err, "Job "+id+" is now "+class+".")
}

func (p *Portal) cancel(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	err := p.as(r, s, http.MethodPost, api.Prefix+"/jobs/"+url.PathEscape(id)+"/cancel", nil, nil)
	return p.after(w, r, s, err, "Job "+id+" is cancelled.")
}

func (p *Portal) requeue(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	err := p.as(r, s, http.MethodPost, api.Prefix+"/jobs/"+url.PathEscape(id)+"/requeue", nil, nil)
	return p.after(w, r, s, err, "Job "+id+" is back in its queue.")
}

// after reports an action's outcome on the page it came from (the form's
// "back" field, a path on this site; else the job's page).
func (p *Portal) after(w http.ResponseWriter, r *http.Request, s *session, err error, ok string) error {
	if err != nil {
		ae, isAPI := err.(*apiError)
		if !isAPI || ae.Status == http.StatusUnauthorized || ae.Status >= 500 {
			return err
		}
		p.sessions.setFlash(s, flash{Error: true, Text: "Refused: " + ae.Msg})
	} else {
		p.sessions.setFlash(s, flash{Text: ok})
	}
	back := r.PostFormValue("back")
	if back == "" {
		back = "/jobs/" + url.PathEscape(r.PathValue("id"))
	}
	http.Redirect(w, r, safeNext(back), http.StatusSeeOther)
	return nil
}
