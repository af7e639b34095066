package trace

import (
	"bytes"
	"os"
	"testing"
)

func BenchmarkReadPodsDefault(b *testing.B) {
	data, err := os.ReadFile(sharedFile(b, "openb_pod_list_default.csv"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		pods, err := ReadPods(bytes.NewReader(data), "openb_pod_list_default.csv")
		if err != nil || len(pods) != 8152 {
			b.Fatalf("got %d pods, %v", len(pods), err)
		}
	}
}
