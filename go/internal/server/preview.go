package server

import (
	"fmt"
	"net/http"
	"sort"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// previewJob checks a submission exactly as submit does and says what it
// would ask for, without storing anything: the portal's submit form
// shows it while the user types.
func (s *Server) previewJob(c *call) error {
	var req api.SubmitRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	rec, err := s.buildJob(c.who, req)
	if err != nil {
		return err
	}
	team, _ := s.team(rec.Team)
	task := rec.Spec.Tasks[0]
	wj := workload.Job{Tasks: rec.Spec.Tasks}
	p := api.JobPreview{
		Team: rec.Team, Project: rec.Project, Class: rec.Class, Tasks: len(rec.Spec.Tasks), Gang: rec.Spec.Gang,
		CPUMilli: task.CPUMilli, MemoryMiB: task.MemoryMiB, Demand: task.GPU.String(),
		GPUs: float64(wj.GPUMilli()) / 1000, BurstGPUs: float64(team.BurstMilli) / 1000,
		Options: previewOptions(task, s.world.Capacity()),
	}
	return c.json(http.StatusOK, p)
}

// previewOptions says what one task takes on each GPU model the cluster
// has (and the task allows), as the engine resolves it.
func previewOptions(task workload.Task, capa *workload.Capacity) []api.PreviewOption {
	d := task.GPU
	if d.Kind == workload.NoGPU {
		return []api.PreviewOption{}
	}
	models := make([]string, 0, len(capa.MaxGPUs))
	for m := range capa.MaxGPUs {
		if d.AllowsModel(m) {
			models = append(models, m)
		}
	}
	sort.Strings(models)
	req, err := engine.NewRequest(task, gpu.DefaultHeadroom)
	out := make([]api.PreviewOption, 0, len(models))
	for _, name := range models {
		m := gpu.Lookup(name)
		o := api.PreviewOption{Model: m.Name}
		switch d.Kind {
		case workload.WholeGPUs:
			o.WholeGPUs = d.Count
			o.Fits = capa.MaxGPUs[name] >= d.Count
			if !o.Fits {
				o.Note = fmt.Sprintf("its largest node has %d", capa.MaxGPUs[name])
			}
		case workload.Fraction:
			o.Milli, o.Fits = d.Milli, true
		case workload.MIGProfile:
			setMIG(&o, m, d.Profile)
		case workload.MemoryProfile:
			if err != nil {
				o.Note = err.Error()
				break
			}
			prof, milli := req.Resolve(m)
			if prof != nil {
				setMIG(&o, m, prof.Name)
			}
			if milli > 0 {
				o.Milli, o.Fits = milli, true
			}
			if !o.Fits {
				o.Note = fmt.Sprintf("%d MiB peak with %.0f%% headroom is more than one %s holds", d.PeakMemoryMiB, gpu.DefaultHeadroom*100, m.Name)
			}
		}
		out = append(out, o)
	}
	return out
}

func setMIG(o *api.PreviewOption, m *gpu.Model, profile string) {
	p, err := m.Profile(profile)
	if err != nil {
		o.Note = err.Error()
		return
	}
	o.MIG, o.MIGMemMiB, o.MIGCompute, o.Fits = p.Name, p.MemoryMiB, p.ComputeShare(), true
}
