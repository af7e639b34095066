package portal

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/gpu"
)

// submitForm is the submit form's fields, as typed.
type submitForm struct {
	Kind                                                string // inference or training
	Team, Project, Name, Image, Command, Class          string
	GPUMode                                             string // count, mig, memory, profile or none
	GPUCount, GPUMIG, GPUMemory, GPUCompute, GPUProfile string
	Tasks, Gang, CPU, Memory, Duration, CheckpointEvery string
	IdempotencyKey                                      string
}

func defaultForm(team string) submitForm {
	return submitForm{Kind: "inference", Team: team, Project: "default", Class: "batch", GPUMode: "memory", GPUMemory: "20Gi", GPUCompute: "0.25",
		GPUCount: "1", Tasks: "1", Gang: "0", Duration: "2h"}
}

func readForm(r *http.Request) submitForm {
	v := func(k string) string { return strings.TrimSpace(r.FormValue(k)) }
	return submitForm{
		Kind: v("kind"), Team: v("team"), Project: v("project"), Name: v("name"), Image: v("image"), Command: v("command"), Class: v("class"),
		GPUMode: v("gpu_mode"), GPUCount: v("gpu_count"), GPUMIG: v("gpu_mig"), GPUMemory: v("gpu_memory"), GPUCompute: v("gpu_compute"), GPUProfile: v("gpu_profile"),
		Tasks: v("tasks"), Gang: v("gang"), CPU: v("cpu"), Memory: v("memory"), Duration: v("duration"), CheckpointEvery: v("checkpoint_every"),
		IdempotencyKey: v("idempotency_key"),
	}
}

// fieldErrors are messages by form field; "" is the form as a whole.
type fieldErrors map[string]string

// request turns the form into the API's request; what cannot be a
// number is an error beside its field before the API sees it.
func (f submitForm) request() (api.SubmitRequest, fieldErrors) {
	errs := fieldErrors{}
	num := func(field, s string, def int) int {
		if s == "" {
			return def
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			errs[field] = fmt.Sprintf("%q is not a whole number", s)
		}
		return n
	}
	req := api.SubmitRequest{Team: f.Team, Project: f.Project, Name: f.Name, Image: f.Image, Command: f.Command, Class: f.Class,
		CPU: f.CPU, Memory: f.Memory, Duration: f.Duration, CheckpointEvery: f.CheckpointEvery, IdempotencyKey: f.IdempotencyKey}
	n := num("tasks", f.Tasks, 1)
	if f.Kind == "training" {
		req.Tasks = n
	} else {
		req.Replicas = n
	}
	req.Gang = num("gang", f.Gang, 0)
	switch f.GPUMode {
	case "count":
		req.GPU.Count = num("gpu_count", f.GPUCount, 0)
		if req.GPU.Count < 1 && errs["gpu_count"] == "" {
			errs["gpu_count"] = "how many whole GPUs each task needs (1 or more)"
			if f.GPUCount != "" {
				errs["gpu_count"] = fmt.Sprintf("%q: each task needs 1 or more whole GPUs", f.GPUCount)
			}
		}
	case "mig":
		req.GPU.MIG = f.GPUMIG
		if f.GPUMIG == "" {
			errs["gpu_mig"] = "pick a MIG profile"
		}
	case "memory":
		req.GPU.Memory = f.GPUMemory
		if f.GPUMemory == "" {
			errs["gpu_memory"] = "the peak GPU memory of one task, e.g. 20Gi"
		}
		if f.GPUCompute != "" {
			// NaN and infinities parse, but JSON has no such numbers.
			c, err := strconv.ParseFloat(f.GPUCompute, 64)
			if err != nil || !(c >= 0 && c <= 1) {
				errs["gpu_compute"] = fmt.Sprintf("%q is not a number from 0 to 1", f.GPUCompute)
				c = 0
			}
			req.GPU.Compute = c
		}
	case "profile":
		req.GPU.Profile = f.GPUProfile
		if f.GPUProfile == "" {
			errs["gpu_profile"] = "pick a workload profile"
		}
	case "none":
	default:
		errs["gpu_mode"] = "say how the job asks for GPUs"
	}
	return req, errs
}

// formField maps an API error's field to the form's.
func formField(apiField string) string {
	switch apiField {
	case "tasks", "replicas":
		return "tasks"
	case "gpu.count", "gpu.mig", "gpu.memory", "gpu.compute", "gpu.profile":
		return strings.Replace(apiField, ".", "_", 1)
	case "gpu", "gpu.models":
		return "gpu"
	case "team", "project", "name", "image", "command", "class", "gang", "cpu", "memory", "duration", "checkpoint_every", "idempotency_key":
		return apiField
	}
	return ""
}

// place is where the form shows an API error: formField, except that
// an error about the GPU request as a whole (it fits no GPU, it exceeds
// the burst limit) goes beside the input of the chosen GPU mode.
func (f submitForm) place(apiField string) string {
	field := formField(apiField)
	if field == "gpu" {
		switch f.GPUMode {
		case "count", "mig", "memory", "profile":
			return "gpu_" + f.GPUMode
		}
	}
	return field
}

// submitData is what the form shows: its values, errors and choices.
type submitData struct {
	Form        submitForm
	Errors      fieldErrors
	Teams       []api.Team
	Admin       bool
	Projects    []string
	Classes     []string
	Profiles    []api.Profile
	MIGProfiles []string
	Preview     *previewData
	CanSubmit   bool
}

func (p *Portal) submitForm(w http.ResponseWriter, r *http.Request, s *session) error {
	f := defaultForm(s.who.Team)
	d, err := p.submitData(r, s, f, fieldErrors{})
	if err != nil {
		return err
	}
	if d.CanSubmit && (s.who.Role != api.RoleAdmin || f.Team != "") {
		d.Preview = p.previewOf(r, s, f)
	}
	p.render(w, http.StatusOK, "submit", p.view(s, "submit", "Submit a job", d))
	return nil
}

func (p *Portal) submitData(r *http.Request, s *session, f submitForm, errs fieldErrors) (*submitData, error) {
	if f.Team == "" && s.who.Role == api.RoleAdmin {
		f.Team = r.FormValue("team")
	}
	f.IdempotencyKey = "portal-" + randomToken()[:20] // fresh for every rendering: a double click submits once
	d := &submitData{Form: f, Errors: errs, Admin: s.who.Role == api.RoleAdmin, CanSubmit: s.who.Role != api.RoleViewer}
	if err := p.as(r, s, http.MethodGet, api.Prefix+"/teams", nil, &d.Teams); err != nil {
		return nil, err
	}
	if d.Admin && d.Form.Team == "" && len(d.Teams) > 0 {
		d.Form.Team = d.Teams[0].Name
	}
	for _, t := range d.Teams {
		if t.Name == d.Form.Team {
			d.Projects, d.Classes = t.Projects, t.Classes
		}
	}
	if len(d.Classes) > 0 && !contains(d.Classes, d.Form.Class) {
		d.Form.Class = d.Classes[0]
		if contains(d.Classes, "batch") {
			d.Form.Class = "batch"
		}
	}
	if err := p.as(r, s, http.MethodGet, api.Prefix+"/profiles", nil, &d.Profiles); err != nil {
		return nil, err
	}
	var c api.Cluster
	if err := p.as(r, s, http.MethodGet, api.Prefix+"/cluster", nil, &c); err != nil {
		return nil, err
	}
	d.MIGProfiles = migProfiles(c)
	return d, nil
}

// migProfiles lists the MIG profiles the cluster's GPUs offer, small to
// large.
func migProfiles(c api.Cluster) []string {
	seen := map[string]*gpu.Profile{}
	for _, n := range c.Nodes {
		for _, g := range n.GPUs {
			m := gpu.Lookup(g.Model)
			for i := range m.Profiles {
				if pr := &m.Profiles[i]; !pr.MediaExt {
					seen[pr.Name] = pr
				}
			}
		}
	}
	names := sortedKeys(seen)
	sort.SliceStable(names, func(a, b int) bool {
		x, y := seen[names[a]], seen[names[b]]
		if x.Memory != y.Memory {
			return x.Memory < y.Memory
		}
		return x.Compute < y.Compute
	})
	return names
}

// submit sends the form to the API; errors come back beside their
// fields, a new job goes to its page.
func (p *Portal) submit(w http.ResponseWriter, r *http.Request, s *session) error {
	f := readForm(r)
	req, errs := f.request()
	status := http.StatusBadRequest
	if len(errs) == 0 {
		var job api.Job
		err := p.as(r, s, http.MethodPost, api.Prefix+"/jobs", req, &job)
		if err == nil {
			msg := "Submitted job " + job.ID + "."
			if job.Queue != nil {
				msg += fmt.Sprintf(" Position %d in team %s's queue.", job.Queue.Position, job.Team)
			}
			p.sessions.setFlash(s, flash{Text: msg})
			http.Redirect(w, r, "/jobs/"+url.PathEscape(job.ID), http.StatusSeeOther)
			return nil
		}
		ae, ok := err.(*apiError)
		if !ok || ae.Status == http.StatusUnauthorized || ae.Status >= 500 {
			return err
		}
		errs[f.place(ae.Field)] = ae.Msg
		status = ae.Status
	}
	d, err := p.submitData(r, s, f, errs)
	if err != nil {
		return err
	}
	p.render(w, status, "submit", p.view(s, "submit", "Submit a job", d))
	return nil
}

// previewData is what a submission would ask for, or why it would be
// refused.
type previewData struct {
	Preview *api.JobPreview
	Errors  fieldErrors
}

func (p *Portal) preview(w http.ResponseWriter, r *http.Request, s *session) error {
	d := p.previewOf(r, s, readForm(r))
	p.fragment(w, "submit", "preview", &view{Data: d})
	return nil
}

func (p *Portal) previewOf(r *http.Request, s *session, f submitForm) *previewData {
	req, errs := f.request()
	d := &previewData{Errors: errs}
	if len(errs) > 0 {
		return d
	}
	req.IdempotencyKey = ""
	var pv api.JobPreview
	if err := p.as(r, s, http.MethodPost, api.Prefix+"/jobs/preview", req, &pv); err != nil {
		msg := err.Error()
		if ae, ok := err.(*apiError); ok {
			msg = ae.Msg
			errs[f.place(ae.Field)] = msg
		} else {
			errs[""] = msg
		}
		return d
	}
	d.Preview = &pv
	return d
}
