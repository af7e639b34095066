use crate::cluster::{Assignment, Node};
use crate::placement::{Hint, Policy, Request, Scorer};
use crate::workload::Kind;

/// Keeps tasks of one kind together (the FGD protocol's GpuClustering): a
/// task's tag is "share" for a share of one GPU, "MIG" for a MIG instance
/// or memory profile, or its GPU count otherwise, and
///
/// ```text
/// score = b + ⌊25 × (8000 − gL) / 8000⌋
/// ```
///
/// where b is 75 if the node holds only GPU tasks of the same tag, 50 if
/// it holds that tag among others, 25 if it holds no GPU task, 0
/// otherwise. 8000 is kept even for smaller nodes, as in the original.
/// CPU-only tasks score 0 everywhere, so the tie rule places them.
pub fn gpu_clustering() -> Policy {
    Policy {
        scorer: Some(Box::new(Clustering)),
        ..Policy::new("gpu-clustering")
    }
}

struct Clustering;

impl Scorer for Clustering {
    fn name(&self) -> &'static str {
        "gpu-clustering"
    }

    fn score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>) {
        if r.kind() == Kind::NoGpu {
            return (0, None);
        }
        let want = request_tag(r);
        let (mut same, mut other) = (0, 0);
        for a in n.tasks() {
            match assignment_tag(a) {
                Tag::NoGpu => {}
                t if t == want => same += 1,
                _ => other += 1,
            }
        }
        let b = match (same > 0, other > 0) {
            (true, false) => 75,
            (true, true) => 50,
            (false, false) => 25,
            (false, true) => 0,
        };
        // Integer arithmetic, truncating toward zero (negative past 8 GPUs).
        let used = 8000 - i64::from(n.gpu_free_milli());
        (b + 25 * used / 8000, None)
    }
}

/// What kind of GPU use a task or assignment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    NoGpu,
    /// A share of one GPU.
    Share,
    /// A MIG instance (or a memory profile, which takes one where MIG is
    /// on).
    Mig,
    /// This many whole GPUs.
    Whole(usize),
}

fn request_tag(r: &Request) -> Tag {
    match r.kind() {
        Kind::WholeGpus => Tag::Whole(usize::try_from(r.count()).unwrap_or(0)),
        Kind::MigProfile | Kind::MemoryProfile => Tag::Mig,
        _ => Tag::Share,
    }
}

fn assignment_tag(a: &Assignment) -> Tag {
    match a.grants.as_slice() {
        [] => Tag::NoGpu,
        [first, ..] if first.slice.is_some() => Tag::Mig,
        [only] if only.milli < 1000 => Tag::Share,
        grants => Tag::Whole(grants.len()),
    }
}
