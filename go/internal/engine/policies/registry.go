// Package policies holds the placement policies: the published baselines
// Partita is measured against and Partita's own. Each is an engine.Policy
// built from small stages; New builds one by name.
package policies

import (
	"fmt"
	"sort"
	"strings"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
)

// Config is what policies may need to know beyond one node.
type Config struct {
	// Typical is the expected workload as the FGD paper sees it (no host
	// memory). Required by fgd and partita.
	Typical *frag.Distribution
	// Shapes are the requests of the expected workload with host memory,
	// for policies that build their own view of it (partita), and
	// Canonical maps their model names to the cluster's.
	Shapes    []frag.Shape
	Canonical func(string) string
	// NormCPU and NormGPU scale CPU (milli) and GPU (milli) in the
	// dot-product and best-fit scores: the largest node's, as in the FGD
	// protocol (128000 and 8000 on the Alibaba cluster).
	NormCPU int64
	NormGPU int
}

// ConfigFor fills the normalisers from a cluster.
func ConfigFor(st *cluster.State, typical *frag.Distribution) Config {
	c := Config{Typical: typical}
	for i := 0; i < st.Len(); i++ {
		n := st.Node(i)
		c.NormCPU = max(c.NormCPU, n.CPUMilli)
		c.NormGPU = max(c.NormGPU, 1000*len(n.GPUs))
	}
	return c
}

var builders = map[string]func(Config) (engine.Policy, error){
	"random":         func(Config) (engine.Policy, error) { return Random(), nil },
	"dot-product":    DotProduct,
	"gpu-clustering": func(Config) (engine.Policy, error) { return GPUClustering(), nil },
	"gpu-packing":    func(Config) (engine.Policy, error) { return GPUPacking(), nil },
	"best-fit":       BestFit,
	"fgd":            FGD,
	"k8s-default":    func(Config) (engine.Policy, error) { return K8sDefault(), nil },
	"partita":        Partita,
}

// Names lists the policies New knows.
func Names() []string {
	names := make([]string, 0, len(builders))
	for n := range builders {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the named policy.
func New(name string, c Config) (engine.Policy, error) {
	b, ok := builders[name]
	if !ok {
		return engine.Policy{}, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return b(c)
}

func needNorms(name string, c Config) error {
	if c.NormCPU <= 0 || c.NormGPU <= 0 {
		return fmt.Errorf("policy %s: needs NormCPU and NormGPU (policies.ConfigFor sets them)", name)
	}
	return nil
}

// gpuLeft returns the milli left on each GPU of n into buf.
func gpuLeft(n *cluster.Node, buf []int) []int {
	buf = buf[:0]
	for i := range n.GPUs {
		buf = append(buf, n.GPUs[i].Free())
	}
	return buf
}
