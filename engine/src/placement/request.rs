use std::cell::RefCell;
use std::fmt;

use crate::gpu::{self, Model, Profile};
use crate::workload::{Kind, Task, WorkloadError};

/// A task as the placement pipeline sees it: the demand with model names
/// made canonical and memory profiles ready to resolve per GPU model.
///
/// The fields are read through methods and never change after
/// construction: the placer caches verdicts per request class (`key`), and
/// a field changed behind the key's back would make the cache answer for
/// another request. A `Rewriter` that wants another request builds one
/// with `Request::new`.
#[derive(Debug, Clone)]
pub struct Request {
    task: Task,
    cpu_milli: i64,
    mem_mib: i64,
    kind: Kind,
    count: i32,
    milli: i32,
    profile: String,
    peak_mib: i64,
    compute: f64,
    models: Vec<String>,
    mig_only: bool,
    headroom: f64,
    key: RequestKey,
    /// What a memory profile becomes per GPU model, filled lazily: a
    /// request meets one or two models, and resolving one costs a profile
    /// search. Interior mutability because stages see `&Request`.
    resolved: RefCell<Vec<Resolution>>,
}

/// Identifies requests that every filter and scorer treat alike, so that
/// their per-node verdicts can be cached and shared. Floats are kept as
/// their bits so the key can be hashed; two requests whose floats differ
/// only in the sign of a zero get two classes, which costs a cache row and
/// changes no result.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct RequestKey {
    cpu: i64,
    mem: i64,
    kind: Kind,
    count: i32,
    milli: i32,
    profile: String,
    peak: i64,
    compute: u64,
    models: String,
    headroom: u64,
    mig_only: bool,
}

/// What a memory profile becomes on one GPU model.
#[derive(Debug, Clone)]
struct Resolution {
    model: String,
    /// The position of the MIG profile in the model's list; none when MIG
    /// is off on the model or no profile holds the request.
    profile: Option<usize>,
    /// The share of a non-MIG GPU; 0 when it cannot fit.
    milli: i32,
}

impl Request {
    /// Prepares a task for placement. `headroom` is the extra GPU memory a
    /// memory profile keeps above its peak (`gpu::DEFAULT_HEADROOM`).
    pub fn new(t: Task, headroom: f64) -> Result<Request, WorkloadError> {
        t.validate(None)?;
        let mut models: Vec<String> = Vec::new();
        for m in &t.gpu.models {
            let name = &gpu::lookup(m).name;
            if !models.contains(name) {
                models.push(name.clone());
            }
        }
        let d = &t.gpu;
        let mut r = Request {
            cpu_milli: t.cpu_milli,
            mem_mib: t.memory_mib,
            kind: d.kind,
            count: d.count,
            milli: d.milli,
            profile: d.profile.clone(),
            peak_mib: d.peak_memory_mib,
            compute: d.compute,
            models,
            mig_only: false,
            headroom,
            key: RequestKey {
                cpu: 0,
                mem: 0,
                kind: Kind::NoGpu,
                count: 0,
                milli: 0,
                profile: String::new(),
                peak: 0,
                compute: 0,
                models: String::new(),
                headroom: 0,
                mig_only: false,
            },
            resolved: RefCell::new(Vec::new()),
            task: t,
        };
        r.key = r.make_key();
        Ok(r)
    }

    fn make_key(&self) -> RequestKey {
        RequestKey {
            cpu: self.cpu_milli,
            mem: self.mem_mib,
            kind: self.kind,
            count: self.count,
            milli: self.milli,
            profile: self.profile.clone(),
            peak: self.peak_mib,
            compute: self.compute.to_bits(),
            models: self.models.join("|"),
            headroom: self.headroom.to_bits(),
            mig_only: self.mig_only,
        }
    }

    /// Sets `mig_only` (the placer's setting), keeping the key in step.
    pub(super) fn set_mig_only(&mut self, on: bool) {
        self.mig_only = on;
        self.key.mig_only = on;
    }

    pub(super) fn key(&self) -> &RequestKey {
        &self.key
    }

    /// The task as given.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// CPU asked, in milli-CPU.
    pub fn cpu_milli(&self) -> i64 {
        self.cpu_milli
    }

    /// Memory asked, in MiB.
    pub fn mem_mib(&self) -> i64 {
        self.mem_mib
    }

    /// The form of the GPU demand.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Whole GPUs asked (`Kind::WholeGpus`).
    pub fn count(&self) -> i32 {
        self.count
    }

    /// The share of one GPU asked, in milli (`Kind::Fraction`).
    pub fn milli(&self) -> i32 {
        self.milli
    }

    /// The MIG profile asked (`Kind::MigProfile`).
    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// Peak GPU memory (`Kind::MemoryProfile`).
    pub fn peak_mib(&self) -> i64 {
        self.peak_mib
    }

    /// Compute share of one GPU, 0 to 1 (`Kind::MemoryProfile`).
    pub fn compute(&self) -> f64 {
        self.compute
    }

    /// Canonical names of the models the task may use, in the order given,
    /// without repeats; empty means any model.
    pub fn models(&self) -> &[String] {
        &self.models
    }

    /// On a MIG-capable model a memory profile takes a MIG instance, never
    /// a time-sliced share of a GPU with MIG off.
    pub fn mig_only(&self) -> bool {
        self.mig_only
    }

    /// The GPU memory kept above a memory profile's peak, as a share of it.
    pub fn headroom(&self) -> f64 {
        self.headroom
    }

    /// Whether the request may use a GPU of model `m`.
    pub fn allows_model(&self, m: &Model) -> bool {
        self.models.is_empty() || self.models.contains(&m.name)
    }

    /// Whether the request shares one non-MIG GPU.
    pub fn is_fractional(&self) -> bool {
        self.kind == Kind::Fraction
    }

    /// The GPU the request takes on a non-MIG GPU in milli, for policies
    /// that think in milli (whole GPUs count 1000 each; MIG and memory
    /// profiles 0).
    pub fn gpu_milli(&self) -> i32 {
        match self.kind {
            Kind::WholeGpus => self.count * 1000,
            Kind::Fraction => self.milli,
            _ => 0,
        }
    }

    /// What a memory-profile request needs on model `m`: the MIG profile
    /// (on a MIG model; none when no profile holds it) and the share of a
    /// non-MIG GPU (0 when it cannot fit). A share is the larger of the
    /// compute share and the memory share, since without MIG a task gets
    /// memory in proportion to its share (that is how time-sliced sharing
    /// is modelled without OOM).
    pub fn resolve<'m>(&self, m: &'m Model) -> (Option<&'m Profile>, i32) {
        let found = self
            .resolved
            .borrow()
            .iter()
            .find(|x| x.model == m.name)
            .map(|x| (x.profile, x.milli));
        let (profile, milli) = found.unwrap_or_else(|| {
            let x = self.resolution(m);
            let answer = (x.profile, x.milli);
            self.resolved.borrow_mut().push(x);
            answer
        });
        (profile.map(|i| &m.profiles[i]), milli)
    }

    fn resolution(&self, m: &Model) -> Resolution {
        let mut profile = None;
        if m.mig
            && let Ok(p) = m.profile_for(self.peak_mib, self.compute, self.headroom)
        {
            profile = m.profiles.iter().position(|q| std::ptr::eq(q, p));
        }
        let mut milli = 0;
        if m.memory_mib > 0 {
            let need = self.peak_mib as f64 * (1.0 + self.headroom);
            let by_mem = go_int((need / m.memory_mib as f64 * 1000.0).ceil());
            let by_compute = go_int((self.compute * 1000.0).ceil());
            milli = by_mem.max(by_compute).max(1);
            if milli > 1000 {
                milli = 0;
            }
        }
        Resolution {
            model: m.name.clone(),
            profile,
            milli: milli as i32,
        }
    }
}

/// Go's `int(x)` of a float on amd64: truncation toward zero, and the
/// "integer indefinite" (the most negative int64) for NaN and values out of
/// range, where Rust's `as` would saturate.
fn go_int(x: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if !(-TWO_63..TWO_63).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// "name (cpu 1500m, mem 2048 MiB, 4096 MiB peak, 0.50 compute)".
impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (cpu {}m, mem {} MiB, {})",
            self.task.name, self.cpu_milli, self.mem_mib, self.task.gpu
        )
    }
}
