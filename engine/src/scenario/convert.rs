//! From the raw file to a Scenario (the Go build's convert.go): the names
//! that refer to other tables (GPU models, tiers, classes, profiles) are
//! parsed, defaults applied, and missing required fields reported. Ranges
//! and cross-references are `validate`'s job, so that a Scenario built in
//! code is checked the same way.

use std::collections::BTreeMap;

use super::raw::{RawArrival, RawNodeGroup, RawScenario, RawTeam, RawWorkload};
use super::{Dist, Error, Gang, NodeGroup, Process, Scenario, TRACE, Team, Weighted, Workload};
use crate::cluster::parse_tier;
use crate::gpu;
use crate::profiles::{self, Kind};
use crate::quote::quote;
use crate::workload::{classes, parse_class};

pub(super) fn convert(
    raw: &RawScenario,
    file: &str,
    lines: BTreeMap<String, usize>,
) -> Result<Scenario, Error> {
    let mut s = Scenario {
        file: file.to_string(),
        name: raw.name.clone(),
        duration: raw.duration.nanos,
        seed: raw.seed.0,
        production_reserve_gpus: raw.reserve.0,
        node_groups: Vec::new(),
        teams: Vec::new(),
        workloads: Vec::new(),
        lines,
    };
    if !s.has("name") {
        s.name = file_stem(file);
    }
    if !s.has("seed") {
        s.seed = 1;
    }
    if !raw.duration.set {
        return Err(s.missing("duration", "the simulated horizon, such as 168h"));
    }
    for (i, r) in raw.nodes.iter().enumerate() {
        let g = s.node_group(&format!("nodes[{i}]"), r)?;
        s.node_groups.push(g);
    }
    for (i, r) in raw.teams.iter().enumerate() {
        let t = s.team(&format!("teams[{i}]"), r)?;
        s.teams.push(t);
    }
    for (i, r) in raw.workloads.iter().enumerate() {
        let w = s.workload(&format!("workloads[{i}]"), r)?;
        s.workloads.push(w);
    }
    Ok(s)
}

/// Go's `strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))`.
fn file_stem(file: &str) -> String {
    let trimmed = file.trim_end_matches('/');
    let base = match trimmed.rfind('/') {
        Some(i) => &trimmed[i + 1..],
        None if trimmed.is_empty() && !file.is_empty() => "/",
        None if trimmed.is_empty() => ".",
        None => trimmed,
    };
    // filepath.Ext looks at the whole path, not only its base.
    let ext = match file.rfind(['.', '/']) {
        Some(i) if file.as_bytes()[i] == b'.' => &file[i..],
        _ => "",
    };
    base.strip_suffix(ext).unwrap_or(base).to_string()
}

/// Go's `filepath.Dir`: everything before the last slash, cleaned.
fn dir(path: &str) -> String {
    match path.rfind('/') {
        Some(i) => clean(&path[..=i]),
        None => ".".to_string(),
    }
}

/// Go's `filepath.Join(dir, name)` for a relative name: the two joined by
/// a slash, cleaned.
fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        return clean(name);
    }
    clean(&format!("{dir}/{name}"))
}

/// Go's `filepath.Clean`: one slash between elements, no `.` elements,
/// `..` removed with the element before it where there is one.
fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// The canonical names of the GPU models a node group may use: those
/// whose memory is known.
pub(crate) fn known_models() -> Vec<&'static str> {
    gpu::catalog()
        .iter()
        .filter(|m| m.memory_mib > 0)
        .map(|m| m.name.as_str())
        .collect()
}

impl Scenario {
    fn missing(&self, path: &str, what: &str) -> Error {
        self.error(path, format!("missing: {what}"))
    }

    fn node_group(&self, path: &str, r: &RawNodeGroup) -> Result<NodeGroup, Error> {
        let mut g = NodeGroup {
            group: r.group.clone(),
            count: r.count.0,
            gpu: String::new(),
            gpus: r.gpus.0,
            mig: r.mig,
            cpu_milli: r.cpu.milli,
            memory_mib: r.memory.mib,
            tier: Default::default(),
            leaves: r.leaves.clone(),
            spine: r.spine.clone(),
            block: r.block.clone(),
            nvlink: r.nvlink.clone(),
        };
        if !self.has(&format!("{path}.count")) {
            g.count = 1;
        }
        if r.gpu.is_empty() {
            return Err(self.missing(&format!("{path}.gpu"), "a GPU model such as H100-80GB"));
        }
        if !self.has(&format!("{path}.gpus")) {
            return Err(self.missing(&format!("{path}.gpus"), "GPUs per node, such as 8"));
        }
        if !r.cpu.set {
            return Err(self.missing(&format!("{path}.cpu"), "CPU cores per node, such as 192"));
        }
        if !r.memory.set {
            return Err(self.missing(
                &format!("{path}.memory"),
                "host memory per node, such as 2Ti",
            ));
        }
        let m = gpu::lookup(&r.gpu);
        if !m.known {
            return Err(self.error(
                &format!("{path}.gpu"),
                format!(
                    "unknown GPU model {} (known: {})",
                    quote(&r.gpu),
                    known_models().join(", ")
                ),
            ));
        }
        g.gpu = m.name.clone();
        g.tier =
            parse_tier(&r.tier).map_err(|e| self.error(&format!("{path}.tier"), e.to_string()))?;
        Ok(g)
    }

    fn team(&self, path: &str, r: &RawTeam) -> Result<Team, Error> {
        let mut t = Team {
            name: r.name.clone(),
            guaranteed_gpus: r.guaranteed_gpus.0,
            burst_gpus: r.burst_gpus.0,
            weight: r.weight,
            classes: Vec::new(),
        };
        if !self.has(&format!("{path}.burst_gpus")) {
            t.burst_gpus = self.gpus();
        }
        if !self.has(&format!("{path}.weight")) {
            t.weight = 1.0;
        }
        if !self.has(&format!("{path}.classes")) {
            t.classes = classes().to_vec();
        }
        for (i, name) in r.classes.iter().enumerate() {
            let class = parse_class(name)
                .map_err(|e| self.error(&format!("{path}.classes[{i}]"), e.to_string()))?;
            t.classes.push(class);
        }
        Ok(t)
    }

    fn workload(&self, path: &str, r: &RawWorkload) -> Result<Workload, Error> {
        let mut w = Workload {
            name: r.name.clone(),
            team: r.team.clone(),
            replicas: r.replicas.0,
            checkpoint_every: r.checkpoint_every.nanos,
            gang: Gang {
                sizes: r.gang.sizes.iter().map(|s| s.0).collect(),
                weights: r.gang.weights.clone(),
            },
            ..Workload::default()
        };
        if r.team.is_empty() {
            return Err(self.missing(&format!("{path}.team"), "the team that owns the workload"));
        }
        if r.class.is_empty() {
            return Err(self.missing(&format!("{path}.class"), "production, batch or best-effort"));
        }
        if !self.has(&format!("{path}.arrival")) {
            return Err(self.missing(
                &format!("{path}.arrival"),
                "how jobs arrive: {process: poisson, rate_per_hour: …}, trace or fixed",
            ));
        }
        w.class = parse_class(&r.class)
            .map_err(|e| self.error(&format!("{path}.class"), e.to_string()))?;
        w.mix = self.mix(path, r)?;
        w.arrival = self.arrival(&format!("{path}.arrival"), &r.arrival)?;
        let d = &r.duration;
        w.duration = Dist {
            dist: d.dist.clone(),
            mean: d.mean.nanos,
            sigma: d.sigma,
            value: d.value.nanos,
            min: d.min.nanos,
            max: d.max.nanos,
        };
        match w.kind() {
            Some(Kind::Inference) if !self.has(&format!("{path}.replicas")) => w.replicas = 1,
            Some(Kind::Training) => {
                if !self.has(&format!("{path}.gang")) {
                    w.gang = Gang {
                        sizes: vec![1],
                        weights: Vec::new(),
                    };
                }
                if w.gang.weights.is_empty()
                    && !w.gang.sizes.is_empty()
                    && !self.has(&format!("{path}.gang.weights"))
                {
                    w.gang.weights = vec![1.0; w.gang.sizes.len()];
                }
            }
            _ => {}
        }
        Ok(w)
    }

    /// `profile: x` or `mix: {x: weight, …}`, in name order so that the
    /// map's order in the file does not matter.
    fn mix(&self, path: &str, r: &RawWorkload) -> Result<Vec<Weighted>, Error> {
        if !r.profile.is_empty() && self.has(&format!("{path}.mix")) {
            return Err(self.error(
                &format!("{path}.mix"),
                "give profile or mix, not both".into(),
            ));
        }
        if !r.profile.is_empty() {
            let profile = profiles::lookup(&r.profile)
                .map_err(|e| self.error(&format!("{path}.profile"), e.to_string()))?;
            return Ok(vec![Weighted {
                profile,
                weight: 1.0,
            }]);
        }
        if r.mix.is_empty() {
            return Err(self.missing(
                &format!("{path}.profile"),
                "a profile, or a mix of profiles with weights",
            ));
        }
        // A BTreeMap iterates in name order (Go sorts the names).
        let mut mix = Vec::with_capacity(r.mix.len());
        for (name, &weight) in &r.mix {
            let profile = profiles::lookup(name)
                .map_err(|e| self.error(&format!("{path}.mix.{name}"), e.to_string()))?;
            mix.push(Weighted { profile, weight });
        }
        Ok(mix)
    }

    fn arrival(&self, path: &str, r: &RawArrival) -> Result<Process, Error> {
        let mut a = Process {
            process: r.process.clone(),
            rate_per_hour: r.rate_per_hour,
            file: r.file.clone(),
            time_scale: r.time_scale,
            at: r.at.iter().map(|at| at.nanos).collect(),
        };
        if r.process.is_empty() {
            return Err(self.missing(&format!("{path}.process"), "poisson, trace or fixed"));
        }
        if r.process == TRACE {
            if !self.has(&format!("{path}.time_scale")) {
                a.time_scale = 1.0;
            }
            if !a.file.is_empty() && !a.file.starts_with('/') {
                a.file = join(&dir(&self.file), &a.file);
            }
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_as_go_writes_them() {
        assert_eq!(file_stem("dir/my-scenario.yaml"), "my-scenario");
        assert_eq!(file_stem("t.yaml"), "t");
        assert_eq!(file_stem("a.b/c"), "c");
        assert_eq!(file_stem("x.tar.gz"), "x.tar");
        assert_eq!(file_stem(""), ".");
        assert_eq!(dir("some/dir/s.yaml"), "some/dir");
        assert_eq!(dir("s.yaml"), ".");
        assert_eq!(dir("/s.yaml"), "/");
        assert_eq!(join("some/dir", "pods.csv"), "some/dir/pods.csv");
        assert_eq!(join(".", "pods.csv"), "pods.csv");
        assert_eq!(join("scenarios", "../shared/x.csv"), "shared/x.csv");
        assert_eq!(join(".", "../x.csv"), "../x.csv");
        assert_eq!(clean("a//b/./c/.."), "a/b");
    }
}
