package fill

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"partita.dev/partita/internal/sim"
	"partita.dev/partita/internal/svgchart"
)

// PublishedName maps our baseline names to the labels of the published
// results (hkust-adsl/kubernetes-scheduler-simulator expected_results).
var PublishedName = map[string]string{
	"random":         "01-Random",
	"dot-product":    "02-DotProd",
	"gpu-clustering": "03-GpuClustering",
	"gpu-packing":    "04-GpuPacking",
	"best-fit":       "05-BestFit",
	"fgd":            "06-FGD",
}

// Published holds published curves: workload -> label -> seed -> columns.
type Published map[string]map[string]map[int64][]float64

// ReadPublished reads analysis_allo_discrete.csv (or the frag one).
func ReadPublished(path string) (Published, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) < 1 || len(rows[0]) < 4+Columns {
		return nil, fmt.Errorf("%s: not a published curves file", path)
	}
	first := len(rows[0]) - Columns // columns 0..130 are the last 131
	out := Published{}
	for i, r := range rows[1:] {
		if len(r) != len(rows[0]) {
			return nil, fmt.Errorf("%s:%d: %d fields, header has %d", path, i+2, len(r), len(rows[0]))
		}
		seed, err := strconv.ParseInt(r[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: column seed: %q: %v", path, i+2, r[3], err)
		}
		cols := make([]float64, Columns)
		for c := range cols {
			if cols[c], err = strconv.ParseFloat(r[first+c], 64); err != nil {
				return nil, fmt.Errorf("%s:%d: column %d: %q: %v", path, i+2, c, r[first+c], err)
			}
		}
		w, label := r[0], r[1]
		if out[w] == nil {
			out[w] = map[string]map[int64][]float64{}
		}
		if out[w][label] == nil {
			out[w][label] = map[int64][]float64{}
		}
		out[w][label][seed] = cols
	}
	return out, nil
}

// MedianUnallocated returns the published median of 100 − column 100 over
// seeds, and whether the curve exists.
func (p Published) MedianUnallocated(workload, policy string) (float64, bool) {
	seeds := p[workload][PublishedName[policy]]
	if len(seeds) == 0 {
		return 0, false
	}
	var vals []float64
	for _, cols := range seeds {
		vals = append(vals, round2(100-cols[100]))
	}
	return Median(vals), true
}

// WorkloadName is the published name of a pod list: its file name without
// extension.
func WorkloadName(podsPath string) string {
	return strings.TrimSuffix(filepath.Base(podsPath), filepath.Ext(podsPath))
}

// WriteReport writes, into dir, the curves in the published shape
// (curves_alloc.csv, curves_frag.csv), a Markdown table of medians beside
// the published ones (summary.md) and an SVG chart (alloc.svg). published
// may be nil.
func WriteReport(dir, podsPath string, e *Experiment, results map[string][]*Result, published Published) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	w := WorkloadName(podsPath)
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{"curves_alloc.csv", func(out io.Writer) error {
			return writeCurves(out, w, e, results, func(r *Result) []float64 { return r.Alloc[:] })
		}},
		{"curves_frag.csv", func(out io.Writer) error {
			return writeCurves(out, w, e, results, func(r *Result) []float64 { return r.Frag[:] })
		}},
		{"summary.md", func(out io.Writer) error { return writeSummary(out, w, e, results, published) }},
		{"alloc.svg", func(out io.Writer) error { return writeChart(out, w, e, results) }},
	}
	for _, f := range files {
		if err := sim.WriteFile(filepath.Join(dir, f.name), f.write); err != nil {
			return err
		}
	}
	return nil
}

func label(policy string) string {
	if l, ok := PublishedName[policy]; ok {
		return l
	}
	return policy
}

// writeCurves writes workload,sc_policy,tune,seed,total_gpus,0..130.
func writeCurves(out io.Writer, workload string, e *Experiment, results map[string][]*Result, pick func(*Result) []float64) error {
	cw := csv.NewWriter(out)
	header := []string{"workload", "sc_policy", "tune", "seed", "total_gpus"}
	for c := 0; c < Columns; c++ {
		header = append(header, strconv.Itoa(c))
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, p := range e.Policies {
		for _, r := range results[p] {
			row := []string{workload, label(p), strconv.FormatFloat(e.Tune, 'f', -1, 64), strconv.FormatInt(r.Seed, 10), strconv.Itoa(r.TotalGPUs)}
			for _, v := range pick(r) {
				row = append(row, strconv.FormatFloat(v, 'f', 2, 64))
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

func writeSummary(out io.Writer, workload string, e *Experiment, results map[string][]*Result, published Published) error {
	fmt.Fprintf(out, "# Fill experiment: %s\n\n", workload)
	fmt.Fprintf(out, "Unallocated GPUs (%% of %d) when the arrived workload reaches 100%% of capacity; median over seeds %s; tune %.2g.\n\n",
		firstTotal(results), seedRange(e.Seeds), e.Tune)
	fmt.Fprintln(out, "| policy | ours (median) | published (median) | difference | seeds (ours) |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	for _, p := range e.Policies {
		var vals []float64
		var seeds []string
		for _, r := range results[p] {
			vals = append(vals, r.Unallocated())
			seeds = append(seeds, fmt.Sprintf("%.2f", r.Unallocated()))
		}
		ours := Median(vals)
		pub, diff := "—", "—"
		if v, ok := published.MedianUnallocated(workload, p); ok {
			pub, diff = fmt.Sprintf("%.2f", v), fmt.Sprintf("%+.2f", ours-v)
		}
		fmt.Fprintf(out, "| %s | %.2f | %s | %s | %s |\n", p, ours, pub, diff, strings.Join(seeds, " "))
	}
	return nil
}

func firstTotal(results map[string][]*Result) int {
	for _, rs := range results {
		if len(rs) > 0 {
			return rs[0].TotalGPUs
		}
	}
	return 0
}

func seedRange(seeds []int64) string {
	if len(seeds) == 0 {
		return ""
	}
	s := append([]int64(nil), seeds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return fmt.Sprintf("%d–%d (%d seeds)", s[0], s[len(s)-1], len(s))
}

// writeChart draws the mean allocation curve of each policy over its seeds,
// from 50 % arrived workload, where policies start to differ.
func writeChart(out io.Writer, workload string, e *Experiment, results map[string][]*Result) error {
	c := svgchart.Chart{
		Title:  "GPU allocation rate vs arrived workload — " + workload,
		XLabel: "arrived workload (% of cluster GPUs)",
		YLabel: "GPU allocation rate (%)",
		XMin:   50, XMax: 130, YMin: 50, YMax: 100,
	}
	for _, p := range e.Policies {
		rs := results[p]
		if len(rs) == 0 {
			continue
		}
		s := svgchart.Series{Name: p}
		for col := 50; col < Columns; col++ {
			sum := 0.0
			for _, r := range rs {
				sum += r.Alloc[col]
			}
			s.Points = append(s.Points, svgchart.Point{X: float64(col), Y: sum / float64(len(rs))})
		}
		c.Series = append(c.Series, s)
	}
	return c.Write(out)
}

// ListResult is one pod list's experiment.
type ListResult struct {
	Pods       string
	Experiment *Experiment
	Results    map[string][]*Result
	Wall       time.Duration
}

func (lr ListResult) median(policy string) (float64, bool) {
	rs := lr.Results[policy]
	if len(rs) == 0 {
		return 0, false
	}
	vals := make([]float64, len(rs))
	for i, r := range rs {
		vals[i] = r.Unallocated()
	}
	return Median(vals), true
}

// fidelityTolerance is how far a baseline's median may sit from the
// published one: 1.0 point for random (its per-seed spread is larger and
// its draws depend on goroutine order in the original), 0.5 for the rest.
func fidelityTolerance(policy string) float64 {
	if policy == "random" {
		return 1.0
	}
	return 0.5
}

// WriteSummary writes the tables across pod lists: our baselines beside the
// published medians, and partita beside FGD's published median.
func WriteSummary(path string, all []ListResult, published Published, command string) error {
	return sim.WriteFile(path, func(out io.Writer) error {
		fmt.Fprintf(out, "# Fill experiment on the Alibaba GPU 2023 trace\n\n")
		fmt.Fprintf(out, "Regenerate with:\n\n    partita bench fill %s\n\n", command)
		fmt.Fprintln(out, "Values: unallocated GPUs (% of 6,212) when the arrived workload reaches 100 % of capacity, median over seeds.")
		fmt.Fprintln(out)
		writeFidelity(out, all, published)
		writeVersusFGD(out, all, published)
		fmt.Fprintln(out, "## Wall time per pod list (all policies and seeds)")
		fmt.Fprintln(out)
		for _, lr := range all {
			fmt.Fprintf(out, "- %s: %.1f s\n", WorkloadName(lr.Pods), lr.Wall.Seconds())
		}
		return nil
	})
}

func writeFidelity(out io.Writer, all []ListResult, published Published) {
	baselines := []string{"random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd"}
	fmt.Fprintln(out, "## Fidelity: our baselines (published)")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Within tolerance (random ±1.0, others ±0.5) unless marked ✗.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| pod list | "+strings.Join(baselines, " | ")+" |")
	fmt.Fprintln(out, "|---"+strings.Repeat("|---", len(baselines))+"|")
	for _, lr := range all {
		w := WorkloadName(lr.Pods)
		row := []string{w}
		for _, p := range baselines {
			ours, ok := lr.median(p)
			if !ok {
				row = append(row, "—")
				continue
			}
			cell := fmt.Sprintf("%.2f", ours)
			if pub, ok := published.MedianUnallocated(w, p); ok {
				mark := ""
				if math.Abs(ours-pub) > fidelityTolerance(p)+1e-9 {
					mark = " ✗"
				}
				cell = fmt.Sprintf("%.2f (%.2f)%s", ours, pub, mark)
			}
			row = append(row, cell)
		}
		fmt.Fprintln(out, "| "+strings.Join(row, " | ")+" |")
	}
	fmt.Fprintln(out)
}

func writeVersusFGD(out io.Writer, all []ListResult, published Published) {
	fmt.Fprintln(out, "## Partita against FGD")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Target: at most 0.8 × FGD's published median on every pod list.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| pod list | partita | FGD (ours) | FGD (published) | partita / published FGD | target met |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, lr := range all {
		w := WorkloadName(lr.Pods)
		p, ok := lr.median("partita")
		if !ok {
			continue
		}
		f, _ := lr.median("fgd")
		pub, hasPub := published.MedianUnallocated(w, "fgd")
		ratio, met := "—", "—"
		if hasPub && pub > 0 {
			ratio = fmt.Sprintf("%.2f", p/pub)
			met = "no"
			if p <= 0.8*pub {
				met = "yes"
			}
		}
		fmt.Fprintf(out, "| %s | %.2f | %.2f | %s | %s | %s |\n", w, p, f, fmtOpt(pub, hasPub), ratio, met)
	}
	fmt.Fprintln(out)
}

func fmtOpt(v float64, ok bool) string {
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}
