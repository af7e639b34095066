package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// This file is the one place that holds GPU facts. Everything else in the
// package is arithmetic over these tables.
//
// Sources:
//   - MIG geometry (profiles, slices, placements, SMs, max per GPU): NVIDIA MIG
//     User Guide, driver 580 series, "Supported MIG Profiles", and
//     `nvidia-smi mig -lgip` / `-lgipp` transcripts for A100-80GB and
//     H100-80GB, as summarised in shared/reference/mig-and-gpu-operator.md.
//   - PCI device ids of the MIG GPUs: the same reference (the GPU Operator's
//     mig-parted `device-filter` writes them with the NVIDIA vendor id
//     appended, e.g. "0x233010DE").
//   - GFD product labels (`nvidia.com/gpu.product`): the NVML product name
//     with spaces replaced by '-', as GPU Feature Discovery writes it.
//   - Whole-card memory and SM counts: NVIDIA's public data sheets.
//   - Alibaba trace names (V100M16, V100M32, G2, G3, ...): the `model` column
//     of shared/data/alibaba-gpu-v2023/openb_node_list_*.csv.

// ComputeSlices and MemorySlices are the shape of every MIG-capable GPU in
// the catalog: 7 compute slices and 8 memory slices. A layout's memory use
// fits in a uint8 bit mask because of the 8.
const (
	ComputeSlices = 7
	MemorySlices  = 8
)

// mibPerGB turns the nominal GB in a product or profile name into MiB. The
// driver reports less than the nominal figure, and an instance's real size
// is what a task can use: where we have an `nvidia-smi mig -lgip` transcript
// the profile memory is what it reports (reportedGiB); elsewhere the
// nominal figure stands and DefaultHeadroom has to absorb the gap.
const mibPerGB = 1024

// reportedGiB is the instance memory `nvidia-smi mig -lgip` reports, per
// model, in migKinds order.
//   - H200-141GB: measured on an H200 (driver 580.159.04), 2026-11-29;
//     testdata/h200-nvidia-smi-mig.txt is the transcript (16.00 GiB for a
//     "1g.18gb": the nominal figure over-promises by 11 %).
//   - H100-80GB: a public transcript (jbarrow.ai/field_notes/nvidia-mig,
//     updated 2026-06-11).
//   - A100: no transcript found; nominal sizes.
var reportedGiB = map[string][]float64{
	"H200-141GB": {16.00, 16.00, 32.50, 32.50, 69.75, 69.75, 140.00},
	"H100-80GB":  {9.75, 9.75, 19.62, 19.62, 39.50, 39.50, 79.25},
}

// migKind is one row of the MIG guide's profile table: a profile shape that
// every MIG GPU in the catalog offers under its own name (1g.10gb on an
// H100-80GB is 1g.18gb on an H200-141GB).
type migKind struct {
	compute   int   // compute slices, of 7
	memory    int   // memory slices, of 8; also the placement width
	starts    []int // allowed start memory-slice indexes
	mediaExt  bool  // the "+me" variant, which owns the media engines
	maxPerGPU int
	smsGA100  int // SMs of the instance on an A100 (GA100)
	smsGH100  int // SMs of the instance on an H100 or H200 (GH100)
}

// migKinds lists the profile shapes small to large (memory slices, then
// compute slices); migProfiles pairs each model's names with these rows in
// this order.
var migKinds = [...]migKind{
	{compute: 1, memory: 1, starts: []int{0, 1, 2, 3, 4, 5, 6}, maxPerGPU: 7, smsGA100: 14, smsGH100: 16},                 // 1g
	{compute: 1, memory: 1, starts: []int{0, 1, 2, 3, 4, 5, 6}, mediaExt: true, maxPerGPU: 1, smsGA100: 14, smsGH100: 16}, // 1g+me
	{compute: 1, memory: 2, starts: []int{0, 2, 4, 6}, maxPerGPU: 4, smsGA100: 14, smsGH100: 26},                          // 1g with 2/8 memory
	{compute: 2, memory: 2, starts: []int{0, 2, 4}, maxPerGPU: 3, smsGA100: 28, smsGH100: 32},                             // 2g
	{compute: 3, memory: 4, starts: []int{0, 4}, maxPerGPU: 2, smsGA100: 42, smsGH100: 60},                                // 3g
	{compute: 4, memory: 4, starts: []int{0}, maxPerGPU: 1, smsGA100: 56, smsGH100: 64},                                   // 4g
	{compute: 7, memory: 8, starts: []int{0}, maxPerGPU: 1, smsGA100: 98, smsGH100: 132},                                  // 7g
}

// arch selects the SM column of migKinds.
type arch int

const (
	ga100 arch = iota
	gh100
)

const (
	migSource = "NVIDIA MIG User Guide r580 (Supported MIG Profiles); nvidia-smi mig -lgip/-lgipp " +
		"transcripts for A100-80GB and H100-80GB; profile memory is the nominal GB in the name x 1024 MiB"
	specSource    = "NVIDIA data sheet (memory, SMs); not MIG-capable"
	aliTraceOnly  = "Alibaba GPU 2023 trace (cluster-trace-gpu-v2023); the model is undisclosed, so memory and SMs are unknown"
	h200Placement = "; H200 profiles, memory and placements from nvidia-smi mig -lgip/-lgipp on an H200 (testdata/h200-nvidia-smi-mig.txt)"
)

// catalog is every GPU model Partita knows, in the order Catalog returns them.
// Lookup accepts Name and every alias, case-insensitively.
var catalog = []*Model{
	{
		Name: "A100-40GB", Aliases: []string{"NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"},
		MemoryMiB: 40 * mibPerGB, SMs: 108, PCIDeviceIDs: []string{"0x20B0", "0x20B1"},
		MIG: true, Known: true, Source: migSource,
		Profiles: migProfiles(ga100, nil, "1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
	},
	{
		Name: "A100-80GB", Aliases: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"},
		MemoryMiB: 80 * mibPerGB, SMs: 108, PCIDeviceIDs: []string{"0x20B2", "0x20B5"},
		MIG: true, Known: true, Source: migSource,
		Profiles: migProfiles(ga100, nil, "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
	},
	{
		// SMs are the SXM5 card's; the PCIe card (0x2331) has 114, so its
		// MIG instances have fewer SMs than the table says.
		Name: "H100-80GB", Aliases: []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"},
		MemoryMiB: 80 * mibPerGB, SMs: 132, PCIDeviceIDs: []string{"0x2330", "0x2331"},
		MIG: true, Known: true, Source: migSource,
		Profiles: migProfiles(gh100, reportedGiB["H100-80GB"], "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
	},
	{
		// Memory and placements as an H200 reports them (143771 MiB,
		// device id 0x2335; testdata/h200-nvidia-smi-mig.txt).
		Name: "H200-141GB", Aliases: []string{"NVIDIA-H200", "NVIDIA-H200-NVL", "H200"},
		MemoryMiB: 143771, SMs: 132, PCIDeviceIDs: []string{"0x2335", "0x233B"},
		MIG: true, Known: true, Source: migSource + h200Placement,
		Profiles: migProfiles(gh100, reportedGiB["H200-141GB"], "1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
	},
	{Name: "L4", Aliases: []string{"NVIDIA-L4"}, MemoryMiB: 24 * mibPerGB, SMs: 58, Known: true, Source: specSource},
	{Name: "L40S", Aliases: []string{"NVIDIA-L40S"}, MemoryMiB: 48 * mibPerGB, SMs: 142, Known: true, Source: specSource},
	{Name: "A10", Aliases: []string{"NVIDIA-A10"}, MemoryMiB: 24 * mibPerGB, SMs: 72, Known: true, Source: specSource},
	{Name: "T4", Aliases: []string{"Tesla-T4"}, MemoryMiB: 16 * mibPerGB, SMs: 40, Known: true, Source: specSource},
	{
		Name: "V100-16GB", Aliases: []string{"V100M16", "Tesla-V100-SXM2-16GB", "Tesla-V100-PCIE-16GB"},
		MemoryMiB: 16 * mibPerGB, SMs: 80, Known: true, Source: specSource,
	},
	{
		Name: "V100-32GB", Aliases: []string{"V100M32", "Tesla-V100-SXM2-32GB", "Tesla-V100-PCIE-32GB"},
		MemoryMiB: 32 * mibPerGB, SMs: 80, Known: true, Source: specSource,
	},
	{
		// The trace says only "P100"; the 16 GB card is the common one (a
		// 12 GB PCIe card exists too).
		Name: "P100", Aliases: []string{"Tesla-P100-SXM2-16GB", "Tesla-P100-PCIE-16GB"},
		MemoryMiB: 16 * mibPerGB, SMs: 56, Known: true, Source: specSource,
	},
	{Name: "G2", Known: true, Source: aliTraceOnly},
	{Name: "G3", Known: true, Source: aliTraceOnly},
}

// migProfiles builds a model's profiles from its names, one per migKinds row
// in that order. The data above is static, so a mismatch is a programming
// error caught at start-up (and by TestCatalogMatchesReference).
func migProfiles(a arch, reported []float64, names ...string) []Profile {
	if len(names) != len(migKinds) {
		panic(fmt.Sprintf("gpu: %d MIG profile names for %d kinds", len(names), len(migKinds)))
	}
	out := make([]Profile, len(names))
	for i, k := range migKinds {
		sms := k.smsGA100
		if a == gh100 {
			sms = k.smsGH100
		}
		mem := nominalMiB(names[i])
		if reported != nil {
			mem = int64(reported[i] * mibPerGB)
		}
		out[i] = Profile{
			Name:      names[i],
			Compute:   k.compute,
			Memory:    k.memory,
			Starts:    k.starts,
			MemoryMiB: mem,
			SMs:       sms,
			MediaExt:  k.mediaExt,
			MaxPerGPU: k.maxPerGPU,
		}
	}
	return out
}

// nominalMiB reads the memory out of a profile name: "3g.40gb+me" is 40 GB.
func nominalMiB(name string) int64 {
	_, rest, _ := strings.Cut(name, ".")
	gb, _, _ := strings.Cut(rest, "gb")
	n, err := strconv.ParseInt(gb, 10, 64)
	if err != nil || n <= 0 {
		panic(fmt.Sprintf("gpu: profile name %q has no <n>gb memory", name))
	}
	return n * mibPerGB
}
