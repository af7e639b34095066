//! What users ask for: jobs made of tasks, each task asking for CPU, memory
//! and one kind of GPU demand.
//!
//! It knows nothing about where work runs; the engine matches demands to
//! the cluster. Validation here only checks what can be checked without a
//! cluster, plus the few facts a `Capacity` summary gives (largest node,
//! which models exist).
//!
//! The JSON form (serde) is the Go build's: Go's field names, the class and
//! the demand kind as numbers, an empty list as `null`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

use crate::numfmt::format_g;
use crate::quote::quote;

/// A priority class. Higher classes are ordered first and may preempt
/// lower ones. The order of the variants is the order of the classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Class {
    /// May be preempted at any time.
    #[default]
    BestEffort = 0,
    /// Training and other throughput work.
    Batch = 1,
    /// Latency-sensitive serving; always runs.
    Production = 2,
}

const CLASS_NAMES: [&str; 3] = ["best-effort", "batch", "production"];

impl Class {
    /// Every class from lowest to highest.
    pub const ALL: [Class; 3] = [Class::BestEffort, Class::Batch, Class::Production];

    /// The class's position from the lowest, 0-2: an index for arrays
    /// kept by class.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name `parse_class` reads.
    pub fn as_str(self) -> &'static str {
        CLASS_NAMES[self.index()]
    }

    /// The class numbered `n` (its JSON form), if there is one.
    pub fn from_index(n: i64) -> Option<Class> {
        usize::try_from(n)
            .ok()
            .and_then(|i| Class::ALL.get(i).copied())
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown priority class name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown priority class {} (known: best-effort, batch, production)", quote(.0))]
pub struct ParseClassError(pub String);

/// Reads the names `Class` displays as.
pub fn parse_class(s: &str) -> Result<Class, ParseClassError> {
    Class::ALL
        .into_iter()
        .find(|c| c.as_str() == s)
        .ok_or_else(|| ParseClassError(s.to_string()))
}

impl std::str::FromStr for Class {
    type Err = ParseClassError;
    fn from_str(s: &str) -> Result<Class, ParseClassError> {
        parse_class(s)
    }
}

/// Every class from lowest to highest.
pub fn classes() -> [Class; 3] {
    Class::ALL
}

impl Serialize for Class {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(self.index() as i64)
    }
}

impl<'de> Deserialize<'de> for Class {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Class, D::Error> {
        let n = i64::deserialize(d)?;
        Class::from_index(n)
            .ok_or_else(|| serde::de::Error::custom(format!("class({n}) is not a priority class")))
    }
}

/// Which form a GPU demand takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Kind {
    /// CPU and memory only.
    #[default]
    NoGpu = 0,
    /// `count` whole GPUs on one node.
    WholeGpus = 1,
    /// One MIG instance of the named profile.
    MigProfile = 2,
    /// Peak GPU memory and compute share; the engine picks a MIG profile or
    /// a share.
    MemoryProfile = 3,
    /// `milli` thousandths of one GPU, shared with others.
    Fraction = 4,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::NoGpu,
        Kind::WholeGpus,
        Kind::MigProfile,
        Kind::MemoryProfile,
        Kind::Fraction,
    ];

    /// "none", "gpus", "mig", "memory" or "fraction".
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NoGpu => "none",
            Kind::WholeGpus => "gpus",
            Kind::MigProfile => "mig",
            Kind::MemoryProfile => "memory",
            Kind::Fraction => "fraction",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(*self as i64)
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        let n = i64::deserialize(d)?;
        usize::try_from(n)
            .ok()
            .and_then(|i| Kind::ALL.get(i).copied())
            .ok_or_else(|| serde::de::Error::custom(format!("gpu demand: unknown kind {n}")))
    }
}

/// A task's GPU request. Only the fields of its `kind` are used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Demand {
    #[serde(rename = "Kind")]
    pub kind: Kind,
    /// WholeGpus: how many whole GPUs, all on one node.
    #[serde(rename = "Count")]
    pub count: i32,
    /// Fraction: 1..999 thousandths of one GPU.
    #[serde(rename = "Milli")]
    pub milli: i32,
    /// MigProfile: a profile name such as "1g.10gb".
    #[serde(rename = "Profile")]
    pub profile: String,
    /// MemoryProfile: the most GPU memory the task touches...
    #[serde(rename = "PeakMemoryMiB")]
    pub peak_memory_mib: i64,
    /// ...and the share of one GPU's compute it needs to meet its latency
    /// or throughput target.
    #[serde(rename = "Compute")]
    pub compute: f64,
    /// When not empty, the GPU models the task may run on.
    #[serde(
        rename = "Models",
        serialize_with = "null_if_empty",
        deserialize_with = "empty_if_null"
    )]
    pub models: Vec<String>,
}

/// Go writes a nil list as `null`.
fn null_if_empty<S: Serializer, T: Serialize>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
    if v.is_empty() {
        s.serialize_none()
    } else {
        v.serialize(s)
    }
}

fn empty_if_null<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

impl Demand {
    /// No GPU: CPU and memory only.
    pub fn none() -> Demand {
        Demand::default()
    }

    /// `count` whole GPUs on one node.
    pub fn whole_gpus(count: i32) -> Demand {
        Demand {
            kind: Kind::WholeGpus,
            count,
            ..Demand::default()
        }
    }

    /// `milli` thousandths of one GPU.
    pub fn fraction(milli: i32) -> Demand {
        Demand {
            kind: Kind::Fraction,
            milli,
            ..Demand::default()
        }
    }

    /// One MIG instance of `profile`.
    pub fn mig_profile(profile: &str) -> Demand {
        Demand {
            kind: Kind::MigProfile,
            profile: profile.to_string(),
            ..Demand::default()
        }
    }

    /// A peak of GPU memory and a share of compute.
    pub fn memory_profile(peak_memory_mib: i64, compute: f64) -> Demand {
        Demand {
            kind: Kind::MemoryProfile,
            peak_memory_mib,
            compute,
            ..Demand::default()
        }
    }

    /// The demand, allowed only on `models`.
    pub fn on(mut self, models: &[&str]) -> Demand {
        self.models = models.iter().map(|m| m.to_string()).collect();
        self
    }

    /// The number of GPUs the demand touches (a share or instance counts
    /// as one).
    pub fn gpus(&self) -> i32 {
        match self.kind {
            Kind::WholeGpus => self.count,
            Kind::NoGpu => 0,
            _ => 1,
        }
    }

    /// Whether the demand may run on the named model. Names are compared
    /// as given; callers canonicalise them first (`gpu::lookup`).
    pub fn allows_model(&self, model: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|m| m == model)
    }

    /// The demand's size in thousandths of a GPU before a model is chosen:
    /// a MIG profile counts as its compute share (3g = 3/7), a memory
    /// profile as its compute share rounded to the nearest milli.
    pub fn nominal_milli(&self) -> i64 {
        match self.kind {
            Kind::WholeGpus => i64::from(self.count) * 1000,
            Kind::Fraction => i64::from(self.milli),
            // Truncated as Go's int64(float64) truncates.
            Kind::MemoryProfile => (self.compute * 1000.0 + 0.5) as i64,
            Kind::MigProfile => {
                // The compute share of a profile is fixed by its name:
                // "3g.40gb" is 3/7. (Read by hand: this runs for every
                // waiting job in every scheduling cycle.)
                match self.profile.as_bytes() {
                    [c @ b'1'..=b'7', b'g', ..] => i64::from(c - b'0') * 1000 / 7,
                    _ => 1000,
                }
            }
            Kind::NoGpu => 0,
        }
    }

    fn validate_shape(&self) -> Result<(), DemandError> {
        match self.kind {
            Kind::NoGpu if !self.models.is_empty() => Err(DemandError::ModelsWithoutGpu),
            Kind::WholeGpus if self.count < 1 => Err(DemandError::BadCount(self.count)),
            Kind::Fraction if !(1..=999).contains(&self.milli) => {
                Err(DemandError::BadFraction(self.milli))
            }
            Kind::MigProfile if self.profile.is_empty() => Err(DemandError::EmptyProfile),
            Kind::MemoryProfile if self.peak_memory_mib <= 0 => {
                Err(DemandError::BadPeak(self.peak_memory_mib))
            }
            // `contains` is false for NaN too.
            Kind::MemoryProfile if !(0.0..=1.0).contains(&self.compute) => {
                Err(DemandError::BadCompute(self.compute))
            }
            _ => Ok(()),
        }
    }

    fn validate_against(&self, c: &Capacity) -> Result<(), DemandError> {
        if let Some(m) = self.models.iter().find(|m| !c.max_gpus.contains_key(*m)) {
            return Err(DemandError::ModelNotInCluster {
                model: m.clone(),
                cluster_has: join_keys(&c.max_gpus),
            });
        }
        match self.kind {
            Kind::WholeGpus => {
                let (most, model) = c.largest_node(&self.models);
                if self.count > most {
                    if most == 0 {
                        return Err(DemandError::NoGpuForWhole {
                            count: self.count,
                            on_models: on_models(&self.models),
                        });
                    }
                    return Err(DemandError::TooManyGpus {
                        count: self.count,
                        on_models: on_models(&self.models),
                        most,
                        model: model.to_string(),
                    });
                }
            }
            Kind::Fraction => {
                if c.largest_node(&self.models).0 == 0 {
                    return Err(DemandError::NoGpuForShare {
                        on_models: on_models(&self.models),
                    });
                }
            }
            Kind::MigProfile => {
                let Some(models) = c.mig_profiles.get(&self.profile) else {
                    return Err(DemandError::ProfileNotOffered {
                        profile: self.profile.clone(),
                        offered: join_keys(&c.mig_profiles),
                    });
                };
                if !self.models.is_empty() && !models.iter().any(|m| self.models.contains(m)) {
                    return Err(DemandError::ProfileNotOnModels {
                        profile: self.profile.clone(),
                        offered_on: models.join(", "),
                        models: self.models.join("|"),
                    });
                }
            }
            Kind::MemoryProfile => {
                let best = c
                    .gpu_memory_mib
                    .iter()
                    .filter(|(m, _)| self.allows_model(m))
                    .map(|(_, &mem)| mem)
                    .fold(0, i64::max);
                if self.peak_memory_mib > best {
                    return Err(DemandError::PeakTooLarge {
                        peak_mib: self.peak_memory_mib,
                        on_models: on_models(&self.models),
                        best,
                    });
                }
            }
            Kind::NoGpu => {}
        }
        Ok(())
    }
}

impl fmt::Display for Demand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::NoGpu => return f.write_str("no GPU"),
            Kind::WholeGpus => write!(f, "{} GPU", self.count)?,
            Kind::Fraction => write!(f, "{} milli-GPU", self.milli)?,
            Kind::MigProfile => write!(f, "MIG {}", self.profile)?,
            Kind::MemoryProfile => write!(
                f,
                "{} MiB peak, {:.2} compute",
                self.peak_memory_mib, self.compute
            )?,
        }
        if !self.models.is_empty() {
            write!(f, " on {}", self.models.join("|"))?;
        }
        Ok(())
    }
}

fn on_models(models: &[String]) -> String {
    if models.is_empty() {
        String::new()
    } else {
        format!(" of {}", models.join("|"))
    }
}

fn join_keys<V>(m: &BTreeMap<String, V>) -> String {
    let keys: Vec<&str> = m.keys().map(String::as_str).collect();
    keys.join(", ")
}

/// One schedulable unit: a pod, a process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Task {
    #[serde(rename = "Name")]
    pub name: String,
    #[serde(rename = "CPUMilli")]
    pub cpu_milli: i64,
    #[serde(rename = "MemoryMiB")]
    pub memory_mib: i64,
    #[serde(rename = "GPU")]
    pub gpu: Demand,
}

impl Task {
    /// Checks one task, against the cluster when `c` is given. The error
    /// names the task.
    pub fn validate(&self, c: Option<&Capacity>) -> Result<(), WorkloadError> {
        let task = || self.name.clone();
        if self.cpu_milli < 0 {
            return Err(WorkloadError::NegativeCpu {
                task: task(),
                cpu_milli: self.cpu_milli,
            });
        }
        if self.memory_mib < 0 {
            return Err(WorkloadError::NegativeMemory {
                task: task(),
                memory_mib: self.memory_mib,
            });
        }
        let in_task = |source| WorkloadError::InTask {
            task: task(),
            source,
        };
        self.gpu.validate_shape().map_err(in_task)?;
        let Some(c) = c else {
            return Ok(());
        };
        if self.cpu_milli > c.max_cpu_milli {
            return Err(WorkloadError::TooMuchCpu {
                task: task(),
                cpu_milli: self.cpu_milli,
                max: c.max_cpu_milli,
            });
        }
        if self.memory_mib > c.max_memory_mib {
            return Err(WorkloadError::TooMuchMemory {
                task: task(),
                memory_mib: self.memory_mib,
                max: c.max_memory_mib,
            });
        }
        self.gpu.validate_against(c).map_err(in_task)
    }
}

/// What a user submits: one or more tasks, owned by a team.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Job {
    #[serde(rename = "ID")]
    pub id: String,
    #[serde(rename = "Team")]
    pub team: String,
    #[serde(rename = "Project")]
    pub project: String,
    #[serde(rename = "Class")]
    pub class: Class,
    #[serde(
        rename = "Tasks",
        serialize_with = "null_if_empty",
        deserialize_with = "empty_if_null"
    )]
    pub tasks: Vec<Task>,
    /// This many tasks must start together or not at all. 0 or 1 means
    /// each task starts on its own.
    #[serde(rename = "GangSize")]
    pub gang_size: i32,
}

impl Job {
    /// Whether the job's tasks must start all together.
    pub fn is_gang(&self) -> bool {
        self.gang_size > 1
    }

    /// The GPU the job asks for in thousandths of a GPU, before a model is
    /// chosen: a MIG profile counts as its compute share (3g = 3/7), a
    /// memory profile as its compute share.
    pub fn gpu_milli(&self) -> i64 {
        self.tasks.iter().map(|t| t.gpu.nominal_milli()).sum()
    }

    /// Checks the job; with no capacity only its own shape. The error
    /// names the job, the task and the field.
    pub fn validate(&self, c: Option<&Capacity>) -> Result<(), WorkloadError> {
        if self.id.is_empty() {
            return Err(WorkloadError::EmptyJobId);
        }
        let job = || self.id.clone();
        if self.tasks.is_empty() {
            return Err(WorkloadError::NoTasks { job: job() });
        }
        if self.gang_size < 0 || self.gang_size as usize > self.tasks.len() {
            return Err(WorkloadError::BadGangSize {
                job: job(),
                gang_size: self.gang_size,
                tasks: self.tasks.len(),
            });
        }
        let mut seen = BTreeSet::new();
        for (index, t) in self.tasks.iter().enumerate() {
            if t.name.is_empty() {
                return Err(WorkloadError::EmptyTaskName { job: job(), index });
            }
            if !seen.insert(t.name.as_str()) {
                return Err(WorkloadError::DuplicateTask {
                    job: job(),
                    task: t.name.clone(),
                });
            }
            t.validate(c).map_err(|e| WorkloadError::InJob {
                job: job(),
                source: Box::new(e),
            })?;
        }
        Ok(())
    }
}

/// What a cluster could ever offer one task. Validation uses it to refuse,
/// up front, work that can never run (9 GPUs on a cluster of 8-GPU nodes)
/// instead of letting it wait forever.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capacity {
    pub max_cpu_milli: i64,
    pub max_memory_mib: i64,
    /// Per GPU model, the most GPUs of that model on one node.
    pub max_gpus: BTreeMap<String, i32>,
    /// Per MIG profile name, the models that offer it.
    pub mig_profiles: BTreeMap<String, Vec<String>>,
    /// Per model, its memory (0 when unknown).
    pub gpu_memory_mib: BTreeMap<String, i64>,
}

impl Capacity {
    /// The most GPUs on one node among the allowed models (all when
    /// `models` is empty), and the model: the first by name among equals.
    pub fn largest_node(&self, models: &[String]) -> (i32, &str) {
        let mut best = (0, "");
        for (m, &n) in &self.max_gpus {
            if (models.is_empty() || models.contains(m)) && n > best.0 {
                best = (n, m.as_str());
            }
        }
        best
    }
}

/// Why a job or task is refused. The texts are the Go build's.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WorkloadError {
    #[error("job: id is empty")]
    EmptyJobId,
    #[error("job {job}: has no tasks")]
    NoTasks { job: String },
    #[error("job {job}: gang size {gang_size} must be between 0 and the number of tasks ({tasks})")]
    BadGangSize {
        job: String,
        gang_size: i32,
        tasks: usize,
    },
    #[error("job {job}: task {index}: name is empty")]
    EmptyTaskName { job: String, index: usize },
    #[error("job {job}: task name {} is used twice", quote(.task))]
    DuplicateTask { job: String, task: String },
    /// A task of the job is refused.
    #[error("job {job}: {source}")]
    InJob {
        job: String,
        source: Box<WorkloadError>,
    },
    #[error("task {task}: cpu {cpu_milli}m is negative")]
    NegativeCpu { task: String, cpu_milli: i64 },
    #[error("task {task}: memory {memory_mib} MiB is negative")]
    NegativeMemory { task: String, memory_mib: i64 },
    #[error("task {task}: asks for {cpu_milli}m CPU but the largest node has {max}m")]
    TooMuchCpu {
        task: String,
        cpu_milli: i64,
        max: i64,
    },
    #[error("task {task}: asks for {memory_mib} MiB memory but the largest node has {max} MiB")]
    TooMuchMemory {
        task: String,
        memory_mib: i64,
        max: i64,
    },
    /// The task's GPU demand is refused.
    #[error("task {task}: {source}")]
    InTask { task: String, source: DemandError },
}

/// Why a GPU demand is refused. The texts are the Go build's.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DemandError {
    #[error("gpu models are given but no GPU is asked for")]
    ModelsWithoutGpu,
    #[error("gpus: {0} must be at least 1")]
    BadCount(i32),
    #[error("gpu fraction: {0} milli must be between 1 and 999 (ask for whole GPUs for 1000)")]
    BadFraction(i32),
    #[error("mig profile: empty")]
    EmptyProfile,
    #[error("gpu memory: peak {0} MiB must be positive")]
    BadPeak(i64),
    #[error("gpu compute: share {} must be between 0 and 1", format_g(*.0, None))]
    BadCompute(f64),
    #[error("gpu model {}: no node has it (cluster has: {cluster_has})", quote(.model))]
    ModelNotInCluster { model: String, cluster_has: String },
    #[error("asks for {count} GPUs but no node has a GPU{on_models}")]
    NoGpuForWhole { count: i32, on_models: String },
    #[error("asks for {count} GPUs but the largest node{on_models} has {most} ({model})")]
    TooManyGpus {
        count: i32,
        on_models: String,
        most: i32,
        model: String,
    },
    #[error("asks for a GPU share but no node has a GPU{on_models}")]
    NoGpuForShare { on_models: String },
    #[error("mig profile {}: no GPU in the cluster offers it (offered: {offered})", quote(.profile))]
    ProfileNotOffered { profile: String, offered: String },
    #[error("mig profile {}: offered only on {offered_on}, not on {models}", quote(.profile))]
    ProfileNotOnModels {
        profile: String,
        offered_on: String,
        models: String,
    },
    #[error(
        "gpu memory: peak {peak_mib} MiB is more than the largest GPU{on_models} has ({best} MiB)"
    )]
    PeakTooLarge {
        peak_mib: i64,
        on_models: String,
        best: i64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str) -> Task {
        Task {
            name: name.to_string(),
            ..Task::default()
        }
    }

    fn with_gpu(mut t: Task, d: Demand) -> Task {
        t.gpu = d;
        t
    }

    fn cpu(mut t: Task, milli: i64) -> Task {
        t.cpu_milli = milli;
        t
    }

    fn memory(mut t: Task, mib: i64) -> Task {
        t.memory_mib = mib;
        t
    }

    fn job(id: &str, tasks: Vec<Task>) -> Job {
        Job {
            id: id.to_string(),
            team: "ml".to_string(),
            class: Class::Batch,
            tasks,
            ..Job::default()
        }
    }

    fn gang(mut j: Job, size: i32) -> Job {
        j.gang_size = size;
        j
    }

    fn class(mut j: Job, c: Class) -> Job {
        j.class = c;
        j
    }

    /// A cluster whose largest nodes have 64 CPUs, 512 GiB, 8 H100-80GB
    /// (MIG-capable, offering three profiles) or 4 V100-32GB.
    fn mixed_cluster() -> Capacity {
        let mut c = Capacity {
            max_cpu_milli: 64000,
            max_memory_mib: 512 * 1024,
            ..Capacity::default()
        };
        c.max_gpus.insert("H100-80GB".into(), 8);
        c.gpu_memory_mib.insert("H100-80GB".into(), 80 * 1024);
        c.max_gpus.insert("V100-32GB".into(), 4);
        c.gpu_memory_mib.insert("V100-32GB".into(), 32 * 1024);
        for p in ["1g.10gb", "3g.40gb", "7g.80gb"] {
            c.mig_profiles.insert(p.into(), vec!["H100-80GB".into()]);
        }
        c
    }

    /// A cluster without a GPU.
    fn cpu_cluster() -> Capacity {
        Capacity {
            max_cpu_milli: 32000,
            max_memory_mib: 128 * 1024,
            ..Capacity::default()
        }
    }

    #[track_caller]
    fn want_err(err: Result<(), WorkloadError>, subs: &[&str]) {
        let err = err.expect_err("got no error");
        for sub in subs {
            assert!(
                err.to_string().contains(sub),
                "error {:?} does not contain {sub:?}",
                err.to_string()
            );
        }
    }

    #[test]
    fn job_validate_accepts_well_formed_jobs() {
        let cases = [
            (
                "accepts a CPU-only job",
                job("j", vec![memory(cpu(task("a"), 1000), 1024)]),
            ),
            (
                "accepts a task asking for nothing",
                job("j", vec![task("a")]),
            ),
            (
                "accepts best-effort",
                class(job("j", vec![task("a")]), Class::BestEffort),
            ),
            (
                "accepts production",
                class(job("j", vec![task("a")]), Class::Production),
            ),
            (
                "accepts gang size 0",
                gang(job("j", vec![task("a"), task("b")]), 0),
            ),
            (
                "accepts gang size 1",
                gang(job("j", vec![task("a"), task("b")]), 1),
            ),
            (
                "accepts a gang of every task",
                gang(
                    job(
                        "j",
                        vec![
                            with_gpu(task("a"), Demand::whole_gpus(8)),
                            with_gpu(task("b"), Demand::whole_gpus(8)),
                        ],
                    ),
                    2,
                ),
            ),
            (
                "accepts a task using a whole node",
                job(
                    "j",
                    vec![with_gpu(
                        memory(cpu(task("a"), 64000), 512 * 1024),
                        Demand::whole_gpus(8),
                    )],
                ),
            ),
            (
                "accepts whole GPUs on an allowed model",
                job(
                    "j",
                    vec![with_gpu(
                        task("a"),
                        Demand::whole_gpus(4).on(&["V100-32GB"]),
                    )],
                ),
            ),
            (
                "accepts the smallest and largest fraction",
                job(
                    "j",
                    vec![
                        with_gpu(task("a"), Demand::fraction(1)),
                        with_gpu(task("b"), Demand::fraction(999)),
                    ],
                ),
            ),
            (
                "accepts an offered MIG profile",
                job(
                    "j",
                    vec![with_gpu(task("a"), Demand::mig_profile("3g.40gb"))],
                ),
            ),
            (
                "accepts an offered MIG profile on its model",
                job(
                    "j",
                    vec![with_gpu(
                        task("a"),
                        Demand::mig_profile("1g.10gb").on(&["H100-80GB", "V100-32GB"]),
                    )],
                ),
            ),
            (
                "accepts a peak equal to the largest GPU",
                job(
                    "j",
                    vec![with_gpu(task("a"), Demand::memory_profile(80 * 1024, 1.0))],
                ),
            ),
            (
                "accepts no compute share",
                job(
                    "j",
                    vec![with_gpu(task("a"), Demand::memory_profile(1024, 0.0))],
                ),
            ),
            (
                "accepts a peak that fits an allowed model",
                job(
                    "j",
                    vec![with_gpu(
                        task("a"),
                        Demand::memory_profile(32 * 1024, 0.5).on(&["V100-32GB"]),
                    )],
                ),
            ),
        ];
        for (name, j) in cases {
            assert_eq!(j.validate(None), Ok(()), "{name}");
            assert_eq!(j.validate(Some(&mixed_cluster())), Ok(()), "{name}");
        }
    }

    #[test]
    fn job_validate_refuses_bad_shapes() {
        let t = |d: Demand| with_gpu(task("w"), d);
        let cases: Vec<(&str, Job, &[&str])> = vec![
            (
                "refuses an empty id",
                job("", vec![task("a")]),
                &["job: id is empty"],
            ),
            (
                "refuses a job without tasks",
                job("j1", vec![]),
                &["job j1: has no tasks"],
            ),
            (
                "refuses a negative gang size",
                gang(job("j1", vec![task("a"), task("b")]), -1),
                &["job j1: gang size -1 must be between 0 and the number of tasks (2)"],
            ),
            (
                "refuses a gang larger than the job",
                gang(job("j1", vec![task("a"), task("b")]), 3),
                &["job j1: gang size 3 must be between 0 and the number of tasks (2)"],
            ),
            (
                "refuses an empty task name",
                job("j1", vec![task("a"), task("")]),
                &["job j1: task 1: name is empty"],
            ),
            (
                "refuses a task name used twice",
                job("j1", vec![task("w"), task("x"), task("w")]),
                &[r#"job j1: task name "w" is used twice"#],
            ),
            (
                "refuses negative cpu",
                job("j1", vec![cpu(task("w"), -1)]),
                &["job j1: task w: cpu -1m is negative"],
            ),
            (
                "refuses negative memory",
                job("j1", vec![memory(task("w"), -5)]),
                &["job j1: task w: memory -5 MiB is negative"],
            ),
            (
                "refuses models without a GPU",
                job("j1", vec![t(Demand::none().on(&["H100-80GB"]))]),
                &["task w: gpu models are given but no GPU is asked for"],
            ),
            (
                "refuses zero whole GPUs",
                job("j1", vec![t(Demand::whole_gpus(0))]),
                &["task w: gpus: 0 must be at least 1"],
            ),
            (
                "refuses negative whole GPUs",
                job("j1", vec![t(Demand::whole_gpus(-2))]),
                &["gpus: -2 must be at least 1"],
            ),
            (
                "refuses a zero fraction",
                job("j1", vec![t(Demand::fraction(0))]),
                &["task w: gpu fraction: 0 milli must be between 1 and 999"],
            ),
            (
                "refuses a fraction of a whole GPU",
                job("j1", vec![t(Demand::fraction(1000))]),
                &[
                    "gpu fraction: 1000 milli must be between 1 and 999",
                    "ask for whole GPUs",
                ],
            ),
            (
                "refuses a negative fraction",
                job("j1", vec![t(Demand::fraction(-3))]),
                &["gpu fraction: -3 milli"],
            ),
            (
                "refuses an empty MIG profile",
                job("j1", vec![t(Demand::mig_profile(""))]),
                &["task w: mig profile: empty"],
            ),
            (
                "refuses a zero peak memory",
                job("j1", vec![t(Demand::memory_profile(0, 0.5))]),
                &["task w: gpu memory: peak 0 MiB must be positive"],
            ),
            (
                "refuses a negative peak memory",
                job("j1", vec![t(Demand::memory_profile(-1, 0.5))]),
                &["gpu memory: peak -1 MiB must be positive"],
            ),
            (
                "refuses a negative compute share",
                job("j1", vec![t(Demand::memory_profile(1024, -0.1))]),
                &["task w: gpu compute: share -0.1 must be between 0 and 1"],
            ),
            (
                "refuses a compute share over one",
                job("j1", vec![t(Demand::memory_profile(1024, 1.5))]),
                &["gpu compute: share 1.5 must be between 0 and 1"],
            ),
            (
                "refuses an infinite compute share",
                job("j1", vec![t(Demand::memory_profile(1024, f64::INFINITY))]),
                &["gpu compute: share +Inf"],
            ),
            (
                "refuses a NaN compute share",
                job("j1", vec![t(Demand::memory_profile(1024, f64::NAN))]),
                &["task w", "gpu compute", "NaN"],
            ),
            (
                "names the first bad task",
                job(
                    "j1",
                    vec![
                        cpu(task("ok"), 0),
                        with_gpu(task("bad"), Demand::fraction(0)),
                        cpu(task("worse"), -1),
                    ],
                ),
                &["task bad: gpu fraction"],
            ),
        ];
        for (name, j, want) in cases {
            let _ = name;
            want_err(j.validate(None), want);
            // A cluster cannot make a malformed job valid.
            want_err(j.validate(Some(&mixed_cluster())), want);
        }
    }

    #[test]
    fn job_validate_refuses_what_the_cluster_cannot_offer() {
        let t = |name: &str, d: Demand| with_gpu(task(name), d);
        let cases: Vec<(Capacity, Task, &str)> = vec![
            (
                mixed_cluster(),
                t("big", Demand::whole_gpus(9)),
                "job j1: task big: asks for 9 GPUs but the largest node has 8 (H100-80GB)",
            ),
            (
                mixed_cluster(),
                t("big", Demand::whole_gpus(5).on(&["V100-32GB"])),
                "job j1: task big: asks for 5 GPUs but the largest node of V100-32GB has 4 (V100-32GB)",
            ),
            (
                cpu_cluster(),
                t("big", Demand::whole_gpus(1)),
                "job j1: task big: asks for 1 GPUs but no node has a GPU",
            ),
            (
                mixed_cluster(),
                t("w", Demand::whole_gpus(1).on(&["A100-80GB"])),
                r#"job j1: task w: gpu model "A100-80GB": no node has it (cluster has: H100-80GB, V100-32GB)"#,
            ),
            (
                mixed_cluster(),
                t("w", Demand::fraction(100).on(&["V100-32GB", "T4"])),
                r#"job j1: task w: gpu model "T4": no node has it (cluster has: H100-80GB, V100-32GB)"#,
            ),
            (
                cpu_cluster(),
                t("w", Demand::fraction(250)),
                "job j1: task w: asks for a GPU share but no node has a GPU",
            ),
            (
                mixed_cluster(),
                t("w", Demand::mig_profile("2g.20gb")),
                r#"job j1: task w: mig profile "2g.20gb": no GPU in the cluster offers it (offered: 1g.10gb, 3g.40gb, 7g.80gb)"#,
            ),
            (
                cpu_cluster(),
                t("w", Demand::mig_profile("1g.10gb")),
                r#"job j1: task w: mig profile "1g.10gb": no GPU in the cluster offers it (offered: )"#,
            ),
            (
                mixed_cluster(),
                t("w", Demand::mig_profile("1g.10gb").on(&["V100-32GB"])),
                r#"job j1: task w: mig profile "1g.10gb": offered only on H100-80GB, not on V100-32GB"#,
            ),
            (
                mixed_cluster(),
                t("w", Demand::memory_profile(80 * 1024 + 1, 0.5)),
                "job j1: task w: gpu memory: peak 81921 MiB is more than the largest GPU has (81920 MiB)",
            ),
            (
                mixed_cluster(),
                t(
                    "w",
                    Demand::memory_profile(40 * 1024, 0.5).on(&["V100-32GB"]),
                ),
                "job j1: task w: gpu memory: peak 40960 MiB is more than the largest GPU of V100-32GB has (32768 MiB)",
            ),
            (
                cpu_cluster(),
                t("w", Demand::memory_profile(1024, 0.1)),
                "job j1: task w: gpu memory: peak 1024 MiB is more than the largest GPU has (0 MiB)",
            ),
            (
                mixed_cluster(),
                cpu(task("w"), 64001),
                "job j1: task w: asks for 64001m CPU but the largest node has 64000m",
            ),
            (
                mixed_cluster(),
                memory(task("w"), 512 * 1024 + 1),
                "job j1: task w: asks for 524289 MiB memory but the largest node has 524288 MiB",
            ),
        ];
        for (capacity, t, want) in cases {
            let j = job("j1", vec![cpu(task("fine"), 100), t]);
            let err = j.validate(Some(&capacity)).expect_err(want);
            assert_eq!(err.to_string(), want);
            // The job's shape is fine: without a cluster it passes.
            assert_eq!(j.validate(None), Ok(()), "{want}");
        }
    }

    #[test]
    fn task_validate_names_only_the_task() {
        let err = cpu(task("w"), -7).validate(None).unwrap_err();
        assert_eq!(err.to_string(), "task w: cpu -7m is negative");
        let err = with_gpu(task("w"), Demand::whole_gpus(9))
            .validate(Some(&mixed_cluster()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "task w: asks for 9 GPUs but the largest node has 8 (H100-80GB)"
        );
    }

    #[test]
    fn task_validate_checks_capacity_only_when_given() {
        let t = with_gpu(
            memory(cpu(task("w"), 1 << 40), 1 << 40),
            Demand::whole_gpus(1000),
        );
        assert_eq!(t.validate(None), Ok(()));
        want_err(t.validate(Some(&mixed_cluster())), &["task w", "CPU"]);
    }

    #[test]
    fn largest_node_picks_the_most_gpus_among_allowed_models() {
        let mut c = Capacity::default();
        for (m, n) in [("A", 4), ("B", 8), ("C", 8), ("D", 2)] {
            c.max_gpus.insert(m.into(), n);
        }
        let models = |ms: &[&str]| ms.iter().map(|m| m.to_string()).collect::<Vec<_>>();
        assert_eq!(c.largest_node(&[]), (8, "B"), "picks the largest of all");
        assert_eq!(
            c.largest_node(&models(&["C", "B"])),
            (8, "B"),
            "breaks ties by name"
        );
        assert_eq!(
            c.largest_node(&models(&["A", "D"])),
            (4, "A"),
            "keeps to the allowed models"
        );
        assert_eq!(
            c.largest_node(&models(&["Z"])),
            (0, ""),
            "finds nothing for a model the cluster lacks"
        );
    }

    #[test]
    fn parse_class_reads_what_display_writes() {
        for (text, want) in [
            ("best-effort", Class::BestEffort),
            ("batch", Class::Batch),
            ("production", Class::Production),
        ] {
            assert_eq!(parse_class(text), Ok(want));
            assert_eq!(want.to_string(), text);
            assert_eq!(text.parse::<Class>(), Ok(want));
        }
    }

    #[test]
    fn parse_class_refuses_unknown_names() {
        for text in [
            "",
            "Batch",
            "besteffort",
            " batch",
            "batch ",
            "class(1)",
            "1",
            "prod",
            "batch\0",
            "prödüction",
        ] {
            let err = parse_class(text).unwrap_err().to_string();
            assert!(
                err.contains(&format!("unknown priority class {}", quote(text))),
                "{err}"
            );
            assert!(
                err.contains("known: best-effort, batch, production"),
                "{err}"
            );
        }
    }

    #[test]
    fn classes_are_ordered_low_to_high() {
        assert_eq!(
            classes(),
            [Class::BestEffort, Class::Batch, Class::Production]
        );
        assert!(classes().windows(2).all(|w| w[0] < w[1]));
        for (i, c) in classes().into_iter().enumerate() {
            assert_eq!(c.index(), i);
            assert_eq!(Class::from_index(i as i64), Some(c));
        }
        assert_eq!(Class::from_index(3), None);
        assert_eq!(Class::from_index(-1), None);
    }

    #[test]
    fn kind_names() {
        let names: Vec<String> = Kind::ALL.iter().map(|k| k.to_string()).collect();
        assert_eq!(names, ["none", "gpus", "mig", "memory", "fraction"]);
    }

    #[test]
    fn demand_display() {
        let cases = [
            (Demand::none(), "no GPU"),
            (Demand::whole_gpus(8), "8 GPU"),
            (Demand::fraction(250), "250 milli-GPU"),
            (Demand::mig_profile("3g.40gb"), "MIG 3g.40gb"),
            (
                Demand::memory_profile(20480, 0.5),
                "20480 MiB peak, 0.50 compute",
            ),
            (
                Demand::whole_gpus(2).on(&["H100-80GB", "A100-80GB"]),
                "2 GPU on H100-80GB|A100-80GB",
            ),
            (
                Demand::mig_profile("1g.10gb").on(&["H100-80GB"]),
                "MIG 1g.10gb on H100-80GB",
            ),
        ];
        for (d, want) in cases {
            assert_eq!(d.to_string(), want);
        }
    }

    #[test]
    fn demand_gpus() {
        assert_eq!(Demand::none().gpus(), 0);
        assert_eq!(Demand::whole_gpus(4).gpus(), 4);
        assert_eq!(Demand::fraction(100).gpus(), 1);
        assert_eq!(Demand::mig_profile("1g.10gb").gpus(), 1);
        assert_eq!(Demand::memory_profile(1024, 0.1).gpus(), 1);
    }

    #[test]
    fn demand_allows_model() {
        let any = Demand::whole_gpus(1);
        assert!(any.allows_model("H100-80GB") && any.allows_model(""));
        let some = Demand::whole_gpus(1).on(&["H100-80GB", "A100-80GB"]);
        assert!(some.allows_model("A100-80GB") && some.allows_model("H100-80GB"));
        for m in ["V100-32GB", "h100-80gb", ""] {
            assert!(
                !some.allows_model(m),
                "allows {m:?}, which it does not list (names are compared as given)"
            );
        }
    }

    #[test]
    fn job_gpu_milli() {
        let t = |name: &str, d: Demand| with_gpu(task(name), d);
        let cases = [
            ("counts nothing for CPU work", vec![task("a")], 0),
            (
                "counts whole GPUs as 1000 each",
                vec![t("a", Demand::whole_gpus(3))],
                3000,
            ),
            (
                "counts a fraction as its milli",
                vec![t("a", Demand::fraction(250))],
                250,
            ),
            (
                "counts a memory profile by its compute share",
                vec![t("a", Demand::memory_profile(1024, 0.3333))],
                333,
            ),
            (
                "rounds a compute share up to the nearest milli",
                vec![t("a", Demand::memory_profile(1024, 0.0006))],
                1,
            ),
            (
                "rounds a compute share down to the nearest milli",
                vec![t("a", Demand::memory_profile(1024, 0.0004))],
                0,
            ),
            (
                "counts a MIG profile as its compute sevenths",
                vec![t("a", Demand::mig_profile("3g.40gb"))],
                3000 / 7,
            ),
            (
                "counts a +me profile by its compute",
                vec![t("a", Demand::mig_profile("1g.10gb+me"))],
                1000 / 7,
            ),
            (
                "counts a full-GPU profile as 1000",
                vec![t("a", Demand::mig_profile("7g.80gb"))],
                1000,
            ),
            (
                "counts an unreadable profile as a whole GPU",
                vec![t("a", Demand::mig_profile("big"))],
                1000,
            ),
            (
                "counts a profile past 7g as a whole GPU",
                vec![t("a", Demand::mig_profile("9g.99gb"))],
                1000,
            ),
            (
                "adds up every task",
                vec![
                    t("a", Demand::whole_gpus(1)),
                    t("b", Demand::fraction(500)),
                    t("c", Demand::mig_profile("2g.20gb")),
                ],
                1000 + 500 + 2000 / 7,
            ),
        ];
        for (name, tasks, want) in cases {
            assert_eq!(job("j", tasks).gpu_milli(), want, "{name}");
        }
    }

    #[test]
    fn job_is_gang() {
        for (size, want) in [(0, false), (1, false), (2, true), (5, true)] {
            assert_eq!(
                gang(job("j", vec![]), size).is_gang(),
                want,
                "gang size {size}"
            );
        }
    }

    #[test]
    fn json_has_the_go_field_names() {
        let j = job(
            "j1",
            vec![with_gpu(
                cpu(task("w"), 500),
                Demand::mig_profile("3g.40gb").on(&["H100-80GB"]),
            )],
        );
        let v = serde_json::to_value(&j).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"ID": "j1", "Team": "ml", "Project": "", "Class": 1, "GangSize": 0, "Tasks": [
                {"Name": "w", "CPUMilli": 500, "MemoryMiB": 0, "GPU": {"Kind": 2, "Count": 0, "Milli": 0,
                 "Profile": "3g.40gb", "PeakMemoryMiB": 0, "Compute": 0.0, "Models": ["H100-80GB"]}}]})
        );
        assert_eq!(serde_json::from_value::<Job>(v).unwrap(), j);
        let none = serde_json::to_value(Demand::none()).unwrap();
        assert_eq!(none["Models"], serde_json::Value::Null);
        assert_eq!(
            serde_json::from_value::<Demand>(none).unwrap(),
            Demand::none()
        );
        let bad = serde_json::json!({"ID": "j", "Team": "", "Project": "", "Class": 3, "Tasks": null, "GangSize": 0});
        let err = serde_json::from_value::<Job>(bad).unwrap_err().to_string();
        assert!(err.contains("class(3) is not a priority class"), "{err}");
        let bad = serde_json::json!({"Kind": 7, "Count": 0, "Milli": 0, "Profile": "", "PeakMemoryMiB": 0, "Compute": 0, "Models": null});
        let err = serde_json::from_value::<Demand>(bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("gpu demand: unknown kind 7"), "{err}");
    }
}
