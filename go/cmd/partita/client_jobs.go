package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/client"
)

func init() {
	register("submit", "client: submit a job to a running server", runSubmit)
	register("jobs", "client: list jobs, or show one with its events (partita jobs ID)", runJobs)
	register("queue", "client: queued jobs with positions and estimated starts", runQueue)
	register("cancel", "client: cancel jobs (partita cancel ID...)", runCancel)
}

func runSubmit(args []string, stdout, stderr io.Writer) int {
	var req api.SubmitRequest
	var file, models string
	return clientRun("submit", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&file, "f", "", "read the request from this JSON file (POST /api/v1/jobs's body); flags given override it")
		fs.StringVar(&req.Team, "team", "", "team (default: your token's)")
		fs.StringVar(&req.Project, "project", "", "project (default: default)")
		fs.StringVar(&req.Name, "name", "", "a name to remember it by")
		fs.StringVar(&req.Class, "class", "", "production, batch (default) or best-effort")
		fs.IntVar(&req.Tasks, "tasks", 0, "number of tasks (default 1)")
		fs.IntVar(&req.Replicas, "replicas", 0, "number of replicas (services; instead of --tasks)")
		fs.IntVar(&req.Gang, "gang", 0, "tasks that start together: 0 or the task count")
		fs.StringVar(&req.CPU, "cpu", "", "CPU per task: 4, 0.5 or 500m")
		fs.StringVar(&req.Memory, "memory", "", "memory per task: 32Gi")
		fs.IntVar(&req.GPU.Count, "gpus", 0, "whole GPUs per task")
		fs.StringVar(&req.GPU.MIG, "mig", "", "a MIG profile per task: 1g.10gb, 3g.40gb, …")
		fs.StringVar(&req.GPU.Memory, "gpu-memory", "", "peak GPU memory per task (the engine picks the slice): 20Gi")
		fs.Float64Var(&req.GPU.Compute, "compute", 0, "with --gpu-memory: share of one GPU's compute, 0 to 1")
		fs.IntVar(&req.GPU.Milli, "milli", 0, "a share of one GPU in thousandths")
		fs.StringVar(&req.GPU.Profile, "profile", "", "a profile of the catalog (GET /api/v1/profiles): llm-7b-bf16, …")
		fs.StringVar(&models, "models", "", "allowed GPU models, comma-separated")
		fs.StringVar(&req.Duration, "duration", "", "run time once started (cluster time): 2h; empty: until cancelled")
		fs.StringVar(&req.FailAfter, "fail-after", "", "make the virtual job fail after running this long")
		fs.StringVar(&req.CheckpointEvery, "checkpoint-every", "", "checkpoint interval: a preempted job loses the work since")
		fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "resubmitting with the same key never makes a second job")
	}, func(ctx context.Context, c *client.Client, cf *clientFlags, _ []string) error {
		body, err := mergeRequest(file, req, models)
		if err != nil {
			return err
		}
		var j api.Job
		if err := c.Do(ctx, "POST", api.Prefix+"/jobs", body, &j); err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, j)
		}
		fmt.Fprintf(stdout, "%s %s (team %s, project %s, %s, %.2f GPUs)\n", j.ID, j.State, j.Team, j.Project, j.Class, j.GPUs)
		return nil
	})
}

// mergeRequest reads the file's request, if any, and lays the flags
// given over it (a flag left at its zero value does not override).
func mergeRequest(file string, flags api.SubmitRequest, models string) (any, error) {
	if models != "" {
		flags.GPU.Models = strings.Split(models, ",")
	}
	if file == "" {
		return flags, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	over, _ := json.Marshal(flags)
	var o map[string]any
	_ = json.Unmarshal(over, &o)
	for k, v := range o {
		if k == "gpu" {
			g, _ := m["gpu"].(map[string]any)
			if g == nil {
				g = map[string]any{}
			}
			for gk, gv := range v.(map[string]any) {
				g[gk] = gv
			}
			v = g
		}
		m[k] = v
	}
	return m, nil
}

func runJobs(args []string, stdout, stderr io.Writer) int {
	var team, state, project, user, class string
	var limit int
	return clientRun("jobs", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&team, "team", "", "only this team (admins)")
		fs.StringVar(&state, "state", "", "only these states, comma-separated: queued,running,…")
		fs.StringVar(&project, "project", "", "only this project")
		fs.StringVar(&user, "user", "", "only this submitter")
		fs.StringVar(&class, "class", "", "only this class")
		fs.IntVar(&limit, "limit", 50, "at most this many")
	}, func(ctx context.Context, c *client.Client, cf *clientFlags, rest []string) error {
		if len(rest) == 1 {
			return showJob(ctx, c, cf, rest[0], stdout)
		}
		if len(rest) > 1 {
			return usageError{"give one job ID to show, or none to list"}
		}
		var l api.JobList
		q := query("team", team, "state", state, "project", project, "user", user, "class", class, "limit", fmt.Sprint(limit))
		if err := c.Do(ctx, "GET", api.Prefix+"/jobs"+q, nil, &l); err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, l)
		}
		tw := table(stdout)
		fmt.Fprintln(tw, "ID\tSTATE\tTEAM\tPROJECT\tCLASS\tGPUS\tSUBMITTED\tREASON")
		for _, j := range l.Jobs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\n", j.ID, j.State, j.Team, j.Project, j.Class, j.GPUs, j.SubmittedAt.Format(time.RFC3339), shorten(j.Reason, 60))
		}
		return tw.Flush()
	})
}

func showJob(ctx context.Context, c *client.Client, cf *clientFlags, id string, stdout io.Writer) error {
	var j api.Job
	if err := c.Do(ctx, "GET", api.Prefix+"/jobs/"+id, nil, &j); err != nil {
		return err
	}
	if cf.json {
		return printJSON(stdout, j)
	}
	fmt.Fprintf(stdout, "%s  %s  team %s  project %s  user %s  class %s\n", j.ID, j.State, j.Team, j.Project, j.User, j.Class)
	fmt.Fprintf(stdout, "%d tasks, %.2f GPUs, duration %s, attempts %d\n", len(j.Tasks), j.GPUs, orDash(j.Duration), j.Attempts)
	if q := j.Queue; q != nil {
		fmt.Fprintf(stdout, "queued: position %d in team %s: %s\n", q.Position, j.Team, q.Reason)
		if q.EstimatedStart != nil {
			fmt.Fprintf(stdout, "estimated start: %s (in %.0f s of wall time)\n", q.EstimatedStart.Format(time.RFC3339), *q.WaitSeconds)
		}
	}
	tw := table(stdout)
	fmt.Fprintln(tw, "\nTASK\tDEMAND\tNODE\tGPUS")
	for _, t := range j.Tasks {
		node, gpus := "-", "-"
		if p := t.Placement; p != nil {
			node = p.Node
			var gs []string
			for _, g := range p.Grants {
				if g.Slice != "" {
					gs = append(gs, fmt.Sprintf("gpu%d %s %s", g.GPU, g.Model, g.Slice))
				} else {
					gs = append(gs, fmt.Sprintf("gpu%d %s %dm", g.GPU, g.Model, g.Milli))
				}
			}
			gpus = strings.Join(gs, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.GPU, node, gpus)
	}
	fmt.Fprintln(tw, "\nTIME\tEVENT\tREASON")
	for _, e := range j.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Time.Format(time.RFC3339), e.State, e.Reason)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runQueue(args []string, stdout, stderr io.Writer) int {
	var team string
	return clientRun("queue", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&team, "team", "", "only this team (admins)")
	}, func(ctx context.Context, c *client.Client, cf *clientFlags, _ []string) error {
		var q api.Queue
		if err := c.Do(ctx, "GET", api.Prefix+"/queue"+query("team", team), nil, &q); err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, q)
		}
		tw := table(stdout)
		fmt.Fprintln(tw, "TEAM\tPOS\tJOB\tCLASS\tGPUS\tWAITING\tEST. START\tREASON")
		for _, t := range q.Teams {
			for _, e := range t.Jobs {
				est := "-"
				if e.EstimatedStart != nil {
					est = fmt.Sprintf("in %.0fs", *e.WaitSeconds)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.2f\t%s\t%s\t%s\n", t.Team, e.Position, e.Job, e.Class, e.GPUs, ago(e.SubmittedAt, q.Clock.Now), est, shorten(e.Reason, 60))
			}
		}
		return tw.Flush()
	})
}

func runCancel(args []string, stdout, stderr io.Writer) int {
	return clientRun("cancel", args, stderr, nil, func(ctx context.Context, c *client.Client, cf *clientFlags, ids []string) error {
		if len(ids) == 0 {
			return usageError{"give the IDs of the jobs to cancel"}
		}
		var failed error
		for _, id := range ids {
			var j api.Job
			if err := c.Do(ctx, "POST", api.Prefix+"/jobs/"+id+"/cancel", nil, &j); err != nil {
				fmt.Fprintf(stdout, "%s: %v\n", id, err)
				failed = fmt.Errorf("some jobs were not cancelled")
				continue
			}
			fmt.Fprintf(stdout, "%s %s\n", j.ID, j.State)
		}
		return failed
	})
}
