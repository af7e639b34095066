package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/profiles"
	"partita.dev/partita/internal/store"
	"partita.dev/partita/internal/workload"
)

// Limits on a submission.
const (
	maxTasks       = 4096
	maxNameLen     = 200
	maxKeyLen      = 200
	maxImageLen    = 500
	maxCommandLen  = 4096
	maxJobDuration = 8760 * time.Hour // a year of cluster time
)

// buildJob checks a submission and turns it into a job record (without
// ID, times or state). Every error names the field.
func (s *Server) buildJob(who store.Principal, req api.SubmitRequest) (*store.Job, error) {
	team, err := s.submitTeam(who, &req)
	if err != nil {
		return nil, err
	}
	if err := checkProjectAndName(team, &req); err != nil {
		return nil, err
	}
	class, err := teamClass(team, req.Class, "class")
	if err != nil {
		return nil, err
	}
	req.Class = class.String()
	spec, err := s.buildSpec(&req, team)
	if err != nil {
		return nil, err
	}
	if len(req.IdempotencyKey) > maxKeyLen {
		return nil, badRequest("idempotency_key", "idempotency_key: %d characters; at most %d", len(req.IdempotencyKey), maxKeyLen)
	}
	key := req.IdempotencyKey
	req.IdempotencyKey = ""
	canon, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	rec := &store.Job{Team: team.Name, Project: req.Project, User: who.User, Name: req.Name, Class: req.Class, Spec: spec, Request: canon, IdemKey: key}
	if key != "" {
		// The hash covers the resolved request (team, project and class
		// filled in) and the user, so a replay must say the same thing.
		sum := sha256.Sum256(append(canon, []byte("\x00"+who.User)...))
		rec.IdemHash = hex.EncodeToString(sum[:])
	}
	return rec, nil
}

func (s *Server) submitTeam(who store.Principal, req *api.SubmitRequest) (teamInfo, error) {
	if req.Team == "" {
		req.Team = who.Team
	}
	if req.Team == "" {
		return teamInfo{}, badRequest("team", "team: required (an admin has no team of their own)")
	}
	if who.Role != api.RoleAdmin && req.Team != who.Team {
		return teamInfo{}, errorf(403, "team", "team: %q is not your team (%s)", req.Team, who.Team)
	}
	t, ok := s.team(req.Team)
	if !ok {
		return teamInfo{}, badRequest("team", "team: %q does not exist", req.Team)
	}
	return t, nil
}

func checkProjectAndName(team teamInfo, req *api.SubmitRequest) error {
	if req.Project == "" {
		req.Project = "default"
	}
	if !team.projects[req.Project] {
		return badRequest("project", "project: %q is not a project of team %s (create it with POST %s/teams/%s/projects)", req.Project, team.Name, api.Prefix, team.Name)
	}
	if len(req.Name) > maxNameLen {
		return badRequest("name", "name: %d characters; at most %d", len(req.Name), maxNameLen)
	}
	if len(req.Image) > maxImageLen || strings.ContainsAny(req.Image, " \t\r\n") {
		return badRequest("image", "image: %q must be an image reference such as registry/name:tag, without spaces, at most %d characters", truncateText(req.Image, 40), maxImageLen)
	}
	if len(req.Command) > maxCommandLen {
		return badRequest("command", "command: %d characters; at most %d", len(req.Command), maxCommandLen)
	}
	return nil
}

// teamClass parses a class (default batch) the team allows.
func teamClass(team teamInfo, name, field string) (workload.Class, error) {
	if name == "" {
		name = workload.Batch.String()
	}
	class, err := workload.ParseClass(name)
	if err != nil {
		return 0, badRequest(field, "%s: %v", field, err)
	}
	for _, c := range team.Classes {
		if c == name {
			return class, nil
		}
	}
	return 0, badRequest(field, "%s: team %s may not use %s (allowed: %s)", field, team.Name, name, strings.Join(team.Classes, ", "))
}

// buildSpec turns the task and time fields into a Spec.
func (s *Server) buildSpec(req *api.SubmitRequest, team teamInfo) (store.Spec, error) {
	var spec store.Spec
	n, err := taskCount(req)
	if err != nil {
		return spec, err
	}
	if req.Gang != 0 && req.Gang != 1 && req.Gang != n {
		return spec, badRequest("gang", "gang: %d must be 0 or 1 (tasks start on their own) or the task count %d (all or nothing)", req.Gang, n)
	}
	spec.Gang = req.Gang
	d, cpu, mem, err := demand(req.GPU)
	if err != nil {
		return spec, err
	}
	if err := taskResources(req, &cpu, &mem); err != nil {
		return spec, err
	}
	for _, f := range []struct {
		name string
		in   string
		out  *time.Duration
	}{{"duration", req.Duration, &spec.Duration}, {"fail_after", req.FailAfter, &spec.FailAfter}, {"checkpoint_every", req.CheckpointEvery, &spec.CheckpointEvery}} {
		if *f.out, err = parseDuration(f.name, f.in); err != nil {
			return spec, err
		}
	}
	task := workload.Task{CPUMilli: cpu, MemoryMiB: mem, GPU: d}
	if err := task.Validate(s.world.Capacity()); err != nil {
		return spec, badRequest(taskField(err), "%s", strings.TrimPrefix(err.Error(), "task : "))
	}
	for i := range n {
		t := task
		t.GPU.Models = append([]string(nil), d.Models...)
		t.Name = strconv.Itoa(i) // the job ID is prefixed once it has one
		spec.Tasks = append(spec.Tasks, t)
	}
	job := workload.Job{Tasks: spec.Tasks}
	if milli := job.GPUMilli(); milli > team.BurstMilli {
		return spec, badRequest("gpu", "gpu: the job asks for %.2f GPUs but team %s may hold at most %.2f (burst_gpus)", float64(milli)/1000, team.Name, float64(team.BurstMilli)/1000)
	}
	return spec, nil
}

func taskCount(req *api.SubmitRequest) (int, error) {
	if req.Tasks != 0 && req.Replicas != 0 {
		return 0, badRequest("replicas", "replicas: give tasks or replicas, not both")
	}
	n, field := max(req.Tasks, req.Replicas), "tasks"
	if req.Replicas != 0 {
		field = "replicas"
	}
	if req.Tasks < 0 || req.Replicas < 0 || n > maxTasks {
		return 0, badRequest(field, "%s: %d must be from 1 to %d", field, min(req.Tasks, req.Replicas, n), maxTasks)
	}
	return max(n, 1), nil
}

// taskField guesses which request field a workload validation error is
// about, from the resource it names.
func taskField(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "CPU") || strings.Contains(msg, "cpu"):
		return "cpu"
	case strings.Contains(msg, "MiB memory") || strings.Contains(msg, "memory ") && !strings.Contains(msg, "gpu memory"):
		return "memory"
	}
	return "gpu"
}

// demand reads the GPU request; a named profile also gives the task's
// CPU and memory (0 when it gives none).
func demand(g api.GPURequest) (workload.Demand, int64, int64, error) {
	set := 0
	for _, on := range []bool{g.Count != 0, g.MIG != "", g.Memory != "", g.Milli != 0, g.Profile != ""} {
		if on {
			set++
		}
	}
	if set > 1 {
		return workload.Demand{}, 0, 0, badRequest("gpu", "gpu: give one of count, mig, memory, milli or profile")
	}
	if g.Compute != 0 && g.Memory == "" {
		return workload.Demand{}, 0, 0, badRequest("gpu.compute", "gpu.compute: only with gpu.memory")
	}
	models, err := canonicalModels(g.Models)
	if err != nil {
		return workload.Demand{}, 0, 0, err
	}
	d := workload.Demand{Models: models}
	switch {
	case g.Profile != "":
		p, err := profiles.Lookup(g.Profile)
		if err != nil {
			return d, 0, 0, badRequest("gpu.profile", "gpu.profile: %v", err)
		}
		return p.Demand(models), p.CPUMilli, p.HostMemoryMiB, nil
	case g.Count != 0:
		if g.Count < 1 || g.Count > 16 {
			return d, 0, 0, badRequest("gpu.count", "gpu.count: %d must be from 1 to 16", g.Count)
		}
		d.Kind, d.Count = workload.WholeGPUs, g.Count
	case g.MIG != "":
		d.Kind, d.Profile = workload.MIGProfile, g.MIG
	case g.Memory != "":
		mib, err := parseMemory("gpu.memory", g.Memory)
		if err != nil {
			return d, 0, 0, err
		}
		if !(g.Compute >= 0 && g.Compute <= 1) {
			return d, 0, 0, badRequest("gpu.compute", "gpu.compute: %v must be from 0 to 1", g.Compute)
		}
		d.Kind, d.PeakMemoryMiB, d.Compute = workload.MemoryProfile, mib, g.Compute
	case g.Milli != 0:
		if g.Milli < 1 || g.Milli > 999 {
			return d, 0, 0, badRequest("gpu.milli", "gpu.milli: %d must be from 1 to 999 (use count for whole GPUs)", g.Milli)
		}
		d.Kind, d.Milli = workload.Fraction, g.Milli
	default:
		if len(models) > 0 {
			return d, 0, 0, badRequest("gpu.models", "gpu.models: given without a GPU demand")
		}
		d.Kind = workload.NoGPU
	}
	return d, 0, 0, nil
}

func canonicalModels(names []string) ([]string, error) {
	var out []string
	for i, n := range names {
		m := gpu.Lookup(n)
		if m == nil || !m.Known {
			return nil, badRequest("gpu.models", "gpu.models[%d]: unknown GPU model %q", i, n)
		}
		out = append(out, m.Name)
	}
	return out, nil
}

// taskResources applies cpu and memory, over the profile's (or the
// defaults: 1 core, 4Gi).
func taskResources(req *api.SubmitRequest, cpu, mem *int64) error {
	if *cpu == 0 {
		*cpu = 1000
	}
	if *mem == 0 {
		*mem = 4096
	}
	var err error
	if req.CPU != "" {
		if *cpu, err = parseCPU(req.CPU); err != nil {
			return err
		}
	}
	if req.Memory != "" {
		if *mem, err = parseMemory("memory", req.Memory); err != nil {
			return err
		}
	}
	return nil
}

// parseCPU reads cores ("4", "0.5") or millicores ("500m").
func parseCPU(s string) (int64, error) {
	if m, ok := strings.CutSuffix(s, "m"); ok {
		v, err := strconv.ParseInt(m, 10, 64)
		if err != nil || v < 1 || v > 1<<30 {
			return 0, badRequest("cpu", "cpu: %q is not a millicore count such as 500m", s)
		}
		return v, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0 && v <= 1<<20) || math.Abs(v*1000-math.Round(v*1000)) > 1e-6 {
		return 0, badRequest("cpu", "cpu: %q is not a core count such as 4, 0.5 or 500m", s)
	}
	return int64(math.Round(v * 1000)), nil
}

// parseMemory reads a binary quantity ("512Mi", "32Gi", "1.5Ti") as MiB.
func parseMemory(field, s string) (int64, error) {
	units := map[string]float64{"Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
	for suffix, mult := range units {
		num, ok := strings.CutSuffix(s, suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(num, 64)
		mib := v * mult
		if err != nil || !(mib >= 1 && mib <= 1<<40) || mib != math.Trunc(mib) {
			break
		}
		return int64(mib), nil
	}
	return 0, badRequest(field, "%s: %q is not a whole number of MiB written with Mi, Gi or Ti (e.g. 512Mi, 32Gi)", field, s)
}

// parseDuration reads an optional positive duration.
func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > maxJobDuration {
		return 0, badRequest(field, "%s: %q must be a duration such as 90m or 2h, above 0 and at most %s", field, s, maxJobDuration)
	}
	return d, nil
}

// nameTasks gives the tasks their names once the job has an ID.
func nameTasks(rec *store.Job) {
	for i := range rec.Spec.Tasks {
		rec.Spec.Tasks[i].Name = fmt.Sprintf("%s-%d", rec.ID, i)
	}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
