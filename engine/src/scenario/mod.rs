//! Scenario files: the YAML that describes a cluster (node groups, teams
//! with quotas) and the work offered to it (workloads: which profile, how
//! jobs arrive, how long they run) for the mixed-workload benchmark and the
//! standalone server's virtual cluster. docs/scenario.md documents every
//! field. This is the Go build's `internal/scenario`, with the same
//! behaviour and error texts.
//!
//! `parse` refuses anything it does not understand: unknown fields, values
//! of the wrong type, references to teams or profiles that do not exist,
//! and workloads the cluster could never run. Every error is an [`Error`]
//! naming the file, the line and the field.
//!
//! A parsed Scenario builds its nodes (`nodes`) and a deterministic stream
//! of job arrivals over its horizon (`jobs`): the same seed gives the same
//! stream, bit for bit, and the same stream as the Go build's.
//!
//! The engine does no I/O: `parse` takes the file's text and its name, and
//! `jobs` asks its caller for the text of the trace files that `trace`
//! arrivals name.

pub(crate) mod convert;
mod decode;
pub mod duration;
mod index;
mod jobs;
mod nodes;
mod raw;
mod validate;
mod yaml;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

use crate::cluster::Tier;
use crate::profiles::{self, Profile};
use crate::workload::Class;

pub use jobs::{Arrival, TraceFiles, go_open_error};

/// Every error `parse`, `Scenario::validate`, `nodes` and `jobs` return
/// about a scenario: it names the file, the line when known, and the
/// field, as `file:line: field: what is wrong`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct Error {
    /// As given to `parse`; "" for a scenario built in code.
    pub file: String,
    /// 1-based; 0 when unknown.
    pub line: usize,
    /// A path such as "nodes[2].gpus"; "" for the whole file.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.file.is_empty() {
            f.write_str("scenario")?;
        } else {
            f.write_str(&self.file)?;
        }
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A parsed, valid scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// As given to `parse`; trace files are relative to its directory.
    pub file: String,
    /// Default: the file name without its extension.
    pub name: String,
    /// The simulated horizon, in nanoseconds.
    pub duration: i64,
    /// Default 1; callers pass it to `jobs`.
    pub seed: i64,
    /// GPUs Partita keeps free of borrowed batch and best-effort work so
    /// that production starts at once (0: none).
    pub production_reserve_gpus: i64,
    pub node_groups: Vec<NodeGroup>,
    pub teams: Vec<Team>,
    pub workloads: Vec<Workload>,
    /// Field path -> line, for errors found after parsing.
    lines: BTreeMap<String, usize>,
}

/// `count` identical nodes named group-0, group-1, ….
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeGroup {
    pub group: String,
    pub count: i64,
    /// The canonical `gpu::lookup` name.
    pub gpu: String,
    /// Per node.
    pub gpus: i64,
    /// Every GPU starts in MIG mode with no instances.
    pub mig: bool,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub tier: Tier,
    /// Nodes go round-robin under these leaf switches.
    pub leaves: Vec<String>,
    pub spine: String,
    pub block: String,
    /// `cluster::LINK_NONE`, `LINK_ALL`, `LINK_PAIRS`, or "" for the
    /// model's default.
    pub nvlink: String,
}

/// A quota holder.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Team {
    pub name: String,
    pub guaranteed_gpus: i64,
    /// The most GPUs the team may hold when others are idle; default all.
    pub burst_gpus: i64,
    /// Share of what is left over after guarantees; default 1.
    pub weight: f64,
    pub classes: Vec<Class>,
}

/// A stream of jobs of one kind.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Workload {
    /// Also the project of its jobs and the prefix of their IDs.
    pub name: String,
    pub team: String,
    pub class: Class,
    /// `profile: x` is a mix of one with weight 1.
    pub mix: Vec<Weighted>,
    pub arrival: Process,
    /// `dist` "" only for trace arrivals: the trace's own times.
    pub duration: Dist,
    /// Inference: tasks per job, default 1; 0 for training.
    pub replicas: i64,
    /// Training: tasks per job; empty for inference.
    pub gang: Gang,
    /// Nanoseconds.
    pub checkpoint_every: i64,
}

/// One profile of a workload's mix.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighted {
    pub profile: Profile,
    pub weight: f64,
}

impl Workload {
    /// The kind of the workload's profiles (they all share one); None
    /// without profiles.
    pub fn kind(&self) -> Option<profiles::Kind> {
        self.mix.first().map(|m| m.profile.kind)
    }
}

/// Arrival processes.
pub const POISSON: &str = "poisson";
/// Creation times of an Alibaba pod list.
pub const TRACE: &str = "trace";
/// Listed times.
pub const FIXED: &str = "fixed";

/// When a workload's jobs arrive. Only the fields of its process are set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Process {
    pub process: String,
    pub rate_per_hour: f64,
    /// Resolved against the scenario file's directory.
    pub file: String,
    /// Multiplies trace times (0.1 runs the trace ten times faster).
    pub time_scale: f64,
    /// Nanoseconds since the start.
    pub at: Vec<i64>,
}

/// Duration distributions.
pub const EXPONENTIAL: &str = "exponential";
/// Mean (of the distribution, not of its log) and sigma.
pub const LOGNORMAL: &str = "lognormal";
/// Value.
pub const CONSTANT: &str = "fixed";
/// Min, max.
pub const UNIFORM: &str = "uniform";

/// A distribution of job run times. Only the fields of its `dist` are set;
/// durations in nanoseconds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Dist {
    pub dist: String,
    pub mean: i64,
    pub sigma: f64,
    pub value: i64,
    pub min: i64,
    pub max: i64,
}

/// A distribution of gang sizes: tasks per training job.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Gang {
    pub sizes: Vec<i64>,
    /// One per size; default equal.
    pub weights: Vec<f64>,
}

/// What `parse` reads at most: scenario files are hand-written.
pub const MAX_FILE_BYTES: usize = 4 << 20;

/// Reads and checks a scenario: the file's text (its bytes), and `file`,
/// which names it in errors and anchors relative trace paths.
pub fn parse(data: impl AsRef<[u8]>, file: &str) -> Result<Scenario, Error> {
    let data = data.as_ref();
    let whole_file = |message: String| Error {
        file: file.to_string(),
        line: 0,
        field: String::new(),
        message,
    };
    if data.len() > MAX_FILE_BYTES {
        return Err(whole_file(format!(
            "larger than {} MiB",
            MAX_FILE_BYTES >> 20
        )));
    }
    let text = yaml::decode_input(data).map_err(|e| index::syntax_error(file, &e))?;
    let mut reader = yaml::Reader::new(&text);
    // The tree gives the positions of fields; the strict decode below
    // fills the raw types and refuses unknown fields.
    let tree = match reader.next_document() {
        Err(e) => return Err(index::syntax_error(file, &e)),
        Ok(None) => return Err(whole_file("empty scenario: no YAML document".into())),
        Ok(Some(tree)) => tree,
    };
    let ix = index::Index::new(&tree);
    let mut raw = raw::RawScenario::default();
    let mut decoder = decode::Decoder::new(&tree, true);
    match decoder.unmarshal(0, &mut raw) {
        Err(fatal) => return Err(ix.decode_error(file, Some(&fatal), None)),
        Ok(_) if !decoder.terrors.is_empty() => {
            return Err(ix.decode_error(file, None, decoder.terrors.first()));
        }
        Ok(_) => {}
    }
    match reader.next_document() {
        Err(e) => return Err(index::syntax_error(file, &e)),
        Ok(Some(next)) => {
            return Err(Error {
                file: file.to_string(),
                line: next.nodes[0].line,
                field: String::new(),
                message: "a second YAML document; put one scenario in a file".into(),
            });
        }
        Ok(None) => {}
    }
    let s = convert::convert(&raw, file, ix.lines)?;
    s.validate()?;
    Ok(s)
}

impl Scenario {
    /// An error about field `field` of the scenario, at its line (or its
    /// nearest ancestor's) in the file.
    fn error(&self, field: &str, message: String) -> Error {
        Error {
            file: self.file.clone(),
            line: index::line_of(&self.lines, field),
            field: field.to_string(),
            message,
        }
    }

    /// Whether the file gives the field at `path`.
    fn has(&self, path: &str) -> bool {
        self.lines.contains_key(path)
    }

    /// The number of GPUs in the cluster.
    pub fn gpus(&self) -> i64 {
        self.node_groups.iter().map(|g| g.count * g.gpus).sum()
    }

    /// A scenario built in code (no file): check it with `validate`.
    pub fn new(name: &str, duration: i64) -> Scenario {
        Scenario {
            file: String::new(),
            name: name.to_string(),
            duration,
            seed: 1,
            production_reserve_gpus: 0,
            node_groups: Vec::new(),
            teams: Vec::new(),
            workloads: Vec::new(),
            lines: BTreeMap::new(),
        }
    }
}
