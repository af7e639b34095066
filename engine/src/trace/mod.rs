//! Strict readers of the node and pod lists of the Alibaba GPU 2023
//! production trace (cluster-trace-gpu-v2023, the "openb" CSVs).
//!
//! The readers are strict on purpose: the simulator replays these files
//! and a row that is silently dropped or misread changes every result
//! downstream. Any malformed row is a [`ParseError`] naming the file, the
//! line and the column; nothing is skipped. They accept and refuse exactly
//! what the Go build's `internal/trace` does, with the same error texts.
//!
//! Columns are matched by header name, so their order does not matter, but
//! every header must be a known column and each may appear only once. The
//! pod lists come in two shapes: the full eleven-column form and the
//! five-column form of the multigpu* files (name, cpu_milli, memory_mib,
//! num_gpu, gpu_milli); the optional columns then read as absent.
//!
//! Numbers are plain non-negative decimal integers. "nan" in any letter
//! case, as pandas writes a missing value, means empty in gpu_spec and in
//! a node's model. Text cells may not have surrounding white space or
//! control characters. Quoting follows RFC 4180; a UTF-8 BOM before the
//! header and blank lines (a trailing newline, say) are tolerated.
//!
//! The engine does no I/O: the readers take the file's bytes, or a reader
//! the caller opened, and the name to put in errors.

mod csv;
#[cfg(test)]
mod invariants;
mod nodes;
mod pods;
mod table;
#[cfg(test)]
mod tests;

use std::fmt;

use crate::quote::go_quote;

pub use nodes::{parse_nodes, read_nodes};
pub use pods::{parse_pods, read_pods};

/// One row of an openb_node_list_*.csv file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The sn column.
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub gpus: usize,
    /// Empty when the node has no GPU.
    pub model: String,
    /// 1-based line in the file.
    pub line: usize,
}

/// One row of an openb_pod_list_*.csv file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub num_gpu: usize,
    /// The share of each GPU in milli, as written in the file: 1..=1000 for
    /// a single-GPU pod, exactly 1000 for a multi-GPU pod, 0 for a pod
    /// without GPUs.
    pub gpu_milli: i64,
    /// The GPU models the pod may run on, de-duplicated with the first
    /// occurrence's order kept (the trace has rows such as
    /// "V100M16|V100M32|V100M32"). Empty means no constraint.
    pub gpu_spec: Vec<String>,
    /// The gpu_spec cell exactly as written, duplicates and "nan" included
    /// (empty when the column is absent). The FGD protocol keys on the raw
    /// string, so it is kept alongside the parsed list.
    pub gpu_spec_raw: String,
    /// Empty when the column is absent.
    pub qos: String,
    /// The pod_phase column; empty when absent.
    pub phase: String,
    /// Integer seconds from the start of the trace; `None` when the column
    /// is absent or the cell empty (the trace leaves scheduled_time empty
    /// for Pending pods).
    pub creation_time: Option<i64>,
    pub deletion_time: Option<i64>,
    pub scheduled_time: Option<i64>,
    /// 1-based line in the file.
    pub line: usize,
}

/// A malformed trace file.
#[derive(Debug)]
pub struct ParseError {
    /// The name given to the reader.
    pub file: String,
    /// 1-based; 0 when the error is not tied to a line.
    pub line: usize,
    /// Header name of the offending cell; `None` for row or header errors.
    pub column: Option<&'static str>,
    /// The offending cell as written (its bytes: a cell may be invalid
    /// UTF-8); meaningful only with `column`.
    pub value: Vec<u8>,
    /// What is wrong.
    pub cause: Cause,
}

/// How much of a cell an error prints, so that a garbage cell of megabytes
/// does not become a megabyte error message.
const MAX_SHOWN_VALUE: usize = 64;

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = if self.file.is_empty() {
            "<input>"
        } else {
            &self.file
        };
        f.write_str(file)?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        }
        let Some(column) = self.column else {
            return write!(f, ": {}", self.cause);
        };
        // Cut by bytes, as Go does, even inside a UTF-8 sequence: the
        // quoting then shows the cut bytes as \x escapes.
        let shown = if self.value.len() > MAX_SHOWN_VALUE {
            let mut v = self.value[..MAX_SHOWN_VALUE - 3].to_vec();
            v.extend_from_slice(b"...");
            go_quote(&v)
        } else {
            go_quote(&self.value)
        };
        write!(f, ": column {column}: {shown}: {}", self.cause)
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
    }
}

/// What is wrong with a trace file. The texts are the Go build's; they are
/// written to read well after the quoted value of a [`ParseError`].
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    /// The caller's reader failed.
    #[error("{0}")]
    Read(#[source] std::io::Error),
    /// Nothing but blank lines, or nothing at all.
    #[error("empty file: no header row")]
    NoHeader,
    /// A header name appears twice; fields are 1-based.
    #[error("duplicate column {} (fields {first} and {second})", go_quote(.name))]
    DuplicateColumn {
        name: Vec<u8>,
        first: usize,
        second: usize,
    },
    /// Header names that are not columns of this kind of file.
    #[error("unknown columns {} (known: {})", quoted_list(.names), .known.join(", "))]
    UnknownColumns {
        names: Vec<Vec<u8>>,
        known: Vec<&'static str>,
    },
    /// Required columns the header lacks.
    #[error("missing required columns {}", .names.join(", "))]
    MissingColumns { names: Vec<&'static str> },
    /// A row whose field count differs from the header's.
    #[error("row has {got} fields, header has {want}")]
    FieldCount { got: usize, want: usize },
    #[error("bare \" in non-quoted-field")]
    BareQuote,
    #[error("extraneous or missing \" in quoted-field")]
    Quote,
    #[error("empty cell")]
    EmptyCell,
    #[error("not an integer")]
    NotInteger,
    #[error("negative")]
    Negative,
    #[error("out of range")]
    OutOfRange,
    #[error("empty name")]
    EmptyName,
    /// A name already used by an earlier row, on line `first`.
    #[error("duplicate name, first used on line {first}")]
    DuplicateName { first: usize },
    #[error("leading or trailing white space")]
    Spaces,
    #[error("control character in text")]
    Control,
    #[error("invalid UTF-8")]
    BadUtf8,
    #[error("node has GPUs but no model")]
    NoModel,
    #[error("model given for a node without GPUs")]
    ModelNoGpu,
    #[error("node model must be a single model, not a | list")]
    ModelList,
    #[error("empty model in the | list")]
    EmptySpec,
    #[error("\"nan\" inside a | list")]
    NanInSpec,
    #[error("must be between 0 and 1000")]
    MilliRange,
    #[error("GPU share given for a pod with num_gpu 0")]
    MilliNoGpu,
    #[error("pod asks for GPUs but gpu_milli is 0")]
    MilliZero,
    #[error("multi-GPU pods must ask for whole GPUs (gpu_milli 1000)")]
    MultiShare,
}

/// The names, each in Go's `%q` quotes, joined by ", ".
fn quoted_list(names: &[Vec<u8>]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| go_quote(n)).collect();
    quoted.join(", ")
}
