package policies_test

import (
	"slices"
	"testing"

	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
)

func TestNamesListsEveryPolicyInOrder(t *testing.T) {
	want := []string{"best-fit", "dot-product", "fgd", "gpu-clustering", "gpu-packing", "k8s-default", "partita", "random"}
	if got := policies.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
}

func TestNewRefusesAnUnknownNameListingTheKnownOnes(t *testing.T) {
	_, err := policies.New("tetris", fullConfig())
	wantErr(t, err, `unknown policy "tetris"`)
	wantErr(t, err, policies.Names()...)
}

func TestNewBuildsEveryPolicyNamedAfterItself(t *testing.T) {
	for _, name := range policies.Names() {
		t.Run(name, func(t *testing.T) {
			p, err := policies.New(name, fullConfig())
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != name {
				t.Fatalf("Name = %q, want %q", p.Name, name)
			}
		})
	}
}

func TestEveryStageOfEveryPolicyHasAName(t *testing.T) {
	// Names label the reasons a node is filtered out and the scores it got.
	for _, name := range policies.Names() {
		p := mustPolicy(t, name, fullConfig())
		if p.Scorer != nil && p.Scorer.Name() == "" {
			t.Fatalf("%s: scorer %T has no name", name, p.Scorer)
		}
		for _, f := range p.Filters {
			if f.Name() == "" {
				t.Fatalf("%s: filter %T has no name", name, f)
			}
		}
	}
}

func TestNewRefusesAPolicyWithoutWhatItNeeds(t *testing.T) {
	typ := typical(shape().share(500))
	tests := []struct {
		name   string
		policy string
		config policies.Config
		want   string
	}{
		{"refuses fgd without the typical workload", "fgd", alibabaNorms(), "Config.Typical"},
		{"refuses partita without the typical workload", "partita", policies.Config{Shapes: fullConfig().Shapes}, "Config.Typical and Config.Shapes"},
		{"refuses partita without the shapes", "partita", policies.Config{Typical: typ}, "Config.Typical and Config.Shapes"},
		{"refuses dot-product without norms", "dot-product", policies.Config{Typical: typ}, "NormCPU and NormGPU"},
		{"refuses dot-product without a GPU norm", "dot-product", policiesConfig(128000, 0), "NormCPU and NormGPU"},
		{"refuses best-fit without norms", "best-fit", policies.Config{Typical: typ}, "NormCPU and NormGPU"},
		{"refuses best-fit without a CPU norm", "best-fit", policiesConfig(0, 8000), "NormCPU and NormGPU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := policies.New(tt.policy, tt.config)
			wantErr(t, err, tt.policy, tt.want)
		})
	}
}

func TestNewBuildsPoliciesThatNeedNothingFromAnEmptyConfig(t *testing.T) {
	for _, name := range []string{"random", "gpu-clustering", "gpu-packing", "k8s-default"} {
		if _, err := policies.New(name, policies.Config{}); err != nil {
			t.Fatalf("New(%s, empty config): %v", name, err)
		}
	}
}

func TestConfigForTakesTheLargestNodeOfEachKind(t *testing.T) {
	st := world(t,
		node("wide").cpu(96000).gpus(2, "V100-16GB"),
		node("deep").cpu(64000).gpus(4, "V100-32GB"),
		node("cpu").cpu(32000),
	)
	typ := typical(shape().share(500))
	c := policies.ConfigFor(st, typ)
	if c.NormCPU != 96000 || c.NormGPU != 4000 || c.Typical != typ {
		t.Fatalf("ConfigFor = norms %d, %d, typical %p; want 96000, 4000, %p", c.NormCPU, c.NormGPU, c.Typical, typ)
	}
}

// fullConfig is enough for every policy.
func fullConfig() policies.Config {
	shapes := []frag.Shape{shape().cpu(1000).share(500).s, shape().cpu(4000).gpus(2).s, shape().cpu(500).s}
	c := alibabaNorms()
	c.Typical = frag.Typicals(shapes, frag.DefaultThreshold, canonical)
	c.Shapes, c.Canonical = shapes, canonical
	return c
}
