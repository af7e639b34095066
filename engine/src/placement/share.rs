//! Accounting of GPU shares, shared by every world's utilization figures
//! and reports (docs/metrics.md).

use crate::cluster::{Assignment, Grant, Node};
use crate::gpu::{COMPUTE_SLICES, DEFAULT_HEADROOM, MEMORY_SLICES, Model, Profile};
use crate::workload::{Kind, Task};

/// The share of one GPU a grant holds: a whole or partial GPU by its milli,
/// a MIG instance by the larger of its compute (of 7) and memory (of 8)
/// slices. 0 for an instance of a profile the GPU's model lacks, or on a
/// GPU the node lacks.
pub fn grant_share(n: &Node, g: &Grant) -> f64 {
    let Some(slice) = &g.slice else {
        return f64::from(g.milli) / 1000.0;
    };
    let gpu = usize::try_from(g.gpu).ok().and_then(|i| n.gpus().get(i));
    match gpu.and_then(|d| d.model().profile(&slice.profile).ok()) {
        Some(p) => profile_share(p),
        None => 0.0,
    }
}

/// A MIG profile's share of its GPU: the larger of its compute and memory
/// shares.
fn profile_share(p: &Profile) -> f64 {
    (f64::from(p.compute) / f64::from(COMPUTE_SLICES))
        .max(f64::from(p.memory) / f64::from(MEMORY_SLICES))
}

/// The GPU a task needs, whatever it was given: whole GPUs count whole; a
/// share its share; a MIG or memory profile the share (as `grant_share`
/// counts it) of the smallest MIG profile that holds it on the model it
/// runs on (that of its first grant, else the node's).
pub fn need(n: &Node, a: &Assignment, t: &Task) -> f64 {
    let d = &t.gpu;
    match d.kind {
        Kind::WholeGpus => return f64::from(d.count),
        Kind::Fraction => return f64::from(d.milli) / 1000.0,
        Kind::NoGpu => return 0.0,
        Kind::MigProfile | Kind::MemoryProfile => {}
    }
    let model: Option<&Model> = match a.grants.first() {
        Some(g) => usize::try_from(g.gpu)
            .ok()
            .and_then(|i| n.gpus().get(i))
            .map(|d| d.model()),
        None => n.model(),
    };
    let Some(model) = model else {
        return 0.0;
    };
    let p = if d.kind == Kind::MigProfile {
        model.profile(&d.profile).ok()
    } else if model.mig {
        model
            .profile_for(d.peak_memory_mib, d.compute, DEFAULT_HEADROOM)
            .ok()
    } else {
        None
    };
    if let Some(p) = p {
        return profile_share(p);
    }
    if model.memory_mib > 0 {
        let by_memory = d.peak_memory_mib as f64 / model.memory_mib as f64;
        return go_min(1.0, go_max(d.compute, by_memory));
    }
    d.compute
}

/// Go's built-in min of two floats: NaN if either is NaN.
fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// Go's built-in max of two floats: NaN if either is NaN.
fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}
