// Package accounting turns the usage ledger into usage and chargeback
// reports: GPU-hours per team, project, user, model, tier or class over
// any period, priced from a per-model, per-tier price table.
//
// All arithmetic is in integers so that totals reconcile exactly: a hold's
// share is in 1/7000 GPU (ShareUnit; both a MIG slice, k/7 of a GPU, and a
// share in milli are whole numbers of it), its length in milliseconds of
// cluster time; each hold clipped to the period becomes whole micro
// GPU-hours and whole micro currency units, and only those are summed.
package accounting

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/cluster"
)

// ShareUnit is a whole GPU in the ledger's share unit: 7 compute slices ×
// 1000 milli.
const ShareUnit = 7000

// GrantShare is the part of a GPU a grant holds, in ShareUnit: a MIG slice
// its compute share (3g.40gb = 3000), a whole GPU or a share its milli × 7.
func GrantShare(n *cluster.Node, g cluster.Grant) int64 {
	if g.Slice == nil {
		return int64(g.Milli) * ShareUnit / 1000
	}
	p, err := n.GPUs[g.GPU].Model.Profile(g.Slice.Profile)
	if err != nil {
		return 0
	}
	return int64(p.Compute) * ShareUnit / 7
}

// Prices is a price table: micro currency units per GPU-hour by model and
// capacity tier.
type Prices struct {
	Currency    string
	Source      string
	Assumptions []string
	micros      map[priceKey]int64
}

type priceKey struct{ model, tier string }

// Any is the model of a price that applies to models not listed.
const Any = "*"

// defaultTable is the built-in price table, in USD per GPU-hour. These are
// round planning figures, not a quote: operators load their own with
// `partita serve --prices FILE`.
//
// Sources and assumptions (2025-2026 public list prices):
//   - on-demand: hyperscaler H100 list prices fell to about $3-7 per
//     GPU-hour after AWS's June 2025 P5 reduction (up to 45%); AWS EC2
//     Capacity Blocks listed p5.48xlarge (8 × H100) at $4.916 per
//     accelerator-hour and p4d.24xlarge (8 × A100-40GB) at $1.844 in
//     us-east-1 in 2025. We take $4.00 for H100-80GB and scale the others
//     by the same market's ratios.
//   - reserved (owned hardware or 1-3 year commitments): about 35-40%
//     below on-demand.
//   - spot: about 50-65% below on-demand, preemptible.
var defaultTable = []api.PriceItem{
	{Model: "H200-141GB", Tier: "on-demand", Price: 5.00}, {Model: "H200-141GB", Tier: "reserved", Price: 3.10}, {Model: "H200-141GB", Tier: "spot", Price: 2.20},
	{Model: "H100-80GB", Tier: "on-demand", Price: 4.00}, {Model: "H100-80GB", Tier: "reserved", Price: 2.50}, {Model: "H100-80GB", Tier: "spot", Price: 1.80},
	{Model: "A100-80GB", Tier: "on-demand", Price: 2.50}, {Model: "A100-80GB", Tier: "reserved", Price: 1.55}, {Model: "A100-80GB", Tier: "spot", Price: 1.10},
	{Model: "A100-40GB", Tier: "on-demand", Price: 1.85}, {Model: "A100-40GB", Tier: "reserved", Price: 1.15}, {Model: "A100-40GB", Tier: "spot", Price: 0.80},
	{Model: "L40S", Tier: "on-demand", Price: 1.50}, {Model: "L40S", Tier: "reserved", Price: 0.95}, {Model: "L40S", Tier: "spot", Price: 0.65},
	{Model: "L4", Tier: "on-demand", Price: 0.80}, {Model: "L4", Tier: "reserved", Price: 0.50}, {Model: "L4", Tier: "spot", Price: 0.35},
	{Model: Any, Tier: "on-demand", Price: 2.00}, {Model: Any, Tier: "reserved", Price: 1.25}, {Model: Any, Tier: "spot", Price: 0.90},
}

// DefaultPrices is the built-in table (defaultTable).
func DefaultPrices() *Prices {
	p, err := FromTable(api.PriceTable{
		Currency: "USD",
		Source:   "built-in planning figures (internal/accounting/prices.go); replace with `partita serve --prices FILE`",
		Assumptions: []string{
			"on-demand: 2025-2026 hyperscaler list prices after the mid-2025 reductions (AWS EC2 Capacity Blocks, us-east-1: p5.48xlarge $4.916 and p4d.24xlarge $1.844 per GPU-hour); H100-80GB taken at $4.00, other models scaled by market ratios",
			"reserved: owned hardware or 1-3 year commitments, about 35-40% below on-demand",
			"spot: about 50-65% below on-demand, and preemptible",
			"a MIG slice costs its compute share of the GPU (3g.40gb = 3/7); a share its milli",
		},
		Prices: defaultTable,
	})
	if err != nil {
		panic(err) // the built-in table is checked by a test
	}
	return p
}

// FromTable checks a price table and builds Prices from it.
func FromTable(t api.PriceTable) (*Prices, error) {
	if t.Currency == "" {
		return nil, fmt.Errorf("prices: currency is empty")
	}
	p := &Prices{Currency: t.Currency, Source: t.Source, Assumptions: t.Assumptions, micros: map[priceKey]int64{}}
	for i, it := range t.Prices {
		if _, err := cluster.ParseTier(it.Tier); err != nil || it.Tier == "" {
			return nil, fmt.Errorf("prices[%d].tier: %q is not a tier (reserved, on-demand, spot)", i, it.Tier)
		}
		if it.Model == "" {
			return nil, fmt.Errorf("prices[%d].model: empty (use %q for any model)", i, Any)
		}
		if !(it.Price >= 0 && it.Price < 1e6) {
			return nil, fmt.Errorf("prices[%d].price: %v must be between 0 and 1000000", i, it.Price)
		}
		k := priceKey{it.Model, it.Tier}
		if _, dup := p.micros[k]; dup {
			return nil, fmt.Errorf("prices[%d]: %s/%s is listed twice", i, it.Model, it.Tier)
		}
		p.micros[k] = int64(math.Round(it.Price * 1e6))
	}
	return p, nil
}

// LoadPrices reads a price table file: JSON in the shape of GET
// /api/v1/prices.
func LoadPrices(path string) (*Prices, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(io.LimitReader(f, 1<<20))
	dec.DisallowUnknownFields()
	var t api.PriceTable
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p, err := FromTable(t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if p.Source == "" {
		p.Source = path
	}
	return p, nil
}

// PerHour is the price of one GPU-hour in micro units: the model's own
// price in the tier, else the tier's price for any model, else 0.
func (p *Prices) PerHour(model, tier string) int64 {
	if v, ok := p.micros[priceKey{model, tier}]; ok {
		return v
	}
	return p.micros[priceKey{Any, tier}]
}

// Table returns the table in API form, sorted by model and tier.
func (p *Prices) Table() api.PriceTable {
	t := api.PriceTable{Currency: p.Currency, Source: p.Source, Assumptions: p.Assumptions}
	for k, v := range p.micros {
		t.Prices = append(t.Prices, api.PriceItem{Model: k.model, Tier: k.tier, Price: float64(v) / 1e6})
	}
	sort.Slice(t.Prices, func(i, j int) bool {
		a, b := t.Prices[i], t.Prices[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		return a.Tier < b.Tier
	})
	return t
}
