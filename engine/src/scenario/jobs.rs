//! The jobs a scenario offers over its horizon (the Go build's jobs.go),
//! draw for draw the Go build's: each workload draws from its own stream,
//! seeded with the seed XOR the FNV-1a hash of the workload's name, and
//! each job draws its profile, then its run time, then its gang size.

use std::collections::BTreeMap;

use super::duration::{SECOND, hours, seconds};
use super::validate::MAX_HORIZON;
use super::{
    CONSTANT, EXPONENTIAL, Error, FIXED, LOGNORMAL, POISSON, Scenario, TRACE, UNIFORM, Workload,
};
use super::{Dist, Weighted};
use crate::fmath;
use crate::profiles::{Kind, Profile};
use crate::random::Rand;
use crate::trace::{self, Pod};
use crate::workload::Job;

/// One job of the stream: when it arrives, what it asks for, and how long
/// it runs once all its tasks have started. Times in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// Since the start of the scenario.
    pub at: i64,
    pub job: Job,
    /// Run time; work lost to preemption comes on top.
    pub duration: i64,
    /// Training: a preempted job loses the work since its last
    /// checkpoint; 0: all of it.
    pub checkpoint_every: i64,
}

/// Where `jobs` gets the text of the trace files that `trace` arrivals
/// name (the engine opens no file). `read` gets the path as the scenario
/// resolved it and returns the file's bytes, or the error to report,
/// worded as the Go build words it ("open x.csv: no such file or
/// directory": see [`go_open_error`]). Any `FnMut(&str) -> Result<Vec<u8>,
/// String>` is one.
pub trait TraceFiles {
    fn read(&mut self, path: &str) -> Result<Vec<u8>, String>;
}

impl<F: FnMut(&str) -> Result<Vec<u8>, String>> TraceFiles for F {
    fn read(&mut self, path: &str) -> Result<Vec<u8>, String> {
        self(path)
    }
}

/// The text Go's `os.Open(path)` gives for an error: "open PATH: no such
/// file or directory". For callers whose `TraceFiles` read files.
pub fn go_open_error(path: &str, e: &std::io::Error) -> String {
    // Go spells the system's error text in lower case, without Rust's
    // " (os error N)".
    let text = e.to_string();
    let text = match text.find(" (os error") {
        Some(i) => &text[..i],
        None => &text,
    };
    let mut chars = text.chars();
    let lower = match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    };
    format!("open {path}: {lower}")
}

/// The shortest run time a job gets: a draw from a continuous
/// distribution can come arbitrarily close to zero, and a job that runs for
/// no time means nothing to a scheduler.
const MIN_RUN_TIME: i64 = SECOND;

impl Scenario {
    /// The jobs that arrive over the horizon, in order of arrival (ties:
    /// workloads in file order, then each workload's own order). The stream
    /// depends only on the scenario and seed: each workload draws from its
    /// own stream, seeded from `seed` and the workload's name, so adding or
    /// removing a workload leaves the others' jobs as they were.
    ///
    /// Job IDs are the workload's name and a sequence number
    /// ("chat-000123"), task names the job ID and the task's index
    /// ("chat-000123-0"). `files` gives the text of trace files.
    pub fn jobs(&self, seed: i64, files: &mut dyn TraceFiles) -> Result<Vec<Arrival>, Error> {
        let mut all = Vec::new();
        // By file, for workloads sharing one.
        let mut traces: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
        for i in 0..self.workloads.len() {
            all.extend(self.workload_jobs(i, seed, files, &mut traces)?);
        }
        // Stable, as Go's SortStableFunc.
        all.sort_by_key(|a| a.at);
        Ok(all)
    }

    fn workload_jobs(
        &self,
        i: usize,
        seed: i64,
        files: &mut dyn TraceFiles,
        traces: &mut BTreeMap<String, Vec<Pod>>,
    ) -> Result<Vec<Arrival>, Error> {
        let w = &self.workloads[i];
        let mut g = Generator {
            w,
            rng: Rand::new(stream_seed(seed, &w.name)),
            models: w
                .mix
                .iter()
                .map(|m| (m.profile.name.clone(), self.models_for(&m.profile)))
                .collect(),
            out: Vec::new(),
        };
        match w.arrival.process.as_str() {
            POISSON => {
                let per_second = w.arrival.rate_per_hour / 3600.0;
                let mut t = 0.0;
                loop {
                    t += g.rng.exp_float64() / per_second;
                    let at = from_seconds(t);
                    if at >= self.duration {
                        break;
                    }
                    g.emit(at, 0);
                }
            }
            FIXED => {
                let mut at = w.arrival.at.clone();
                at.sort_unstable();
                for t in at {
                    g.emit(t, 0);
                }
            }
            TRACE => {
                let field = format!("workloads[{i}].arrival.file");
                self.trace_arrivals(&mut g, &field, files, traces)?;
            }
            other => {
                return Err(self.error(
                    &format!("workloads[{i}].arrival.process"),
                    format!("unknown process {}", crate::quote::quote(other)),
                ));
            }
        }
        Ok(g.out)
    }

    /// Arrival times, and run times unless the workload gives a
    /// distribution, from the GPU pods of an Alibaba pod list:
    /// creation_time is the arrival, deletion_time − creation_time the run
    /// time, both multiplied by time_scale. A pod without a deletion time
    /// runs to the end of the horizon. Pods without GPUs are left out: the
    /// trace gives timing only, and the workload's profile the demand.
    fn trace_arrivals(
        &self,
        g: &mut Generator,
        field: &str,
        files: &mut dyn TraceFiles,
        traces: &mut BTreeMap<String, Vec<Pod>>,
    ) -> Result<(), Error> {
        let a = &g.w.arrival;
        if !traces.contains_key(&a.file) {
            let data = files.read(&a.file).map_err(|e| self.error(field, e))?;
            let pods =
                trace::parse_pods(&data, &a.file).map_err(|e| self.error(field, e.to_string()))?;
            traces.insert(a.file.clone(), pods);
        }
        let pods = &traces[&a.file];
        let mut times: Vec<(i64, i64)> = Vec::new();
        for p in pods.iter().filter(|p| p.num_gpu != 0) {
            let Some(created) = p.creation_time else {
                return Err(self.error(
                    field,
                    format!("{}:{}: pod {} has no creation_time", a.file, p.line, p.name),
                ));
            };
            let at = from_seconds(created as f64 * a.time_scale);
            if at >= self.duration {
                continue;
            }
            let mut run = self.duration - at;
            if let Some(deleted) = p.deletion_time {
                if deleted < created {
                    return Err(self.error(
                        field,
                        format!(
                            "{}:{}: pod {} is deleted ({deleted}) before it is created ({created})",
                            a.file, p.line, p.name
                        ),
                    ));
                }
                run = from_seconds((deleted - created) as f64 * a.time_scale);
            }
            times.push((at, run.max(MIN_RUN_TIME)));
        }
        times.sort_by_key(|&(at, _)| at);
        for (at, run) in times {
            g.emit(at, run);
        }
        Ok(())
    }

    /// The GPUs the workloads keep busy on average if every job runs as
    /// soon as it arrives (Little's law: jobs per hour × mean run time ×
    /// GPU-equivalents per job), to compare with `gpus()`. A task on a MIG
    /// slice counts as the larger of its compute and memory share of the
    /// GPU. Trace workloads are not counted: their rate is in the file.
    pub fn offered_load(&self) -> f64 {
        let mut total = 0.0;
        for w in &self.workloads {
            total += self.workload_load(w);
        }
        total
    }

    /// One workload's part of `offered_load`.
    pub fn workload_load(&self, w: &Workload) -> f64 {
        let per_hour = match w.arrival.process.as_str() {
            POISSON => w.arrival.rate_per_hour,
            FIXED => w.arrival.at.len() as f64 / hours(self.duration),
            _ => return 0.0,
        };
        let tasks = if w.kind() == Some(Kind::Training) {
            weighted_mean(&w.gang.sizes, &w.gang.weights)
        } else {
            w.replicas as f64
        };
        let (mut gpus, mut weights) = (0.0, 0.0);
        for m in &w.mix {
            gpus += m.weight * self.gpu_equivalents(&m.profile);
            weights += m.weight;
        }
        if weights == 0.0 {
            return 0.0;
        }
        per_hour * hours(w.duration.mean_run_time()) * tasks * gpus / weights
    }
}

impl Dist {
    /// The mean of the distribution; 0 when `dist` is "" (trace times).
    pub fn mean_run_time(&self) -> i64 {
        match self.dist.as_str() {
            EXPONENTIAL | LOGNORMAL => self.mean,
            CONSTANT => self.value,
            // Go's Duration arithmetic wraps.
            UNIFORM => self.min.wrapping_add(self.max) / 2,
            _ => 0,
        }
    }
}

fn weighted_mean(values: &[i64], weights: &[f64]) -> f64 {
    let (mut sum, mut total) = (0.0, 0.0);
    for (v, w) in values.iter().zip(weights) {
        sum += *v as f64 * w;
        total += w;
    }
    if total == 0.0 { 0.0 } else { sum / total }
}

/// Mixes the scenario's seed with a workload's name: seed XOR
/// FNV-1a-64(name).
pub(super) fn stream_seed(seed: i64, name: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    seed ^ h as i64
}

/// A time in seconds as nanoseconds, truncated, saturating at the longest
/// horizon rather than overflowing (NaN saturates too).
fn from_seconds(t: f64) -> i64 {
    let limit = (MAX_HORIZON / SECOND) as f64;
    // Written so that NaN saturates too.
    if t.is_nan() || t >= limit {
        return MAX_HORIZON;
    }
    (t * SECOND as f64) as i64
}

/// Draws the jobs of one workload.
struct Generator<'s> {
    w: &'s Workload,
    rng: Rand,
    /// Per profile: the models it may run on; empty: any.
    models: BTreeMap<String, Vec<String>>,
    out: Vec<Arrival>,
}

impl Generator<'_> {
    /// Adds the next job, arriving at `at`. `run` is the trace's run time,
    /// used when the workload has no duration distribution. The draws come
    /// in a fixed order: profile, run time, gang size.
    fn emit(&mut self, at: i64, run: i64) {
        let w = self.w;
        let p = self.pick_profile().clone();
        let run = if w.duration.dist.is_empty() {
            run
        } else {
            self.run_time()
        };
        let (n, gang) = if w.kind() == Some(Kind::Training) {
            let n = self.pick_gang();
            (n, n)
        } else {
            (w.replicas, 0)
        };
        let id = format!("{}-{:06}", w.name, self.out.len());
        let models = self
            .models
            .get(&p.name)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let tasks = (0..n.max(0))
            .map(|k| {
                let mut task = p.task(&format!("{id}-{k}"));
                task.gpu = p.demand(models);
                task
            })
            .collect();
        self.out.push(Arrival {
            at,
            job: Job {
                id,
                team: w.team.clone(),
                project: w.name.clone(),
                class: w.class,
                tasks,
                gang_size: i32::try_from(gang).unwrap_or(i32::MAX),
            },
            duration: run,
            checkpoint_every: w.checkpoint_every,
        });
    }

    fn pick_profile(&mut self) -> &Profile {
        let mix: &[Weighted] = &self.w.mix;
        if mix.len() == 1 {
            return &mix[0].profile;
        }
        let weights: Vec<f64> = mix.iter().map(|m| m.weight).collect();
        &mix[pick(&mut self.rng, &weights)].profile
    }

    fn pick_gang(&mut self) -> i64 {
        let gang = &self.w.gang;
        if gang.sizes.len() == 1 {
            return gang.sizes[0];
        }
        gang.sizes[pick(&mut self.rng, &gang.weights)]
    }

    /// A draw from the workload's distribution, within [MIN_RUN_TIME,
    /// MAX_HORIZON].
    fn run_time(&mut self) -> i64 {
        let d = &self.w.duration;
        let sec = match d.dist.as_str() {
            EXPONENTIAL => self.rng.exp_float64() * seconds(d.mean),
            LOGNORMAL => {
                // Mean is the distribution's mean: exp(mu + sigma²/2) = mean.
                let mu = fmath::ln(seconds(d.mean)) - (d.sigma * d.sigma) / 2.0;
                fmath::exp(mu + d.sigma * self.rng.norm_float64())
            }
            CONSTANT => seconds(d.value),
            UNIFORM => seconds(d.min) + self.rng.float64() * seconds(d.max.wrapping_sub(d.min)),
            _ => 0.0,
        };
        from_seconds(sec).max(MIN_RUN_TIME)
    }
}

/// Draws an index with probability proportional to its weight.
fn pick(rng: &mut Rand, weights: &[f64]) -> usize {
    let mut total = 0.0;
    for w in weights {
        total += w;
    }
    let mut u = rng.float64() * total;
    for (i, &w) in weights.iter().enumerate() {
        if u < w {
            return i;
        }
        u -= w;
    }
    weights.len().saturating_sub(1) // u landed on the total through rounding
}
