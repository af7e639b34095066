// Package trace reads the node and pod lists of the Alibaba GPU 2023
// production trace (cluster-trace-gpu-v2023, the "openb" CSVs).
//
// The reader is strict on purpose: the simulator replays these files and a
// row that is silently dropped or misread changes every result downstream.
// Any malformed row is reported as a *ParseError naming the file, the line
// and the column; nothing is skipped.
//
// Columns are matched by header name, so their order does not matter, but
// every header must be a known column and each may appear only once. The
// pod lists come in two shapes: the full eleven-column form and the
// five-column form of the multigpu* files (name, cpu_milli, memory_mib,
// num_gpu, gpu_milli); the optional columns then read as absent.
//
// Numbers are plain non-negative decimal integers. "nan" in any letter
// case, as pandas writes a missing value, means empty in gpu_spec and in
// a node's model. Text cells may not have surrounding white space or
// control characters. Quoting follows RFC 4180; a UTF-8 BOM before the
// header and blank lines (a trailing newline, say) are tolerated.
package trace

import (
	"errors"
	"fmt"
	"strconv"
)

// Node is one row of an openb_node_list_*.csv file.
type Node struct {
	Name      string // the sn column
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int
	Model     string // "" when the node has no GPU
	Line      int    // 1-based line in the file
}

// Pod is one row of an openb_pod_list_*.csv file.
type Pod struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	NumGPU    int
	// GPUMilli is the share of each GPU in milli, as written in the file:
	// 1..1000 for a single-GPU pod, exactly 1000 for a multi-GPU pod, 0 for
	// a pod without GPUs.
	GPUMilli int64
	// GPUSpec lists the GPU models the pod may run on, de-duplicated with
	// the first occurrence's order kept (the trace has rows such as
	// "V100M16|V100M32|V100M32"). nil means no constraint.
	GPUSpec []string
	// GPUSpecRaw is the gpu_spec cell exactly as written, duplicates and
	// "nan" included ("" when the column is absent). The FGD protocol keys
	// on the raw string, so it is kept alongside the parsed list.
	GPUSpecRaw string
	QoS        string // "" when the column is absent
	Phase      string // the pod_phase column; "" when absent

	// Times are integer seconds from the start of the trace. A Has* flag
	// is false, and its time 0, when the column is absent or the cell
	// empty (the trace leaves scheduled_time empty for Pending pods).
	CreationTime  int64
	DeletionTime  int64
	ScheduledTime int64
	HasCreation   bool
	HasDeletion   bool
	HasScheduled  bool

	Line int // 1-based line in the file
}

// ParseError reports a malformed trace file.
type ParseError struct {
	File   string // the name given to the reader
	Line   int    // 1-based; 0 when the error is not tied to a line
	Column string // header name of the offending cell; "" for row or header errors
	Value  string // the offending cell as written; meaningful only with Column
	Err    error
}

// maxShownValue bounds how much of a cell Error prints, so that a garbage
// cell of megabytes does not become a megabyte error message.
const maxShownValue = 64

func (e *ParseError) Error() string {
	loc := e.File
	if loc == "" {
		loc = "<input>"
	}
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Column == "" {
		return fmt.Sprintf("%s: %v", loc, e.Err)
	}
	v := e.Value
	if len(v) > maxShownValue {
		v = v[:maxShownValue-3] + "..."
	}
	return fmt.Sprintf("%s: column %s: %q: %v", loc, e.Column, v, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// Cell-level failures. They are wrapped in a ParseError, which carries the
// position; the messages are written to read well after the quoted value.
var (
	errEmptyCell  = errors.New("empty cell")
	errNotInteger = errors.New("not an integer")
	errNegative   = errors.New("negative")
	errOutOfRange = errors.New("out of range")
	errEmptyName  = errors.New("empty name")
	errSpaces     = errors.New("leading or trailing white space")
	errControl    = errors.New("control character in text")
	errBadUTF8    = errors.New("invalid UTF-8")
	errNoHeader   = errors.New("empty file: no header row")
	errNoModel    = errors.New("node has GPUs but no model")
	errModelNoGPU = errors.New("model given for a node without GPUs")
	errModelList  = errors.New("node model must be a single model, not a | list")
	errEmptySpec  = errors.New("empty model in the | list")
	errNaNInSpec  = errors.New(`"nan" inside a | list`)
	errMilliRange = errors.New("must be between 0 and 1000")
	errMilliNoGPU = errors.New("GPU share given for a pod with num_gpu 0")
	errMilliZero  = errors.New("pod asks for GPUs but gpu_milli is 0")
	errMultiShare = errors.New("multi-GPU pods must ask for whole GPUs (gpu_milli 1000)")
)
