package trace

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Column ids of a node list; indexes into nodeColumns.
const (
	nodeSN = iota
	nodeCPU
	nodeMemory
	nodeGPU
	nodeModel
)

var nodeColumns = []column{
	nodeSN:     {"sn", true},
	nodeCPU:    {"cpu_milli", true},
	nodeMemory: {"memory_mib", true},
	nodeGPU:    {"gpu", true},
	nodeModel:  {"model", true},
}

// ReadNodes reads a node list, in file order; file names the input in
// errors. Besides well-formed non-negative numbers and unique non-empty
// names, a node with GPUs must name its model and one without must not.
// On any error it returns nil and a *ParseError.
func ReadNodes(r io.Reader, file string) ([]Node, error) {
	t, err := newTable(r, file, nodeColumns)
	if err != nil {
		return nil, err
	}
	nodes := make([]Node, 0, t.rowsHint)
	seen := make(map[string]int, t.rowsHint) // name -> line, for the duplicate error
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nodes, nil
		}
		n, err := parseNode(t)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[n.Name]; dup {
			return nil, duplicateName(t, nodeSN, first)
		}
		seen[n.Name] = n.Line
		nodes = append(nodes, n)
	}
}

// ReadNodesFile reads the node list at path; errors name the path as given.
func ReadNodesFile(path string) ([]Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadNodes(f, path)
}

func parseNode(t *table) (Node, error) {
	n := Node{Line: t.line()}
	var err error
	if n.Name, err = name(t, nodeSN); err != nil {
		return Node{}, err
	}
	if n.CPUMilli, err = t.count(nodeCPU); err != nil {
		return Node{}, err
	}
	if n.MemoryMiB, err = t.count(nodeMemory); err != nil {
		return Node{}, err
	}
	if n.GPUs, err = t.smallCount(nodeGPU); err != nil {
		return Node{}, err
	}
	if n.Model, err = nodeModelOf(t, n.GPUs); err != nil {
		return Node{}, err
	}
	return n, nil
}

// nodeModelOf checks the model cell against the GPU count. The all_node
// list writes "" for CPU-only nodes and pandas exports write "nan"; both
// mean no model. A model on a CPU-only node is rejected rather than
// dropped, because it means the gpu column is probably wrong.
func nodeModelOf(t *table, gpus int) (string, error) {
	model, err := t.text(nodeModel)
	if err != nil {
		return "", err
	}
	if isNaN(model) {
		model = ""
	}
	switch {
	case gpus > 0 && model == "":
		return "", t.cellError(nodeModel, errNoModel)
	case gpus == 0 && model != "":
		return "", t.cellError(nodeModel, errModelNoGPU)
	case strings.Contains(model, "|"):
		// Pods list allowed models with |; a node model holding one could
		// never match any of them.
		return "", t.cellError(nodeModel, errModelList)
	}
	return model, nil
}

// name reads a row's identifying column, which must be non-empty.
func name(t *table, c int) (string, error) {
	s, err := t.text(c)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", t.cellError(c, errEmptyName)
	}
	return s, nil
}

// duplicateName reports the current row's name as already used on line
// first, so the error shows both lines.
func duplicateName(t *table, c int, first int) error {
	return t.cellError(c, fmt.Errorf("duplicate name, first used on line %d", first))
}

// isNaN reports whether s is the pandas spelling of a missing value.
func isNaN(s string) bool { return strings.EqualFold(s, "nan") }
