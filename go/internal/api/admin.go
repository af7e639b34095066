package api

import "time"

// Team is a tenant with a quota.
type Team struct {
	Name string `json:"name"`
	// GuaranteedGPUs can always be had, by preempting borrowers;
	// BurstGPUs is the most the team may hold when others leave GPUs idle.
	GuaranteedGPUs float64  `json:"guaranteed_gpus"`
	BurstGPUs      float64  `json:"burst_gpus"`
	Weight         float64  `json:"weight"`  // share of what guarantees leave over
	Classes        []string `json:"classes"` // priority classes its jobs may use
	Projects       []string `json:"projects,omitempty"`
}

// TeamRequest creates (POST /teams, Name required) or changes (PATCH
// /teams/{team}) a team; absent fields keep their value or default.
type TeamRequest struct {
	Name           string   `json:"name,omitempty"`
	GuaranteedGPUs *float64 `json:"guaranteed_gpus,omitempty"`
	BurstGPUs      *float64 `json:"burst_gpus,omitempty"`
	Weight         *float64 `json:"weight,omitempty"`
	Classes        []string `json:"classes,omitempty"`
}

// Project groups a team's jobs for chargeback.
type Project struct {
	Team      string    `json:"team"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// ProjectRequest is the body of POST /teams/{team}/projects.
type ProjectRequest struct {
	Name string `json:"name"`
}

// User is a person or robot that holds tokens.
type User struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Team      string    `json:"team,omitempty"` // every role but admin has one
	CreatedAt time.Time `json:"created_at"`
}

// UserRequest is the body of POST /users.
type UserRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
	Team string `json:"team,omitempty"`
}

// TokenRequest is the body of POST /users/{user}/tokens.
type TokenRequest struct {
	Description string `json:"description,omitempty"`
}

// Token describes an API token; only NewToken carries the secret, once.
type Token struct {
	ID          string     `json:"id"`
	User        string     `json:"user"`
	Description string     `json:"description,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
}

// NewToken is the answer to POST /users/{user}/tokens: the secret is shown
// here and never again (the server keeps only its SHA-256).
type NewToken struct {
	Token
	Secret string `json:"secret"`
}

// Profile is one row of the workload profile catalog.
type Profile struct {
	Name          string  `json:"name"`
	Kind          string  `json:"kind"` // inference or training
	PeakMemoryMiB int64   `json:"peak_memory_mib"`
	Compute       float64 `json:"compute"`
	GPUs          int     `json:"gpus"` // whole GPUs per task; 0: sized by memory
	CPUMilli      int64   `json:"cpu_milli"`
	HostMemoryMiB int64   `json:"host_memory_mib"`
	Basis         string  `json:"basis"`
}
