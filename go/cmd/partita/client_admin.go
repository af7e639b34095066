package main

import (
	"context"
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
	register("report", "client: usage or chargeback report (partita report usage|chargeback)", runReport)
	register("admin", "client: teams, projects, users and tokens (partita admin teams|projects|users|tokens …)", runAdmin)
}

func runReport(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "usage" && args[0] != "chargeback") {
		fmt.Fprintln(stderr, "usage: partita report usage|chargeback [--from T] [--to T] [--group-by team,project] [--team T] [--format table|csv|json]")
		return 2
	}
	kind := args[0]
	var from, to, groupBy, team, format string
	return clientRun("report "+kind, args[1:], stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&from, "from", "", "start (RFC 3339, cluster time; default 30 days before --to)")
		fs.StringVar(&to, "to", "", "end (RFC 3339, cluster time; default now)")
		fs.StringVar(&groupBy, "group-by", "", "team, project, user, model, tier, class (comma-separated)")
		fs.StringVar(&team, "team", "", "only this team (admins)")
		fs.StringVar(&format, "format", "table", "table, csv or json")
	}, func(ctx context.Context, c *client.Client, cf *clientFlags, _ []string) error {
		path := api.Prefix + "/reports/" + kind
		q := []string{"from", from, "to", to, "group_by", groupBy, "team", team}
		if cf.json {
			format = "json"
		}
		switch format {
		case "csv":
			data, err := c.Raw(ctx, path+query(append(q, "format", "csv")...))
			if err != nil {
				return err
			}
			_, err = stdout.Write(data)
			return err
		case "json", "table":
		default:
			return usageError{fmt.Sprintf("--format %q: want table, csv or json", format)}
		}
		var r api.Report
		if err := c.Do(ctx, "GET", path+query(q...), nil, &r); err != nil {
			return err
		}
		if format == "json" {
			return printJSON(stdout, r)
		}
		fmt.Fprintf(stdout, "%s to %s, %s (prices: %s)\n\n", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), r.Currency, r.Prices)
		tw := table(stdout)
		fmt.Fprintf(tw, "%s\tGPU-HOURS\tCOST\tHOLDS\n", strings.ToUpper(strings.Join(r.GroupBy, "\t")))
		for _, row := range append(r.Rows, r.Total) {
			keys := map[string]string{"team": row.Team, "project": row.Project, "user": row.User, "model": row.Model, "tier": row.Tier, "class": row.Class}
			var cols []string
			for _, g := range r.GroupBy {
				cols = append(cols, keys[g])
			}
			if row == r.Total {
				cols[0] = "TOTAL"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", strings.Join(cols, "\t"), row.GPUHours, row.Cost, row.Holds)
		}
		return tw.Flush()
	})
}

// adminCommands: partita admin <noun> <verb> [args].
var adminCommands = map[string]func(ctx context.Context, c *client.Client, cf *clientFlags, fs *flag.FlagSet, args []string, stdout io.Writer) error{
	"teams list":      adminTeamsList,
	"teams create":    adminTeamsPut,
	"teams update":    adminTeamsPut,
	"projects list":   adminProjectsList,
	"projects create": adminProjectsCreate,
	"users list":      adminUsersList,
	"users create":    adminUsersCreate,
	"tokens list":     adminTokensList,
	"tokens create":   adminTokensCreate,
	"tokens revoke":   adminTokensRevoke,
}

func runAdmin(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 || adminCommands[args[0]+" "+args[1]] == nil {
		fmt.Fprintln(stderr, `usage: partita admin <command>
  teams list
  teams create NAME [--guarantee GPUS] [--burst GPUS] [--weight W] [--classes production,batch,best-effort]
  teams update NAME [same flags]
  projects list TEAM
  projects create TEAM NAME
  users list
  users create NAME --role admin|lead|member|viewer [--team TEAM]
  tokens list
  tokens create USER [--description TEXT]     (prints the secret once)
  tokens revoke TOKEN-ID`)
		return 2
	}
	name := args[0] + " " + args[1]
	var fs *flag.FlagSet
	return clientRun("admin "+name, args[2:], stderr, func(f *flag.FlagSet) {
		fs = f
		adminFlags(name, f)
	}, func(ctx context.Context, c *client.Client, cf *clientFlags, rest []string) error {
		return adminCommands[name](ctx, c, cf, fs, rest, stdout)
	})
}

var adminOpts struct {
	guarantee, burst, weight  float64
	classes, role, team, desc string
}

func adminFlags(name string, fs *flag.FlagSet) {
	switch name {
	case "teams create", "teams update":
		fs.Float64Var(&adminOpts.guarantee, "guarantee", -1, "guaranteed GPUs")
		fs.Float64Var(&adminOpts.burst, "burst", -1, "most GPUs the team may hold (default: the cluster)")
		fs.Float64Var(&adminOpts.weight, "weight", 0, "share of what guarantees leave over (default 1)")
		fs.StringVar(&adminOpts.classes, "classes", "", "allowed classes, comma-separated")
	case "users create":
		fs.StringVar(&adminOpts.role, "role", "", "admin, lead, member or viewer")
		fs.StringVar(&adminOpts.team, "team", "", "the user's team (all roles but admin)")
	case "tokens create":
		fs.StringVar(&adminOpts.desc, "description", "", "what the token is for")
	}
}

func oneArg(args []string, what string) (string, error) {
	if len(args) != 1 {
		return "", usageError{"give " + what}
	}
	return args[0], nil
}

func adminTeamsList(ctx context.Context, c *client.Client, cf *clientFlags, _ *flag.FlagSet, _ []string, stdout io.Writer) error {
	var ts []api.Team
	if err := c.Do(ctx, "GET", api.Prefix+"/teams", nil, &ts); err != nil {
		return err
	}
	if cf.json {
		return printJSON(stdout, ts)
	}
	tw := table(stdout)
	fmt.Fprintln(tw, "TEAM\tGUARANTEE\tBURST\tWEIGHT\tCLASSES\tPROJECTS")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%g\t%g\t%g\t%s\t%s\n", t.Name, t.GuaranteedGPUs, t.BurstGPUs, t.Weight, strings.Join(t.Classes, ","), strings.Join(t.Projects, ","))
	}
	return tw.Flush()
}

func adminTeamsPut(ctx context.Context, c *client.Client, cf *clientFlags, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	name, err := oneArg(args, "the team's name")
	if err != nil {
		return err
	}
	req := api.TeamRequest{}
	if adminOpts.guarantee >= 0 {
		req.GuaranteedGPUs = &adminOpts.guarantee
	}
	if adminOpts.burst >= 0 {
		req.BurstGPUs = &adminOpts.burst
	}
	if adminOpts.weight > 0 {
		req.Weight = &adminOpts.weight
	}
	if adminOpts.classes != "" {
		req.Classes = strings.Split(adminOpts.classes, ",")
	}
	method, path := "PATCH", api.Prefix+"/teams/"+name
	if fs.Name() == "admin teams create" {
		method, path, req.Name = "POST", api.Prefix+"/teams", name
	}
	var t api.Team
	if err := c.Do(ctx, method, path, req, &t); err != nil {
		return err
	}
	return printJSON(stdout, t)
}

func adminProjectsList(ctx context.Context, c *client.Client, cf *clientFlags, _ *flag.FlagSet, args []string, stdout io.Writer) error {
	team, err := oneArg(args, "the team")
	if err != nil {
		return err
	}
	var ps []api.Project
	if err := c.Do(ctx, "GET", api.Prefix+"/teams/"+team+"/projects", nil, &ps); err != nil {
		return err
	}
	if cf.json {
		return printJSON(stdout, ps)
	}
	for _, p := range ps {
		fmt.Fprintf(stdout, "%s/%s\n", p.Team, p.Name)
	}
	return nil
}

func adminProjectsCreate(ctx context.Context, c *client.Client, cf *clientFlags, _ *flag.FlagSet, args []string, stdout io.Writer) error {
	if len(args) != 2 {
		return usageError{"give the team and the project's name"}
	}
	var p api.Project
	if err := c.Do(ctx, "POST", api.Prefix+"/teams/"+args[0]+"/projects", api.ProjectRequest{Name: args[1]}, &p); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created project %s/%s\n", p.Team, p.Name)
	return nil
}

func adminUsersList(ctx context.Context, c *client.Client, cf *clientFlags, _ *flag.FlagSet, _ []string, stdout io.Writer) error {
	var us []api.User
	if err := c.Do(ctx, "GET", api.Prefix+"/users", nil, &us); err != nil {
		return err
	}
	if cf.json {
		return printJSON(stdout, us)
	}
	tw := table(stdout)
	fmt.Fprintln(tw, "USER\tROLE\tTEAM")
	for _, u := range us {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Name, u.Role, orDash(u.Team))
	}
	return tw.Flush()
}

func adminUsersCreate(ctx context.Context, c *client.Client, cf *clientFlags, _ *flag.FlagSet, args []string, stdout io.Writer) error {
	name, err := oneArg(args, "the user's name")
	if err != nil {
		return err
	}
	var u api.User
	if err := c.Do(ctx, "POST", api.Prefix+"/users", api.UserRequest{Name: name, Role: adminOpts.role, Team: adminOpts.team}, &u); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created user %s (%s%s); give them a token with: partita admin tokens create %s\n", u.Name, u.Role, map[bool]string{true: ", team " + u.Team}[u.Team != ""], u.Name)
	return nil
}

func adminTokensList(ctx context.Context, c *client.Client, cf *clientFlags, _ *flag.FlagSet, _ []string, stdout io.Writer) error {
	var ts []api.Token
	if err := c.Do(ctx, "GET", api.Prefix+"/tokens", nil, &ts); err != nil {
		return err
	}
	if cf.json {
		return printJSON(stdout, ts)
	}
	tw := table(stdout)
	fmt.Fprintln(tw, "ID\tUSER\tCREATED\tREVOKED\tDESCRIPTION")
	for _, t := range ts {
		rev := "-"
		if t.RevokedAt != nil {
			rev = t.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.User, t.CreatedAt.Format(time.RFC3339), rev, t.Description)
	}
	return tw.Flush()
}

func adminTokensCreate(ctx context.Context, c *client.Client, cf *clientFlags, _ *flag.FlagSet, args []string, stdout io.Writer) error {
	user, err := oneArg(args, "the user")
	if err != nil {
		return err
	}
	var t api.NewToken
	if err := c.Do(ctx, "POST", api.Prefix+"/users/"+user+"/tokens", api.TokenRequest{Description: adminOpts.desc}, &t); err != nil {
		return err
	}
	if cf.json {
		return printJSON(stdout, t)
	}
	fmt.Fprintf(os.Stderr, "token %s for %s; the secret is shown only now:\n", t.ID, t.User)
	fmt.Fprintln(stdout, t.Secret)
	return nil
}

func adminTokensRevoke(ctx context.Context, c *client.Client, cf *clientFlags, _ *flag.FlagSet, args []string, stdout io.Writer) error {
	id, err := oneArg(args, "the token ID")
	if err != nil {
		return err
	}
	var t api.Token
	if err := c.Do(ctx, "DELETE", api.Prefix+"/tokens/"+id, nil, &t); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked %s (%s)\n", t.ID, t.User)
	return nil
}
