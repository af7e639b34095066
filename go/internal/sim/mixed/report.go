package mixed

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"partita.dev/partita/internal/sim"
	"partita.dev/partita/internal/svgchart"
)

// WriteReport writes report.md, utilization.svg (useful and allocated GPU
// over time, per scheduler) and teams-<scheduler>.svg (each team's GPUs
// against its entitlement) into dir.
func WriteReport(dir, command string, results []*Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := sim.WriteFile(filepath.Join(dir, "report.md"), func(w io.Writer) error { return writeMarkdown(w, command, results) }); err != nil {
		return err
	}
	if err := sim.WriteFile(filepath.Join(dir, "utilization.svg"), func(w io.Writer) error { return utilizationChart(results).Write(w) }); err != nil {
		return err
	}
	for _, r := range results {
		r := r
		if err := sim.WriteFile(filepath.Join(dir, "teams-"+r.Scheduler+".svg"), func(w io.Writer) error { return teamsChart(r).Write(w) }); err != nil {
			return err
		}
	}
	return nil
}

func writeMarkdown(w io.Writer, command string, results []*Result) error {
	if len(results) == 0 {
		return nil
	}
	fmt.Fprintf(w, "# Mixed workload: %s\n\n", results[0].Scenario)
	fmt.Fprintf(w, "Regenerate with `%s`. docs/metrics.md defines every column.\n\n", command)
	fmt.Fprintf(w, "Offered load: %.3f of the cluster's GPU-time (`offered_load`: what the job stream asks for, the same under every scheduler).\n\n", results[0].OfferedLoad)
	fmt.Fprintln(w, "| scheduler | useful util. | allocated util. | OOM | wait p95 production | production within guarantee | wait p95 batch | wait p95 best-effort | JCT p50 | guarantee violation | violation, owed clock | Jain | preemptions | lost GPU-h | MIG changes | moves | jobs done |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		jain := "n/a (never all backlogged)"
		if r.JainSamples > 0 && r.JainFairness != nil {
			jain = fmt.Sprintf("%.3f", *r.JainFairness)
		}
		jct := "n/a" // no job finished
		if r.JCTP50 != nil {
			jct = dur(*r.JCTP50)
		}
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %d | %s | %s | %s | %s | %s | %.0f s | %.0f s | %s | %d | %.1f | %d | %d | %d / %d |\n",
			r.Scheduler, r.UsefulUtilization, r.AllocatedUtilization, r.OOMEvents,
			dur(r.WaitP95["production"]), dur(r.WaitP95WithinGuarantee["production"]), dur(r.WaitP95["batch"]), dur(r.WaitP95["best-effort"]),
			jct, r.GuaranteeViolation, r.GuaranteeViolationOwed, jain, r.Preemptions, r.LostGPUHours,
			r.MIGReconfigurations, r.Migrations, r.Completed, r.Jobs)
	}
	fmt.Fprintln(w)
	writeGPUHours(w, results)
	writeOwedLate(w, results)
	fmt.Fprintln(w, "![utilization](utilization.svg)")
	for _, r := range results {
		fmt.Fprintf(w, "\n![teams under %s](teams-%s.svg)\n", r.Scheduler, r.Scheduler)
	}
	return nil
}

// writeGPUHours accounts for the cluster's GPU-hours under each
// scheduler: needed by running work, held but not needed, and
// unallocated by cause (idle_gpu_hours, the causes that cost most
// first).
func writeGPUHours(w io.Writer, results []*Result) {
	causes := keysByTotal(results, func(r *Result) map[string]float64 { return r.IdleGPUHours })
	fmt.Fprintln(w, "Where the GPU-hours went: needed by running work, held but not needed, and unallocated by cause (`idle_gpu_hours`: why the GPUs no one held stood idle, as the last scheduling cycle saw it).")
	fmt.Fprintln(w)
	tableHead(w, "GPU-hours", results)
	row := func(name string, value func(*Result) float64) {
		fmt.Fprintf(w, "| %s |", name)
		for _, r := range results {
			fmt.Fprintf(w, " %.1f |", value(r))
		}
		fmt.Fprintln(w)
	}
	row("needed by running work (useful)", func(r *Result) float64 { return r.UsefulUtilization * float64(r.GPUs) * r.Horizon.Hours() })
	row("held but not needed", func(r *Result) float64 {
		return (r.AllocatedUtilization - r.UsefulUtilization) * float64(r.GPUs) * r.Horizon.Hours()
	})
	for _, cause := range causes {
		row("unallocated: "+cause, func(r *Result) float64 { return r.IdleGPUHours[cause] })
	}
	fmt.Fprintln(w)
}

// writeOwedLate lists, when any scheduler has some, the jobs that waited
// past the guarantee's limit by the owed clock, by class and wait reason
// (owed_late_jobs): where the owed clock's time comes from.
func writeOwedLate(w io.Writer, results []*Result) {
	keys := keysByTotal(results, func(r *Result) map[string]int { return r.OwedLateJobs })
	if len(keys) == 0 {
		return
	}
	fmt.Fprintln(w, "Jobs owed their team's guarantee that waited past 60 s plus the grace (`owed_late_jobs`: once per episode, by class and the reason they waited at that moment; `--trace` names each).")
	fmt.Fprintln(w)
	tableHead(w, "class: wait reason", results)
	for _, key := range keys {
		fmt.Fprintf(w, "| %s |", key)
		for _, r := range results {
			fmt.Fprintf(w, " %d |", r.OwedLateJobs[key])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "| of them, behind their team's own claims (`owed_late_behind_own_team`) |")
	for _, r := range results {
		fmt.Fprintf(w, " %d |", r.OwedLateBehindTeam)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
}

// keysByTotal returns the keys of every result's of map, largest sum
// over the results first, ties by name.
func keysByTotal[V int | float64](results []*Result, of func(*Result) map[string]V) []string {
	total := map[string]V{}
	for _, r := range results {
		for key, v := range of(r) {
			total[key] += v
		}
	}
	keys := make([]string, 0, len(total))
	for key := range total {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(a, b int) bool {
		if total[keys[a]] != total[keys[b]] {
			return total[keys[a]] > total[keys[b]]
		}
		return keys[a] < keys[b]
	})
	return keys
}

// tableHead writes a Markdown table's header: first, then one column
// per scheduler.
func tableHead(w io.Writer, first string, results []*Result) {
	fmt.Fprintf(w, "| %s |", first)
	for _, r := range results {
		fmt.Fprintf(w, " %s |", r.Scheduler)
	}
	fmt.Fprint(w, "\n|---|")
	for range results {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
}

// dur prints seconds readably.
func dur(s float64) string {
	switch {
	case s >= 3600:
		return fmt.Sprintf("%.1f h", s/3600)
	case s >= 60:
		return fmt.Sprintf("%.1f min", s/60)
	}
	return fmt.Sprintf("%.0f s", s)
}

func utilizationChart(results []*Result) svgchart.Chart {
	c := svgchart.Chart{Title: "GPU utilization over time", XLabel: "simulated time (h)", YLabel: "share of all GPUs", YMin: 0, YMax: 1}
	for i, r := range results {
		color := svgchart.Palette[i%len(svgchart.Palette)]
		useful := svgchart.Series{Name: r.Scheduler + " useful", Color: color}
		alloc := svgchart.Series{Name: r.Scheduler + " allocated", Dashed: true, Color: color}
		for _, s := range smooth(r.Timeline, 12) {
			x := s.T.Hours()
			useful.Points = append(useful.Points, svgchart.Point{X: x, Y: s.Useful / float64(r.GPUs)})
			alloc.Points = append(alloc.Points, svgchart.Point{X: x, Y: s.Alloc / float64(r.GPUs)})
			c.XMax = max(c.XMax, x)
		}
		c.Series = append(c.Series, useful, alloc)
	}
	return c
}

func teamsChart(r *Result) svgchart.Chart {
	c := svgchart.Chart{Title: "GPUs held per team — " + r.Scheduler + " (dashed: entitlement)", XLabel: "simulated time (h)", YLabel: "GPUs", YMin: 0, YMax: float64(r.GPUs)}
	teams := make([]string, 0, len(r.Entitlement))
	for t := range r.Entitlement {
		teams = append(teams, t)
	}
	sort.Strings(teams)
	end := 0.0
	if n := len(r.Timeline); n > 0 {
		end = r.Timeline[n-1].T.Hours()
	}
	c.XMax = end
	for i, t := range teams {
		s := svgchart.Series{Name: t, Color: svgchart.Palette[i%len(svgchart.Palette)]}
		for _, p := range smooth(r.Timeline, 12) {
			s.Points = append(s.Points, svgchart.Point{X: p.T.Hours(), Y: p.Teams[t]})
		}
		c.Series = append(c.Series, s)
	}
	for i, t := range teams {
		c.Series = append(c.Series, svgchart.Series{
			Name: strings.TrimSpace(t + " entitled"), Dashed: true, Color: svgchart.Palette[i%len(svgchart.Palette)],
			Points: []svgchart.Point{{X: 0, Y: r.Entitlement[t]}, {X: end, Y: r.Entitlement[t]}},
		})
	}
	return c
}

// smooth averages samples in windows of k, so a week fits a chart.
func smooth(ss []Sample, k int) []Sample {
	var out []Sample
	for i := 0; i < len(ss); i += k {
		end := min(i+k, len(ss))
		s := Sample{T: ss[i].T, Teams: map[string]float64{}}
		for _, x := range ss[i:end] {
			s.Useful += x.Useful / float64(end-i)
			s.Alloc += x.Alloc / float64(end-i)
			for t, v := range x.Teams {
				s.Teams[t] += v / float64(end-i)
			}
		}
		out = append(out, s)
	}
	return out
}
