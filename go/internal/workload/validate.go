package workload

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Capacity summarises what a cluster could ever offer one task. Validation
// uses it to refuse, up front, work that can never run (9 GPUs on a cluster
// of 8-GPU nodes) instead of letting it wait forever.
type Capacity struct {
	MaxCPUMilli  int64
	MaxMemoryMiB int64
	// MaxGPUs is, per GPU model, the most GPUs of that model on one node.
	MaxGPUs map[string]int
	// MIGProfiles is, per MIG profile name, the models that offer it.
	MIGProfiles map[string][]string
	// GPUMemoryMiB is, per model, its memory (0 when unknown).
	GPUMemoryMiB map[string]int64
}

// largestNode returns the most GPUs on one node among the allowed models.
func (c *Capacity) largestNode(models []string) (int, string) {
	best, bestModel := 0, ""
	for _, m := range sortedKeys(c.MaxGPUs) {
		if len(models) > 0 && !contains(models, m) {
			continue
		}
		if n := c.MaxGPUs[m]; n > best {
			best, bestModel = n, m
		}
	}
	return best, bestModel
}

// Validate checks a job. With a nil Capacity only the job's own shape is
// checked. Errors name the job, the task and the field.
func (j *Job) Validate(c *Capacity) error {
	if j.ID == "" {
		return errors.New("job: id is empty")
	}
	if len(j.Tasks) == 0 {
		return fmt.Errorf("job %s: has no tasks", j.ID)
	}
	if j.Class < BestEffort || j.Class > Production {
		return fmt.Errorf("job %s: %s is not a priority class", j.ID, j.Class)
	}
	if j.GangSize < 0 || j.GangSize > len(j.Tasks) {
		return fmt.Errorf("job %s: gang size %d must be between 0 and the number of tasks (%d)", j.ID, j.GangSize, len(j.Tasks))
	}
	seen := make(map[string]bool, len(j.Tasks))
	for i := range j.Tasks {
		t := &j.Tasks[i]
		if t.Name == "" {
			return fmt.Errorf("job %s: task %d: name is empty", j.ID, i)
		}
		if seen[t.Name] {
			return fmt.Errorf("job %s: task name %q is used twice", j.ID, t.Name)
		}
		seen[t.Name] = true
		if err := t.Validate(c); err != nil {
			return fmt.Errorf("job %s: %w", j.ID, err)
		}
	}
	return nil
}

// Validate checks one task, against the cluster when c is not nil.
func (t *Task) Validate(c *Capacity) error {
	if t.CPUMilli < 0 {
		return fmt.Errorf("task %s: cpu %dm is negative", t.Name, t.CPUMilli)
	}
	if t.MemoryMiB < 0 {
		return fmt.Errorf("task %s: memory %d MiB is negative", t.Name, t.MemoryMiB)
	}
	if err := t.GPU.validateShape(); err != nil {
		return fmt.Errorf("task %s: %w", t.Name, err)
	}
	if c == nil {
		return nil
	}
	if t.CPUMilli > c.MaxCPUMilli {
		return fmt.Errorf("task %s: asks for %dm CPU but the largest node has %dm", t.Name, t.CPUMilli, c.MaxCPUMilli)
	}
	if t.MemoryMiB > c.MaxMemoryMiB {
		return fmt.Errorf("task %s: asks for %d MiB memory but the largest node has %d MiB", t.Name, t.MemoryMiB, c.MaxMemoryMiB)
	}
	if err := t.GPU.validateAgainst(c); err != nil {
		return fmt.Errorf("task %s: %w", t.Name, err)
	}
	return nil
}

func (d Demand) validateShape() error {
	switch d.Kind {
	case NoGPU:
		if len(d.Models) > 0 {
			return errors.New("gpu models are given but no GPU is asked for")
		}
	case WholeGPUs:
		if d.Count < 1 {
			return fmt.Errorf("gpus: %d must be at least 1", d.Count)
		}
	case Fraction:
		if d.Milli < 1 || d.Milli > 999 {
			return fmt.Errorf("gpu fraction: %d milli must be between 1 and 999 (ask for whole GPUs for 1000)", d.Milli)
		}
	case MIGProfile:
		if d.Profile == "" {
			return errors.New("mig profile: empty")
		}
	case MemoryProfile:
		if d.PeakMemoryMiB <= 0 {
			return fmt.Errorf("gpu memory: peak %d MiB must be positive", d.PeakMemoryMiB)
		}
		if !(d.Compute >= 0 && d.Compute <= 1) { // also refuses NaN
			return fmt.Errorf("gpu compute: share %g must be between 0 and 1", d.Compute)
		}
	default:
		return fmt.Errorf("gpu demand: unknown kind %d", int(d.Kind))
	}
	return nil
}

func (d Demand) validateAgainst(c *Capacity) error {
	for _, m := range d.Models {
		if _, ok := c.MaxGPUs[m]; !ok {
			return fmt.Errorf("gpu model %q: no node has it (cluster has: %s)", m, strings.Join(sortedKeys(c.MaxGPUs), ", "))
		}
	}
	switch d.Kind {
	case WholeGPUs:
		most, model := c.largestNode(d.Models)
		if d.Count > most {
			if most == 0 {
				return fmt.Errorf("asks for %d GPUs but no node has a GPU%s", d.Count, onModels(d.Models))
			}
			return fmt.Errorf("asks for %d GPUs but the largest node%s has %d (%s)", d.Count, onModels(d.Models), most, model)
		}
	case Fraction:
		if most, _ := c.largestNode(d.Models); most == 0 {
			return fmt.Errorf("asks for a GPU share but no node has a GPU%s", onModels(d.Models))
		}
	case MIGProfile:
		models, ok := c.MIGProfiles[d.Profile]
		if !ok {
			return fmt.Errorf("mig profile %q: no GPU in the cluster offers it (offered: %s)", d.Profile, strings.Join(sortedKeys(c.MIGProfiles), ", "))
		}
		if len(d.Models) > 0 && !overlaps(models, d.Models) {
			return fmt.Errorf("mig profile %q: offered only on %s, not on %s", d.Profile, strings.Join(models, ", "), strings.Join(d.Models, "|"))
		}
	case MemoryProfile:
		var best int64
		for m, mem := range c.GPUMemoryMiB {
			if d.AllowsModel(m) && mem > best {
				best = mem
			}
		}
		if d.PeakMemoryMiB > best {
			return fmt.Errorf("gpu memory: peak %d MiB is more than the largest GPU%s has (%d MiB)", d.PeakMemoryMiB, onModels(d.Models), best)
		}
	}
	return nil
}

func onModels(models []string) string {
	if len(models) == 0 {
		return ""
	}
	return " of " + strings.Join(models, "|")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		if contains(b, x) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
