//! The checks of a whole scenario (the Go build's validate.go): ranges,
//! names, references between sections, and that the cluster can run every
//! workload.

use std::collections::BTreeSet;

use super::duration::{HOUR, hours, human};
use super::{
    CONSTANT, EXPONENTIAL, Error, FIXED, LOGNORMAL, NodeGroup, POISSON, Scenario, TRACE, UNIFORM,
    Workload,
};
use crate::cluster::{LINK_ALL, LINK_NONE, LINK_PAIRS};
use crate::gpu::{self, DEFAULT_HEADROOM};
use crate::numfmt::{format_fixed, format_g};
use crate::profiles::{self, Kind, Profile};
use crate::quote::quote;
use crate::workload::Class;

/// Limits that keep a scenario, and what `nodes` and `jobs` build from it,
/// to a size a simulator can hold. They are far above any real cluster or
/// week.
pub(super) const MAX_HORIZON: i64 = 10 * 365 * 24 * HOUR;
const MAX_NODES: i64 = 100_000;
const MAX_GPUS_PER_NODE: i64 = 16;
const MAX_REPLICAS: i64 = 1_000;
const MAX_GANG_SIZE: i64 = 4_096;
/// Expected jobs per workload over the horizon.
const MAX_ARRIVALS: usize = 1_000_000;
const MAX_SIGMA: f64 = 10.0;

/// `^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`: names that become node names, job
/// IDs and labels.
fn is_name(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=40).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|&c| c == b'-' || c.is_ascii_lowercase() || c.is_ascii_digit())
        && b[b.len() - 1] != b'-'
}

/// `^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`: a Kubernetes label
/// value.
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// "1 GPU", "8 GPUs".
pub(super) fn plural(n: i64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Go's `%v` of a float64.
fn v(f: f64) -> String {
    format_g(f, None)
}

/// Whether a weight, rate or scale is a number more than 0 (not NaN, not
/// +Inf).
fn positive(f: f64) -> bool {
    f > 0.0 && f != f64::INFINITY
}

impl Scenario {
    /// Checks the whole scenario: ranges, names, references between
    /// sections, and that the cluster can run every workload. `parse`
    /// calls it; a Scenario built or changed in code should be checked with
    /// it too.
    pub fn validate(&self) -> Result<(), Error> {
        if self.name.is_empty() {
            return Err(self.error("name", "missing".into()));
        }
        if self.duration <= 0 || self.duration > MAX_HORIZON {
            return Err(self.error(
                "duration",
                format!(
                    "{} must be more than 0 and at most {}",
                    human(self.duration),
                    human(MAX_HORIZON)
                ),
            ));
        }
        self.validate_nodes()?;
        self.validate_teams()?;
        let (r, total) = (self.production_reserve_gpus, self.gpus());
        if r < 0 || r > total {
            return Err(self.error(
                "production_reserve_gpus",
                format!("{r} must be between 0 and the cluster's {total} GPUs"),
            ));
        }
        let mut names = BTreeSet::new();
        for (i, w) in self.workloads.iter().enumerate() {
            let path = format!("workloads[{i}]");
            self.check_name(&format!("{path}.name"), &w.name, &mut names)?;
            self.validate_workload(&path, w)?;
        }
        Ok(())
    }

    fn check_name(
        &self,
        field: &str,
        name: &str,
        seen: &mut BTreeSet<String>,
    ) -> Result<(), Error> {
        if name.is_empty() {
            return Err(self.error(field, "missing".into()));
        }
        if !is_name(name) {
            return Err(self.error(
                field,
                format!(
                    "{} must be lowercase letters, digits and '-', start with a letter, \
                     not end with '-', and be at most 40 long",
                    quote(name)
                ),
            ));
        }
        if !seen.insert(name.to_string()) {
            return Err(self.error(field, format!("{} is used twice", quote(name))));
        }
        Ok(())
    }

    fn check_label(&self, field: &str, value: &str) -> Result<(), Error> {
        if !is_label(value) {
            return Err(self.error(
                field,
                format!(
                    "{} is not a valid label value (letters, digits, '-', '_', '.'; at most 63)",
                    quote(value)
                ),
            ));
        }
        Ok(())
    }

    fn validate_nodes(&self) -> Result<(), Error> {
        if self.node_groups.is_empty() {
            return Err(self.error("nodes", "missing: at least one node group".into()));
        }
        let mut names = BTreeSet::new();
        let mut total = 0;
        for (i, g) in self.node_groups.iter().enumerate() {
            let path = format!("nodes[{i}]");
            self.check_name(&format!("{path}.group"), &g.group, &mut names)?;
            self.validate_group(&path, g)?;
            total += g.count;
            if total > MAX_NODES {
                return Err(self.error(
                    &format!("{path}.count"),
                    format!("brings the cluster to {total} nodes, more than {MAX_NODES}"),
                ));
            }
        }
        Ok(())
    }

    fn validate_group(&self, path: &str, g: &NodeGroup) -> Result<(), Error> {
        let m = gpu::lookup(&g.gpu);
        let field = |f: &str| format!("{path}.{f}");
        if g.count < 1 || g.count > MAX_NODES {
            return Err(self.error(
                &field("count"),
                format!("{} must be ≥ 1 and ≤ {MAX_NODES}", g.count),
            ));
        }
        if !m.known || m.memory_mib <= 0 {
            return Err(self.error(
                &field("gpu"),
                format!(
                    "unknown GPU model {} (known: {})",
                    quote(&g.gpu),
                    super::convert::known_models().join(", ")
                ),
            ));
        }
        if g.gpus < 1 {
            return Err(self.error(&field("gpus"), format!("{} must be ≥ 1", g.gpus)));
        }
        if g.gpus > MAX_GPUS_PER_NODE {
            return Err(self.error(
                &field("gpus"),
                format!("{} must be ≤ {MAX_GPUS_PER_NODE}", g.gpus),
            ));
        }
        if g.mig && !m.mig {
            return Err(self.error(&field("mig"), format!("{} does not support MIG", m.name)));
        }
        if g.cpu_milli <= 0 {
            return Err(self.error(
                &field("cpu"),
                format!("{}m must be more than 0", g.cpu_milli),
            ));
        }
        if g.memory_mib <= 0 {
            return Err(self.error(
                &field("memory"),
                format!("{} MiB must be more than 0", g.memory_mib),
            ));
        }
        // The tier is a `Tier` already: Go re-parses its string here.
        if !matches!(g.nvlink.as_str(), "" | LINK_NONE | LINK_ALL | LINK_PAIRS) {
            return Err(self.error(
                &field("nvlink"),
                format!("{} must be none, all or pairs", quote(&g.nvlink)),
            ));
        }
        for (j, leaf) in g.leaves.iter().enumerate() {
            let field = format!("{path}.leaves[{j}]");
            self.check_label(&field, leaf)?;
            if g.leaves.iter().position(|l| l == leaf) < Some(j) {
                return Err(self.error(&field, format!("{} is listed twice", quote(leaf))));
            }
        }
        for (f, value) in [("spine", &g.spine), ("block", &g.block)] {
            if !value.is_empty() {
                self.check_label(&field(f), value)?;
            }
        }
        Ok(())
    }

    fn validate_teams(&self) -> Result<(), Error> {
        let total = self.gpus();
        let mut names = BTreeSet::new();
        let mut guaranteed: i64 = 0;
        for (i, t) in self.teams.iter().enumerate() {
            let path = format!("teams[{i}]");
            let field = |f: &str| format!("{path}.{f}");
            self.check_name(&field("name"), &t.name, &mut names)?;
            if t.guaranteed_gpus < 0 {
                return Err(self.error(
                    &field("guaranteed_gpus"),
                    format!("{} must be ≥ 0", t.guaranteed_gpus),
                ));
            }
            if t.guaranteed_gpus > total {
                return Err(self.error(
                    &field("guaranteed_gpus"),
                    format!(
                        "{} is more than the cluster's {total} GPUs",
                        t.guaranteed_gpus
                    ),
                ));
            }
            if t.burst_gpus < t.guaranteed_gpus {
                return Err(self.error(
                    &field("burst_gpus"),
                    format!(
                        "{} is below guaranteed_gpus {}",
                        t.burst_gpus, t.guaranteed_gpus
                    ),
                ));
            }
            if t.burst_gpus > total {
                return Err(self.error(
                    &field("burst_gpus"),
                    format!("{} is more than the cluster's {total} GPUs", t.burst_gpus),
                ));
            }
            if !positive(t.weight) {
                return Err(self.error(
                    &field("weight"),
                    format!("{} must be a number more than 0", v(t.weight)),
                ));
            }
            if t.classes.is_empty() {
                return Err(self.error(
                    &field("classes"),
                    "empty: allow at least one of production, batch, best-effort".into(),
                ));
            }
            // Go also refuses a class number outside the enum here; a Class
            // cannot be one.
            for (j, c) in t.classes.iter().enumerate() {
                if t.classes.iter().position(|x| x == c) < Some(j) {
                    return Err(self.error(
                        &format!("{path}.classes[{j}]"),
                        format!("{c} is listed twice"),
                    ));
                }
            }
            guaranteed += t.guaranteed_gpus;
        }
        if guaranteed > total {
            return Err(self.error(
                "teams",
                format!(
                    "guaranteed_gpus add up to {guaranteed}, more than the cluster's {total} GPUs"
                ),
            ));
        }
        Ok(())
    }

    fn team_names(&self) -> String {
        if self.teams.is_empty() {
            return "none are defined".into();
        }
        self.teams
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn validate_workload(&self, path: &str, w: &Workload) -> Result<(), Error> {
        let Some(t) = self.teams.iter().find(|t| t.name == w.team) else {
            return Err(self.error(
                &format!("{path}.team"),
                format!(
                    "{} is not a team (teams: {})",
                    quote(&w.team),
                    self.team_names()
                ),
            ));
        };
        if !t.classes.contains(&w.class) {
            return Err(self.error(
                &format!("{path}.class"),
                format!(
                    "team {} may not run {} work (allowed: {})",
                    t.name,
                    w.class,
                    class_list(&t.classes)
                ),
            ));
        }
        self.validate_mix(path, w)?;
        self.validate_arrival(&format!("{path}.arrival"), w)?;
        self.validate_dist(&format!("{path}.duration"), w)?;
        self.validate_shape(path, w)
    }

    /// Where the i-th profile of a workload is written in the file.
    fn mix_field(&self, path: &str, w: &Workload, i: usize) -> String {
        if !self.has(&format!("{path}.mix")) && w.mix.len() == 1 {
            return format!("{path}.profile");
        }
        format!("{path}.mix.{}", w.mix[i].profile.name)
    }

    fn validate_mix(&self, path: &str, w: &Workload) -> Result<(), Error> {
        let Some(first) = w.mix.first() else {
            return Err(self.error(
                &format!("{path}.profile"),
                "missing: a profile, or a mix of profiles with weights".into(),
            ));
        };
        let kind = first.profile.kind;
        for (i, m) in w.mix.iter().enumerate() {
            let field = self.mix_field(path, w, i);
            let p =
                profiles::lookup(&m.profile.name).map_err(|e| self.error(&field, e.to_string()))?;
            if !positive(m.weight) {
                return Err(self.error(
                    &field,
                    format!("weight {} must be a number more than 0", v(m.weight)),
                ));
            }
            if p.kind != kind {
                return Err(self.error(
                    &field,
                    format!(
                        "{} is {} but {} is {kind}; a workload's profiles must be of one kind",
                        p.name, p.kind, first.profile.name
                    ),
                ));
            }
            self.fits(&field, &m.profile)?;
        }
        Ok(())
    }

    /// Checks that some node group can run a task of `p`.
    fn fits(&self, field: &str, p: &Profile) -> Result<(), Error> {
        if !self.holders(p).is_empty() {
            return Ok(());
        }
        let need = super::nodes::need_mib(p);
        let headroom = format_fixed(DEFAULT_HEADROOM * 100.0, 0);
        if p.whole() {
            return Err(self.error(
                field,
                format!(
                    "{} needs {} with {} MiB each ({} MiB + {headroom}% headroom) on one node; no node group has that",
                    p.name,
                    plural(i64::from(p.gpus.max(1)), "GPU"),
                    format_fixed(need, 0),
                    p.peak_memory_mib
                ),
            ));
        }
        Err(self.error(
            field,
            format!(
                "{} needs a GPU with {} MiB ({} MiB + {headroom}% headroom); no node group has one",
                p.name,
                format_fixed(need, 0),
                p.peak_memory_mib
            ),
        ))
    }

    fn validate_arrival(&self, path: &str, w: &Workload) -> Result<(), Error> {
        let a = &w.arrival;
        let only = |field: &str, process: &str| {
            self.error(
                &format!("{path}.{field}"),
                format!("only for process: {process} (this one is {})", a.process),
            )
        };
        let field = |f: &str| format!("{path}.{f}");
        if ![POISSON, TRACE, FIXED].contains(&a.process.as_str()) {
            return Err(self.error(
                &field("process"),
                format!(
                    "unknown process {} (known: poisson, trace, fixed)",
                    quote(&a.process)
                ),
            ));
        }
        if a.process != POISSON && a.rate_per_hour != 0.0 {
            return Err(only("rate_per_hour", POISSON));
        }
        if a.process != TRACE && !a.file.is_empty() {
            return Err(only("file", TRACE));
        }
        if a.process != TRACE && a.time_scale != 0.0 {
            return Err(only("time_scale", TRACE));
        }
        if a.process != FIXED && !a.at.is_empty() {
            return Err(only("at", FIXED));
        }
        match a.process.as_str() {
            POISSON => {
                if !positive(a.rate_per_hour) {
                    return Err(self.error(
                        &field("rate_per_hour"),
                        format!("{} must be a number more than 0", v(a.rate_per_hour)),
                    ));
                }
                let n = a.rate_per_hour * hours(self.duration);
                if n > MAX_ARRIVALS as f64 {
                    return Err(self.error(
                        &field("rate_per_hour"),
                        format!(
                            "{} per hour over {} is {} jobs, more than {MAX_ARRIVALS}",
                            v(a.rate_per_hour),
                            human(self.duration),
                            format_g(n, Some(3))
                        ),
                    ));
                }
            }
            TRACE => {
                if a.file.is_empty() {
                    return Err(self.error(
                        &field("file"),
                        "missing: the Alibaba pod list (CSV) whose creation times give the arrivals".into(),
                    ));
                }
                if !positive(a.time_scale) {
                    return Err(self.error(
                        &field("time_scale"),
                        format!("{} must be a number more than 0", v(a.time_scale)),
                    ));
                }
            }
            _ => {
                if a.at.is_empty() {
                    return Err(self.error(
                        &field("at"),
                        "missing: the arrival times, such as [0s, 10m]".into(),
                    ));
                }
                if a.at.len() > MAX_ARRIVALS {
                    return Err(self.error(
                        &field("at"),
                        format!("{} times, more than {MAX_ARRIVALS}", a.at.len()),
                    ));
                }
                for (i, &at) in a.at.iter().enumerate() {
                    if at < 0 || at >= self.duration {
                        return Err(self.error(
                            &format!("{path}.at[{i}]"),
                            format!(
                                "{} must be ≥ 0 and before the horizon {}",
                                human(at),
                                human(self.duration)
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn validate_dist(&self, path: &str, w: &Workload) -> Result<(), Error> {
        let d = &w.duration;
        let field = |f: &str| format!("{path}.{f}");
        let empty = *d == super::Dist::default();
        if empty && w.arrival.process == TRACE {
            return Ok(()); // the trace's own deletion times
        }
        if empty {
            return Err(self.error(
                path,
                "missing: a run-time distribution, such as {dist: exponential, mean: 2h}".into(),
            ));
        }
        if d.dist.is_empty() {
            return Err(self.error(
                &field("dist"),
                "missing: exponential, lognormal, fixed or uniform".into(),
            ));
        }
        let want: &[&str] = match d.dist.as_str() {
            EXPONENTIAL => &["mean"],
            LOGNORMAL => &["mean", "sigma"],
            CONSTANT => &["value"],
            UNIFORM => &["min", "max"],
            _ => {
                return Err(self.error(
                    &field("dist"),
                    format!(
                        "unknown distribution {} (known: exponential, lognormal, fixed, uniform)",
                        quote(&d.dist)
                    ),
                ));
            }
        };
        let set = [
            ("mean", d.mean != 0),
            ("sigma", d.sigma != 0.0),
            ("value", d.value != 0),
            ("min", d.min != 0),
            ("max", d.max != 0),
        ];
        for (f, is_set) in set {
            if is_set && !want.contains(&f) {
                return Err(self.error(
                    &field(f),
                    format!(
                        "not used by dist: {} (it takes {})",
                        d.dist,
                        want.join(" and ")
                    ),
                ));
            }
        }
        let in_range = |f: &str, v: i64| {
            if v <= 0 || v > MAX_HORIZON {
                return Err(self.error(
                    &field(f),
                    format!(
                        "{} must be more than 0 and at most {}",
                        human(v),
                        human(MAX_HORIZON)
                    ),
                ));
            }
            Ok(())
        };
        match d.dist.as_str() {
            EXPONENTIAL => return in_range("mean", d.mean),
            LOGNORMAL => {
                if !(d.sigma > 0.0 && d.sigma <= MAX_SIGMA) {
                    return Err(self.error(
                        &field("sigma"),
                        format!("{} must be more than 0 and at most {MAX_SIGMA}", v(d.sigma)),
                    ));
                }
                return in_range("mean", d.mean);
            }
            CONSTANT => return in_range("value", d.value),
            _ => {}
        }
        if d.min < 0 {
            return Err(self.error(&field("min"), format!("{} must be ≥ 0", human(d.min))));
        }
        in_range("max", d.max)?;
        if d.max <= d.min {
            return Err(self.error(
                &field("max"),
                format!("{} must be more than min {}", human(d.max), human(d.min)),
            ));
        }
        Ok(())
    }

    /// Checks the fields that depend on the workload's kind: replicas for
    /// inference; gang and checkpoints for training.
    fn validate_shape(&self, path: &str, w: &Workload) -> Result<(), Error> {
        let field = |f: &str| format!("{path}.{f}");
        if w.kind() == Some(Kind::Inference) {
            if w.replicas < 1 || w.replicas > MAX_REPLICAS {
                return Err(self.error(
                    &field("replicas"),
                    format!("{} must be ≥ 1 and ≤ {MAX_REPLICAS}", w.replicas),
                ));
            }
            if !w.gang.sizes.is_empty() || !w.gang.weights.is_empty() {
                return Err(self.error(
                    &field("gang"),
                    "only for training workloads; inference runs replicas tasks per job".into(),
                ));
            }
            if w.checkpoint_every != 0 {
                return Err(self.error(
                    &field("checkpoint_every"),
                    "only for training workloads".into(),
                ));
            }
            return Ok(());
        }
        if w.replicas != 0 {
            return Err(self.error(
                &field("replicas"),
                "only for inference workloads; training runs gang.sizes tasks per job".into(),
            ));
        }
        if w.gang.sizes.is_empty() {
            return Err(self.error(
                &field("gang.sizes"),
                "missing: tasks per job, such as [8, 16]".into(),
            ));
        }
        if w.gang.weights.len() != w.gang.sizes.len() {
            return Err(self.error(
                &field("gang.weights"),
                format!(
                    "{} given for {} sizes; give one weight per size",
                    w.gang.weights.len(),
                    w.gang.sizes.len()
                ),
            ));
        }
        if w.checkpoint_every < 0 || w.checkpoint_every > MAX_HORIZON {
            return Err(self.error(
                &field("checkpoint_every"),
                format!(
                    "{} must be ≥ 0 and at most {}",
                    human(w.checkpoint_every),
                    human(MAX_HORIZON)
                ),
            ));
        }
        for (i, &size) in w.gang.sizes.iter().enumerate() {
            let field = format!("{path}.gang.sizes[{i}]");
            if !(1..=MAX_GANG_SIZE).contains(&size) {
                return Err(self.error(&field, format!("{size} must be ≥ 1 and ≤ {MAX_GANG_SIZE}")));
            }
            for m in &w.mix {
                let p = &m.profile;
                let per = i64::from(p.gpus.max(1));
                let have = self.capacity_for(p);
                if size * per > have {
                    return Err(self.error(
                        &field,
                        format!(
                            "a gang of {size} tasks × {} needs {}; the cluster has {have} that can run {}",
                            plural(per, "GPU"),
                            plural(size * per, "GPU"),
                            p.name
                        ),
                    ));
                }
            }
        }
        for (i, &wt) in w.gang.weights.iter().enumerate() {
            if !positive(wt) {
                return Err(self.error(
                    &format!("{path}.gang.weights[{i}]"),
                    format!("{} must be a number more than 0", v(wt)),
                ));
            }
        }
        Ok(())
    }
}

fn class_list(cs: &[Class]) -> String {
    cs.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
}
