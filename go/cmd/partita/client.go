package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/client"
)

// The client commands talk to a running `partita serve`. They find it
// with --server or $PARTITA_SERVER (default http://127.0.0.1:8080) and
// authenticate with --token, $PARTITA_TOKEN or ./partita-data/admin.token.

type clientFlags struct {
	server, token string
	json          bool
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{}
	fs.StringVar(&cf.server, "server", "", "server address (default $PARTITA_SERVER or http://127.0.0.1:8080)")
	fs.StringVar(&cf.token, "token", "", "API token (default $PARTITA_TOKEN or ./partita-data/admin.token)")
	fs.BoolVar(&cf.json, "json", false, "print the API's JSON")
	return cf
}

// clientRun parses flags, builds the client and runs fn, turning errors
// into exit codes: 1 for failures, 2 for usage.
func clientRun(name string, args []string, stderr io.Writer, setup func(fs *flag.FlagSet), fn func(ctx context.Context, c *client.Client, cf *clientFlags, rest []string) error) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	if setup != nil {
		setup(fs)
	}
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	c, err := client.Resolve(cf.server, cf.token)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fn(ctx, c, cf, rest); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// parseInterspersed parses flags that may come after positional
// arguments (partita admin users create ann --role member), which the
// flag package alone stops at.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// query builds a query string from name, value pairs, skipping empty
// values.
func query(pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func init() {
	register("cluster", "client: the cluster's nodes, GPUs, MIG slices and utilization", runCluster)
}

func runCluster(args []string, stdout, stderr io.Writer) int {
	return clientRun("cluster", args, stderr, nil, func(ctx context.Context, c *client.Client, cf *clientFlags, _ []string) error {
		var cl api.Cluster
		if err := c.Do(ctx, "GET", api.Prefix+"/cluster", nil, &cl); err != nil {
			return err
		}
		if cf.json {
			return printJSON(stdout, cl)
		}
		u := cl.Utilization
		fmt.Fprintf(stdout, "cluster time %s (%gx); %d GPUs: %.1f allocated (%.0f%%), %.1f useful (%.0f%%); %d running, %d queued\n\n",
			cl.Clock.Now.Format(time.RFC3339), cl.Clock.Speed, cl.GPUs, u.AllocatedGPUs, 100*u.Allocated, u.UsefulGPUs, 100*u.Useful, u.RunningJobs, u.QueuedJobs)
		tw := table(stdout)
		fmt.Fprintln(tw, "NODE\tGPU\tMODEL\tMODE\tIN USE")
		for _, n := range cl.Nodes {
			for _, g := range n.GPUs {
				mode, use := "whole", fmt.Sprintf("%d/1000", g.Used)
				if g.MIG {
					mode = "mig"
					var parts []string
					for _, s := range g.Slices {
						who := "free"
						if s.Busy {
							who = "busy"
							if s.Job != "" {
								who = s.Job
							}
						}
						parts = append(parts, s.Slice+" "+who)
					}
					use = strings.Join(parts, ", ")
				}
				if g.Cordoned {
					mode += " (changing)"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", n.Name, g.Index, g.Model, mode, use)
			}
		}
		return tw.Flush()
	})
}
