package workload

import (
	"strings"
	"testing"
)

// Named builders for the package's fixtures.

// demandBuilder builds a Demand: wholeGPUs(8).on("H100-80GB").
type demandBuilder struct{ d Demand }

func noGPU() *demandBuilder { return &demandBuilder{Demand{Kind: NoGPU}} }
func wholeGPUs(count int) *demandBuilder {
	return &demandBuilder{Demand{Kind: WholeGPUs, Count: count}}
}
func fraction(milli int) *demandBuilder { return &demandBuilder{Demand{Kind: Fraction, Milli: milli}} }
func migProfile(name string) *demandBuilder {
	return &demandBuilder{Demand{Kind: MIGProfile, Profile: name}}
}
func memoryProfile(peakMiB int64, compute float64) *demandBuilder {
	return &demandBuilder{Demand{Kind: MemoryProfile, PeakMemoryMiB: peakMiB, Compute: compute}}
}
func (b *demandBuilder) on(models ...string) *demandBuilder { b.d.Models = models; return b }
func (b *demandBuilder) demand() Demand                     { return b.d }

// taskBuilder builds a Task: task("w").cpu(1000).memory(2048).gpu(fraction(250)).
type taskBuilder struct{ t Task }

func task(name string) *taskBuilder                      { return &taskBuilder{Task{Name: name}} }
func (b *taskBuilder) cpu(milli int64) *taskBuilder      { b.t.CPUMilli = milli; return b }
func (b *taskBuilder) memory(mib int64) *taskBuilder     { b.t.MemoryMiB = mib; return b }
func (b *taskBuilder) gpu(d *demandBuilder) *taskBuilder { b.t.GPU = d.demand(); return b }
func (b *taskBuilder) build() Task                       { return b.t }

// jobBuilder builds a Job: job("j1").class(Batch).gang(2).tasks(...).
type jobBuilder struct{ j Job }

func job(id string) *jobBuilder                 { return &jobBuilder{Job{ID: id, Team: "ml", Class: Batch}} }
func (b *jobBuilder) class(c Class) *jobBuilder { b.j.Class = c; return b }
func (b *jobBuilder) gang(size int) *jobBuilder { b.j.GangSize = size; return b }
func (b *jobBuilder) tasks(ts ...*taskBuilder) *jobBuilder {
	for _, t := range ts {
		b.j.Tasks = append(b.j.Tasks, t.build())
	}
	return b
}
func (b *jobBuilder) build() *Job { j := b.j; return &j }

// capacityBuilder builds a Capacity: capacity().cpu(64000).gpus("H100-80GB", 8).
type capacityBuilder struct{ c Capacity }

func capacity() *capacityBuilder {
	return &capacityBuilder{Capacity{
		MaxGPUs:      map[string]int{},
		MIGProfiles:  map[string][]string{},
		GPUMemoryMiB: map[string]int64{},
	}}
}
func (b *capacityBuilder) cpu(milli int64) *capacityBuilder  { b.c.MaxCPUMilli = milli; return b }
func (b *capacityBuilder) memory(mib int64) *capacityBuilder { b.c.MaxMemoryMiB = mib; return b }

// gpus says the largest node with model has perNode of them, each of
// memoryMiB.
func (b *capacityBuilder) gpus(model string, perNode int, memoryMiB int64) *capacityBuilder {
	b.c.MaxGPUs[model] = perNode
	b.c.GPUMemoryMiB[model] = memoryMiB
	return b
}

// offers says model offers the MIG profiles.
func (b *capacityBuilder) offers(model string, profiles ...string) *capacityBuilder {
	for _, p := range profiles {
		b.c.MIGProfiles[p] = append(b.c.MIGProfiles[p], model)
	}
	return b
}
func (b *capacityBuilder) build() *Capacity { c := b.c; return &c }

// wantErr fails unless err is non-nil and holds every substring.
func wantErr(t testing.TB, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", subs)
	}
	for _, sub := range subs {
		if !strings.Contains(err.Error(), sub) {
			t.Fatalf("error %q does not contain %q", err, sub)
		}
	}
}
