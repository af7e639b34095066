package portal

import (
	"fmt"
	"sort"
	"strings"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/gpu"
)

// The node drawing: each GPU is a bar of its eight memory slices; a MIG
// instance covers the slices it owns (its placement), a GPU with MIG off
// is filled by the shares its tasks hold. Sizes are in the SVG's user
// units.
const (
	barX      = 58.0
	barW      = 296.0
	rowH      = 22.0
	rowGap    = 5.0
	nodeWidth = 360
)

type nodeGroup struct {
	Leaf, Tier string
	Nodes      []nodeDraw
}

type nodeDraw struct {
	Name, Tier, Leaf, Models string
	CPU, Memory              string // used of total
	GPUsUsed                 string
	Height                   float64
	Rows                     []gpuRow
}

type gpuRow struct {
	Index        int
	Y, TextY     float64
	Bottom       float64
	Label        string // "0 MIG"
	Cordoned     bool
	Boxes        []box
	SliceLinesAt []float64 // the memory-slice boundaries, for MIG GPUs
}

// box is one MIG instance or share.
type box struct {
	X, W    float64
	Class   string // the team's colour, "other", or "free"
	Text    string
	TextX   float64
	Title   string
	JobHref string
}

// drawNodes lays out every node, grouped by leaf switch then tier.
func drawNodes(c api.Cluster, colors map[string]string, admin bool) []nodeGroup {
	groups := map[[2]string]*nodeGroup{}
	for _, n := range c.Nodes {
		key := [2]string{n.Leaf, n.Tier}
		g := groups[key]
		if g == nil {
			g = &nodeGroup{Leaf: n.Leaf, Tier: n.Tier}
			groups[key] = g
		}
		g.Nodes = append(g.Nodes, drawNode(n, colors))
	}
	keys := make([][2]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a][0] != keys[b][0] {
			return keys[a][0] < keys[b][0]
		}
		return keys[a][1] < keys[b][1]
	})
	out := make([]nodeGroup, 0, len(keys))
	for _, k := range keys {
		if groups[k].Leaf == "" {
			groups[k].Leaf = "no leaf switch"
		}
		out = append(out, *groups[k])
	}
	return out
}

func drawNode(n api.Node, colors map[string]string) nodeDraw {
	d := nodeDraw{Name: n.Name, Tier: n.Tier, Leaf: n.Leaf,
		CPU:    fmt.Sprintf("%s of %s cores", fmtCPU(n.CPUUsed), fmtCPU(n.CPUMilli)),
		Memory: fmt.Sprintf("%s of %s", fmtMiB(n.MemUsed), fmtMiB(n.MemoryMiB))}
	models := map[string]bool{}
	var used float64
	for i, g := range n.GPUs {
		models[g.Model] = true
		used += gpuShare(g)
		y := float64(i) * (rowH + rowGap)
		row := gpuRow{Index: g.Index, Y: y, Bottom: y + rowH, TextY: y + rowH/2 + 4, Cordoned: g.Cordoned, Label: fmt.Sprintf("GPU %d", g.Index)}
		if g.MIG {
			row.Label += " MIG"
			row.Boxes = migBoxes(g, colors)
			for k := 1; k < gpu.MemorySlices; k++ {
				row.SliceLinesAt = append(row.SliceLinesAt, barX+float64(k)*barW/gpu.MemorySlices)
			}
		} else {
			row.Boxes = shareBoxes(g, colors)
		}
		d.Rows = append(d.Rows, row)
	}
	d.Height = float64(len(n.GPUs))*(rowH+rowGap) - rowGap
	d.Models = strings.Join(sortedKeys(models), ", ")
	d.GPUsUsed = fmtGPUs(used) + " of " + fmt.Sprint(len(n.GPUs)) + " GPUs in use"
	return d
}

// migBoxes draws a MIG GPU's instances where they sit.
func migBoxes(g api.GPU, colors map[string]string) []box {
	m := gpu.Lookup(g.Model)
	var out []box
	for _, s := range g.Slices {
		pl, err := gpu.ParsePlacement(s.Slice)
		if err != nil {
			continue
		}
		width := 1
		if prof, err := m.Profile(pl.Profile); err == nil {
			width = prof.Memory
		}
		b := box{X: barX + float64(pl.Start)*barW/gpu.MemorySlices, W: float64(width) * barW / gpu.MemorySlices}
		b.Class, b.Title, b.JobHref = holder(s.Busy, s.Job, s.Team, colors)
		b.Title = pl.Profile + " at memory slice " + fmt.Sprint(pl.Start) + ": " + b.Title
		b.Text = pl.Profile
		if width == 1 {
			b.Text = strings.SplitN(pl.Profile, ".", 2)[0] // "1g"
		}
		if s.Job != "" && width >= 3 {
			b.Text += " · " + shortID(s.Job)
		}
		b.TextX = b.X + b.W/2
		out = append(out, b)
	}
	return out
}

// shareBoxes draws a GPU with MIG off: each task's share, left to right.
func shareBoxes(g api.GPU, colors map[string]string) []box {
	var out []box
	x := barX
	for _, h := range g.Holders {
		b := box{X: x, W: float64(h.Milli) / 1000 * barW}
		b.Class, b.Title, b.JobHref = holder(true, h.Job, h.Team, colors)
		if h.Milli >= 1000 {
			b.Text = "whole GPU"
		} else {
			b.Text = fmt.Sprintf("%d‰", h.Milli)
		}
		if h.Job != "" && b.W >= 110 {
			b.Text += " · " + shortID(h.Job)
		}
		b.Title = fmt.Sprintf("%d/1000 of the GPU: %s", h.Milli, b.Title)
		b.TextX = b.X + b.W/2
		x += b.W
		out = append(out, b)
	}
	return out
}

// holder says whose a slice is: a job the viewer may see (linked, in its
// team's colour), another team's work (grey, unnamed), or free.
func holder(busy bool, job, team string, colors map[string]string) (class, title, href string) {
	switch {
	case !busy:
		return "free", "free", ""
	case job == "":
		return "other", "in use by another team", ""
	}
	class = colors[team]
	if class == "" {
		class = "other"
	}
	return class, "job " + job + " of team " + team, "/jobs/" + job
}
