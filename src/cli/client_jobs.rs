//! The client's job and cluster commands (Go:
//! `go/cmd/partita/client_jobs.go` and `client.go`): `submit`, `jobs`
//! (list, or show one), `queue`, `cancel`, `requeue` and `cluster`, with
//! the Go build's flags and output. `--json` prints the server's answer as
//! it came.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use partita_engine::numfmt::{format_fixed, format_g};
use serde_json::{Map, Value};

use super::client::{ClientArgs, ago, connect, or_dash, rfc3339, shorten, table};
use super::split_list;
use crate::api;
use crate::client::{Client, query};
use crate::output::write_json;

/// `partita submit`: the flags of POST /api/v1/jobs's body.
#[derive(Debug, Clone, clap::Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// read the request from this JSON file (POST /api/v1/jobs's body); flags given override it
    #[arg(short = 'f', value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// team (default: your token's)
    #[arg(long, default_value = "", hide_default_value = true)]
    pub team: String,
    /// project (default: default)
    #[arg(long, default_value = "", hide_default_value = true)]
    pub project: String,
    /// a name to remember it by
    #[arg(long, default_value = "", hide_default_value = true)]
    pub name: String,
    /// production, batch (default) or best-effort
    #[arg(long, default_value = "", hide_default_value = true)]
    pub class: String,
    /// number of tasks (default 1)
    #[arg(
        long,
        default_value_t = 0,
        hide_default_value = true,
        allow_negative_numbers = true
    )]
    pub tasks: i64,
    /// number of replicas (services; instead of --tasks)
    #[arg(
        long,
        default_value_t = 0,
        hide_default_value = true,
        allow_negative_numbers = true
    )]
    pub replicas: i64,
    /// tasks that start together: 0 or the task count
    #[arg(
        long,
        default_value_t = 0,
        hide_default_value = true,
        allow_negative_numbers = true
    )]
    pub gang: i64,
    /// CPU per task: 4, 0.5 or 500m
    #[arg(long, default_value = "", hide_default_value = true)]
    pub cpu: String,
    /// memory per task: 32Gi
    #[arg(long, default_value = "", hide_default_value = true)]
    pub memory: String,
    /// whole GPUs per task
    #[arg(
        long,
        default_value_t = 0,
        hide_default_value = true,
        allow_negative_numbers = true
    )]
    pub gpus: i64,
    /// a MIG profile per task: 1g.10gb, 3g.40gb, …
    #[arg(long, default_value = "", hide_default_value = true)]
    pub mig: String,
    /// peak GPU memory per task (the engine picks the slice): 20Gi
    #[arg(long, default_value = "", hide_default_value = true)]
    pub gpu_memory: String,
    /// with --gpu-memory: share of one GPU's compute, 0 to 1
    #[arg(
        long,
        default_value_t = 0.0,
        hide_default_value = true,
        allow_negative_numbers = true
    )]
    pub compute: f64,
    /// a share of one GPU in thousandths
    #[arg(
        long,
        default_value_t = 0,
        hide_default_value = true,
        allow_negative_numbers = true
    )]
    pub milli: i64,
    /// a profile of the catalog (GET /api/v1/profiles): llm-7b-bf16, …
    #[arg(long, default_value = "", hide_default_value = true)]
    pub profile: String,
    /// allowed GPU models, comma-separated
    #[arg(long, default_value = "", hide_default_value = true)]
    pub models: String,
    /// run time once started (cluster time): 2h; empty: until cancelled
    #[arg(long, default_value = "", hide_default_value = true)]
    pub duration: String,
    /// make the virtual job fail after running this long
    #[arg(long, default_value = "", hide_default_value = true)]
    pub fail_after: String,
    /// checkpoint interval: a preempted job loses the work since
    #[arg(long, default_value = "", hide_default_value = true)]
    pub checkpoint_every: String,
    /// resubmitting with the same key never makes a second job
    #[arg(long, default_value = "", hide_default_value = true)]
    pub idempotency_key: String,
}

impl SubmitArgs {
    /// The request the flags give; a flag left at its zero value is absent.
    pub fn request(&self) -> api::SubmitRequest {
        api::SubmitRequest {
            team: self.team.clone(),
            project: self.project.clone(),
            name: self.name.clone(),
            class: self.class.clone(),
            tasks: self.tasks,
            replicas: self.replicas,
            gang: self.gang,
            cpu: self.cpu.clone(),
            memory: self.memory.clone(),
            gpu: api::GpuRequest {
                count: self.gpus,
                mig: self.mig.clone(),
                memory: self.gpu_memory.clone(),
                compute: self.compute,
                milli: self.milli,
                profile: self.profile.clone(),
                models: split_list(&self.models),
            },
            duration: self.duration.clone(),
            fail_after: self.fail_after.clone(),
            checkpoint_every: self.checkpoint_every.clone(),
            idempotency_key: self.idempotency_key.clone(),
            ..api::SubmitRequest::default()
        }
    }
}

/// The body to send: the file's request, if any, with the flags given laid
/// over it (Go's `mergeRequest`): a flag replaces the file's field, and the
/// `gpu` object is merged one level down, so `--mig` over a file's
/// `{"gpu": {"models": [...]}}` keeps the models. The server checks the
/// result (a file may name fields the flags do not have).
pub fn merge_request(file: Option<&Path>, flags: &api::SubmitRequest) -> anyhow::Result<Value> {
    let over = serde_json::to_value(flags)?;
    let Some(file) = file else {
        return Ok(over);
    };
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut body: Map<String, Value> = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a JSON object", file.display()))?;
    let Value::Object(over) = over else {
        unreachable!("a SubmitRequest serialises as an object")
    };
    for (k, v) in over {
        match (k.as_str(), v) {
            ("gpu", Value::Object(gpu_flags)) => {
                let gpu = body
                    .entry("gpu")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(gpu) = gpu {
                    gpu.extend(gpu_flags);
                } else if !gpu_flags.is_empty() {
                    // The file's "gpu" is not an object: the flags replace it.
                    *gpu = Value::Object(gpu_flags);
                }
            }
            (_, v) => {
                body.insert(k, v);
            }
        }
    }
    Ok(Value::Object(body))
}

pub fn submit(args: &SubmitArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let body = merge_request(args.file.as_deref(), &args.request())?;
    let client = connect(&args.client)?;
    if args.client.json {
        let answer: Value = client.submit(&body)?;
        return write_json(stdout, &answer);
    }
    let j: api::Job = client.submit(&body)?;
    writeln!(
        stdout,
        "{} {} (team {}, project {}, {}, {} GPUs)",
        j.id,
        j.state,
        j.team,
        j.project,
        j.class,
        format_fixed(j.gpus, 2)
    )?;
    Ok(())
}

/// `partita jobs [ID]`.
#[derive(Debug, Clone, clap::Args)]
pub struct JobsArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// show this job with its tasks and events instead of listing
    #[arg(value_name = "ID")]
    pub id: Option<String>,
    /// only this team (admins)
    #[arg(long, default_value = "", hide_default_value = true)]
    pub team: String,
    /// only these states, comma-separated: queued,running,…
    #[arg(long, default_value = "", hide_default_value = true)]
    pub state: String,
    /// only this project
    #[arg(long, default_value = "", hide_default_value = true)]
    pub project: String,
    /// only this submitter
    #[arg(long, default_value = "", hide_default_value = true)]
    pub user: String,
    /// only this class
    #[arg(long, default_value = "", hide_default_value = true)]
    pub class: String,
    /// at most this many
    #[arg(long, default_value_t = 50, allow_negative_numbers = true)]
    pub limit: i64,
}

pub fn jobs(args: &JobsArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    if let Some(id) = &args.id {
        return show_job(&client, args.client.json, id, stdout);
    }
    let limit = args.limit.to_string();
    let q = query(&[
        ("team", &args.team),
        ("state", &args.state),
        ("project", &args.project),
        ("user", &args.user),
        ("class", &args.class),
        ("limit", &limit),
    ]);
    if args.client.json {
        let answer: Value = client.jobs(&q)?;
        return write_json(stdout, &answer);
    }
    let list: api::JobList = client.jobs(&q)?;
    let mut tw = table(stdout);
    writeln!(
        tw,
        "ID\tSTATE\tTEAM\tPROJECT\tCLASS\tGPUS\tSUBMITTED\tREASON"
    )?;
    for j in &list.jobs {
        writeln!(
            tw,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            j.id,
            j.state,
            j.team,
            j.project,
            j.class,
            format_fixed(j.gpus, 2),
            rfc3339(j.submitted_at),
            shorten(&j.reason, 60)
        )?;
    }
    tw.flush()?;
    Ok(())
}

fn show_job(client: &Client, json: bool, id: &str, stdout: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        let answer: Value = client.job(id)?;
        return write_json(stdout, &answer);
    }
    let j: api::Job = client.job(id)?;
    writeln!(
        stdout,
        "{}  {}  team {}  project {}  user {}  class {}",
        j.id, j.state, j.team, j.project, j.user, j.class
    )?;
    writeln!(
        stdout,
        "{} tasks, {} GPUs, duration {}, attempts {}",
        j.tasks.len(),
        format_fixed(j.gpus, 2),
        or_dash(&j.duration),
        j.attempts
    )?;
    // The Rust server records a cancel or a requeue of a job that holds
    // resources as a request the worker carries out; say so until it has.
    if let Some(t) = j.cancel_requested_at.filter(|_| !api::terminal(&j.state)) {
        writeln!(stdout, "cancel requested at {} (wall time)", rfc3339(t))?;
    }
    if let Some(t) = j.requeue_requested_at {
        writeln!(stdout, "requeue requested at {} (wall time)", rfc3339(t))?;
    }
    if let Some(q) = &j.queue {
        writeln!(
            stdout,
            "queued: position {} in team {}: {}",
            q.position, j.team, q.reason
        )?;
        if let (Some(start), Some(wait)) = (q.estimated_start, q.wait_seconds) {
            writeln!(
                stdout,
                "estimated start: {} (in {} s of wall time)",
                rfc3339(start),
                format_fixed(wait, 0)
            )?;
        }
    }
    let mut tw = table(stdout);
    writeln!(tw, "\nTASK\tDEMAND\tNODE\tGPUS")?;
    for t in &j.tasks {
        let (node, gpus) = match &t.placement {
            None => ("-".to_string(), "-".to_string()),
            Some(p) => {
                let grants: Vec<String> = p
                    .grants
                    .iter()
                    .map(|g| {
                        if g.slice.is_empty() {
                            format!("gpu{} {} {}m", g.gpu, g.model, g.milli)
                        } else {
                            format!("gpu{} {} {}", g.gpu, g.model, g.slice)
                        }
                    })
                    .collect();
                (p.node.clone(), grants.join(", "))
            }
        };
        writeln!(tw, "{}\t{}\t{}\t{}", t.name, t.gpu, node, gpus)?;
    }
    // Go's table has no clock column: its events are all in cluster time.
    // Here the API records the requests (cancel, requeue) in wall time
    // beside the cluster-time transitions, and each event says which.
    writeln!(tw, "\nTIME\tCLOCK\tEVENT\tREASON")?;
    for e in &j.events {
        writeln!(
            tw,
            "{}\t{}\t{}\t{}",
            rfc3339(e.time),
            e.clock,
            e.state,
            e.reason
        )?;
    }
    tw.flush()?;
    Ok(())
}

/// `partita queue`.
#[derive(Debug, Clone, clap::Args)]
pub struct QueueArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// only this team (admins)
    #[arg(long, default_value = "", hide_default_value = true)]
    pub team: String,
}

pub fn queue(args: &QueueArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    let q = query(&[("team", &args.team)]);
    if args.client.json {
        let answer: Value = client.queue(&q)?;
        return write_json(stdout, &answer);
    }
    let queue: api::Queue = client.queue(&q)?;
    write_queue(&queue, stdout)
}

/// The queue as Go's table. WAITING is how long since submission, to the
/// cluster's now: a job's submission time is cluster time too (the API
/// stores it so; the scheduler ages jobs by it).
pub fn write_queue(queue: &api::Queue, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let mut tw = table(stdout);
    writeln!(
        tw,
        "TEAM\tPOS\tJOB\tCLASS\tGPUS\tWAITING\tEST. START\tREASON"
    )?;
    for t in &queue.teams {
        for e in &t.jobs {
            let est = match (e.slot.estimated_start, e.slot.wait_seconds) {
                (Some(_), Some(wait)) => format!("in {}s", format_fixed(wait, 0)),
                _ => "-".to_string(),
            };
            writeln!(
                tw,
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                t.team,
                e.slot.position,
                e.job,
                e.class,
                format_fixed(e.gpus, 2),
                ago(e.submitted_at, queue.clock.now),
                est,
                shorten(&e.slot.reason, 60)
            )?;
        }
    }
    tw.flush()?;
    Ok(())
}

/// `partita cancel ID...` and `partita requeue ID...`.
#[derive(Debug, Clone, clap::Args)]
pub struct IdsArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// the jobs' IDs
    #[arg(value_name = "ID", required = true)]
    pub ids: Vec<String>,
}

/// `partita move ID up|down`.
#[derive(Debug, Clone, clap::Args)]
pub struct MoveArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// the queued job's ID
    #[arg(value_name = "ID")]
    pub id: String,
    /// one place sooner (up) or later (down), among the team's queued jobs of its class
    #[arg(value_name = "DIRECTION", value_parser = ["up", "down"])]
    pub direction: String,
}

/// Moves a queued job one place in its team's queue and says where it is
/// now (the scheduler takes it in that order from its next cycle).
pub fn move_job(args: &MoveArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    let j: api::Job = client.move_job(&args.id, &args.direction)?;
    writeln!(
        stdout,
        "{} moved {} in team {}'s queue",
        j.id, args.direction, j.team
    )?;
    Ok(())
}

/// Which change `cancel` or `requeue` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobAction {
    Cancel,
    Requeue,
}

/// Asks for the change on each job in turn, one line each (Go's
/// `runCancel`): the job's state, or the error. Fails, after trying every
/// job, when any was refused.
pub fn change_jobs(
    args: &IdsArgs,
    action: JobAction,
    stdout: &mut dyn Write,
) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    let mut failed = 0;
    for id in &args.ids {
        let answer: Result<api::Job, _> = match action {
            JobAction::Cancel => client.cancel(id),
            JobAction::Requeue => client.requeue(id),
        };
        match answer {
            Ok(j) => writeln!(stdout, "{} {}", j.id, state_after(&j, action))?,
            Err(err) => {
                writeln!(stdout, "{id}: {err}")?;
                failed += 1;
            }
        }
    }
    match (failed, action) {
        (0, _) => Ok(()),
        (_, JobAction::Cancel) => anyhow::bail!("some jobs were not cancelled"),
        (_, JobAction::Requeue) => anyhow::bail!("some jobs were not requeued"),
    }
}

/// The state to print after a cancel or a requeue: the job's state, and
/// whether the change is still a request (the worker carries out a cancel
/// or a requeue of a job that holds resources at its next cycle; Go's
/// server did it at once).
fn state_after(j: &api::Job, action: JobAction) -> String {
    let pending = match action {
        JobAction::Cancel => j.cancel_requested_at.is_some() && !api::terminal(&j.state),
        JobAction::Requeue => j.requeue_requested_at.is_some(),
    };
    match (pending, action) {
        (true, JobAction::Cancel) => format!("{} (cancel requested)", j.state),
        (true, JobAction::Requeue) => format!("{} (requeue requested)", j.state),
        (false, _) => j.state.clone(),
    }
}

/// `partita cluster`.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub client: ClientArgs,
}

pub fn cluster(args: &ClusterArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let client = connect(&args.client)?;
    if args.client.json {
        let answer: Value = client.cluster()?;
        return write_json(stdout, &answer);
    }
    let cluster: api::Cluster = client.cluster()?;
    write_cluster(&cluster, stdout)
}

/// The cluster as Go prints it: a summary line, then one row per GPU.
pub fn write_cluster(cl: &api::Cluster, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let u = &cl.utilization;
    writeln!(
        stdout,
        "cluster time {} ({}x); {} GPUs: {} allocated ({}%), {} useful ({}%); {} running, {} queued\n",
        rfc3339(cl.clock.now),
        format_g(cl.clock.speed, None),
        cl.gpus,
        format_fixed(u.allocated_gpus, 1),
        format_fixed(100.0 * u.allocated, 0),
        format_fixed(u.useful_gpus, 1),
        format_fixed(100.0 * u.useful, 0),
        u.running_jobs,
        u.queued_jobs
    )?;
    let mut tw = table(stdout);
    writeln!(tw, "NODE\tGPU\tMODEL\tMODE\tIN USE")?;
    for n in &cl.nodes {
        for g in &n.gpus {
            let (mut mode, use_) = if g.mig {
                let parts: Vec<String> = g
                    .slices
                    .iter()
                    .map(|s| {
                        let who = match (s.busy, s.job.as_str()) {
                            (false, _) => "free",
                            (true, "") => "busy",
                            (true, job) => job,
                        };
                        format!("{} {who}", s.slice)
                    })
                    .collect();
                ("mig".to_string(), parts.join(", "))
            } else {
                ("whole".to_string(), format!("{}/1000", g.used_milli))
            };
            if g.cordoned {
                mode.push_str(" (changing)");
            }
            writeln!(
                tw,
                "{}\t{}\t{}\t{}\t{}",
                n.name, g.index, g.model, mode, use_
            )?;
        }
    }
    tw.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> api::SubmitRequest {
        api::SubmitRequest {
            team: "search".into(),
            gpu: api::GpuRequest {
                mig: "3g.40gb".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn flags_alone_are_the_request() {
        let v = merge_request(None, &flags()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"team": "search", "gpu": {"mig": "3g.40gb"}})
        );
    }

    #[test]
    fn flags_override_the_file_and_merge_into_its_gpu() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("job.json");
        std::fs::write(
            &file,
            r#"{"team":"ads","project":"p","image":"r/x:1","gpu":{"count":2,"models":["H100-80GB"]}}"#,
        )
        .unwrap();
        let v = merge_request(Some(&file), &flags()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "team": "search", "project": "p", "image": "r/x:1",
                "gpu": {"count": 2, "models": ["H100-80GB"], "mig": "3g.40gb"}
            })
        );
        std::fs::write(&file, "[1]").unwrap();
        let err = merge_request(Some(&file), &flags()).unwrap_err();
        assert!(format!("{err:#}").contains("not a JSON object"), "{err:#}");
        let err = merge_request(Some(&dir.path().join("none.json")), &flags()).unwrap_err();
        assert!(format!("{err:#}").contains("reading"), "{err:#}");
    }

    #[test]
    fn the_queue_prints_as_gos_table() {
        let q: api::Queue = serde_json::from_str(
            r#"{"clock":{"now":"2026-03-01T12:00:00Z","speed":60},"teams":[
                {"team":"search","jobs":[
                  {"job":"job-a","project":"chat","class":"production","gpus":0.5,
                   "submitted_at":"2026-03-01T11:58:30Z","position":1,"reason":"waiting for a 3g.40gb slice",
                   "estimated_start":"2026-03-01T13:00:00Z","wait_seconds":60.4},
                  {"job":"job-b","project":"default","class":"batch","gpus":8,
                   "submitted_at":"2026-03-01T11:59:59Z","position":2,"extra":true}]}]}"#,
        )
        .unwrap();
        let mut out = Vec::new();
        write_queue(&q, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "TEAM    POS  JOB    CLASS       GPUS  WAITING  EST. START  REASON\n\
             search  1    job-a  production  0.50  1m30s    in 60s      waiting for a 3g.40gb slice\n\
             search  2    job-b  batch       8.00  1s       -           \n"
        );
    }

    #[test]
    fn the_cluster_prints_as_gos_table() {
        let c: api::Cluster = serde_json::from_str(
            r#"{"clock":{"now":"2026-03-01T12:00:00Z","speed":60},"gpus":16,
                "utilization":{"allocated_gpus":2.5,"useful_gpus":1.25,"allocated":0.15625,"useful":0.078125,"queued_jobs":3,"running_jobs":2},
                "nodes":[{"name":"h100-0","tier":"a","cpu_milli":192000,"cpu_used_milli":0,"memory_mib":2097152,"memory_used_mib":0,"gpus":[
                  {"index":0,"model":"H100-80GB","mig":true,"used_milli":0,"slices":[
                    {"slice":"3g.40gb@0","busy":true,"job":"job-a"},{"slice":"3g.40gb@4","busy":true},{"slice":"1g.10gb@6","busy":false}]},
                  {"index":1,"model":"H100-80GB","mig":false,"cordoned":true,"used_milli":500}]}]}"#,
        )
        .unwrap();
        let mut out = Vec::new();
        write_cluster(&c, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "cluster time 2026-03-01T12:00:00Z (60x); 16 GPUs: 2.5 allocated (16%), 1.2 useful (8%); 2 running, 3 queued\n\
             \n\
             NODE    GPU  MODEL      MODE              IN USE\n\
             h100-0  0    H100-80GB  mig               3g.40gb@0 job-a, 3g.40gb@4 busy, 1g.10gb@6 free\n\
             h100-0  1    H100-80GB  whole (changing)  500/1000\n"
        );
    }
}
