package kube

import (
	"fmt"
	"strconv"
	"strings"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
)

// DeviceAnnotations records what an assignment grants, for the Binding:
// whole GPUs as partita.dev/gpus "0,1", a MIG instance as
// partita.dev/mig-slice "2:3g.40gb@4", a share as partita.dev/gpu-share
// "0:300". An assignment without GPUs gives none.
func DeviceAnnotations(a cluster.Assignment) map[string]string {
	out := map[string]string{}
	var whole []string
	for _, g := range a.Grants {
		switch {
		case g.Slice != nil:
			out[AnnotationMIGSlice] = strconv.Itoa(g.GPU) + ":" + g.Slice.String()
		case g.Milli >= 1000:
			whole = append(whole, strconv.Itoa(g.GPU))
		default:
			out[AnnotationGPUShare] = strconv.Itoa(g.GPU) + ":" + strconv.Itoa(g.Milli)
		}
	}
	if len(whole) > 0 {
		out[AnnotationGPUs] = strings.Join(whole, ",")
	}
	return out
}

// GrantsFromAnnotations reads back what DeviceAnnotations wrote. ok is
// false when the pod carries none of the annotations; an error means they
// are there but unreadable.
func GrantsFromAnnotations(ann map[string]string) (grants []cluster.Grant, ok bool, err error) {
	if text, has := ann[AnnotationGPUs]; has {
		ok = true
		for _, part := range strings.Split(text, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil || i < 0 {
				return nil, true, fmt.Errorf("annotation %s=%q: want GPU indices such as 0,1", AnnotationGPUs, text)
			}
			grants = append(grants, cluster.Grant{GPU: i, Milli: 1000})
		}
	}
	if text, has := ann[AnnotationMIGSlice]; has {
		ok = true
		idx, pl, found := strings.Cut(text, ":")
		i, err := strconv.Atoi(idx)
		if !found || err != nil || i < 0 {
			return nil, true, fmt.Errorf("annotation %s=%q: want <gpu>:<profile>@<start>", AnnotationMIGSlice, text)
		}
		p, err := gpu.ParsePlacement(pl)
		if err != nil {
			return nil, true, fmt.Errorf("annotation %s: %w", AnnotationMIGSlice, err)
		}
		grants = append(grants, cluster.Grant{GPU: i, Slice: &p})
	}
	if text, has := ann[AnnotationGPUShare]; has {
		ok = true
		idx, m, found := strings.Cut(text, ":")
		i, err1 := strconv.Atoi(idx)
		milli, err2 := strconv.Atoi(m)
		if !found || err1 != nil || err2 != nil || i < 0 || milli < 1 || milli > 1000 {
			return nil, true, fmt.Errorf("annotation %s=%q: want <gpu>:<milli>", AnnotationGPUShare, text)
		}
		grants = append(grants, cluster.Grant{GPU: i, Milli: milli})
	}
	return grants, ok, nil
}
