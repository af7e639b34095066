//! The filter every policy shares, and the per-GPU arithmetic the pickers
//! share with it.

use crate::cluster::{Gpu, Node};
use crate::gpu::{Model, Placement, Profile, starts_of};
use crate::workload::Kind;

use super::{Code, Filter, Reason, Request};

/// What a request needs on one particular GPU: a share of a non-MIG GPU
/// (1000 = the whole GPU) or a MIG instance of a profile.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unit<'g> {
    pub(super) milli: i32,
    pub(super) profile: Option<&'g Profile>,
}

/// What `r` needs on GPU `g`, or a code saying why `g` cannot serve it
/// whatever its load.
pub(super) fn unit_for<'g>(r: &Request, g: &'g Gpu) -> Result<Unit<'g>, Code> {
    if !r.allows_model(g.model()) {
        return Err(Code::Model);
    }
    unit_of_allowed(r, g)
}

/// `unit_for` on a GPU whose model the request allows.
fn unit_of_allowed<'g>(r: &Request, g: &'g Gpu) -> Result<Unit<'g>, Code> {
    let model = g.model();
    let share = |milli| {
        Ok(Unit {
            milli,
            profile: None,
        })
    };
    let instance = |p| {
        Ok(Unit {
            milli: 0,
            profile: Some(p),
        })
    };
    match r.kind() {
        Kind::WholeGpus if g.mig() => Err(Code::MigOff),
        Kind::WholeGpus => share(1000),
        Kind::Fraction if g.mig() => Err(Code::MigOff),
        Kind::Fraction => share(r.milli()),
        Kind::MigProfile if !g.mig() => Err(Code::MigOff),
        // A MIG GPU's model has MIG, so `find` is `Model::profile` without
        // the error text.
        Kind::MigProfile => model.find(r.profile()).map_or(Err(Code::Model), instance),
        Kind::MemoryProfile => {
            let (p, milli) = r.resolve(model);
            if g.mig() {
                p.map_or(Err(Code::TooSmall), instance)
            } else if r.mig_only() && model.mig {
                Err(Code::MigOff)
            } else if milli == 0 {
                Err(Code::TooSmall)
            } else {
                share(milli)
            }
        }
        Kind::NoGpu => Err(Code::NoGpu),
    }
}

impl Request {
    /// The MIG profile the request takes on GPU `g`, or none when it takes
    /// no MIG instance there (MIG off, another model, no profile big
    /// enough).
    pub fn profile_on<'g>(&self, g: &'g Gpu) -> Option<&'g Profile> {
        if !g.mig() {
            return None;
        }
        unit_for(self, g).ok().and_then(|u| u.profile)
    }
}

/// Whether GPU `g` has room for `u` right now.
pub(super) fn hosts(g: &Gpu, u: Unit<'_>) -> bool {
    match u.profile {
        None => g.free() >= u.milli,
        Some(p) => slices_for(g, p).next().is_some(),
    }
}

/// Where a new task of profile `p` (a profile of `g`'s model) can go on
/// `g`: free instances of `p` first, in the GPU's order (no
/// reconfiguration), then the instances that could be created in free
/// space, by start. Nothing on a cordoned GPU. It allocates nothing: a
/// scorer may walk it for every GPU of every node.
pub fn slices_for<'a>(g: &'a Gpu, p: &'a Profile) -> impl Iterator<Item = Placement> + 'a {
    let open = !g.cordoned();
    let existing = g
        .slices()
        .iter()
        .filter(move |s| open && s.is_free() && s.profile() == p.name)
        .map(|s| s.placement().clone());
    // `free_starts` is what `Model::free_placements` offers; the compute
    // test first spares it the walk over the instances when it would fail
    // anyway.
    let starts = if open && g.free_compute_slices() >= p.compute {
        g.free_starts(p)
    } else {
        0
    };
    let created = starts_of(starts).map(move |start| Placement {
        profile: p.name.clone(),
        start,
    });
    existing.chain(created)
}

/// The shared filter: CPU and memory must fit, and the GPUs must have room
/// for the demand (the FGD protocol's NodeResourcesFit and Open-Gpu-Share
/// filters, extended to MIG and memory profiles).
pub(super) fn fits(n: &Node, r: &Request) -> Result<(), Code> {
    if r.cpu_milli() > n.cpu_free() {
        return Err(Code::Cpu);
    }
    if r.mem_mib() > n.mem_free() {
        return Err(Code::Memory);
    }
    if r.kind() == Kind::NoGpu {
        return Ok(());
    }
    if n.gpus().is_empty() {
        return Err(Code::NoGpu);
    }
    let want = if r.kind() == Kind::WholeGpus {
        r.count()
    } else {
        1
    };
    // The reason given is the last GPU's: a GPU of the wrong kind says so,
    // one of the right kind with no room says it has none.
    let (mut found, mut why) = (0, Code::Gpu);
    // A node's GPUs are mostly of one model: whether the request allows it
    // (a comparison of names) is asked once per model met, not per GPU.
    let mut last: Option<(&Model, bool)> = None;
    for g in n.gpus() {
        let allowed = match last {
            Some((m, allowed)) if std::ptr::eq(m, g.model()) => allowed,
            _ => {
                let allowed = r.allows_model(g.model());
                last = Some((g.model(), allowed));
                allowed
            }
        };
        if !allowed {
            why = Code::Model;
            continue;
        }
        let u = match unit_of_allowed(r, g) {
            Ok(u) => u,
            Err(code) => {
                why = code;
                continue;
            }
        };
        why = if u.profile.is_some() {
            Code::Mig
        } else {
            Code::Gpu
        };
        if hosts(g, u) {
            found += 1;
            if found >= want {
                return Ok(());
            }
        }
    }
    if found > 0 && why != Code::Mig {
        why = Code::Gpu;
    }
    Err(why)
}

/// The shared filter as a pipeline stage. The placer runs it before a
/// policy's own filters without being told to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fit;

impl Filter for Fit {
    fn name(&self) -> &'static str {
        "fit"
    }

    fn filter(&self, n: &Node, r: &Request) -> Result<(), Reason> {
        fits(n, r).map_err(|code| Reason {
            filter: "fit",
            code,
        })
    }
}

/// Says in words why `r` does not fit `n`, with the numbers; "fits" when
/// it does.
pub fn explain(n: &Node, r: &Request) -> String {
    let model = || n.model().map_or("", |m| m.name.as_str());
    match fits(n, r) {
        Ok(()) => "fits".to_string(),
        Err(Code::Cpu) => format!("cpu: asks {}m, {}m free", r.cpu_milli(), n.cpu_free()),
        Err(Code::Memory) => format!(
            "memory: asks {} MiB, {} MiB free",
            r.mem_mib(),
            n.mem_free()
        ),
        Err(Code::NoGpu) => "no GPU on the node".to_string(),
        // Go's %v of a list of strings: "[a b]".
        Err(Code::Model) => format!(
            "gpu model: node has {}, task allows [{}]",
            model(),
            r.models().join(" ")
        ),
        Err(Code::MigOff) => "gpu: MIG mode does not match the demand".to_string(),
        Err(Code::TooSmall) => format!(
            "gpu memory: no profile or share of {} holds {} MiB",
            model(),
            r.peak_mib()
        ),
        Err(_) => format!(
            "gpu: asks {}; {} fully free GPUs, {} milli free",
            r.task().gpu,
            n.fully_free_gpus(),
            n.gpu_free_milli()
        ),
    }
}
