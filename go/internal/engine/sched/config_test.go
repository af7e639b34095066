package sched

import (
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/engine/policies"
)

func TestPresetSetsTheFlagsOfEachScheduler(t *testing.T) {
	type flags struct {
		Gangs, ClassOrder, Borrow, Preempt, MIG, Reserve       bool
		Order                                                  Order
		ReconfigCooldown, ClaimCooldown, ReserveAfter          time.Duration
		EvictStuckAfter, ReclaimStraddlingAfter, GangRoomAfter time.Duration
	}
	tests := []struct {
		name string
		want flags
	}{
		{"naive", flags{Order: FIFO}},
		{"gang-drf", flags{Gangs: true, ClassOrder: true, Borrow: true, Preempt: true, Order: DRF}},
		{"partita", flags{Gangs: true, ClassOrder: true, Borrow: true, Preempt: true, MIG: true, Reserve: true,
			Order: FairShare, ReconfigCooldown: 10 * time.Minute, ClaimCooldown: time.Minute, ReserveAfter: 10 * time.Minute,
			EvictStuckAfter: time.Minute, ReclaimStraddlingAfter: 2 * time.Minute,
			GangRoomAfter: 2 * time.Minute}},
	}
	for _, tc := range tests {
		t.Run(tc.name+" has its documented flags", func(t *testing.T) {
			placement := policies.K8sDefault()
			c, err := Preset(tc.name, placement)
			if err != nil {
				t.Fatalf("Preset(%q): %v", tc.name, err)
			}
			got := flags{c.Gangs, c.ClassOrder, c.Borrow, c.Preempt, c.MIG, c.Reserve, c.Order, c.ReconfigCooldown, c.ClaimCooldown, c.ReserveAfter, c.EvictStuckAfter, c.ReclaimStraddlingAfter, c.GangRoomAfter}
			if got != tc.want {
				t.Errorf("Preset(%q) flags = %+v, want %+v", tc.name, got, tc.want)
			}
			if c.Name != tc.name {
				t.Errorf("Preset(%q).Name = %q", tc.name, c.Name)
			}
			if c.Placement.Name != placement.Name {
				t.Errorf("Preset(%q).Placement = %q, want the policy passed in (%q)", tc.name, c.Placement.Name, placement.Name)
			}
			if c.Grace != 30*time.Second || c.Headroom != 0.10 {
				t.Errorf("Preset(%q): grace %v, headroom %v; want 30s and 0.10", tc.name, c.Grace, c.Headroom)
			}
		})
	}
}

func TestPresetRefusesAnUnknownName(t *testing.T) {
	for _, name := range []string{"", "Partita", "volcano"} {
		c, err := Preset(name, policies.K8sDefault())
		if err == nil {
			t.Errorf("Preset(%q) = %+v, want an error", name, c)
			continue
		}
		for _, want := range []string{"unknown scheduler", "naive", "gang-drf", "partita"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Preset(%q) error %q does not mention %q", name, err, want)
			}
		}
	}
}

func TestSchedulerKeepsItsConfig(t *testing.T) {
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	s := newScheduler(t, "gang-drf", st)
	if got := s.Config(); got.Name != "gang-drf" || got.Order != DRF {
		t.Errorf("Config() = %+v, want the gang-drf preset", got)
	}
}
