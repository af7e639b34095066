package trace

import (
	"errors"
	"strings"
	"testing"
)

const (
	podKnown  = "known: name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time"
	nodeKnown = "known: sn, cpu_milli, memory_mib, gpu, model"
)

// Each malformed fixture must fail with exactly this message: the file,
// the line and, for a bad cell, the column and the value.
func TestReadPodsErrors(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"pods_empty.csv", `pods_empty.csv: empty file: no header row`},
		{"pods_unknown_columns.csv", `pods_unknown_columns.csv:1: unknown columns "foo", "bar" (` + podKnown + `)`},
		{"pods_missing_columns.csv", `pods_missing_columns.csv:1: missing required columns num_gpu, gpu_milli`},
		{"pods_duplicate_header.csv", `pods_duplicate_header.csv:1: duplicate column "name" (fields 1 and 6)`},
		{"pods_field_count.csv", `pods_field_count.csv:3: row has 10 fields, header has 11`},
		{"pods_trailing_comma.csv", `pods_trailing_comma.csv:3: row has 6 fields, header has 5`},
		{"pods_bare_quote.csv", `pods_bare_quote.csv:3: bare " in non-quoted-field`},
		{"pods_not_integer.csv", `pods_not_integer.csv:3: column gpu_milli: "abc": not an integer`},
		{"pods_negative_cpu.csv", `pods_negative_cpu.csv:2: column cpu_milli: "-100": negative`},
		{"pods_float_memory.csv", `pods_float_memory.csv:3: column memory_mib: "1024.5": not an integer`},
		{"pods_overflow.csv", `pods_overflow.csv:2: column cpu_milli: "99999999999999999999": out of range`},
		{"pods_empty_name.csv", `pods_empty_name.csv:2: column name: "": empty name`},
		{"pods_name_spaces.csv", `pods_name_spaces.csv:2: column name: " pod": leading or trailing white space`},
		{"pods_newline_in_name.csv", `pods_newline_in_name.csv:2: column name: "a\nb": control character in text`},
		{"pods_duplicate_name.csv", `pods_duplicate_name.csv:4: column name: "p1": duplicate name, first used on line 2`},
		{"pods_negative_num_gpu.csv", `pods_negative_num_gpu.csv:2: column num_gpu: "-1": negative`},
		{"pods_milli_over.csv", `pods_milli_over.csv:2: column gpu_milli: "1001": must be between 0 and 1000`},
		{"pods_milli_no_gpu.csv", `pods_milli_no_gpu.csv:2: column gpu_milli: "500": GPU share given for a pod with num_gpu 0`},
		{"pods_milli_zero.csv", `pods_milli_zero.csv:2: column gpu_milli: "0": pod asks for GPUs but gpu_milli is 0`},
		{"pods_multi_share.csv", `pods_multi_share.csv:2: column gpu_milli: "500": multi-GPU pods must ask for whole GPUs (gpu_milli 1000)`},
		{"pods_spec_empty_model.csv", `pods_spec_empty_model.csv:2: column gpu_spec: "T4||P100": empty model in the | list`},
		{"pods_spec_nan_model.csv", `pods_spec_nan_model.csv:2: column gpu_spec: "T4|nan": "nan" inside a | list`},
		{"pods_spec_spaces.csv", `pods_spec_spaces.csv:2: column gpu_spec: "T4 |P100": leading or trailing white space`},
		{"pods_bad_time.csv", `pods_bad_time.csv:2: column creation_time: "12.5": not an integer`},
		{"pods_negative_time.csv", `pods_negative_time.csv:3: column deletion_time: "-5": negative`},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".csv"), func(t *testing.T) {
			pods, err := ReadPodsFile("testdata/bad/" + tt.file)
			checkParseError(t, err, tt.want)
			if pods != nil {
				t.Errorf("got %d pods alongside the error, want nil", len(pods))
			}
		})
	}
}

func TestReadNodesErrors(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"nodes_blank_lines.csv", `nodes_blank_lines.csv: empty file: no header row`},
		{"nodes_unknown_column.csv", `nodes_unknown_column.csv:1: unknown columns "rack" (` + nodeKnown + `)`},
		{"nodes_missing_model.csv", `nodes_missing_model.csv:1: missing required columns model`},
		{"nodes_duplicate_header.csv", `nodes_duplicate_header.csv:1: duplicate column "sn" (fields 1 and 6)`},
		{"nodes_field_count.csv", `nodes_field_count.csv:2: row has 6 fields, header has 5`},
		{"nodes_empty_sn.csv", `nodes_empty_sn.csv:2: column sn: "": empty name`},
		{"nodes_duplicate_sn.csv", `nodes_duplicate_sn.csv:5: column sn: "n2": duplicate name, first used on line 3`},
		{"nodes_negative_gpu.csv", `nodes_negative_gpu.csv:2: column gpu: "-2": negative`},
		{"nodes_gpu_no_model.csv", `nodes_gpu_no_model.csv:3: column model: "": node has GPUs but no model`},
		{"nodes_gpu_nan_model.csv", `nodes_gpu_nan_model.csv:2: column model: "nan": node has GPUs but no model`},
		{"nodes_model_no_gpu.csv", `nodes_model_no_gpu.csv:2: column model: "T4": model given for a node without GPUs`},
		{"nodes_model_list.csv", `nodes_model_list.csv:2: column model: "T4|P100": node model must be a single model, not a | list`},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".csv"), func(t *testing.T) {
			nodes, err := ReadNodesFile("testdata/bad/" + tt.file)
			checkParseError(t, err, tt.want)
			if nodes != nil {
				t.Errorf("got %d nodes alongside the error, want nil", len(nodes))
			}
		})
	}
}

// checkParseError asserts err is a *ParseError whose message, after the
// "testdata/bad/" prefix of the path, is want.
func checkParseError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %s", want)
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("got %T (%v), want *ParseError", err, err)
	}
	if got := err.Error(); got != "testdata/bad/"+want {
		t.Errorf("error\n got %s\nwant testdata/bad/%s", got, want)
	}
	if pe.Err == nil || errors.Unwrap(err) != pe.Err {
		t.Errorf("Unwrap() = %v, want the cause %v", errors.Unwrap(err), pe.Err)
	}
}
