use crate::cluster::{Grant, Node};
use crate::placement::{
    Code, DefaultPicker, Filter, Hint, Picker, Policy, Reason, Request, Rewriter, Scorer,
};
use crate::random::Rand;
use crate::workload::{Demand, Kind};

/// What stock Kubernetes with the NVIDIA device plugin does:
///   - GPUs are opaque integers: a share or a memory profile takes one
///     whole GPU;
///   - no MIG awareness: a MIG request takes an instance that already
///     exists (the device plugin advertises them), never creates one;
///   - the default scheduler's NodeResourcesLeastAllocated score on CPU
///     and memory, which spreads work:
///     score = (⌊(C−c)·100/C⌋ + ⌊(M−m)·100/M⌋) / 2, with c, m in use after
///     placement. Range 0..100.
pub fn k8s_default() -> Policy {
    Policy {
        rewriter: Some(Box::new(WholeGpus)),
        filters: vec![Box::new(ExistingSlices)],
        scorer: Some(Box::new(LeastAllocated)),
        picker: Some(Box::new(ExistingSlices)),
        ..Policy::new("k8s-default")
    }
}

/// Turns a share or a memory profile into one whole GPU of the same
/// models.
struct WholeGpus;

impl Rewriter for WholeGpus {
    fn rewrite(&self, r: Request) -> Request {
        if r.kind() != Kind::Fraction && r.kind() != Kind::MemoryProfile {
            return r;
        }
        let mut t = r.task().clone();
        t.gpu = Demand {
            models: std::mem::take(&mut t.gpu.models),
            ..Demand::whole_gpus(1)
        };
        // A whole GPU is always a valid demand, so the error cannot come;
        // the Go build keeps the request as it was should it ever.
        Request::new(t, 0.0).unwrap_or(r)
    }
}

/// Admits a MIG request only where a free instance of its profile already
/// exists, and picks the first one.
struct ExistingSlices;

const EXISTING: &str = "existing-mig-instances";

impl Filter for ExistingSlices {
    fn name(&self) -> &'static str {
        EXISTING
    }

    fn filter(&self, n: &Node, r: &Request) -> Result<(), Reason> {
        if r.kind() != Kind::MigProfile || first_free_slice(n, r).is_some() {
            return Ok(());
        }
        Err(Reason {
            filter: EXISTING,
            code: Code::Mig,
        })
    }
}

impl Picker for ExistingSlices {
    fn pick(
        &mut self,
        n: &Node,
        r: &Request,
        hint: Option<&Hint>,
        rng: &mut Rand,
    ) -> Option<Vec<Grant>> {
        if r.kind() != Kind::MigProfile {
            return DefaultPicker.pick(n, r, hint, rng);
        }
        first_free_slice(n, r).map(|g| vec![g])
    }
}

/// The first free instance of `r`'s profile on an uncordoned MIG GPU of a
/// model `r` may use.
fn first_free_slice(n: &Node, r: &Request) -> Option<Grant> {
    for (i, g) in n.gpus().iter().enumerate() {
        if !g.mig() || g.cordoned() || !r.allows_model(g.model()) {
            continue;
        }
        if let Some(s) = g
            .slices()
            .iter()
            .find(|s| s.is_free() && s.profile() == r.profile())
        {
            return Some(Grant::instance(i as i32, s.placement().clone()));
        }
    }
    None
}

/// Kubernetes' NodeResourcesLeastAllocated on CPU and memory.
struct LeastAllocated;

impl Scorer for LeastAllocated {
    fn name(&self) -> &'static str {
        "least-allocated"
    }

    fn score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>) {
        let cpu = least_free(n.cpu_milli(), n.cpu_used() + r.cpu_milli());
        let mem = least_free(n.memory_mib(), n.mem_used() + r.mem_mib());
        ((cpu + mem) / 2, None)
    }
}

/// ⌊(capacity − used)·100/capacity⌋, 0 for a resource the node lacks or
/// that would be over-used.
fn least_free(capacity: i64, used: i64) -> i64 {
    if capacity == 0 || used > capacity {
        return 0;
    }
    (capacity - used) * 100 / capacity
}
