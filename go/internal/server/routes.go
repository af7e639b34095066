package server

import (
	"net/http"

	"partita.dev/partita/internal/api"
)

// route is one endpoint: how it is reached, who may call it, what it
// takes and gives (for the OpenAPI document) and its handler.
type route struct {
	method, path string
	summary      string
	roles        []string // nil: public, no token
	query        []param
	body         any // the request type, for decoding's documentation
	status       int // the success status
	resp         any // the success body's type
	csv          bool
	handler      func(*call) error
}

type param struct{ name, desc string }

var (
	everyone   = api.Roles()
	submitters = []string{api.RoleAdmin, api.RoleLead, api.RoleMember}
	leads      = []string{api.RoleAdmin, api.RoleLead}
	admins     = []string{api.RoleAdmin}
)

var (
	pFrom    = param{"from", "start of the period, RFC 3339 cluster time (default: 30 days before to)"}
	pTo      = param{"to", "end of the period, RFC 3339 cluster time (default: now)"}
	pFormat  = param{"format", "json (default) or csv"}
	pTeam    = param{"team", "only this team (admins); others always get their own"}
	pLimit   = param{"limit", "page size"}
	pGroupBy = param{"group_by", "comma-separated: team, project, user, model, tier, class"}
)

// routes is the API. Order is the document's order.
func (s *Server) routes() []route {
	return []route{
		{method: "GET", path: "/healthz", summary: "Liveness and the cluster clock", status: 200, resp: api.Health{}, handler: s.healthz},
		{method: "GET", path: "/metrics", summary: "Prometheus metrics (text exposition format)", status: 200, handler: s.serveMetrics},
		{method: "GET", path: api.Prefix + "/openapi.json", summary: "This OpenAPI 3 document", status: 200, resp: map[string]any{}, handler: s.openAPIHandler},
		{method: "GET", path: api.Prefix + "/whoami", summary: "The caller's user, role and team", roles: everyone, status: 200, resp: api.Whoami{}, handler: whoami},

		{method: "POST", path: api.Prefix + "/jobs", summary: "Submit a job (idempotent with an Idempotency-Key header or idempotency_key)", roles: submitters, body: api.SubmitRequest{}, status: http.StatusCreated, resp: api.Job{}, handler: s.submit},
		{method: "GET", path: api.Prefix + "/jobs", summary: "List jobs, newest first", roles: everyone, status: 200, resp: api.JobList{},
			query: []param{pTeam, {"state", "comma-separated states"}, {"project", "project"}, {"user", "submitter"}, {"class", "priority class"}, pLimit, {"after", "the cursor `next` of the previous page"}}, handler: s.listJobs},
		{method: "GET", path: api.Prefix + "/jobs/{id}", summary: "A job with its events and, while queued, its position and estimated start", roles: everyone, status: 200, resp: api.Job{}, handler: s.getJob},
		{method: "PATCH", path: api.Prefix + "/jobs/{id}", summary: "Change a job's priority class within its team's allowed classes", roles: leads, body: api.JobPatch{}, status: 200, resp: api.Job{}, handler: s.patchJob},
		{method: "POST", path: api.Prefix + "/jobs/preview", summary: "Check a submission and say what it would ask for on each GPU model, storing nothing", roles: submitters, body: api.SubmitRequest{}, status: 200, resp: api.JobPreview{}, handler: s.previewJob},
		{method: "POST", path: api.Prefix + "/jobs/{id}/requeue", summary: "Put a job that holds resources back in its team's queue at once (it loses the work since its last checkpoint)", roles: leads, status: 200, resp: api.Job{}, handler: s.requeueJob},
		{method: "POST", path: api.Prefix + "/jobs/{id}/cancel", summary: "Cancel a job (members: their own jobs)", roles: submitters, status: 200, resp: api.Job{}, handler: s.cancelJob},
		{method: "GET", path: api.Prefix + "/queue", summary: "Queued jobs by team with positions and estimated starts", roles: everyone, query: []param{pTeam}, status: 200, resp: api.Queue{}, handler: s.queue},
		{method: "GET", path: api.Prefix + "/cluster", summary: "Nodes, GPUs, MIG slices and utilization", roles: everyone, status: 200, resp: api.Cluster{}, handler: s.cluster},

		{method: "GET", path: api.Prefix + "/teams", summary: "Teams (non-admins: their own)", roles: everyone, status: 200, resp: []api.Team{}, handler: s.listTeams},
		{method: "POST", path: api.Prefix + "/teams", summary: "Create a team", roles: admins, body: api.TeamRequest{}, status: http.StatusCreated, resp: api.Team{}, handler: s.createTeam},
		{method: "GET", path: api.Prefix + "/teams/{team}", summary: "A team", roles: everyone, status: 200, resp: api.Team{}, handler: s.getTeam},
		{method: "PATCH", path: api.Prefix + "/teams/{team}", summary: "Change a team's quota, weight or classes", roles: admins, body: api.TeamRequest{}, status: 200, resp: api.Team{}, handler: s.patchTeam},
		{method: "GET", path: api.Prefix + "/teams/{team}/projects", summary: "A team's projects", roles: everyone, status: 200, resp: []api.Project{}, handler: s.listProjects},
		{method: "POST", path: api.Prefix + "/teams/{team}/projects", summary: "Create a project (admins, the team's leads)", roles: leads, body: api.ProjectRequest{}, status: http.StatusCreated, resp: api.Project{}, handler: s.createProject},
		{method: "GET", path: api.Prefix + "/users", summary: "Users", roles: admins, status: 200, resp: []api.User{}, handler: s.listUsers},
		{method: "POST", path: api.Prefix + "/users", summary: "Create a user", roles: admins, body: api.UserRequest{}, status: http.StatusCreated, resp: api.User{}, handler: s.createUser},
		{method: "POST", path: api.Prefix + "/users/{user}/tokens", summary: "Issue a token for a user; the secret is shown once", roles: admins, body: api.TokenRequest{}, status: http.StatusCreated, resp: api.NewToken{}, handler: s.createToken},
		{method: "GET", path: api.Prefix + "/tokens", summary: "Tokens, without secrets", roles: admins, status: 200, resp: []api.Token{}, handler: s.listTokens},
		{method: "DELETE", path: api.Prefix + "/tokens/{id}", summary: "Revoke a token", roles: admins, status: 200, resp: api.Token{}, handler: s.revokeToken},
		{method: "GET", path: api.Prefix + "/profiles", summary: "The workload profile catalog", roles: everyone, status: 200, resp: []api.Profile{}, handler: listProfiles},

		{method: "GET", path: api.Prefix + "/reports/usage", summary: "GPU-hours and cost over a period, by team (default)", roles: everyone, query: []param{pFrom, pTo, pGroupBy, pTeam, pFormat}, status: 200, resp: api.Report{}, csv: true, handler: s.usageReport("team")},
		{method: "GET", path: api.Prefix + "/reports/chargeback", summary: "Chargeback over a period, by team and project (default)", roles: everyone, query: []param{pFrom, pTo, pGroupBy, pTeam, pFormat}, status: 200, resp: api.Report{}, csv: true, handler: s.usageReport("team,project")},
		{method: "GET", path: api.Prefix + "/ledger", summary: "The append-only usage ledger, in order", roles: everyone, query: []param{{"after", "only entries after this seq"}, pTeam, pLimit, pFormat}, status: 200, resp: api.Ledger{}, csv: true, handler: s.ledger},
		{method: "GET", path: api.Prefix + "/prices", summary: "The price table reports use, with its source and assumptions", roles: everyone, status: 200, resp: api.PriceTable{}, handler: s.priceTable},
	}
}
