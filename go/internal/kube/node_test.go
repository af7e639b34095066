package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"partita.dev/partita/internal/gpu"
)

func TestViewNodeReadsDevicePluginAndGFD(t *testing.T) {
	tests := []struct {
		name      string
		node      *corev1.Node
		opt       NodeOptions
		wantModel string
		wantGPUs  int
		wantMIG   []string // per GPU: "" for whole, else the layout
		wantState string   // "", unschedulable, changing, failed
	}{
		{
			name: "whole GPUs", node: gpuNode("n", 8).obj(),
			wantModel: "H100-80GB", wantGPUs: 8, wantMIG: []string{"", "", "", "", "", "", "", ""},
		},
		{
			name: "mixed strategy: two GPUs split, MIG GPUs last", node: gpuNode("n", 4).mig(2, map[string]int{"3g.40gb": 2, "1g.10gb": 4}).obj(),
			wantModel: "H100-80GB", wantGPUs: 4,
			wantMIG: []string{"", "", "3g.40gb@0,3g.40gb@4", "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3"},
		},
		{
			name: "MIG on with no instances", node: gpuNode("n", 1).mig(1, nil).obj(),
			wantModel: "H100-80GB", wantGPUs: 1, wantMIG: []string{"mig:"},
		},
		{
			name: "instances that cannot fit the GPUs", node: gpuNode("n", 1).mig(1, map[string]int{"7g.80gb": 2}).obj(),
			wantModel: "H100-80GB", wantGPUs: 1, wantState: "failed",
		},
		{
			name: "single strategy is refused", node: gpuNode("n", 7).label(LabelGPUProduct, "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb").obj(),
			wantModel: "A100-80GB", wantGPUs: 7, wantState: "failed",
		},
		{
			name: "cordoned", node: gpuNode("n", 8).cordoned().obj(),
			wantModel: "H100-80GB", wantGPUs: 8, wantState: "unschedulable",
		},
		{
			name: "a taint Partita does not know", node: gpuNode("n", 8).taint("dedicated").obj(),
			wantModel: "H100-80GB", wantGPUs: 8, wantState: "unschedulable",
		},
		{
			name: "the NVIDIA taint and tolerated ones are fine", node: gpuNode("n", 8).taint("nvidia.com/gpu").taint("dedicated").obj(),
			opt: NodeOptions{ToleratedTaints: map[string]bool{"dedicated": true}}, wantModel: "H100-80GB", wantGPUs: 8,
			wantMIG: []string{"", "", "", "", "", "", "", ""},
		},
		{
			name: "a foreign MIG config being applied", node: gpuNode("n", 1).mig(1, nil).label(LabelMIGConfig, "all-1g.10gb").label(LabelMIGConfigState, "pending").obj(),
			wantModel: "H100-80GB", wantGPUs: 1, wantState: "changing",
		},
		{
			name: "a CPU node", node: func() *corev1.Node {
				n := gpuNode("cpu", 0).obj()
				delete(n.Labels, LabelGPUProduct)
				delete(n.Status.Capacity, ResourceGPU)
				return n
			}(), wantGPUs: 0,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := ViewNode(tc.node, tc.opt)
			if v.Spec.GPUs != tc.wantGPUs || (tc.wantModel != "" && v.Spec.GPUModel != tc.wantModel) {
				t.Fatalf("GPUs %d of %q, want %d of %q", v.Spec.GPUs, v.Spec.GPUModel, tc.wantGPUs, tc.wantModel)
			}
			state := ""
			switch {
			case v.Unschedulable:
				state = "unschedulable"
			case v.MIGChanging:
				state = "changing"
			case v.MIGFailed:
				state = "failed"
			}
			if state != tc.wantState {
				t.Fatalf("state %q (%s), want %q", state, v.Reason, tc.wantState)
			}
			if tc.wantMIG == nil {
				return
			}
			for i, g := range v.GPUs {
				got := ""
				if g.MIG {
					got = g.Layout.String()
					if got == "" {
						got = "mig:"
					}
				}
				if got != tc.wantMIG[i] {
					t.Errorf("GPU %d: %q, want %q", i, got, tc.wantMIG[i])
				}
			}
		})
	}
}

func TestViewNodeOnPartitasConfig(t *testing.T) {
	gpus := []GPUConfig{{MIG: false}, {MIG: true, Counts: map[string]int{"3g.40gb": 1, "2g.20gb": 2}}}
	name := ConfigName(gpus)
	opt := NodeOptions{Configs: map[string][]MIGDeviceSpec{name: DeviceSpecs(gpus)}}
	base := func() *nodeBuilder {
		return gpuNode("n", 2).mig(1, map[string]int{"3g.40gb": 1, "2g.20gb": 2}).label(LabelMIGConfig, name)
	}
	t.Run("applied and advertised", func(t *testing.T) {
		v := ViewNode(base().label(LabelMIGConfigState, MIGStateSuccess).obj(), opt)
		if v.MIGChanging || v.MIGFailed {
			t.Fatalf("node not ready: %s", v.Reason)
		}
		if v.GPUs[0].MIG || v.GPUs[1].Layout.String() != "2g.20gb@0,2g.20gb@2,3g.40gb@4" {
			t.Fatalf("GPUs %+v", v.GPUs)
		}
	})
	t.Run("the MIG manager is still working", func(t *testing.T) {
		v := ViewNode(base().label(LabelMIGConfigState, MIGStatePending).obj(), opt)
		if !v.MIGChanging {
			t.Fatal("pending config not reported as changing")
		}
	})
	t.Run("success, but the device plugin still advertises the old layout", func(t *testing.T) {
		n := gpuNode("n", 2).mig(1, map[string]int{"1g.10gb": 7}).label(LabelMIGConfig, name).label(LabelMIGConfigState, MIGStateSuccess).obj()
		v := ViewNode(n, opt)
		if !v.MIGChanging || !strings.Contains(v.Reason, "device plugin") {
			t.Fatalf("changing %v (%s), want waiting for the device plugin", v.MIGChanging, v.Reason)
		}
	})
	t.Run("failed", func(t *testing.T) {
		v := ViewNode(base().label(LabelMIGConfigState, MIGStateFailed).obj(), opt)
		if !v.MIGFailed {
			t.Fatal("failed config not reported")
		}
	})
}

func TestPackLayouts(t *testing.T) {
	h100 := gpu.Lookup("H100-80GB")
	tests := []struct {
		name   string
		counts map[string]int
		gpus   int
		ok     bool
	}{
		{"all-balanced on one GPU", map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, 1, true},
		{"4g and 3g share a GPU", map[string]int{"4g.40gb": 1, "3g.40gb": 1}, 1, true},
		{"seven 1g", map[string]int{"1g.10gb": 7}, 1, true},
		{"eight 1g need two GPUs", map[string]int{"1g.10gb": 8}, 1, false},
		{"eight 1g on two GPUs", map[string]int{"1g.10gb": 8}, 2, true},
		{"two 4g need two GPUs", map[string]int{"4g.40gb": 2}, 2, true},
		{"two +me on one GPU", map[string]int{"1g.10gb+me": 2}, 1, false},
		{"unknown profile", map[string]int{"5g.99gb": 1}, 1, false},
		{"nothing", nil, 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			layouts, err := PackLayouts(h100, tc.counts, tc.gpus)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				return
			}
			total := map[string]int{}
			for _, l := range layouts {
				if err := h100.Validate(l); err != nil {
					t.Fatalf("layout %s: %v", l, err)
				}
				for p, c := range CountsOf(l) {
					total[p] += c
				}
			}
			for p, c := range tc.counts {
				if total[p] != c {
					t.Fatalf("%s: %d placed, want %d", p, total[p], c)
				}
			}
		})
	}
}
