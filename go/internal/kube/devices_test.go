package kube

import (
	"reflect"
	"testing"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
)

func TestDeviceAnnotationsRoundTrip(t *testing.T) {
	slice := gpu.Placement{Profile: "3g.40gb", Start: 4}
	tests := []struct {
		name   string
		grants []cluster.Grant
		want   map[string]string
	}{
		{"whole GPUs", []cluster.Grant{{GPU: 0, Milli: 1000}, {GPU: 3, Milli: 1000}}, map[string]string{AnnotationGPUs: "0,3"}},
		{"a MIG instance", []cluster.Grant{{GPU: 2, Slice: &slice}}, map[string]string{AnnotationMIGSlice: "2:3g.40gb@4"}},
		{"a share", []cluster.Grant{{GPU: 1, Milli: 250}}, map[string]string{AnnotationGPUShare: "1:250"}},
		{"no GPU", nil, map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ann := DeviceAnnotations(cluster.Assignment{Grants: tc.grants})
			if !reflect.DeepEqual(ann, tc.want) {
				t.Fatalf("annotations %v, want %v", ann, tc.want)
			}
			back, ok, err := GrantsFromAnnotations(ann)
			if err != nil || ok != (len(tc.grants) > 0) {
				t.Fatalf("read back: ok %v err %v", ok, err)
			}
			if !reflect.DeepEqual(back, tc.grants) {
				t.Fatalf("read back %+v, want %+v", back, tc.grants)
			}
		})
	}
}

func TestGrantsFromBadAnnotations(t *testing.T) {
	for _, ann := range []map[string]string{
		{AnnotationGPUs: "0,x"},
		{AnnotationGPUs: "-1"},
		{AnnotationMIGSlice: "3g.40gb@4"},
		{AnnotationMIGSlice: "0:3g.40gb@9"},
		{AnnotationGPUShare: "0:0"},
		{AnnotationGPUShare: "0:1001"},
	} {
		if _, ok, err := GrantsFromAnnotations(ann); !ok || err == nil {
			t.Errorf("%v: ok %v err %v, want an error", ann, ok, err)
		}
	}
}

func FuzzGrantsFromAnnotations(f *testing.F) {
	f.Add("0,1", "2:3g.40gb@4", "1:250")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, gpus, slice, share string) {
		ann := map[string]string{AnnotationGPUs: gpus, AnnotationMIGSlice: slice, AnnotationGPUShare: share}
		grants, _, err := GrantsFromAnnotations(ann)
		if err != nil {
			return
		}
		for _, g := range grants {
			if g.GPU < 0 || g.Slice == nil && (g.Milli < 1 || g.Milli > 1000) {
				t.Fatalf("accepted a bad grant %+v from %v", g, ann)
			}
		}
	})
}
