package api

import "time"

// Report is a usage and chargeback report over [From, To). GPU-hours
// weight a MIG slice by its compute share (3g.40gb = 3/7 GPU) and a share
// by its milli. Each ledger hold is clipped to the period, converted to
// whole micro-GPU-hours and micro-currency units, and only then summed, so
// rows add up exactly to Total and Total to the ledger (GET /ledger).
type Report struct {
	From     time.Time   `json:"from"`
	To       time.Time   `json:"to"`
	GroupBy  []string    `json:"group_by"` // of team, project, user, model, tier, class
	Currency string      `json:"currency"`
	Rows     []ReportRow `json:"rows"`
	Total    ReportRow   `json:"total"`
	Prices   string      `json:"prices"` // where the price table comes from
}

// ReportRow is one group's usage. Empty key fields are not grouped on.
type ReportRow struct {
	Team    string `json:"team,omitempty"`
	Project string `json:"project,omitempty"`
	User    string `json:"user,omitempty"`
	Model   string `json:"model,omitempty"`
	Tier    string `json:"tier,omitempty"`
	Class   string `json:"class,omitempty"`
	// GPUHours and Cost are exact decimals of the integer fields.
	GPUHours      string `json:"gpu_hours"`
	Cost          string `json:"cost"`
	MicroGPUHours int64  `json:"micro_gpu_hours"`
	CostMicros    int64  `json:"cost_micros"`
	Holds         int    `json:"holds"` // ledger holds that overlap the period
}

// LedgerEntry is one row of the append-only usage ledger: a hold of one
// GPU (or slice) by one task begins or ends.
type LedgerEntry struct {
	Seq     int64     `json:"seq"`
	Hold    string    `json:"hold"` // pairs a begin with its end
	Kind    string    `json:"kind"` // begin or end
	Time    time.Time `json:"time"`
	Job     string    `json:"job"`
	Task    string    `json:"task"`
	Team    string    `json:"team"`
	Project string    `json:"project"`
	User    string    `json:"user"`
	Class   string    `json:"class"`
	Node    string    `json:"node"`
	GPU     int       `json:"gpu"`
	Model   string    `json:"model"`
	Tier    string    `json:"tier"`
	Slice   string    `json:"slice,omitempty"`
	// Share is the part of the GPU held, in 1/7000 GPU: a whole GPU is
	// 7000, a MIG slice of k compute slices k×1000, a share of m milli m×7.
	Share int64 `json:"share"`
}

// Ledger is a page of ledger entries in order.
type Ledger struct {
	Entries []LedgerEntry `json:"entries"`
	Next    string        `json:"next,omitempty"`
}

// PriceTable is what a GPU-hour costs, per model and capacity tier.
type PriceTable struct {
	Currency    string      `json:"currency"`
	Source      string      `json:"source"`
	Assumptions []string    `json:"assumptions"`
	Prices      []PriceItem `json:"prices"`
}

// PriceItem is the price of one GPU-hour of a model in a tier; model "*"
// is the price of any model not listed.
type PriceItem struct {
	Model string  `json:"model"`
	Tier  string  `json:"tier"`
	Price float64 `json:"price"`
}
