package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every failure is an
// *Error naming the file, and that whatever it accepts re-validates and
// builds its nodes (and, when small, its jobs).
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"../../../scenarios/*.yaml", "testdata/*.yaml"} {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, path := range paths {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(base))
	f.Add([]byte(strings.Replace(base, "rate_per_hour: 30}", "rate: 30}", 1)))
	f.Add([]byte(strings.Replace(base, "    memory: 2Ti", "    memory: 1.5Ki", 1)))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("- [[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(strings.NewReader(string(data)), "fuzz.yaml")
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "fuzz.yaml" || e.Err == nil {
				t.Fatalf("error %v (%T) is not an *Error naming the file", err, err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted, then Validate says: %v", err)
		}
		if s.GPUs() > 4096 {
			return // valid, but too big to build in a fuzz iteration
		}
		if _, err := s.Nodes(); err != nil {
			t.Fatalf("accepted, then Nodes says: %v", err)
		}
		expected := 0.0
		for _, w := range s.Workloads {
			if w.Arrival.Process == Trace {
				return // reads files
			}
			tasks := float64(max(w.Replicas, 1))
			for _, size := range w.Gang.Sizes {
				tasks = max(tasks, float64(size))
			}
			expected += (w.Arrival.RatePerHour*s.Duration.Hours() + float64(len(w.Arrival.At))) * tasks
		}
		if expected > 10_000 {
			return
		}
		arrivals, err := s.Jobs(s.Seed)
		if err != nil {
			t.Fatalf("accepted, then Jobs says: %v", err)
		}
		for _, a := range arrivals {
			if err := a.Job.Validate(nil); err != nil {
				t.Fatalf("job %s does not validate: %v", a.Job.ID, err)
			}
		}
	})
}
