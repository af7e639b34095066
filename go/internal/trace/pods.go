package trace

import (
	"io"
	"os"
	"slices"
	"strings"
)

// Column ids of a pod list; indexes into podColumns.
const (
	podName = iota
	podCPU
	podMemory
	podNumGPU
	podGPUMilli
	podGPUSpec
	podQoS
	podPhase
	podCreation
	podDeletion
	podScheduled
)

// The first five columns are all the multigpu* lists have.
var podColumns = []column{
	podName:      {"name", true},
	podCPU:       {"cpu_milli", true},
	podMemory:    {"memory_mib", true},
	podNumGPU:    {"num_gpu", true},
	podGPUMilli:  {"gpu_milli", true},
	podGPUSpec:   {"gpu_spec", false},
	podQoS:       {"qos", false},
	podPhase:     {"pod_phase", false},
	podCreation:  {"creation_time", false},
	podDeletion:  {"deletion_time", false},
	podScheduled: {"scheduled_time", false},
}

// fullGPU is a whole GPU in the trace's milli units.
const fullGPU = 1000

// ReadPods reads a pod list, in file order; file names the input in
// errors. Besides well-formed non-negative numbers and unique non-empty
// names, every row must ask for GPUs in one of the trace's three shapes
// (see gpuRequest). On any error it returns nil and a *ParseError.
func ReadPods(r io.Reader, file string) ([]Pod, error) {
	t, err := newTable(r, file, podColumns)
	if err != nil {
		return nil, err
	}
	pods := make([]Pod, 0, t.rowsHint)
	seen := make(map[string]int, t.rowsHint) // name -> line, for the duplicate error
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return pods, nil
		}
		p, err := parsePod(t)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[p.Name]; dup {
			return nil, duplicateName(t, podName, first)
		}
		seen[p.Name] = p.Line
		pods = append(pods, p)
	}
}

// ReadPodsFile reads the pod list at path; errors name the path as given.
func ReadPodsFile(path string) ([]Pod, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadPods(f, path)
}

func parsePod(t *table) (Pod, error) {
	p := Pod{Line: t.line()}
	var err error
	if p.Name, err = name(t, podName); err != nil {
		return Pod{}, err
	}
	if p.CPUMilli, err = t.count(podCPU); err != nil {
		return Pod{}, err
	}
	if p.MemoryMiB, err = t.count(podMemory); err != nil {
		return Pod{}, err
	}
	if p.NumGPU, p.GPUMilli, err = gpuRequest(t); err != nil {
		return Pod{}, err
	}
	if p.GPUSpecRaw, err = t.text(podGPUSpec); err != nil {
		return Pod{}, err
	}
	if p.GPUSpec, err = parseSpec(p.GPUSpecRaw); err != nil {
		return Pod{}, t.cellError(podGPUSpec, err)
	}
	if p.QoS, err = t.text(podQoS); err != nil {
		return Pod{}, err
	}
	if p.Phase, err = t.text(podPhase); err != nil {
		return Pod{}, err
	}
	if p.CreationTime, p.HasCreation, err = t.optCount(podCreation); err != nil {
		return Pod{}, err
	}
	if p.DeletionTime, p.HasDeletion, err = t.optCount(podDeletion); err != nil {
		return Pod{}, err
	}
	if p.ScheduledTime, p.HasScheduled, err = t.optCount(podScheduled); err != nil {
		return Pod{}, err
	}
	return p, nil
}

// gpuRequest reads num_gpu and gpu_milli and checks that together they
// describe one of the three request shapes of the trace: no GPU (0, 0), a
// share of one GPU (1, 1..1000), or several whole GPUs (n, 1000). Errors
// about the pair name gpu_milli, the cell that contradicts num_gpu.
func gpuRequest(t *table) (int, int64, error) {
	num, err := t.smallCount(podNumGPU)
	if err != nil {
		return 0, 0, err
	}
	milli, err := t.count(podGPUMilli)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case milli > fullGPU:
		return 0, 0, t.cellError(podGPUMilli, errMilliRange)
	case num == 0 && milli != 0:
		return 0, 0, t.cellError(podGPUMilli, errMilliNoGPU)
	case num >= 1 && milli == 0:
		return 0, 0, t.cellError(podGPUMilli, errMilliZero)
	case num > 1 && milli != fullGPU:
		return 0, 0, t.cellError(podGPUMilli, errMultiShare)
	}
	return num, milli, nil
}

// dedupeByMap is the list length above which parseSpec de-duplicates with
// a map; real lists have at most seven entries, where a scan is cheaper,
// but a hostile file must not make the reader quadratic.
const dedupeByMap = 16

// parseSpec splits a gpu_spec cell into its models. "" and "nan" mean no
// constraint (nil). Repeated models are dropped, keeping first-seen order,
// since the trace has lists such as "V100M16|V100M32|V100M32".
func parseSpec(raw string) ([]string, error) {
	if raw == "" || isNaN(raw) {
		return nil, nil
	}
	parts := strings.Split(raw, "|")
	var seen map[string]bool
	if len(parts) > dedupeByMap {
		seen = make(map[string]bool, len(parts))
	}
	models := make([]string, 0, len(parts))
	for _, m := range parts {
		switch {
		case m == "":
			return nil, errEmptySpec
		case isNaN(m):
			return nil, errNaNInSpec
		}
		if err := checkText(m); err != nil {
			return nil, err
		}
		if seen != nil {
			if seen[m] {
				continue
			}
			seen[m] = true
		} else if slices.Contains(models, m) {
			continue
		}
		models = append(models, m)
	}
	return models, nil
}
