package trace

import (
	"bytes"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// addSeeds adds every fixture whose name starts with prefix, valid and
// malformed alike, to the fuzz corpus.
func addSeeds(f *testing.F, prefix string) {
	for _, pattern := range []string{"testdata/" + prefix + "*.csv", "testdata/bad/" + prefix + "*.csv"} {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, path := range paths {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}

// checkFailure asserts the shape every failure must have: a *ParseError
// with a cause and, for a cell error, a line.
func checkFailure(t *testing.T, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error is %T (%v), want *ParseError", err, err)
	}
	if pe.Err == nil || pe.Line < 0 || (pe.Column != "" && pe.Line < 1) || pe.Error() == "" {
		t.Fatalf("malformed ParseError %#v", pe)
	}
}

func FuzzReadPods(f *testing.F) {
	addSeeds(f, "pods_")
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := ReadPods(bytes.NewReader(data), "fuzz.csv")
		if err != nil {
			checkFailure(t, err)
			if pods != nil {
				t.Fatalf("got %d pods alongside error %v", len(pods), err)
			}
			return
		}
		if err := podsInvariant(pods); err != nil {
			t.Fatal(err)
		}
		// Written back in the full layout, the rows must read the same:
		// nothing the reader accepted was half-understood.
		again, err := ReadPods(bytes.NewReader(writePods(t, pods)), "again.csv")
		if err != nil {
			t.Fatalf("re-reading accepted pods: %v", err)
		}
		if !reflect.DeepEqual(withoutPodLines(again), withoutPodLines(pods)) {
			t.Fatalf("round trip changed the pods\n got %+v\nwant %+v", again, pods)
		}
	})
}

func FuzzReadNodes(f *testing.F) {
	addSeeds(f, "nodes_")
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := ReadNodes(bytes.NewReader(data), "fuzz.csv")
		if err != nil {
			checkFailure(t, err)
			if nodes != nil {
				t.Fatalf("got %d nodes alongside error %v", len(nodes), err)
			}
			return
		}
		if err := nodesInvariant(nodes); err != nil {
			t.Fatal(err)
		}
		again, err := ReadNodes(bytes.NewReader(writeNodes(t, nodes)), "again.csv")
		if err != nil {
			t.Fatalf("re-reading accepted nodes: %v", err)
		}
		if !reflect.DeepEqual(withoutNodeLines(again), withoutNodeLines(nodes)) {
			t.Fatalf("round trip changed the nodes\n got %+v\nwant %+v", again, nodes)
		}
	})
}

func writePods(t *testing.T, pods []Pod) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	header := make([]string, len(podColumns))
	for c, col := range podColumns {
		header[c] = col.name
	}
	w.Write(header)
	for _, p := range pods {
		w.Write([]string{
			p.Name, itoa64(p.CPUMilli), itoa64(p.MemoryMiB), strconv.Itoa(p.NumGPU), itoa64(p.GPUMilli),
			p.GPUSpecRaw, p.QoS, p.Phase,
			optTime(p.CreationTime, p.HasCreation), optTime(p.DeletionTime, p.HasDeletion),
			optTime(p.ScheduledTime, p.HasScheduled),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeNodes(t *testing.T, nodes []Node) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write([]string{"sn", "cpu_milli", "memory_mib", "gpu", "model"})
	for _, n := range nodes {
		w.Write([]string{n.Name, itoa64(n.CPUMilli), itoa64(n.MemoryMiB), strconv.Itoa(n.GPUs), n.Model})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

func optTime(v int64, has bool) string {
	if !has {
		return ""
	}
	return itoa64(v)
}

// Lines differ after a round trip (blank lines are not written back), so
// the comparison ignores them.
func withoutPodLines(pods []Pod) []Pod {
	out := slices.Clone(pods)
	for i := range out {
		out[i].Line = 0
	}
	return out
}

func withoutNodeLines(nodes []Node) []Node {
	out := slices.Clone(nodes)
	for i := range out {
		out[i].Line = 0
	}
	return out
}
