package fill

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestExperimentGroupsResultsByPolicyInSeedOrder(t *testing.T) {
	in := smallInput(t)
	e := &Experiment{Input: in, Policies: []string{"best-fit", "gpu-packing"}, Seeds: []int64{44, 42, 43}, Tune: 1.3, Workers: 3}
	var calls, last int
	e.Progress = func(done, total int) {
		calls++
		last = done
		if total != 6 {
			t.Errorf("Progress total %d; want 6", total)
		}
	}
	out, err := e.Run()
	if err != nil {
		t.Fatal(err)
	}
	if calls != 6 || last != 6 {
		t.Errorf("Progress called %d times, last done %d; want 6 and 6", calls, last)
	}
	if len(out) != 2 {
		t.Fatalf("%d policies in the results; want 2", len(out))
	}
	for _, policy := range e.Policies {
		var seeds []int64
		for _, r := range out[policy] {
			seeds = append(seeds, r.Seed)
			if r.Policy != policy {
				t.Errorf("%s: a result of %s", policy, r.Policy)
			}
			want, err := Run(in, Options{Policy: policy, Seed: r.Seed, Tune: 1.3})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r, want) {
				t.Errorf("%s seed %d differs from a lone Run", policy, r.Seed)
			}
		}
		if !slices.Equal(seeds, []int64{42, 43, 44}) {
			t.Errorf("%s: seeds %v; want 42 43 44", policy, seeds)
		}
	}
}

func TestExperimentWorkersDoNotChangeResults(t *testing.T) {
	run := func(workers int) map[string][]*Result {
		e := &Experiment{Input: smallInput(t), Policies: []string{"fgd", "random"}, Seeds: []int64{42, 43, 44, 45}, Tune: 1.3, Workers: workers}
		out, err := e.Run()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if one, two := run(1), run(2); !reflect.DeepEqual(one, two) {
		t.Fatal("1 and 2 workers give different results")
	}
}

func TestExperimentNamesAnUnknownPolicy(t *testing.T) {
	e := &Experiment{Input: smallInput(t), Policies: []string{"fgd", "no-such-policy"}, Seeds: []int64{42}, Tune: 1.3, Workers: 2}
	out, err := e.Run()
	if err == nil || !strings.Contains(err.Error(), "no-such-policy") {
		t.Fatalf("results %v, error %v; want an error naming no-such-policy", out, err)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"of nothing is 0", nil, 0},
		{"of one value is the value", []float64{4.2}, 4.2},
		{"of an odd count is the middle value", []float64{9, 1, 5}, 5},
		{"of an even count is the mean of the middle two", []float64{7, 1, 3, 2}, 2.5},
		{"ignores the order", []float64{5.1, 4.8, 4.9, 5.0, 4.7, 5.3, 4.6, 5.2, 4.5, 5.4}, 4.95},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.xs)
			if got := Median(in); got != tt.want {
				t.Errorf("Median(%v) = %v; want %v", tt.xs, got, tt.want)
			}
			if !slices.Equal(in, tt.xs) {
				t.Errorf("Median reordered its argument: %v", in)
			}
		})
	}
}
