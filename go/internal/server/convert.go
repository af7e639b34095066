package server

import (
	"bytes"
	"encoding/json"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/store"
	"partita.dev/partita/internal/workload"
)

// jobView renders a stored job for the API.
func (s *Server) jobView(j *store.Job) api.Job {
	v := api.Job{
		ID: j.ID, Name: j.Name, Team: j.Team, Project: j.Project, User: j.User, Class: j.Class, State: j.State, Reason: j.Reason,
		Gang: j.Spec.Gang, Attempts: j.Attempts, SubmittedAt: s.world.Time(j.SubmittedAt), Tasks: []api.Task{},
	}
	v.Image, v.Command = runs(j.Request)
	wj := workload.Job{Tasks: j.Spec.Tasks}
	v.GPUs = float64(wj.GPUMilli()) / 1000
	if j.Spec.Duration > 0 {
		v.Duration = j.Spec.Duration.String()
	}
	if j.Spec.CheckpointEvery > 0 {
		v.CheckpointEvery = j.Spec.CheckpointEvery.String()
	}
	if j.Attempts > 0 {
		v.StartedAt = s.timePtr(j.StartedAt)
	}
	if api.Terminal(j.State) {
		v.FinishedAt = s.timePtr(j.FinishedAt)
	}
	for i, t := range j.Spec.Tasks {
		tv := api.Task{Name: t.Name, CPUMilli: t.CPUMilli, MemoryMiB: t.MemoryMiB, GPU: t.GPU.String()}
		if i < len(j.Runtime.Placed) && j.Runtime.Placed[i] != nil && !api.Terminal(j.State) {
			a := j.Runtime.Placed[i]
			tier, models := s.world.NodeInfo(a.Node)
			p := &api.Placement{Node: a.Node, Tier: tier}
			for _, g := range a.Grants {
				gv := api.Grant{GPU: g.GPU, Milli: g.Milli}
				if g.GPU >= 0 && g.GPU < len(models) {
					gv.Model = models[g.GPU]
				}
				if g.Slice != nil {
					gv.Slice, gv.Milli = g.Slice.String(), 0
				}
				p.Grants = append(p.Grants, gv)
			}
			tv.Placement = p
		}
		v.Tasks = append(v.Tasks, tv)
	}
	return v
}

// runs reads the image and command from a stored request; most jobs have
// neither, and those skip the decoding.
func runs(request []byte) (image, command string) {
	if !bytes.Contains(request, []byte(`"image"`)) && !bytes.Contains(request, []byte(`"command"`)) {
		return "", ""
	}
	var r struct {
		Image   string `json:"image"`
		Command string `json:"command"`
	}
	_ = json.Unmarshal(request, &r)
	return r.Image, r.Command
}

func (s *Server) timePtr(d time.Duration) *time.Time {
	t := s.world.Time(d)
	return &t
}

// current returns the freshest record of a job: the world's while it is
// unfinished, else the store's.
func (s *Server) current(c *call, id string) (*store.Job, *api.QueueSlot, error) {
	if j, slot, ok := s.world.Job(id); ok {
		return j, slot, nil
	}
	j, err := s.store.Job(c.r.Context(), id)
	return j, nil, err
}

func eventViews(s *Server, evs []store.Event) []api.Event {
	out := make([]api.Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, api.Event{Time: s.world.Time(e.At), State: e.State, Reason: e.Reason})
	}
	return out
}
