//! The worker's world as the API shows it: GET /queue, GET /cluster, and a
//! job's place in its queue or on the cluster (GET /jobs/{id}).
//!
//! The worker may run in another process, so these read what it last
//! published to PostgreSQL (`worker::views`, at most about a second old)
//! and filter it per caller: a caller who does not see every team reads
//! only its own team's queue row, and on the cluster other teams' tasks
//! show as busy without their job or team (the Go build's rule). Which
//! jobs are queued comes from the jobs table itself, so a job submitted
//! after the last publication is listed at once, after the jobs the last
//! cycle saw, as the Go build lists it.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::auth::Principal;
use super::error::{ApiError, ApiResult};
use crate::api;
use crate::store::jobs::{JobRow, JobSpec};
use crate::store::{accounts, views};
use crate::worker::spec::Runtime;
use crate::worker::views::unseen_slot;

/// The query of GET /queue.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct QueueQuery {
    /// only this team (admin, finance); others always get their own
    pub team: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/queue", tag = "jobs",
    summary = "Queued jobs by team with positions and estimated starts",
    description = "Roles: every role; lead, member and viewer see their team's queue, admin and finance every team's \
        (`team` names one; another team's: 404). Each team's jobs in the order the scheduler considers them. \
        Positions, reasons and estimated starts are the worker's, published about once a second; `clock.now` is the \
        cluster time of that publication and `wait_seconds` counts wall seconds from it. A job submitted since comes \
        after those the last cycle saw.",
    params(QueueQuery),
    responses((status = 200, body = api::Queue), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn get_queue(
    State(state): State<AppState>,
    who: Principal,
    Query(q): Query<QueueQuery>,
) -> ApiResult<Json<api::Queue>> {
    let team = who.scope_team(q.team.as_deref().unwrap_or(""))?;
    if let Some(t) = &team
        && who.sees_all()
        && accounts::team(&state.pool, t).await?.is_none()
    {
        return Err(ApiError::not_found("team", t));
    }
    let (clock, published) = views::queues(&state.pool, team.as_deref()).await?;
    let clock = match clock {
        Some(c) => c,
        None => no_worker_clock(&state).await?,
    };
    let mut by_team: BTreeMap<String, Vec<api::QueueEntry>> = BTreeMap::new();
    for row in views::queued_jobs(&state.pool, team.as_deref()).await? {
        let spec: JobSpec = serde_json::from_value(row.spec)
            .map_err(|e| ApiError::internal(&format!("job {}: its spec: {e}", row.id)))?;
        let milli: i64 = spec.tasks.iter().map(|t| t.gpu.nominal_milli()).sum();
        let slot = slot_of(published.get(&row.team), &row.id);
        by_team.entry(row.team).or_default().push(api::QueueEntry {
            job: row.id,
            name: row.name,
            project: row.project,
            class: row.class,
            gpus: milli as f64 / 1000.0,
            submitted_at: row.submitted_at,
            slot,
        });
    }
    let teams = by_team
        .into_iter()
        .map(|(team, mut jobs)| {
            // Stable: jobs of one position (not yet cycled) keep their
            // submission order.
            jobs.sort_by_key(|e| e.slot.position);
            api::TeamQueue { team, jobs }
        })
        .collect();
    Ok(Json(api::Queue { clock, teams }))
}

/// A queued job's place: as published, or after the team's waiting jobs
/// when the publication does not have it yet.
fn slot_of(published: Option<&crate::worker::views::TeamQueueView>, id: &str) -> api::QueueSlot {
    match published {
        Some(q) => q
            .slots
            .get(id)
            .cloned()
            .unwrap_or_else(|| unseen_slot(q.waiting)),
        None => unseen_slot(0),
    }
}

/// The clock before any worker published: cluster time as the API stamps
/// submissions (wall time before the first worker started the clock), and
/// speed 0, since no worker says how fast it runs.
async fn no_worker_clock(state: &AppState) -> ApiResult<api::Clock> {
    let mut conn = state.pool.acquire().await?;
    let now = crate::worker::clock::cluster_now(&mut conn)
        .await?
        .unwrap_or_else(chrono::Utc::now);
    Ok(api::Clock { now, speed: 0.0 })
}

#[utoipa::path(get, path = "/api/v1/cluster", tag = "jobs",
    summary = "Nodes, GPUs, MIG slices and utilization",
    description = "Roles: every role. The worker's world as it last published it (about once a second; `clock.now` \
        is its cluster time). Tasks of teams the caller may not see show as busy without their job or team \
        (admin and finance see every team's). 503 before any worker published the cluster.",
    responses((status = 200, body = api::Cluster), (status = "4XX", body = api::Error), (status = 503, body = api::Error)),
    security(("bearer" = [])))]
pub async fn get_cluster(
    State(state): State<AppState>,
    who: Principal,
) -> ApiResult<Json<api::Cluster>> {
    let Some(view) = views::cluster(&state.pool).await? else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "",
            "no worker has published the cluster yet: start one (partita serve runs it, or partita worker)",
        ));
    };
    let mut c = view.cluster;
    if !who.sees_all() {
        hide_other_teams(&mut c, &who.team);
    }
    Ok(Json(c))
}

/// Blanks the job and team of every task not of `team`.
fn hide_other_teams(c: &mut api::Cluster, team: &str) {
    for g in c.nodes.iter_mut().flat_map(|n| n.gpus.iter_mut()) {
        for s in &mut g.slices {
            if s.team != team {
                s.job.clear();
                s.team.clear();
            }
        }
        for h in &mut g.holders {
            if h.team != team {
                h.job.clear();
                h.team.clear();
            }
        }
    }
}

/// Adds to a job's view what the Go build shows on GET /jobs/{id}: while
/// it is queued, its place in its team's queue and why it waits (the
/// worker publishes it; the row keeps the reason of the job's last
/// change of state); while it holds resources, where each task is.
pub async fn add_place(state: &AppState, job: &JobRow, view: &mut api::Job) -> ApiResult<()> {
    match job.state.as_str() {
        api::STATE_QUEUED => {
            let (_, published) = views::queues(&state.pool, Some(&job.team)).await?;
            let slot = slot_of(published.get(&job.team), &job.id);
            if let Some(why) = wait_reason(&slot) {
                view.reason = why.to_string();
            }
            view.queue = Some(slot);
        }
        "admitted" | "running" | "preempted" => {
            let Some(runtime) = views::runtime(&state.pool, job.seq).await? else {
                return Ok(());
            };
            let rt: Runtime = serde_json::from_value(runtime)
                .map_err(|e| ApiError::internal(&format!("job {}: its runtime: {e}", job.id)))?;
            for (task, a) in view.tasks.iter_mut().zip(&rt.placed) {
                let Some(a) = a else { continue };
                let node = state.cluster.nodes.get(&a.node);
                task.placement = Some(api::Placement {
                    node: a.node.clone(),
                    tier: node.map(|n| n.tier.clone()).unwrap_or_default(),
                    grants: a
                        .grants
                        .iter()
                        .map(|g| {
                            let model = node
                                .and_then(|n| {
                                    usize::try_from(g.gpu).ok().and_then(|i| n.models.get(i))
                                })
                                .cloned()
                                .unwrap_or_default();
                            match &g.slice {
                                Some(p) => api::Grant {
                                    gpu: i64::from(g.gpu),
                                    model,
                                    slice: p.to_string(),
                                    milli: 0,
                                },
                                None => api::Grant {
                                    gpu: i64::from(g.gpu),
                                    model,
                                    slice: String::new(),
                                    milli: i64::from(g.milli),
                                },
                            }
                        })
                        .collect(),
                });
            }
        }
        _ => {}
    }
    Ok(())
}

/// Sets each queued job's reason to why it waits, as the worker last
/// published it (a listing's page: one read of each team's queue).
pub async fn add_wait_reasons(state: &AppState, jobs: &mut [api::Job]) -> ApiResult<()> {
    let mut teams: Vec<&str> = jobs
        .iter()
        .filter(|j| j.state == api::STATE_QUEUED)
        .map(|j| j.team.as_str())
        .collect();
    teams.sort_unstable();
    teams.dedup();
    let mut reasons = std::collections::HashMap::new();
    for team in teams {
        let (_, published) = views::queues(&state.pool, Some(team)).await?;
        if let Some(q) = published.get(team) {
            for (id, slot) in &q.slots {
                if let Some(why) = wait_reason(slot) {
                    reasons.insert(id.clone(), why.to_string());
                }
            }
        }
    }
    for j in jobs.iter_mut().filter(|j| j.state == api::STATE_QUEUED) {
        if let Some(r) = reasons.remove(&j.id) {
            j.reason = r;
        }
    }
    Ok(())
}

/// Why a job waits, once a cycle has said (before that, the job's row
/// says it is in its team's queue, as the Go build shows it).
fn wait_reason(slot: &api::QueueSlot) -> Option<&str> {
    let why = slot.reason.as_str();
    (!why.is_empty() && why != crate::worker::views::NOT_CYCLED).then_some(why)
}
