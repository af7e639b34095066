package cluster

import "testing"

// Check is the oracle of the property tests, so it must itself be able to
// fail: each case breaks one invariant by hand and expects Check to say so.
func TestCheckCatchesEachBrokenInvariant(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(s *State)
		want    []string
	}{
		{
			name:    "catches CPU in use that the tasks do not hold",
			corrupt: func(s *State) { s.NodeByName("v100").cpuUsed++ },
			want:    []string{"node v100: cpu/memory in use 1001/1024, tasks add up to 1000/1024"},
		},
		{
			name:    "catches memory in use that the tasks do not hold",
			corrupt: func(s *State) { s.NodeByName("cpu").memUsed = 7 },
			want:    []string{"node cpu: cpu/memory in use 0/7, tasks add up to 0/0"},
		},
		{
			name: "catches tasks holding more memory than the node has",
			corrupt: func(s *State) {
				n := s.NodeByName("v100")
				n.tasks[0].MemoryMiB = n.MemoryMiB + 1
				n.memUsed = n.MemoryMiB + 1
			},
			want: []string{"node v100: cpu/memory in use 1000/262145 outside 0..32000/262144"},
		},
		{
			name:    "catches milli in use that no task holds",
			corrupt: func(s *State) { s.NodeByName("v100").GPUs[0].used++ },
			want:    []string{"node v100: gpu 0: used 501 milli, tasks hold 500"},
		},
		{
			name: "catches a GPU over 1000 milli",
			corrupt: func(s *State) {
				n := s.NodeByName("v100")
				n.tasks[0].Grants[0].Milli = 1001
				n.GPUs[0].used = 1001
			},
			want: []string{"node v100: gpu 0: used 1001 milli"},
		},
		{
			name: "catches milli held on a MIG GPU",
			corrupt: func(s *State) {
				n := s.NodeByName("h100")
				n.tasks[0].Grants = append(n.tasks[0].Grants, Grant{GPU: 1, Milli: 5})
				n.GPUs[1].used = 5
			},
			want: []string{"node h100: gpu 1: MIG GPU holds 5 milli outside instances"},
		},
		{
			name: "catches an invalid MIG layout",
			corrupt: func(s *State) {
				g := &s.NodeByName("h100").GPUs[1]
				g.slices = append(g.slices, Slice{Placement: mustPlacement("4g.40gb@0")}, Slice{Placement: mustPlacement("1g.10gb@2")})
			},
			want: []string{"node h100: gpu 1", "1g.10gb@2 overlaps 4g.40gb@0"},
		},
		{
			name:    "catches an instance held by a task the node does not run",
			corrupt: func(s *State) { s.NodeByName("h100").GPUs[0].slices[1].Task = "ghost" },
			want:    []string{`node h100: gpu 0: instance 1g.10gb+me@4 held by "ghost", tasks say ""`},
		},
		{
			name:    "catches a task holding an instance that is gone",
			corrupt: func(s *State) { g := &s.NodeByName("h100").GPUs[0]; g.slices = g.slices[1:] },
			want:    []string{"node h100: gpu 0: task inst holds a missing instance 3g.40gb@0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := busyWorld(t)
			tt.corrupt(s)
			wantErr(t, s.Check(), tt.want...)
		})
	}
}

func TestNodeDescribe(t *testing.T) {
	s := busyWorld(t)
	tests := []struct {
		name string
		node string
		want string
	}{
		{"describes a CPU-only node", "cpu", "cpu cpu 0/4000m mem 0/8192 MiB\n"},
		{
			"describes shares and free GPUs", "v100",
			"v100 cpu 1000/32000m mem 1024/262144 MiB\n" +
				"  gpu0 V100-32GB 500/1000 [holder 500]\n" +
				"  gpu1 V100-32GB 0/1000\n  gpu2 V100-32GB 0/1000\n  gpu3 V100-32GB 0/1000\n" +
				"  gpu4 V100-32GB 0/1000\n  gpu5 V100-32GB 0/1000\n  gpu6 V100-32GB 0/1000\n  gpu7 V100-32GB 0/1000\n",
		},
		{
			"describes held and free instances", "h100",
			"h100 cpu 1000/32000m mem 1024/262144 MiB\n" +
				"  gpu0 H100-80GB mig [3g.40gb@0 inst] [1g.10gb+me@4 -]\n" +
				"  gpu1 H100-80GB mig\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.NodeByName(tt.node).Describe(); got != tt.want {
				t.Fatalf("Describe() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
