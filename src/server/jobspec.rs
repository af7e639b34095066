//! Checking a submission and turning it into the job the engine takes
//! (the Go build's `jobspec.go`). Pure: the team and the cluster's shape
//! are given. Every error names the field.

use partita_engine::gpu;
use partita_engine::profiles;
use partita_engine::scenario::duration::parse_duration;
use partita_engine::workload::{self, Demand, Kind};

use super::error::ApiError;
use crate::api::{GpuRequest, SubmitRequest};
use crate::store::accounts::TeamRow;
use crate::store::jobs::JobSpec;

/// Limits on a submission.
pub const MAX_TASKS: i64 = 4096;
pub const MAX_NAME_LEN: usize = 200;
pub const MAX_KEY_LEN: usize = 200;
const MAX_IMAGE_LEN: usize = 500;
const MAX_COMMAND_LEN: usize = 4096;
/// A year of cluster time, in nanoseconds.
const MAX_JOB_DURATION: i64 = 8760 * 3600 * 1_000_000_000;

/// The class a team allows: `name`, or batch when empty.
pub fn team_class(team: &TeamRow, name: &str, field: &str) -> Result<String, ApiError> {
    let name = if name.is_empty() { "batch" } else { name };
    workload::parse_class(name)
        .map_err(|e| ApiError::bad_request(field, format!("{field}: {e}")))?;
    if team.classes.iter().any(|c| c == name) {
        return Ok(name.to_string());
    }
    Err(ApiError::bad_request(
        field,
        format!(
            "{field}: team {} may not use {name} (allowed: {})",
            team.name,
            team.classes.join(", ")
        ),
    ))
}

/// Checks the name, image and command, and fills in the project.
pub fn check_texts(team: &TeamRow, req: &mut SubmitRequest) -> Result<(), ApiError> {
    if req.project.is_empty() {
        req.project = "default".to_string();
    }
    if !team.projects.contains(&req.project) {
        return Err(ApiError::bad_request(
            "project",
            format!(
                "project: {:?} is not a project of team {} (create it with POST /api/v1/teams/{}/projects)",
                req.project, team.name, team.name
            ),
        ));
    }
    if req.name.len() > MAX_NAME_LEN {
        return Err(ApiError::bad_request(
            "name",
            format!(
                "name: {} characters; at most {MAX_NAME_LEN}",
                req.name.len()
            ),
        ));
    }
    if req.image.len() > MAX_IMAGE_LEN || req.image.contains([' ', '\t', '\r', '\n']) {
        let shown: String = req.image.chars().take(40).collect();
        return Err(ApiError::bad_request(
            "image",
            format!(
                "image: {shown:?} must be an image reference such as registry/name:tag, without spaces, at most {MAX_IMAGE_LEN} characters"
            ),
        ));
    }
    if req.command.len() > MAX_COMMAND_LEN {
        return Err(ApiError::bad_request(
            "command",
            format!(
                "command: {} characters; at most {MAX_COMMAND_LEN}",
                req.command.len()
            ),
        ));
    }
    if req.idempotency_key.len() > MAX_KEY_LEN {
        return Err(ApiError::bad_request(
            "idempotency_key",
            format!(
                "idempotency_key: {} characters; at most {MAX_KEY_LEN}",
                req.idempotency_key.len()
            ),
        ));
    }
    Ok(())
}

/// Turns the task and time fields into a spec, checked against the
/// cluster's shape and the team's burst.
pub fn build_spec(
    req: &SubmitRequest,
    team: &TeamRow,
    capacity: &workload::Capacity,
) -> Result<JobSpec, ApiError> {
    let n = task_count(req)?;
    if req.gang != 0 && req.gang != 1 && req.gang != n {
        return Err(ApiError::bad_request(
            "gang",
            format!(
                "gang: {} must be 0 or 1 (tasks start on their own) or the task count {n} (all or nothing)",
                req.gang
            ),
        ));
    }
    let (demand, mut cpu, mut mem) = demand(&req.gpu)?;
    if cpu == 0 {
        cpu = 1000;
    }
    if mem == 0 {
        mem = 4096;
    }
    if !req.cpu.is_empty() {
        cpu = parse_cpu(&req.cpu)?;
    }
    if !req.memory.is_empty() {
        mem = parse_memory("memory", &req.memory)?;
    }
    let mut spec = JobSpec {
        gang: req.gang,
        duration: parse_go_duration("duration", &req.duration)?,
        fail_after: parse_go_duration("fail_after", &req.fail_after)?,
        checkpoint_every: parse_go_duration("checkpoint_every", &req.checkpoint_every)?,
        ..JobSpec::default()
    };
    let task = workload::Task {
        name: String::new(),
        cpu_milli: cpu,
        memory_mib: mem,
        gpu: demand,
    };
    if let Err(e) = task.validate(Some(capacity)) {
        let text = e.to_string();
        let text = text.strip_prefix("task : ").unwrap_or(&text);
        // The message names the part of the request at fault; the field
        // stays the Go build's ("gpu" for every GPU error).
        let part = task_field(text, &req.gpu);
        let field = part.split('.').next().unwrap_or(part);
        return Err(ApiError::bad_request(field, format!("{part}: {text}")));
    }
    for i in 0..n {
        let mut t = task.clone();
        t.name = i.to_string(); // the job's ID is prefixed once it has one
        spec.tasks.push(t);
    }
    let milli: i64 = spec.tasks.iter().map(|t| t.gpu.nominal_milli()).sum();
    if milli > team.burst_milli {
        return Err(ApiError::bad_request(
            "gpu",
            format!(
                "gpu: the job asks for {:.2} GPUs but team {} may hold at most {:.2} (burst_gpus)",
                milli as f64 / 1000.0,
                team.name,
                team.burst_milli as f64 / 1000.0
            ),
        ));
    }
    Ok(spec)
}

fn task_count(req: &SubmitRequest) -> Result<i64, ApiError> {
    if req.tasks != 0 && req.replicas != 0 {
        return Err(ApiError::bad_request(
            "replicas",
            "replicas: give tasks or replicas, not both",
        ));
    }
    let (n, field) = if req.replicas != 0 {
        (req.replicas, "replicas")
    } else {
        (req.tasks, "tasks")
    };
    if !(0..=MAX_TASKS).contains(&n) {
        return Err(ApiError::bad_request(
            field,
            format!("{field}: {n} must be from 1 to {MAX_TASKS}"),
        ));
    }
    Ok(n.max(1))
}

/// Which part of the request a workload validation error is about: the
/// resource it names, and for a GPU the one field of `gpu` that was given.
fn task_field(msg: &str, g: &GpuRequest) -> &'static str {
    if msg.contains("CPU") || msg.contains("cpu") {
        "cpu"
    } else if msg.contains("MiB memory") || (msg.contains("memory ") && !msg.contains("gpu memory"))
    {
        "memory"
    } else if !g.models.is_empty() && msg.contains("model") {
        "gpu.models"
    } else if g.count != 0 {
        "gpu.count"
    } else if !g.mig.is_empty() {
        "gpu.mig"
    } else if !g.memory.is_empty() {
        "gpu.memory"
    } else if g.milli != 0 {
        "gpu.milli"
    } else if !g.profile.is_empty() {
        "gpu.profile"
    } else {
        "gpu"
    }
}

/// Reads the GPU request; a named profile also gives the task's CPU and
/// memory (0 when it gives none).
fn demand(g: &GpuRequest) -> Result<(Demand, i64, i64), ApiError> {
    let set = [
        g.count != 0,
        !g.mig.is_empty(),
        !g.memory.is_empty(),
        g.milli != 0,
        !g.profile.is_empty(),
    ]
    .iter()
    .filter(|on| **on)
    .count();
    if set > 1 {
        return Err(ApiError::bad_request(
            "gpu",
            "gpu: give one of count, mig, memory, milli or profile",
        ));
    }
    if g.compute != 0.0 && g.memory.is_empty() {
        return Err(ApiError::bad_request(
            "gpu.compute",
            "gpu.compute: only with gpu.memory",
        ));
    }
    let mut models = Vec::new();
    for (i, name) in g.models.iter().enumerate() {
        let m = gpu::lookup(name);
        if !m.known {
            return Err(ApiError::bad_request(
                "gpu.models",
                format!("gpu.models[{i}]: unknown GPU model {name:?}"),
            ));
        }
        models.push(m.name.clone());
    }
    let mut d = Demand {
        models: models.clone(),
        ..Demand::default()
    };
    if !g.profile.is_empty() {
        let p = profiles::lookup(&g.profile)
            .map_err(|e| ApiError::bad_request("gpu.profile", format!("gpu.profile: {e}")))?;
        return Ok((p.demand(&models), p.cpu_milli, p.host_memory_mib));
    }
    if g.count != 0 {
        if !(1..=16).contains(&g.count) {
            return Err(ApiError::bad_request(
                "gpu.count",
                format!("gpu.count: {} must be from 1 to 16", g.count),
            ));
        }
        d.kind = Kind::WholeGpus;
        d.count = g.count as i32;
    } else if !g.mig.is_empty() {
        d.kind = Kind::MigProfile;
        d.profile = g.mig.clone();
    } else if !g.memory.is_empty() {
        let mib = parse_memory("gpu.memory", &g.memory)?;
        if !(0.0..=1.0).contains(&g.compute) {
            return Err(ApiError::bad_request(
                "gpu.compute",
                format!("gpu.compute: {} must be from 0 to 1", g.compute),
            ));
        }
        d.kind = Kind::MemoryProfile;
        d.peak_memory_mib = mib;
        d.compute = g.compute;
    } else if g.milli != 0 {
        if !(1..=999).contains(&g.milli) {
            return Err(ApiError::bad_request(
                "gpu.milli",
                format!(
                    "gpu.milli: {} must be from 1 to 999 (use count for whole GPUs)",
                    g.milli
                ),
            ));
        }
        d.kind = Kind::Fraction;
        d.milli = g.milli as i32;
    } else {
        if !models.is_empty() {
            return Err(ApiError::bad_request(
                "gpu.models",
                "gpu.models: given without a GPU demand",
            ));
        }
        d.kind = Kind::NoGpu;
    }
    Ok((d, 0, 0))
}

/// Cores ("4", "0.5") or millicores ("500m"), as millicores.
pub fn parse_cpu(s: &str) -> Result<i64, ApiError> {
    if let Some(m) = s.strip_suffix('m') {
        return match m.parse::<i64>() {
            Ok(v) if (1..=1 << 30).contains(&v) && !m.starts_with('+') => Ok(v),
            _ => Err(ApiError::bad_request(
                "cpu",
                format!("cpu: {s:?} is not a millicore count such as 500m"),
            )),
        };
    }
    let bad = || {
        ApiError::bad_request(
            "cpu",
            format!("cpu: {s:?} is not a core count such as 4, 0.5 or 500m"),
        )
    };
    let v: f64 = s.parse().map_err(|_| bad())?;
    if !(v > 0.0 && v <= (1u64 << 20) as f64) || (v * 1000.0 - (v * 1000.0).round()).abs() > 1e-6 {
        return Err(bad());
    }
    Ok((v * 1000.0).round() as i64)
}

/// A binary quantity ("512Mi", "32Gi", "1.5Ti") as MiB.
pub fn parse_memory(field: &str, s: &str) -> Result<i64, ApiError> {
    for (suffix, mult) in [("Mi", 1.0), ("Gi", 1024.0), ("Ti", 1024.0 * 1024.0)] {
        let Some(num) = s.strip_suffix(suffix) else {
            continue;
        };
        if let Ok(v) = num.parse::<f64>() {
            let mib = v * mult;
            if (1.0..=(1u64 << 40) as f64).contains(&mib) && mib == mib.trunc() {
                return Ok(mib as i64);
            }
        }
        break;
    }
    Err(ApiError::bad_request(
        field,
        format!(
            "{field}: {s:?} is not a whole number of MiB written with Mi, Gi or Ti (e.g. 512Mi, 32Gi)"
        ),
    ))
}

/// An optional positive Go duration ("90m", "2h") in nanoseconds; 0 when
/// empty.
fn parse_go_duration(field: &str, s: &str) -> Result<i64, ApiError> {
    if s.is_empty() {
        return Ok(0);
    }
    match parse_duration(s) {
        Some(d) if d > 0 && d <= MAX_JOB_DURATION => Ok(d),
        _ => Err(ApiError::bad_request(
            field,
            format!(
                "{field}: {s:?} must be a duration such as 90m or 2h, above 0 and at most 8760h0m0s"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_cpu("4").unwrap(), 4000);
        assert_eq!(parse_cpu("0.5").unwrap(), 500);
        assert_eq!(parse_cpu("250m").unwrap(), 250);
        assert!(parse_cpu("0").is_err());
        assert!(parse_cpu("NaN").is_err());
        assert!(parse_cpu("1.0001").is_err());
        assert_eq!(parse_memory("memory", "32Gi").unwrap(), 32 * 1024);
        assert_eq!(parse_memory("memory", "1.5Ti").unwrap(), 1536 * 1024);
        assert!(parse_memory("memory", "32GB").is_err());
        assert!(parse_memory("memory", "0.5Mi").is_err());
        assert_eq!(
            parse_go_duration("duration", "90m").unwrap(),
            5400 * 1_000_000_000
        );
        assert!(parse_go_duration("duration", "-1h").is_err());
        assert!(parse_go_duration("duration", "9000h").is_err());
    }
}
