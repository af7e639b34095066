package trace

import (
	"reflect"
	"strings"
	"testing"
)

func TestReadNodesFixtures(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []Node
	}{
		{
			name: "CPU-only nodes may write the model as empty or any-case nan",
			file: "testdata/nodes_all.csv",
			want: []Node{
				{Name: "node-cpu-a", CPUMilli: 32000, MemoryMiB: 262144, GPUs: 0, Model: "", Line: 2},
				{Name: "node-cpu-b", CPUMilli: 32000, MemoryMiB: 262144, GPUs: 0, Model: "", Line: 3},
				{Name: "node-p100", CPUMilli: 64000, MemoryMiB: 262144, GPUs: 2, Model: "P100", Line: 4},
				{Name: "node-v100", CPUMilli: 96000, MemoryMiB: 786432, GPUs: 8, Model: "V100M32", Line: 5},
				{Name: "node-cpu-c", CPUMilli: 16000, MemoryMiB: 65536, GPUs: 0, Model: "", Line: 6},
			},
		},
		{
			name: "columns are found by name, in any order, quoted or not",
			file: "testdata/nodes_reordered.csv",
			want: []Node{
				{Name: "node-t4", CPUMilli: 32000, MemoryMiB: 131072, GPUs: 1, Model: "T4", Line: 2},
				{Name: "node-g2", CPUMilli: 96000, MemoryMiB: 786432, GPUs: 8, Model: "G2", Line: 3},
			},
		},
		{
			name: "a BOM and CRLF line ends are tolerated",
			file: "testdata/nodes_bom_crlf.csv",
			want: []Node{
				{Name: "node-a", CPUMilli: 1000, MemoryMiB: 2048, GPUs: 1, Model: "A10", Line: 2},
				{Name: "node-b", CPUMilli: 2000, MemoryMiB: 4096, GPUs: 0, Model: "", Line: 3},
			},
		},
		{
			name: "a header alone is an empty list",
			file: "testdata/nodes_header_only.csv",
			want: []Node{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadNodesFile(tt.file)
			if err != nil {
				t.Fatalf("ReadNodesFile(%s): %v", tt.file, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReadNodesFile(%s)\n got %+v\nwant %+v", tt.file, got, tt.want)
			}
		})
	}
}

func TestReadPodsFixtures(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []Pod
	}{
		{
			name: "full eleven-column list",
			file: "testdata/pods_full.csv",
			want: []Pod{
				{
					Name: "pod-cpu", CPUMilli: 12500, MemoryMiB: 57344, QoS: "LS", Phase: "Running",
					CreationTime: 10971827, DeletionTime: 10972394, ScheduledTime: 10971829,
					HasCreation: true, HasDeletion: true, HasScheduled: true, Line: 2,
				},
				{
					Name: "pod-share", CPUMilli: 6000, MemoryMiB: 12288, NumGPU: 1, GPUMilli: 460,
					GPUSpecRaw: "nan", QoS: "BE", Phase: "Running",
					CreationTime: 427061, DeletionTime: 12902960, ScheduledTime: 427061,
					HasCreation: true, HasDeletion: true, HasScheduled: true, Line: 3,
				},
				{
					Name: "pod-whole", CPUMilli: 16000, MemoryMiB: 32768, NumGPU: 1, GPUMilli: 1000,
					GPUSpec: []string{"V100M16", "V100M32"}, GPUSpecRaw: "V100M16|V100M32",
					QoS: "LS", Phase: "Running",
					CreationTime: 9967058, DeletionTime: 9968575, ScheduledTime: 9967063,
					HasCreation: true, HasDeletion: true, HasScheduled: true, Line: 4,
				},
				{
					Name: "pod-dup-spec", CPUMilli: 88000, MemoryMiB: 327680, NumGPU: 8, GPUMilli: 1000,
					GPUSpec: []string{"V100M16", "V100M32"}, GPUSpecRaw: "V100M16|V100M32|V100M32",
					QoS: "Burstable", Phase: "Succeeded",
					CreationTime: 9437497, DeletionTime: 10769854, ScheduledTime: 9437497,
					HasCreation: true, HasDeletion: true, HasScheduled: true, Line: 5,
				},
				{
					Name: "pod-pending", CPUMilli: 4000, MemoryMiB: 15258, NumGPU: 1, GPUMilli: 220,
					QoS: "BE", Phase: "Pending",
					CreationTime: 9679175, DeletionTime: 9973826,
					HasCreation: true, HasDeletion: true, HasScheduled: false, Line: 6,
				},
				{
					Name: "pod-quoted", CPUMilli: 1, MemoryMiB: 0, NumGPU: 2, GPUMilli: 1000,
					GPUSpec: []string{"T4", "P100"}, GPUSpecRaw: "T4|P100",
					QoS: "Guaranteed", Phase: "Failed",
					HasCreation: true, HasDeletion: true, HasScheduled: true, Line: 7,
				},
			},
		},
		{
			name: "multigpu five-column list leaves the optional fields unset",
			file: "testdata/pods_multigpu.csv",
			want: []Pod{
				{Name: "openb-pod-0000", CPUMilli: 12000, MemoryMiB: 16384, NumGPU: 1, GPUMilli: 1000, Line: 2},
				{Name: "openb-pod-0001", CPUMilli: 6000, MemoryMiB: 12288, NumGPU: 1, GPUMilli: 460, Line: 3},
				{Name: "openb-pod-0002", CPUMilli: 88000, MemoryMiB: 327680, NumGPU: 8, GPUMilli: 1000, Line: 4},
				{Name: "openb-pod-0003", CPUMilli: 4000, MemoryMiB: 8192, NumGPU: 0, GPUMilli: 0, Line: 5},
			},
		},
		{
			name: "a header alone is an empty list",
			file: "testdata/pods_header_only.csv",
			want: []Pod{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadPodsFile(tt.file)
			if err != nil {
				t.Fatalf("ReadPodsFile(%s): %v", tt.file, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReadPodsFile(%s)\n got %+v\nwant %+v", tt.file, got, tt.want)
			}
		})
	}
}

func TestReadFileMissing(t *testing.T) {
	if _, err := ReadPodsFile("testdata/no-such-file.csv"); err == nil {
		t.Error("ReadPodsFile on a missing file: got nil error")
	}
	if _, err := ReadNodesFile("testdata/no-such-file.csv"); err == nil {
		t.Error("ReadNodesFile on a missing file: got nil error")
	}
}

func TestParseErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  *ParseError
		want string
	}{
		{
			name: "cell errors quote the value",
			err:  &ParseError{File: "f.csv", Line: 12, Column: "gpu_milli", Value: "abc", Err: errNotInteger},
			want: `f.csv:12: column gpu_milli: "abc": not an integer`,
		},
		{
			name: "row errors have no column",
			err:  &ParseError{File: "f.csv", Line: 3, Err: errNoModel},
			want: `f.csv:3: node has GPUs but no model`,
		},
		{
			name: "file errors have no line",
			err:  &ParseError{File: "f.csv", Err: errNoHeader},
			want: `f.csv: empty file: no header row`,
		},
		{
			name: "an unnamed input still reads as a location",
			err:  &ParseError{Line: 2, Column: "sn", Value: "", Err: errEmptyName},
			want: `<input>:2: column sn: "": empty name`,
		},
		{
			name: "long values are cut short",
			err:  &ParseError{File: "f", Line: 2, Column: "name", Value: strings.Repeat("x", 100), Err: errSpaces},
			want: `f:2: column name: "` + strings.Repeat("x", 61) + `...": leading or trailing white space`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error()\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParseCount(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr error
	}{
		{in: "0", want: 0},
		{in: "007", want: 7},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "9223372036854775808", wantErr: errOutOfRange},
		{in: "", wantErr: errEmptyCell},
		{in: "-", wantErr: errNotInteger},
		{in: "-0", wantErr: errNegative},
		{in: "-12", wantErr: errNegative},
		{in: "+12", wantErr: errNotInteger},
		{in: " 12", wantErr: errNotInteger},
		{in: "1e3", wantErr: errNotInteger},
		{in: "1.0", wantErr: errNotInteger},
		{in: "99999999999999999999x", wantErr: errNotInteger},
	}
	for _, tt := range tests {
		got, err := parseCount(tt.in)
		if err != tt.wantErr || got != tt.want {
			t.Errorf("parseCount(%q) = %d, %v; want %d, %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
