//! The node lists: openb_node_list_*.csv.

use std::io::Read;

use super::table::{Column, Table, parse_rows, read_all};
use super::{Cause, Node, ParseError};

// Column ids: indexes into NODE_COLUMNS.
const SN: usize = 0;
const CPU: usize = 1;
const MEMORY: usize = 2;
const GPU: usize = 3;
const MODEL: usize = 4;

static NODE_COLUMNS: [Column; 5] = [
    Column {
        name: "sn",
        required: true,
    },
    Column {
        name: "cpu_milli",
        required: true,
    },
    Column {
        name: "memory_mib",
        required: true,
    },
    Column {
        name: "gpu",
        required: true,
    },
    Column {
        name: "model",
        required: true,
    },
];

/// Reads a node list from `r`, in file order; `file` names the input in
/// errors. See [`parse_nodes`].
pub fn read_nodes(r: impl Read, file: &str) -> Result<Vec<Node>, ParseError> {
    parse_nodes(read_all(r, file)?, file)
}

/// Parses a node list (the file's bytes, or its text), in file order;
/// `file` names the input in errors. Besides well-formed non-negative
/// numbers and unique non-empty names, a node with GPUs must name its model
/// and one without must not.
pub fn parse_nodes(data: impl AsRef<[u8]>, file: &str) -> Result<Vec<Node>, ParseError> {
    parse_rows(data.as_ref(), file, &NODE_COLUMNS, SN, parse_node, |n| {
        (&n.name, n.line)
    })
}

fn parse_node(t: &Table) -> Result<Node, ParseError> {
    let line = t.line();
    let name = name(t, SN)?.to_string();
    let cpu_milli = t.count(CPU)?;
    let memory_mib = t.count(MEMORY)?;
    let gpus = t.small_count(GPU)?;
    let model = model_of(t, gpus)?.to_string();
    Ok(Node {
        name,
        cpu_milli,
        memory_mib,
        gpus,
        model,
        line,
    })
}

/// Checks the model cell against the GPU count. The all_node list writes
/// "" for CPU-only nodes and pandas exports write "nan"; both mean no
/// model. A model on a CPU-only node is rejected rather than dropped,
/// because it means the gpu column is probably wrong.
fn model_of<'t>(t: &'t Table, gpus: usize) -> Result<&'t str, ParseError> {
    let mut model = t.text(MODEL)?;
    if is_nan(model) {
        model = "";
    }
    if gpus > 0 && model.is_empty() {
        return Err(t.cell_error(MODEL, Cause::NoModel));
    }
    if gpus == 0 && !model.is_empty() {
        return Err(t.cell_error(MODEL, Cause::ModelNoGpu));
    }
    if model.contains('|') {
        // Pods list allowed models with |; a node model holding one could
        // never match any of them.
        return Err(t.cell_error(MODEL, Cause::ModelList));
    }
    Ok(model)
}

/// A row's identifying column, which must be non-empty.
pub(super) fn name<'t>(t: &'t Table, c: usize) -> Result<&'t str, ParseError> {
    let s = t.text(c)?;
    if s.is_empty() {
        return Err(t.cell_error(c, Cause::EmptyName));
    }
    Ok(s)
}

/// Whether `s` is the pandas spelling of a missing value. Go compares with
/// strings.EqualFold, Unicode case folding; no non-ASCII letter folds to
/// 'n' or 'a', so the ASCII comparison is the same.
pub(super) fn is_nan(s: &str) -> bool {
    s.eq_ignore_ascii_case("nan")
}
