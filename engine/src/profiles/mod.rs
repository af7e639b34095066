//! The catalog of workload types Partita's scenarios and benchmarks are
//! made of: LLM serving at several sizes, embedding, reranking, diffusion,
//! recommendation, speech, notebooks, and training from a LoRA fine-tune to
//! a pre-training rank.
//!
//! Each profile says how much GPU memory a task touches at its peak and how
//! much compute it needs, and shows where the memory figure comes from,
//! term by term (`catalog.rs`). Inference asks for a memory profile, so the
//! engine can pick the smallest MIG slice that holds it; training and
//! models too big for one GPU ask for whole GPUs.
//!
//! The Go build's `internal/profiles`, ported at commit c501232 (the rows,
//! their terms, the allocator reserve, the measurements, and the API:
//! `lookup`, `all`, `names`, `Profile::demand`, `Profile::task`).

mod catalog;
#[cfg(test)]
mod tests;

use std::fmt::{self, Write};
use std::sync::LazyLock;

use thiserror::Error;

use crate::quote::quote;
use crate::workload::{self, Demand, Task};

use catalog::MIB;

/// How a profile asks for GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Long-running work sized by memory: a MIG slice picked from
    /// `peak_memory_mib` and `compute`, or whole GPUs when `gpus` > 0.
    Inference,
    /// Runs on whole GPUs, `gpus` per task, often as a gang.
    Training,
}

impl Kind {
    /// "inference" or "training", as scenario errors print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Inference => "inference",
            Kind::Training => "training",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One workload type.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub kind: Kind,
    /// The most GPU memory one GPU of a task holds: for a memory-profiled
    /// task (inference with `gpus` 0) the whole task, for a whole-GPU task
    /// each of its GPUs.
    pub peak_memory_mib: i64,
    /// The share of one H100's compute a task needs, 0 to 1.
    pub compute: f64,
    /// Whole GPUs per task, all on one node; 0 means the task asks for a
    /// memory profile instead.
    pub gpus: i32,
    pub cpu_milli: i64,
    pub host_memory_mib: i64,
    pub derivation: Derivation,
    /// Processes of the profile's model measured on real hardware, each
    /// beside what the derivation gives for the configuration measured.
    pub measured: Vec<Measurement>,
}

/// What one process really held on a real GPU: the caching allocator's
/// reserved memory plus the CUDA context, at its peak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measurement {
    /// The GPU, driver, software, date and source (Go's `Where`).
    pub place: String,
    /// What ran, and how it differs from the profile.
    pub config: String,
    /// Measured.
    pub held_mib: i64,
    /// The derivation, for the configuration measured.
    pub derived_mib: i64,
}

/// Where `peak_memory_mib` comes from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Derivation {
    /// The model's shape, the assumptions (batch, tokens), and sources.
    pub basis: String,
    /// They add up to `peak_memory_mib` (rounded up to whole MiB).
    pub terms: Vec<Term>,
}

/// One addend of a derivation.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// The arithmetic in words: "weights: 6.74e9 params × 2 B (bf16)".
    pub what: String,
    /// The same arithmetic, evaluated.
    pub bytes: f64,
}

impl Derivation {
    /// The terms added up (in order, as the Go build adds them) and
    /// rounded up to whole MiB.
    pub fn total_mib(&self) -> i64 {
        let sum: f64 = self.terms.iter().map(|t| t.bytes).sum();
        (sum / MIB).ceil() as i64
    }
}

impl fmt::Display for Derivation {
    /// The derivation written out, one term a line, ending with the total
    /// (Go's `Derivation.String`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = self.basis.clone();
        for t in &self.terms {
            let _ = write!(s, "\n  {:9.1} MiB  {}", t.bytes / MIB, t.what);
        }
        let _ = write!(s, "\n  {:7}   MiB  total", self.total_mib());
        f.write_str(&s)
    }
}

/// A name that is not in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown profile {} (known: {})", quote(.0), names().join(", "))]
pub struct UnknownProfile(pub String);

static CATALOG: LazyLock<Vec<Profile>> = LazyLock::new(catalog::build);

/// The profile named exactly `name` (case matters), a copy the caller may
/// change.
pub fn lookup(name: &str) -> Result<Profile, UnknownProfile> {
    CATALOG
        .iter()
        .find(|p| p.name == name)
        .cloned()
        .ok_or_else(|| UnknownProfile(name.to_string()))
}

/// Every profile, in catalog order (inference small to large, then
/// training); copies the caller may change.
pub fn all() -> Vec<Profile> {
    CATALOG.clone()
}

/// The profile names in catalog order.
pub fn names() -> Vec<&'static str> {
    CATALOG.iter().map(|p| p.name.as_str()).collect()
}

impl Profile {
    /// Whether a task of the profile asks for whole GPUs rather than a
    /// memory profile.
    pub fn whole(&self) -> bool {
        self.kind == Kind::Training || self.gpus > 0
    }

    /// The GPU demand of one task, limited to `models` when that is not
    /// empty: a memory profile for inference that fits one GPU, `gpus`
    /// whole GPUs otherwise. A training profile with `gpus` 0 (none in the
    /// catalog) still asks for one whole GPU.
    pub fn demand(&self, models: &[String]) -> Demand {
        let mut d = if self.whole() {
            Demand::whole_gpus(self.gpus.max(1))
        } else {
            Demand::memory_profile(self.peak_memory_mib, self.compute)
        };
        d.models = models.to_vec();
        d
    }

    /// One task of the profile, named `name`, on any GPU model.
    pub fn task(&self, name: &str) -> Task {
        workload::Task {
            name: name.to_string(),
            cpu_milli: self.cpu_milli,
            memory_mib: self.host_memory_mib,
            gpu: self.demand(&[]),
        }
    }
}
