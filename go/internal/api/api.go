// Package api holds the JSON types of Partita's HTTP API (/api/v1), shared
// by the server, the CLI client and the OpenAPI document, which is
// generated from these structs: a field added here appears in the document
// by construction.
//
// Conventions: names are lower case with underscores; times are RFC 3339
// in cluster time (on the virtual cluster it runs --speed times faster than
// the wall clock); durations are Go duration strings ("90m"); GPU amounts
// are GPUs, where a MIG slice counts its compute share (3g = 3/7).
package api

import "time"

// Version is the API's version, the path prefix's last element.
const Version = "v1"

// Prefix is where every API route lives.
const Prefix = "/api/" + Version

// Roles a user may have.
const (
	RoleAdmin  = "admin"  // everything, every team
	RoleLead   = "lead"   // a team's jobs, priorities and projects; submits
	RoleMember = "member" // submits; sees the team's jobs; cancels their own
	RoleViewer = "viewer" // reads the team's jobs, queue and usage
)

// Roles lists every role, most powerful first.
func Roles() []string { return []string{RoleAdmin, RoleLead, RoleMember, RoleViewer} }

// Job states. A job is submitted and queued at once; "requeued" is an
// event, after which the job is queued again.
const (
	StateQueued    = "queued"    // waiting in its team's queue
	StateAdmitted  = "admitted"  // resources assigned; MIG instances being created
	StateRunning   = "running"   // every task runs; its clock counts down
	StatePreempted = "preempted" // evicted, in its grace period; then requeued
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// Terminal reports whether a job in state s is finished for good.
func Terminal(s string) bool {
	return s == StateSucceeded || s == StateFailed || s == StateCancelled
}

// States lists every job state.
func States() []string {
	return []string{StateQueued, StateAdmitted, StateRunning, StatePreempted, StateSucceeded, StateFailed, StateCancelled}
}

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	Error string `json:"error"`           // what went wrong, naming the field and value
	Field string `json:"field,omitempty"` // the request field at fault, when one is
}

// Health is the body of /healthz.
type Health struct {
	Status string `json:"status"` // "ok"
	World  string `json:"world"`  // "virtual"
	Clock  Clock  `json:"clock"`
}

// Clock is the cluster's clock: on the virtual cluster, cluster time runs
// Speed times faster than the wall clock while the server runs, and stands
// still while it is stopped.
type Clock struct {
	Now   time.Time `json:"now"`
	Speed float64   `json:"speed"`
}

// Whoami describes the caller's token.
type Whoami struct {
	User    string `json:"user"`
	Role    string `json:"role"`
	Team    string `json:"team,omitempty"`
	TokenID string `json:"token_id"`
}
