package scenario

import (
	"fmt"
	"strings"
	"testing"

	"partita.dev/partita/internal/cluster"
)

func TestNodesSpreadOverLeavesRoundRobin(t *testing.T) {
	text := edit(t, base, "    count: 2", "    count: 3")
	text = edit(t, text, "    leaves: [leaf-a, leaf-b]", `    leaves: [leaf-a, leaf-b]
    spine: spine-0
    block: block-0
    tier: spot
    nvlink: pairs
  - group: a100
    gpu: A100-80GB
    gpus: 4
    cpu: 1500m
    memory: 512Gi`)
	text = edit(t, text, "    burst_gpus: 16", "    burst_gpus: 24")
	nodes, err := parse(t, text).Nodes()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		topo := cluster.TopologyFromLabels(n.Labels)
		got = append(got, fmt.Sprintf("%s %s/%s/%s %s %s×%d mig=%v link0=%d link1=%d cpu=%d mem=%d",
			n.Name, topo.Block, topo.Spine, topo.Leaf, n.Tier, n.GPUs[0].Model.Name, len(n.GPUs), n.GPUs[0].MIG,
			n.GPUs[0].Link, n.GPUs[2].Link, n.CPUMilli, n.MemoryMiB))
	}
	want := []string{
		"h100-0 block-0/spine-0/leaf-a spot H100-80GB×8 mig=true link0=0 link1=1 cpu=192000 mem=2097152",
		"h100-1 block-0/spine-0/leaf-b spot H100-80GB×8 mig=true link0=0 link1=1 cpu=192000 mem=2097152",
		"h100-2 block-0/spine-0/leaf-a spot H100-80GB×8 mig=true link0=0 link1=1 cpu=192000 mem=2097152",
		"a100-0 // reserved A100-80GB×4 mig=false link0=0 link1=0 cpu=1500 mem=524288",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("nodes\n got  %q\n want %q", got, want)
	}
}

func TestNodesReportsWhatBuildNodeRefuses(t *testing.T) {
	s := parse(t, base)
	s.NodeGroups[0].NVLink = "mesh" // Validate would refuse it; Nodes must not panic
	_, err := s.Nodes()
	wantError(t, err, `t.yaml:4: nodes[0]: node h100-0: nvlink "mesh": want none, all or pairs`)
}
