package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/kube/api/v1alpha1"
)

// summary is what the status controller writes to Queues and PodGroups.
type summary struct {
	queues map[string]v1alpha1.QueueStatus
	groups map[string]v1alpha1.PodGroupStatus // namespace/name
}

// summarize counts, per queue and per pod group, what runs and waits.
func summarize(snap *Snapshot, d sched.Decision) summary {
	out := summary{queues: map[string]v1alpha1.QueueStatus{}, groups: map[string]v1alpha1.PodGroupStatus{}}
	used := map[string]int64{}
	for _, j := range snap.Jobs {
		q := snap.JobQueue[j.ID()]
		st := out.queues[q]
		scheduled := int32(0)
		for _, a := range j.Placed {
			if a == nil {
				st.PendingPods++
				continue
			}
			st.RunningPods++
			scheduled++
			if n := snap.State.NodeByName(a.Node); n != nil {
				used[q] += int64(a.GPUMilli(n))
			}
		}
		out.queues[q] = st
		if key, ok := strings.CutPrefix(j.ID(), "group:"); ok {
			gs := v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupPending, Scheduled: scheduled}
			if j.Complete() || j.Spec.GangSize > 0 && int(scheduled) >= j.Spec.GangSize {
				gs.Phase = v1alpha1.PodGroupRunning
			}
			if w, ok := d.Waiting[j.ID()]; ok {
				gs.Message = w.Reason
			}
			out.groups[key] = gs
		}
	}
	for q, st := range out.queues {
		st.UsedGPUs = fmt.Sprintf("%.3f", float64(used[q])/1000)
		out.queues[q] = st
	}
	for id, why := range snap.Held {
		key, ok := strings.CutPrefix(id, "group:")
		if !ok {
			continue
		}
		gs := out.groups[key]
		gs.Phase, gs.Message = v1alpha1.PodGroupPending, why
		out.groups[key] = gs
	}
	return out
}

// statusCache hands the latest summary from the cycle to the status loop,
// and remembers what was written so only changes are.
type statusCache struct {
	mu      sync.Mutex
	latest  summary
	fresh   bool
	written map[string]string
}

func (c *statusCache) set(s summary) {
	c.mu.Lock()
	c.latest, c.fresh = s, true
	c.mu.Unlock()
}

func (c *statusCache) take() (summary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.latest, c.fresh
	c.fresh = false
	return s, ok
}

// statusInterval is how often Queue and PodGroup status is brought up to
// date; status is for people and dashboards, not for decisions.
const statusInterval = 5 * time.Second

// statusLoop writes Queue and PodGroup status, only what changed.
func (s *Scheduler) statusLoop(ctx context.Context) {
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sum, ok := s.statuses.take()
		if !ok {
			continue
		}
		if s.statuses.written == nil {
			s.statuses.written = map[string]string{}
		}
		queues, _ := s.queues.List(labels.Everything())
		for _, x := range queues {
			q, err := v1alpha1.FromUnstructured[v1alpha1.Queue](x)
			if err != nil {
				continue
			}
			s.writeStatus(ctx, "queue/"+q.Name, v1alpha1.QueuesGVR.Resource, "", q.Name, sum.queues[q.Name])
		}
		groups, _ := s.podGroups.List(labels.Everything())
		for _, x := range groups {
			pg, err := v1alpha1.FromUnstructured[v1alpha1.PodGroup](x)
			if err != nil {
				continue
			}
			st, ok := sum.groups[pg.Namespace+"/"+pg.Name]
			if !ok {
				st = v1alpha1.PodGroupStatus{Phase: v1alpha1.PodGroupPending, Message: "no pods yet"}
			}
			s.writeStatus(ctx, "podgroup/"+pg.Namespace+"/"+pg.Name, v1alpha1.PodGroupsGVR.Resource, pg.Namespace, pg.Name, st)
		}
	}
}

func (s *Scheduler) writeStatus(ctx context.Context, key, resource, namespace, name string, status any) {
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil || s.statuses.written[key] == string(data) {
		return
	}
	gvr := v1alpha1.QueuesGVR
	if resource == v1alpha1.PodGroupsGVR.Resource {
		gvr = v1alpha1.PodGroupsGVR
	}
	client := s.dyn.Resource(gvr)
	if namespace != "" {
		_, err = client.Namespace(namespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
	} else {
		_, err = client.Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
	}
	if err != nil {
		s.opt.Logger.Info("status not written", "object", key, "err", err)
		return
	}
	s.statuses.written[key] = string(data)
}
