package engine

import (
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// CapacityOf summarises what a cluster could ever offer one task, so
// that work that can never run is refused up front (workload.Validate).
func CapacityOf(st *cluster.State) *workload.Capacity {
	c := &workload.Capacity{MaxGPUs: map[string]int{}, MIGProfiles: map[string][]string{}, GPUMemoryMiB: map[string]int64{}}
	for i := 0; i < st.Len(); i++ {
		n := st.Node(i)
		c.MaxCPUMilli = max(c.MaxCPUMilli, n.CPUMilli)
		c.MaxMemoryMiB = max(c.MaxMemoryMiB, n.MemoryMiB)
		count := map[*gpu.Model]int{}
		for j := range n.GPUs {
			count[n.GPUs[j].Model]++
		}
		for m, k := range count {
			c.MaxGPUs[m.Name] = max(c.MaxGPUs[m.Name], k)
			c.GPUMemoryMiB[m.Name] = m.MemoryMiB
			for _, p := range m.Profiles {
				if !contains(c.MIGProfiles[p.Name], m.Name) {
					c.MIGProfiles[p.Name] = append(c.MIGProfiles[p.Name], m.Name)
				}
			}
		}
	}
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
