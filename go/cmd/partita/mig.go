package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"partita.dev/partita/internal/gpu"
)

func init() {
	register("mig", "MIG geometry: list layouts, check where a profile fits", runMig)
}

// migSubcommands is the table of `partita mig` subcommands, in the order
// the usage lists them.
var migSubcommands = []struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}{
	{"models", "list the GPU models Partita knows", runMigModels},
	{"profiles", "list the MIG profiles of a model (--gpu)", runMigProfiles},
	{"layouts", "list every way to fill a GPU with MIG instances (--gpu)", runMigLayouts},
	{"fit", "show where a profile (--want) fits beside instances already on a GPU (--used)", runMigFit},
}

func runMig(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		migUsage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "--help":
		migUsage(stdout)
		return 0
	}
	for _, c := range migSubcommands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "partita mig: unknown subcommand %q\n\n", args[0])
	migUsage(stderr)
	return 2
}

func migUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: partita mig <subcommand> [flags]")
	fmt.Fprintln(w)
	for _, c := range migSubcommands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Layouts are written profile@start,... e.g. 3g.40gb@0,2g.20gb@4;")
	fmt.Fprintln(w, "start is the first of the GPU's 8 memory slices the instance takes.")
	fmt.Fprintln(w, "Run `partita mig <subcommand> -h` for its flags.")
}

// migFlags is a subcommand's flag set with the flags they share.
type migFlags struct {
	fs      *flag.FlagSet
	gpuName *string
	asJSON  *bool
}

func newMigFlags(sub string, stderr io.Writer, withGPU bool) migFlags {
	fs := flag.NewFlagSet("partita mig "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := migFlags{fs: fs, asJSON: fs.Bool("json", false, "print JSON instead of a table")}
	if withGPU {
		f.gpuName = fs.String("gpu", "", "GPU `model` or alias, e.g. H100-80GB (partita mig models lists them)")
	}
	return f
}

// parse reads args; when it returns ok false the subcommand exits with code
// (0 after -h, 2 on a usage error, which flag or parse has already reported).
func (f migFlags) parse(args []string) (code int, ok bool) {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(f.fs.Output(), "%s: unexpected argument %q\n", f.fs.Name(), f.fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// model resolves --gpu to a MIG-capable model: 2 when it is missing, 1 when
// it names no such model.
func (f migFlags) model() (*gpu.Model, int) {
	w := f.fs.Output()
	if *f.gpuName == "" {
		fmt.Fprintf(w, "%s: --gpu is required, e.g. --gpu H100-80GB\n", f.fs.Name())
		return nil, 2
	}
	m := gpu.Lookup(*f.gpuName)
	var migNames []string
	for _, c := range gpu.Catalog() {
		if c.MIG {
			migNames = append(migNames, c.Name)
		}
	}
	switch {
	case !m.Known:
		fmt.Fprintf(w, "%s: --gpu: unknown GPU model %q (MIG models: %s)\n", f.fs.Name(), m.Name, strings.Join(migNames, ", "))
		return nil, 1
	case !m.MIG:
		fmt.Fprintf(w, "%s: --gpu: model %q does not support MIG (MIG models: %s)\n", f.fs.Name(), m.Name, strings.Join(migNames, ", "))
		return nil, 1
	}
	return m, 0
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "partita mig: %v\n", err)
		return 1
	}
	return 0
}

func runMigModels(args []string, stdout, stderr io.Writer) int {
	f := newMigFlags("models", stderr, false)
	if code, ok := f.parse(args); !ok {
		return code
	}
	models := gpu.Catalog()
	if *f.asJSON {
		return writeJSON(stdout, stderr, models)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tMIG\tMEMORY MiB\tSMs\tALIASES")
	for _, m := range models {
		mig := "no"
		if m.MIG {
			mig = fmt.Sprintf("%d profiles", len(m.Profiles))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Name, mig, orUnknown(m.MemoryMiB), orUnknown(int64(m.SMs)),
			strings.Join(m.Aliases, ", "))
	}
	return flushTable(tw, stderr)
}

func orUnknown(n int64) string {
	if n == 0 {
		return "unknown"
	}
	return fmt.Sprint(n)
}

func flushTable(tw *tabwriter.Writer, stderr io.Writer) int {
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "partita mig: %v\n", err)
		return 1
	}
	return 0
}

func runMigProfiles(args []string, stdout, stderr io.Writer) int {
	f := newMigFlags("profiles", stderr, true)
	if code, ok := f.parse(args); !ok {
		return code
	}
	m, code := f.model()
	if m == nil {
		return code
	}
	if *f.asJSON {
		return writeJSON(stdout, stderr, m.Profiles)
	}
	fmt.Fprintf(stdout, "%s MIG profiles (%d compute slices, %d memory slices):\n\n", m.Name, gpu.ComputeSlices, gpu.MemorySlices)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tCOMPUTE\tMEMORY\tMiB\tSMs\tSTARTS\tMAX/GPU\tMEDIA ENGINES")
	for _, p := range m.Profiles {
		starts := make([]string, len(p.Starts))
		for i, s := range p.Starts {
			starts[i] = fmt.Sprint(s)
		}
		media := "no"
		if p.MediaExt {
			media = "yes (one per GPU)"
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d/%d\t%d\t%d\t%s\t%d\t%s\n", p.Name, p.Compute, gpu.ComputeSlices,
			p.Memory, gpu.MemorySlices, p.MemoryMiB, p.SMs, strings.Join(starts, ","), p.MaxPerGPU, media)
	}
	return flushTable(tw, stderr)
}

func runMigLayouts(args []string, stdout, stderr io.Writer) int {
	f := newMigFlags("layouts", stderr, true)
	if code, ok := f.parse(args); !ok {
		return code
	}
	m, code := f.model()
	if m == nil {
		return code
	}
	layouts := m.MaximalLayouts()
	if *f.asJSON {
		return writeJSON(stdout, stderr, layouts)
	}
	fmt.Fprintf(stdout, "%s: %d maximal MIG layouts (no +me profiles); each box is one of the %d memory slices\n\n",
		m.Name, len(layouts), gpu.MemorySlices)
	width := cellWidth(m, layouts...)
	pictureWidth := width * gpu.MemorySlices
	fmt.Fprintf(stdout, "%4s  %-*s  %-7s  %s\n", "#", pictureWidth, "memory slices 0-7", "compute", "layout")
	for i, l := range layouts {
		fmt.Fprintf(stdout, "%4d  %s  %-7s  %s\n", i+1, drawLayout(m, l, width), computeUsed(m, l), l)
	}
	return 0
}

// cellWidth is the width of one memory slice in drawLayout: enough for
// every instance's name and brackets within the slices it spans.
func cellWidth(m *gpu.Model, layouts ...gpu.Layout) int {
	width := len("[free]")
	for _, l := range layouts {
		for _, pl := range l {
			if p, err := m.Profile(pl.Profile); err == nil {
				width = max(width, (len(pl.Profile)+2+p.Memory-1)/p.Memory)
			}
		}
	}
	return width
}

// drawLayout pictures a valid layout as boxes over the memory slices:
// "[3g.40gb          ][2g.20gb    ][1g.10gb][ free ]".
func drawLayout(m *gpu.Model, l gpu.Layout, width int) string {
	var owner [gpu.MemorySlices]*gpu.Placement
	for i := range l {
		if l[i].Start >= 0 && l[i].Start < gpu.MemorySlices {
			owner[l[i].Start] = &l[i]
		}
	}
	var b strings.Builder
	for s := 0; s < gpu.MemorySlices; {
		span, label := 1, "free"
		if pl := owner[s]; pl != nil {
			if p, err := m.Profile(pl.Profile); err == nil {
				span, label = p.Memory, pl.Profile
			}
		}
		inner := span*width - 2
		if pl := owner[s]; pl == nil {
			fmt.Fprintf(&b, "[%-*s]", inner, centre(label, inner))
		} else {
			fmt.Fprintf(&b, "[%-*s]", inner, label)
		}
		s += span
	}
	return b.String()
}

func centre(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return strings.Repeat(" ", (width-len(s))/2) + s
}

func computeUsed(m *gpu.Model, l gpu.Layout) string {
	used := 0
	for _, pl := range l {
		if p, err := m.Profile(pl.Profile); err == nil {
			used += p.Compute
		}
	}
	return fmt.Sprintf("%d/%d", used, gpu.ComputeSlices)
}

// migFitResult is the answer of `partita mig fit`.
type migFitResult struct {
	GPU        string          `json:"gpu"`
	Used       gpu.Layout      `json:"used"`
	Want       string          `json:"want"`
	Fits       bool            `json:"fits"`
	Placements []gpu.Placement `json:"placements"`
	Reasons    []string        `json:"reasons,omitempty"` // why each allowed start fails, when none fits
}

func runMigFit(args []string, stdout, stderr io.Writer) int {
	f := newMigFlags("fit", stderr, true)
	usedText := f.fs.String("used", "", "`layout` of the instances already on the GPU, e.g. 3g.40gb@0,1g.10gb@4")
	want := f.fs.String("want", "", "the `profile` to place, e.g. 2g.20gb")
	if code, ok := f.parse(args); !ok {
		return code
	}
	m, code := f.model()
	if m == nil {
		return code
	}
	if *want == "" {
		fmt.Fprintf(stderr, "%s: --want is required, e.g. --want %s\n", f.fs.Name(), m.Profiles[0].Name)
		return 2
	}
	res, err := migFit(m, *usedText, *want)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", f.fs.Name(), err)
		return 1
	}
	if *f.asJSON {
		return writeJSON(stdout, stderr, res)
	}
	printFit(stdout, m, res)
	return 0
}

// migFit answers where want fits; its errors name the flag and the value.
func migFit(m *gpu.Model, usedText, want string) (migFitResult, error) {
	used, err := gpu.ParseLayout(usedText)
	if err != nil {
		return migFitResult{}, fmt.Errorf("--used: %w", err)
	}
	if err := m.Validate(used); err != nil {
		return migFitResult{}, fmt.Errorf("--used %q: %w", usedText, err)
	}
	p, err := m.Profile(want)
	if err != nil {
		return migFitResult{}, fmt.Errorf("--want: %w", err)
	}
	free, err := m.FreePlacements(used, p.Name)
	if err != nil {
		return migFitResult{}, err
	}
	res := migFitResult{GPU: m.Name, Used: used, Want: p.Name, Fits: len(free) > 0, Placements: free}
	if res.Placements == nil {
		res.Placements = []gpu.Placement{}
	}
	if !res.Fits {
		// Validate says why: trying each allowed start gives the first rule
		// that start breaks.
		for _, start := range p.Starts {
			trial := append(append(gpu.Layout{}, used...), gpu.Placement{Profile: p.Name, Start: start})
			if err := m.Validate(trial); err != nil {
				res.Reasons = append(res.Reasons, err.Error())
			}
		}
	}
	return res, nil
}

func printFit(w io.Writer, m *gpu.Model, res migFitResult) {
	beside := "an empty " + m.Name
	if len(res.Used) > 0 {
		beside = fmt.Sprintf("%s beside %s", m.Name, res.Used)
	}
	if !res.Fits {
		fmt.Fprintf(w, "%s does not fit on %s:\n", res.Want, beside)
		for _, r := range res.Reasons {
			fmt.Fprintf(w, "  %s\n", r)
		}
		return
	}
	places := "places"
	if len(res.Placements) == 1 {
		places = "place"
	}
	fmt.Fprintf(w, "%s fits on %s at %d %s:\n", res.Want, beside, len(res.Placements), places)
	trials := make([]gpu.Layout, len(res.Placements))
	for i, pl := range res.Placements {
		trials[i] = append(append(gpu.Layout{}, res.Used...), pl)
	}
	width := cellWidth(m, trials...)
	for i, pl := range res.Placements {
		fmt.Fprintf(w, "  %-12s %s\n", pl, drawLayout(m, trials[i], width))
	}
}
