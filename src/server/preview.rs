//! POST /jobs/preview (the Go build's `preview.go`): a submission checked
//! exactly as POST /jobs checks it (`jobs::checked_submission`), answered
//! with what it would ask for on each GPU model of the cluster, storing
//! nothing. The portal's submit form shows it while the user types.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use partita_engine::gpu::{self, DEFAULT_HEADROOM, Model};
use partita_engine::placement::Request;
use partita_engine::workload::{Capacity, Kind, Task};

use super::AppState;

use super::decode::RawJson;
use super::error::{ApiError, ApiResult};
use super::jobs::checked_submission;
use crate::api;

#[utoipa::path(post, path = "/api/v1/jobs/preview", tag = "jobs",
    summary = "Check a submission and say what it would ask for on each GPU model, storing nothing",
    description = "Roles: admin, lead, member. The body is POST /jobs's and is checked as POST /jobs checks it \
        (400 naming the field); the answer says what one task would take on each GPU model of the cluster \
        that the task allows.",
    request_body = api::SubmitRequest,
    responses((status = 200, body = api::JobPreview), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn preview_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: RawJson,
) -> ApiResult<Json<api::JobPreview>> {
    let (_, req, checked) = checked_submission(&state, &headers, body).await?;
    let spec = &checked.spec;
    let task = spec
        .tasks
        .first()
        .ok_or_else(|| ApiError::internal(&"a checked job without tasks"))?;
    let milli: i64 = spec.tasks.iter().map(|t| t.gpu.nominal_milli()).sum();
    Ok(Json(api::JobPreview {
        team: checked.team.name.clone(),
        project: req.project.clone(),
        class: req.class.clone(),
        tasks: spec.tasks.len() as i64,
        gang: spec.gang,
        cpu_milli: task.cpu_milli,
        memory_mib: task.memory_mib,
        demand: task.gpu.to_string(),
        gpus: milli as f64 / 1000.0,
        burst_gpus: checked.team.burst_milli as f64 / 1000.0,
        options: preview_options(task, &state.cluster.capacity),
    }))
}

/// What one task takes on each GPU model the cluster has (and the task
/// allows), as the engine resolves it.
pub fn preview_options(task: &Task, capacity: &Capacity) -> Vec<api::PreviewOption> {
    let d = &task.gpu;
    if d.kind == Kind::NoGpu {
        return Vec::new();
    }
    let request = Request::new(task.clone(), DEFAULT_HEADROOM);
    let mut out = Vec::new();
    // A BTreeMap: the models in name order, as Go sorts them.
    for (name, &max) in capacity.max_gpus.iter().filter(|(m, _)| d.allows_model(m)) {
        let m = gpu::lookup(name);
        let mut o = api::PreviewOption {
            model: m.name.to_string(),
            mig: String::new(),
            mig_memory_mib: 0,
            mig_compute: 0.0,
            milli: 0,
            whole_gpus: 0,
            fits: false,
            note: String::new(),
        };
        match d.kind {
            Kind::WholeGpus => {
                o.whole_gpus = i64::from(d.count);
                o.fits = max >= d.count;
                if !o.fits {
                    o.note = format!("its largest node has {max}");
                }
            }
            Kind::Fraction => {
                o.milli = i64::from(d.milli);
                o.fits = true;
            }
            Kind::MigProfile => set_mig(&mut o, &m, &d.profile),
            Kind::MemoryProfile => match &request {
                Err(e) => o.note = e.to_string(),
                Ok(r) => {
                    let (profile, milli) = r.resolve(&m);
                    if let Some(p) = profile {
                        set_mig(&mut o, &m, &p.name);
                    }
                    if milli > 0 {
                        o.milli = i64::from(milli);
                        o.fits = true;
                    }
                    if !o.fits {
                        o.note = format!(
                            "{} MiB peak with {:.0}% headroom is more than one {} holds",
                            d.peak_memory_mib,
                            DEFAULT_HEADROOM * 100.0,
                            m.name
                        );
                    }
                }
            },
            Kind::NoGpu => {}
        }
        out.push(o);
    }
    out
}

fn set_mig(o: &mut api::PreviewOption, m: &Model, profile: &str) {
    match m.profile(profile) {
        Ok(p) => {
            o.mig = p.name.to_string();
            o.mig_memory_mib = p.memory_mib;
            o.mig_compute = p.compute_share();
            o.fits = true;
        }
        Err(e) => o.note = e.to_string(),
    }
}
