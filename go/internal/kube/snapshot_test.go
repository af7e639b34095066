package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/kube/api/v1alpha1"
	"partita.dev/partita/internal/random"
)

func TestSnapshotAccountsBoundPods(t *testing.T) {
	obj := Objects{
		Nodes: []*corev1.Node{gpuNode("a", 4).obj(), gpuNode("m", 1).mig(1, map[string]int{"1g.10gb": 7}).obj()},
		Pods: []*corev1.Pod{
			// Partita's, with the devices it recorded.
			pod("train").gpus(2).on("a", map[string]string{AnnotationGPUs: "2,3"}).obj(),
			// Another scheduler's, without annotations: derived.
			pod("other").gpus(1).scheduler("default-scheduler").on("a", nil).obj(),
			pod("infer").migProfile("1g.10gb").on("m", map[string]string{AnnotationMIGSlice: "0:1g.10gb@5"}).obj(),
			// Finished pods hold nothing.
			pod("done").gpus(1).on("a", nil).phase(corev1.PodSucceeded).obj(),
		},
	}
	s := mustSnapshot(t, obj, SnapshotOptions{})
	want := "a cpu 2000/64000m mem 2048/524288 MiB\n" +
		"  gpu0 H100-80GB 1000/1000 [ns/other 1000]\n" +
		"  gpu1 H100-80GB 0/1000\n" +
		"  gpu2 H100-80GB 1000/1000 [ns/train 1000]\n" +
		"  gpu3 H100-80GB 1000/1000 [ns/train 1000]\n"
	if got := s.State.NodeByName("a").Describe(); got != want {
		t.Errorf("node a:\n%s\nwant:\n%s", got, want)
	}
	if got := s.State.NodeByName("m").Describe(); !strings.Contains(got, "[1g.10gb@5 ns/infer]") {
		t.Errorf("node m does not hold infer on its recorded instance:\n%s", got)
	}
	if !s.Busy["a"] || !s.Busy["m"] {
		t.Errorf("busy nodes %v, want a and m", s.Busy)
	}
	if len(s.Jobs) != 2 {
		t.Fatalf("%d jobs, want Partita's two (train, infer)", len(s.Jobs))
	}
	for _, j := range s.Jobs {
		if j.Phase != sched.Running {
			t.Errorf("job %s phase %v, want running", j.ID(), j.Phase)
		}
	}
}

func TestSnapshotRecordedDevicesThatNoLongerFitAreDerived(t *testing.T) {
	obj := Objects{
		Nodes: []*corev1.Node{gpuNode("a", 2).obj()},
		Pods: []*corev1.Pod{
			pod("x").gpus(1).on("a", map[string]string{AnnotationGPUs: "1"}).obj(),
			pod("y").gpus(1).on("a", map[string]string{AnnotationGPUs: "1"}).obj(), // a conflicting record
		},
	}
	s := mustSnapshot(t, obj, SnapshotOptions{})
	if got := s.State.NodeByName("a").GPUFreeMilli(); got != 0 {
		t.Fatalf("free milli %d, want both GPUs held", got)
	}
}

func TestSnapshotJobs(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("a", 8).obj()}
	queues := []*v1alpha1.Queue{{Spec: v1alpha1.QueueSpec{Team: "ml", GuaranteedGPUs: 4, BurstGPUs: 8, Weight: 2, AllowedPriorityClasses: []string{"batch"}}}}
	queues[0].Name = "ml"
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		groups   []*v1alpha1.PodGroup
		wantJob  string // a job the engine gets
		wantGang int
		wantHeld string // part of the reason a job is held
	}{
		{name: "a lone pod", pods: []*corev1.Pod{pod("p").gpus(1).obj()}, wantJob: "pod:ns/p"},
		{name: "a gang by annotation, complete", pods: []*corev1.Pod{
			pod("w0").gpus(8).group("g").ann(AnnotationMinMember, "2").obj(),
			pod("w1").gpus(8).group("g").ann(AnnotationMinMember, "2").obj(),
		}, wantJob: "group:ns/g", wantGang: 2},
		{name: "a gang missing a pod", pods: []*corev1.Pod{
			pod("w0").gpus(8).group("g").ann(AnnotationMinMember, "3").obj(),
			pod("w1").gpus(8).group("g").ann(AnnotationMinMember, "3").obj(),
		}, wantHeld: "gang: 2 of 3 pods exist"},
		{name: "a PodGroup object gives the size", pods: []*corev1.Pod{
			pod("w0").gpus(1).group("g").obj(), pod("w1").gpus(1).group("g").obj(),
		}, groups: []*v1alpha1.PodGroup{podGroup("g", 3, "")}, wantHeld: "gang: 2 of 3"},
		{name: "the coscheduling label works too", pods: []*corev1.Pod{
			pod("w0").gpus(1).label(LabelCoschedulingPodGroup, "g").obj(),
		}, wantJob: "group:ns/g"},
		{name: "a finished member still counts toward the gang", pods: []*corev1.Pod{
			pod("w0").gpus(1).group("g").phase(corev1.PodSucceeded).obj(),
			pod("w1").gpus(1).group("g").obj(),
		}, groups: []*v1alpha1.PodGroup{podGroup("g", 2, "")}, wantJob: "group:ns/g", wantGang: 1},
		{name: "an unknown MIG profile", pods: []*corev1.Pod{pod("p").migProfile("5g.99gb").obj()},
			wantHeld: `mig profile "5g.99gb": no GPU in the cluster offers it`},
		{name: "more GPUs than any node has", pods: []*corev1.Pod{pod("p").gpus(16).obj()}, wantHeld: "asks for 16 GPUs but the largest node"},
		{name: "an unknown queue", pods: []*corev1.Pod{pod("p").gpus(1).queue("nope").obj()}, wantHeld: `queue "nope" does not exist`},
		{name: "a queue's allowed priority class", pods: []*corev1.Pod{pod("p").gpus(1).queue("ml").priorityClass("batch").obj()}, wantJob: "pod:ns/p"},
		{name: "another priority class", pods: []*corev1.Pod{pod("p").gpus(1).queue("ml").priorityClass("urgent").obj()},
			wantHeld: `priority class "urgent" is not allowed in queue ml`},
		{name: "a node selector Partita does not evaluate", pods: []*corev1.Pod{func() *corev1.Pod {
			p := pod("p").gpus(1).obj()
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			return p
		}()}, wantHeld: "nodeSelector zone"},
		{name: "a bad memory annotation", pods: []*corev1.Pod{pod("p").ann(AnnotationGPUMemory, "x").obj()}, wantHeld: "not a quantity"},
		{name: "another scheduler's pod is not a job", pods: []*corev1.Pod{pod("p").gpus(1).scheduler("default-scheduler").obj()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSnapshot(t, Objects{Nodes: nodes, Pods: tc.pods, Queues: queues, PodGroups: tc.groups}, SnapshotOptions{})
			if tc.wantHeld != "" {
				found := false
				for _, why := range s.Held {
					found = found || strings.Contains(why, tc.wantHeld)
				}
				if !found {
					t.Fatalf("held %v, want a reason containing %q", s.Held, tc.wantHeld)
				}
				if len(s.Jobs) != 0 {
					t.Fatalf("held job also given to the engine")
				}
				return
			}
			if tc.wantJob == "" {
				if len(s.Jobs)+len(s.Held) != 0 {
					t.Fatalf("jobs %d held %v, want none", len(s.Jobs), s.Held)
				}
				return
			}
			if len(s.Jobs) != 1 || s.Jobs[0].ID() != tc.wantJob {
				t.Fatalf("jobs %v held %v, want %s", jobIDs(s.Jobs), s.Held, tc.wantJob)
			}
			if g := s.Jobs[0].Spec.GangSize; tc.wantGang > 0 && g != tc.wantGang {
				t.Fatalf("gang size %d, want %d", g, tc.wantGang)
			}
		})
	}
}

func TestSnapshotHeldJobStillCountsItsBoundPods(t *testing.T) {
	pods := []*corev1.Pod{
		pod("w0").gpus(2).group("g").on("a", map[string]string{AnnotationGPUs: "0,1"}).obj(),
		pod("w1").group("g").ann(AnnotationGPUMemory, "bad").obj(),
	}
	s := mustSnapshot(t, Objects{Nodes: []*corev1.Node{gpuNode("a", 8).obj()}, Pods: pods}, SnapshotOptions{})
	if len(s.Held) != 1 || len(s.Jobs) != 1 || len(s.Jobs[0].Spec.Tasks) != 1 || s.Jobs[0].Phase != sched.Running {
		t.Fatalf("held %v, jobs %v: want the pending pod held and the bound one given as a running job", s.Held, jobIDs(s.Jobs))
	}
}

func TestSnapshotPhases(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("a", 8).obj()}
	running := pod("r").gpus(1).on("a", map[string]string{AnnotationGPUs: "0"}).obj()
	deleting := pod("d").gpus(1).on("a", map[string]string{AnnotationGPUs: "1"}).deleting().obj()
	evicted := pod("e").gpus(1).on("a", map[string]string{AnnotationGPUs: "2"}).obj()
	assumed := pod("b").gpus(1).obj()
	s := mustSnapshot(t, Objects{Nodes: nodes, Pods: []*corev1.Pod{running, deleting, evicted, assumed}}, SnapshotOptions{
		Evicting: map[types.UID]bool{evicted.UID: true},
		Bound:    map[types.UID]Assumed{assumed.UID: {Node: "a", Annotations: map[string]string{AnnotationGPUs: "3"}}},
	})
	want := map[string]sched.Phase{"pod:ns/r": sched.Running, "pod:ns/d": sched.Terminating, "pod:ns/e": sched.Terminating, "pod:ns/b": sched.Running}
	for _, j := range s.Jobs {
		if j.Phase != want[j.ID()] {
			t.Errorf("%s: phase %v, want %v", j.ID(), j.Phase, want[j.ID()])
		}
	}
	if free := s.State.NodeByName("a").FullyFreeGPUs(); free != 4 {
		t.Errorf("%d GPUs free, want 4 (the assumed bind holds GPU 3)", free)
	}
}

func TestFreezeBusyHidesWhatTheMIGManagerWouldDisturb(t *testing.T) {
	nodes := []*corev1.Node{
		gpuNode("busy", 2).mig(2, map[string]int{"3g.40gb": 1, "1g.10gb": 3}).obj(),
		gpuNode("idle", 1).mig(1, map[string]int{"1g.10gb": 2}).obj(),
	}
	pods := []*corev1.Pod{
		pod("serve").migProfile("3g.40gb").on("busy", map[string]string{AnnotationMIGSlice: "0:3g.40gb@4"}).obj(),
		pod("want").migProfile("1g.10gb").obj(),
	}
	s := mustSnapshot(t, Objects{Nodes: nodes, Pods: pods}, SnapshotOptions{FreezeBusy: true})
	busy := s.State.NodeByName("busy")
	for k := range busy.GPUs {
		g := &busy.GPUs[k]
		if g.FreeMemorySlices()&0x7f != 0 {
			t.Errorf("busy GPU %d keeps free memory slices %08b the engine could carve", k, g.FreeMemorySlices())
		}
		for _, sl := range g.Slices() {
			if sl.Task == "" && sl.Profile != "1g.10gb" {
				t.Errorf("busy GPU %d: free %s instance nobody asks for is not held", k, sl.Placement)
			}
		}
	}
	free1g := 0
	for k := range busy.GPUs {
		for _, sl := range busy.GPUs[k].Slices() {
			if sl.Task == "" && sl.Profile == "1g.10gb" {
				free1g++
			}
		}
	}
	if free1g != 3 {
		t.Errorf("%d free 1g.10gb instances on the busy node, want the 3 a pending pod may use", free1g)
	}
	for _, sl := range s.State.NodeByName("idle").GPUs[0].Slices() {
		if sl.Task != "" {
			t.Errorf("idle node holds %s", sl.Task)
		}
	}
}

// TestEngineOnSnapshot runs the engine's cycle on a snapshot: a gang goes
// on one node with disjoint devices, and a pod for an unknown profile is
// held with a reason.
func TestEngineOnSnapshot(t *testing.T) {
	opt := Options{}
	opt.defaults()
	cfg, err := engineConfig(opt)
	if err != nil {
		t.Fatal(err)
	}
	eng := sched.New(cfg, random.New(1))
	pods := []*corev1.Pod{
		pod("w0").gpus(4).group("g").ann(AnnotationMinMember, "2").obj(),
		pod("w1").gpus(4).group("g").ann(AnnotationMinMember, "2").obj(),
		pod("blocker").gpus(2).on("b", map[string]string{AnnotationGPUs: "0,1"}).obj(),
	}
	s := mustSnapshot(t, Objects{Nodes: []*corev1.Node{gpuNode("a", 8).obj(), gpuNode("b", 8).obj(), gpuNode("c", 8).cordoned().obj()}, Pods: pods}, SnapshotOptions{})
	d := eng.Cycle(sched.Input{Cluster: s.State, Teams: s.Teams, Jobs: s.Jobs})
	if len(d.Starts) != 2 {
		t.Fatalf("starts %+v waiting %v, want the gang's two", d.Starts, d.Waiting)
	}
	seen := map[string]bool{}
	for _, st := range d.Starts {
		if st.Assignment.Node == "c" {
			t.Fatal("placed on a cordoned node")
		}
		for _, g := range st.Assignment.Grants {
			key := st.Assignment.Node + "/" + string(rune('0'+g.GPU))
			if seen[key] {
				t.Fatalf("GPU %s granted twice", key)
			}
			seen[key] = true
		}
	}
}

func podGroup(name string, minMember int32, queue string) *v1alpha1.PodGroup {
	pg := &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinMember: minMember, Queue: queue}}
	pg.Name, pg.Namespace = name, "ns"
	return pg
}

func jobIDs(js []*sched.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.ID())
	}
	return out
}
