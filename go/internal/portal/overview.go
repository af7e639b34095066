package portal

import (
	"bytes"
	"context"
	"html/template"
	"math"
	"net/http"
	"sort"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/svgchart"
)

// overviewData is the cluster overview: utilization, GPUs by state, and
// every node's GPUs with their MIG slices, by leaf switch and tier.
type overviewData struct {
	Cluster api.Cluster
	Chart   template.HTML
	States  []stateCount
	Groups  []nodeGroup
	Teams   []teamColor // the legend
	Samples int
}

type stateCount struct {
	Name, Class string
	N           int
	X, W        float64 // in the stacked bar, of 1000
}

type teamColor struct{ Team, Class string }

func (p *Portal) overview(w http.ResponseWriter, r *http.Request, s *session) error {
	d, err := p.overviewData(r, s)
	if err != nil {
		return err
	}
	p.render(w, http.StatusOK, "overview", p.view(s, "overview", "Cluster", d))
	return nil
}

func (p *Portal) overviewFragment(w http.ResponseWriter, r *http.Request, s *session) error {
	d, err := p.overviewData(r, s)
	if err != nil {
		return err
	}
	p.fragment(w, "overview", "overview-live", p.view(s, "overview", "Cluster", d))
	return nil
}

func (p *Portal) overviewData(r *http.Request, s *session) (*overviewData, error) {
	var c api.Cluster
	if err := p.as(r, s, http.MethodGet, api.Prefix+"/cluster", nil, &c); err != nil {
		return nil, err
	}
	colors := p.teamColors(r.Context())
	d := &overviewData{Cluster: c, States: gpuStates(c), Groups: drawNodes(c, colors, s.who.Role == api.RoleAdmin)}
	for _, t := range sortedKeys(colors) {
		if s.who.Role == api.RoleAdmin || t == s.who.Team {
			d.Teams = append(d.Teams, teamColor{Team: t, Class: colors[t]})
		}
	}
	samples := p.samples.all()
	d.Samples = len(samples)
	d.Chart = utilizationChart(samples, c.Clock)
	return d, nil
}

// teamColors gives each team a colour class, by name order, so that a
// team keeps its colour from page to page.
func (p *Portal) teamColors(ctx context.Context) map[string]string {
	out := map[string]string{}
	teams, err := p.cfg.Store.Teams(ctx)
	if err != nil {
		return out
	}
	names := make([]string, 0, len(teams))
	for _, t := range teams {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	for i, n := range names {
		out[n] = "tm" + string(rune('0'+i%8))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// utilizationChart draws allocated and useful utilization over the
// samples, against cluster time before now: in minutes while the samples
// span 3 hours or less, else in hours. The axis starts at a whole number
// of tens of minutes (at least an hour) or of hours, so that its ticks
// are whole numbers.
func utilizationChart(ss []sample, clock api.Clock) template.HTML {
	span := time.Hour
	for _, x := range ss {
		span = max(span, clock.Now.Sub(x.At))
	}
	unit, label, from := time.Minute, "cluster minutes before now", math.Ceil(span.Minutes()/10)*10
	if span > 3*time.Hour {
		unit, label, from = time.Hour, "cluster hours before now", math.Ceil(span.Hours())
	}
	var alloc, useful []svgchart.Point
	for _, x := range ss {
		t := float64(x.At.Sub(clock.Now)) / float64(unit)
		alloc = append(alloc, svgchart.Point{X: t, Y: x.Allocated * 100})
		useful = append(useful, svgchart.Point{X: t, Y: x.Useful * 100})
	}
	c := svgchart.Chart{
		XLabel: label, YLabel: "% of GPUs", XMin: -from, XMax: 0, YMin: 0, YMax: 100, Width: 760, Height: 250,
		Series: []svgchart.Series{{Name: "allocated", Points: alloc}, {Name: "useful", Points: useful, Dashed: true}},
	}
	var b bytes.Buffer
	_ = c.Write(&b)
	return template.HTML(b.String()) // svgchart escapes every text it writes
}

// gpuShare is the part of a GPU in use: a MIG slice counts the larger of
// its compute and memory share, as the API's utilization does.
func gpuShare(g api.GPU) float64 {
	if !g.MIG {
		return float64(g.Used) / 1000
	}
	m := gpu.Lookup(g.Model)
	total := 0.0
	for _, s := range g.Slices {
		if !s.Busy {
			continue
		}
		pl, err := gpu.ParsePlacement(s.Slice)
		if err != nil {
			continue
		}
		if prof, err := m.Profile(pl.Profile); err == nil {
			total += max(prof.ComputeShare(), float64(prof.Memory)/gpu.MemorySlices)
		}
	}
	return total
}

// gpuStates counts GPUs by state: being reconfigured, idle, partly used,
// full.
func gpuStates(c api.Cluster) []stateCount {
	counts := map[string]int{}
	for _, n := range c.Nodes {
		for _, g := range n.GPUs {
			share := gpuShare(g)
			switch {
			case g.Cordoned:
				counts["reconfiguring"]++
			case share <= 0:
				counts["idle"]++
			case share >= 0.999:
				counts["full"]++
			default:
				counts["partly used"]++
			}
		}
	}
	var out []stateCount
	total := max(c.GPUs, 1)
	x := 0.0
	for _, s := range []struct{ name, class string }{{"full", "st-full"}, {"partly used", "st-part"}, {"reconfiguring", "st-reconf"}, {"idle", "st-idle"}} {
		n := counts[s.name]
		w := float64(n) / float64(total) * 1000
		out = append(out, stateCount{Name: s.name, Class: s.class, N: n, X: x, W: w})
		x += w
	}
	return out
}
