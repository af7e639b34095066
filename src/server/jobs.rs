//! Jobs: submit (idempotent), list with cursor paging, get with events,
//! change the class, cancel, requeue (the Go build's `jobs.go`).
//!
//! The API does not run jobs: the worker does. So a cancel of a queued
//! job takes effect here at once (it holds nothing), while a cancel or a
//! requeue of a job that holds resources is recorded as a request
//! (`cancel_requested_at`, `requeue_requested_at`, and an event) that the
//! worker carries out in its next cycle.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use partita_engine::scenario::duration::format_duration;
use rand::RngExt;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use utoipa::IntoParams;

use super::AppState;
use super::accounts::{actor, query_int};
use super::auth::{LEADS, Principal, SUBMITTERS, bearer_secret, usable};
use super::decode::RawJson;
use super::error::{ApiError, ApiResult};
use super::jobspec;
use crate::api::{self, ROLE_ADMIN, ROLE_MEMBER, STATE_QUEUED, STATES, terminal};
use crate::db::bootstrap::token_hash;
use crate::store::accounts::{self, TeamProjects, TeamRow};
use crate::store::audit::{self, Change};
use crate::store::jobs::{self, JobFilter, JobRow, JobSpec, NewJob, Submitted};

/// A new job ID: "job-" and 16 hex digits, as the Go build's.
fn new_job_id() -> String {
    let n: u64 = rand::rng().random();
    format!("job-{n:016x}")
}

/// A stored job as the API shows it.
fn job_view(j: &JobRow) -> ApiResult<api::Job> {
    let spec: JobSpec = serde_json::from_value(j.spec.clone())
        .map_err(|e| ApiError::internal(&format!("job {}: its spec: {e}", j.id)))?;
    let text = |key: &str| {
        j.request
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let milli: i64 = spec.tasks.iter().map(|t| t.gpu.nominal_milli()).sum();
    let dur = |ns: i64| {
        if ns > 0 {
            format_duration(ns)
        } else {
            String::new()
        }
    };
    Ok(api::Job {
        id: j.id.clone(),
        name: j.name.clone(),
        team: j.team.clone(),
        project: j.project.clone(),
        user: j.user.clone(),
        image: text("image"),
        command: text("command"),
        class: j.class.clone(),
        state: j.state.clone(),
        reason: j.reason.clone(),
        gpus: milli as f64 / 1000.0,
        gang: spec.gang,
        duration: dur(spec.duration),
        checkpoint_every: dur(spec.checkpoint_every),
        tasks: spec
            .tasks
            .iter()
            .map(|t| api::Task {
                name: t.name.clone(),
                cpu_milli: t.cpu_milli,
                memory_mib: t.memory_mib,
                gpu: t.gpu.to_string(),
                placement: None,
            })
            .collect(),
        submitted_at: j.submitted_at,
        started_at: if j.attempts > 0 { j.started_at } else { None },
        finished_at: if terminal(&j.state) {
            j.finished_at
        } else {
            None
        },
        attempts: i64::from(j.attempts),
        queue: None,
        requeue_requested_at: j.requeue_requested_at,
        cancel_requested_at: j.cancel_requested_at,
        events: Vec::new(),
    })
}

#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs",
    summary = "Submit a job (idempotent with an Idempotency-Key header or idempotency_key)",
    description = "Roles: admin, lead, member (their own team; an admin names the team). 201 with the new job; \
        200 with `Idempotent-Replayed: true` and the first job for a replay of a key with the same request; \
        409 for a key used with another request. Work that can never run on this cluster is refused (400, naming the field).",
    params(("Idempotency-Key" = Option<String>, Header, description = "the same as idempotency_key")),
    request_body = api::SubmitRequest,
    responses((status = 201, body = api::Job), (status = 200, body = api::Job), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: RawJson,
) -> ApiResult<Response> {
    let (who, mut req, checked) = checked_submission(&state, &headers, body).await?;
    let Checked {
        team,
        mut spec,
        project_id,
    } = checked;

    // The hash covers the resolved request (team, project and class filled
    // in) and the user, so a replay must say the same thing.
    let key = std::mem::take(&mut req.idempotency_key);
    let canonical = serde_json::to_vec(&req).map_err(|e| ApiError::internal(&e))?;
    let idempotency = (!key.is_empty()).then(|| {
        let mut h = Sha256::new();
        h.update(&canonical);
        h.update(b"\0");
        h.update(who.user.as_bytes());
        (key.clone(), h.finalize().to_vec())
    });
    let id = new_job_id();
    for (i, t) in spec.tasks.iter_mut().enumerate() {
        t.name = format!("{id}-{i}");
    }
    let job = NewJob {
        id,
        team_id: team.id,
        project_id,
        user_id: who.user_id,
        name: req.name.clone(),
        class: req.class.clone(),
        spec: serde_json::to_value(&spec).map_err(|e| ApiError::internal(&e))?,
        request: serde_json::from_slice(&canonical).map_err(|e| ApiError::internal(&e))?,
        idempotency,
    };
    let stored = state
        .jobs
        .submit(job.clone(), &who.user, &team.name)
        .await?;
    let (status, id) = match stored.outcome {
        Submitted::Created(id) => {
            state.metrics.submitted(&team.name);
            (StatusCode::CREATED, id)
        }
        Submitted::Replayed(id) => (StatusCode::OK, id),
        Submitted::Conflict(id) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_key",
                format!("idempotency_key {key:?}: used before with another request (job {id})"),
            ));
        }
    };
    // A new job is answered from what was just written; a replayed one
    // (or one written alone after its batch failed) is read back.
    let row = match (status, stored.seq, stored.submitted_at) {
        (StatusCode::CREATED, Some(seq), Some(submitted_at)) => JobRow {
            seq,
            id: job.id,
            name: job.name,
            team: team.name.clone(),
            team_id: team.id,
            project: req.project.clone(),
            user: who.user.clone(),
            class: job.class,
            state: STATE_QUEUED.to_string(),
            reason: jobs::queued_reason(&team.name),
            spec: job.spec,
            request: job.request,
            submitted_at,
            started_at: None,
            finished_at: None,
            attempts: 0,
            requeue_requested_at: None,
            cancel_requested_at: None,
        },
        _ => jobs::get(&state.pool, &id)
            .await?
            .ok_or_else(|| ApiError::internal(&"the job vanished"))?,
    };
    let mut response = (status, Json(job_view(&row)?)).into_response();
    if status == StatusCode::CREATED {
        if let Ok(v) = HeaderValue::from_str(&format!("{}/jobs/{id}", api::PREFIX)) {
            response.headers_mut().insert(header::LOCATION, v);
        }
    } else {
        response
            .headers_mut()
            .insert("Idempotent-Replayed", HeaderValue::from_static("true"));
    }
    Ok(response)
}

/// The caller (None: no such token) and the team a submission names (or
/// the caller's own), from memory or else in one query.
async fn submission_context(
    state: &AppState,
    hash: &[u8],
    team: &str,
) -> ApiResult<(Option<accounts::TokenOwner>, Option<TeamProjects>)> {
    if let Some(owner) = state.accounts.token(hash) {
        let name = if team.is_empty() {
            owner.principal.team.as_str()
        } else {
            team
        };
        if let Some(found) = state.accounts.team(name) {
            return Ok((Some(owner), Some(found)));
        }
    }
    let ticket = state.accounts.ticket();
    let Some(c) = accounts::submission_context(&state.pool, hash, team).await? else {
        return Ok((None, None));
    };
    state.accounts.keep_token(ticket, hash, &c.owner);
    if let Some(found) = &c.team {
        state.accounts.keep_team(ticket, found);
    }
    Ok((Some(c.owner), c.team))
}

/// A submission checked as POST /jobs checks it: its team, project, texts,
/// class and tasks, with the defaults filled in the request.
pub struct Checked {
    pub team: TeamRow,
    pub spec: JobSpec,
    pub project_id: i64,
}

/// The caller and the checks of POST /jobs, shared with POST /jobs/preview
/// so that a preview refuses exactly what a submission would. The caller,
/// the team and its projects are read together (from memory, or in one
/// query: a submission is the API's hot path), so the body is read first
/// (for the team's name), but its errors are told only after the
/// caller's, as on every other route.
pub async fn checked_submission(
    state: &AppState,
    headers: &HeaderMap,
    body: RawJson,
) -> ApiResult<(Principal, api::SubmitRequest, Checked)> {
    let hash = token_hash(bearer_secret(headers)?);
    let decoded: ApiResult<api::SubmitRequest> = body.decode();
    let team_name = decoded.as_ref().map(|r| r.team.as_str()).unwrap_or("");
    let (owner, team) = submission_context(state, &hash, team_name).await?;
    let who = usable(owner)?;
    who.require(SUBMITTERS, "submit jobs")?;
    let mut req = decoded?;
    if let Some(h) = headers.get("Idempotency-Key") {
        let h = String::from_utf8_lossy(h.as_bytes()).into_owned();
        if !req.idempotency_key.is_empty() && req.idempotency_key != h {
            return Err(ApiError::bad_request(
                "idempotency_key",
                format!(
                    "idempotency_key: {:?} differs from the Idempotency-Key header {h:?}",
                    req.idempotency_key
                ),
            ));
        }
        req.idempotency_key = h;
    }
    // The team: the caller's own; an admin names one.
    if req.team.is_empty() {
        req.team = who.team.clone();
    }
    if req.team.is_empty() {
        return Err(ApiError::bad_request(
            "team",
            "team: required (an admin has no team of their own)",
        ));
    }
    if who.role != ROLE_ADMIN && req.team != who.team {
        return Err(ApiError::forbidden(
            "team",
            format!("team: {:?} is not your team ({})", req.team, who.team),
        ));
    }
    let Some(found) = team else {
        return Err(ApiError::bad_request(
            "team",
            format!("team: {:?} does not exist", req.team),
        ));
    };
    jobspec::check_texts(&found.team, &mut req)?;
    req.class = jobspec::team_class(&found.team, &req.class, "class")?;
    let spec = jobspec::build_spec(&req, &found.team, &state.cluster.capacity)?;
    // check_texts found the project among the team's, so it has an id.
    let project_id = found.project_id(&req.project).ok_or_else(|| {
        ApiError::bad_request(
            "project",
            format!("project: {:?} does not exist", req.project),
        )
    })?;
    Ok((
        who,
        req,
        Checked {
            team: found.team,
            spec,
            project_id,
        },
    ))
}

/// The query of GET /jobs.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobQuery {
    /// only this team (admin, finance); others always get their own
    pub team: Option<String>,
    /// comma-separated states
    pub state: Option<String>,
    /// project
    pub project: Option<String>,
    /// submitter
    pub user: Option<String>,
    /// priority class
    pub class: Option<String>,
    /// page size, 1 to 1000 (default 100)
    pub limit: Option<String>,
    /// the cursor `next` of the previous page
    pub after: Option<String>,
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs",
    summary = "List jobs, newest first",
    description = "Roles: every role; lead, member and viewer see their team's jobs, admin and finance every team's. \
        Paged: `next` is the cursor for `after`.",
    params(JobQuery),
    responses((status = 200, body = api::JobList), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn list_jobs(
    State(state): State<AppState>,
    who: Principal,
    Query(q): Query<JobQuery>,
) -> ApiResult<Json<api::JobList>> {
    let team = who.scope_team(q.team.as_deref().unwrap_or(""))?;
    let mut f = JobFilter {
        team,
        project: non_empty(q.project),
        user: non_empty(q.user),
        class: non_empty(q.class),
        ..JobFilter::default()
    };
    if let Some(states) = non_empty(q.state) {
        let mut list = Vec::new();
        for st in states.split(',') {
            if !STATES.contains(&st) {
                return Err(ApiError::bad_request(
                    "state",
                    format!("state: {st:?} is not one of {}", STATES.join(", ")),
                ));
            }
            list.push(st.to_string());
        }
        f.states = Some(list);
    }
    if let Some(c) = &f.class
        && let Err(e) = partita_engine::workload::parse_class(c)
    {
        return Err(ApiError::bad_request("class", format!("class: {e}")));
    }
    f.limit = query_int("limit", q.limit.as_deref(), 100, 1, 1000)?;
    if let Some(after) = non_empty(q.after) {
        f.before = Some(query_int("after", Some(&after), 0, 0, i64::MAX)?);
    }
    let rows = jobs::list(&state.pool, &f).await?;
    let next = match rows.last() {
        Some(last) if rows.len() as i64 == f.limit => last.seq.to_string(),
        _ => String::new(),
    };
    let mut jobs = rows.iter().map(job_view).collect::<ApiResult<Vec<_>>>()?;
    super::views::add_wait_reasons(&state, &mut jobs).await?;
    Ok(Json(api::JobList { jobs, next }))
}

/// The job `id` if the caller may see it; any other is not found.
async fn visible_job(state: &AppState, who: &Principal, id: &str) -> ApiResult<JobRow> {
    match jobs::get(&state.pool, id).await? {
        Some(j) if who.sees(&j.team) => Ok(j),
        _ => Err(ApiError::not_found("job", id)),
    }
}

/// A job with its events, as GET /jobs/{id} and the changes answer.
async fn job_with_events(state: &AppState, id: &str) -> ApiResult<api::Job> {
    let row = jobs::get(&state.pool, id)
        .await?
        .ok_or_else(|| ApiError::not_found("job", id))?;
    let mut view = job_view(&row)?;
    view.events = jobs::events(&state.pool, row.seq)
        .await?
        .into_iter()
        .map(|e| api::Event {
            time: e.at,
            clock: e.clock,
            state: e.state,
            reason: e.reason,
        })
        .collect();
    Ok(view)
}

#[utoipa::path(get, path = "/api/v1/jobs/{id}", tag = "jobs",
    summary = "A job with its events and, while queued, its position and estimated start",
    description = "Roles: every role (another team's: 404). While queued, `queue` is its place as the worker \
        last published it (see GET /queue); while it holds resources, each task's `placement`.",
    params(("id" = String, Path, description = "job id")),
    responses((status = 200, body = api::Job), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn get_job(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<api::Job>> {
    let job = visible_job(&state, &who, &id).await?;
    let mut view = job_with_events(&state, &id).await?;
    super::views::add_place(&state, &job, &mut view).await?;
    Ok(Json(view))
}

#[utoipa::path(patch, path = "/api/v1/jobs/{id}", tag = "jobs",
    summary = "Change a job's priority class within its team's allowed classes",
    description = "Roles: admin, lead (own team).",
    params(("id" = String, Path, description = "job id")),
    request_body = api::JobPatch,
    responses((status = 200, body = api::Job), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn patch_job(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
    body: RawJson,
) -> ApiResult<Json<api::Job>> {
    who.require(LEADS, "change a job's class")?;
    let job = visible_job(&state, &who, &id).await?;
    let patch: api::JobPatch = body.decode()?;
    if patch.class.is_empty() {
        return Err(ApiError::bad_request("class", "class: required"));
    }
    let team = accounts::team(&state.pool, &job.team)
        .await?
        .ok_or_else(|| ApiError::not_found("team", &job.team))?;
    let class = jobspec::team_class(&team, &patch.class, "class")?;
    let mut tx = state.pool.begin().await?;
    let current = jobs::lock(&mut tx, job.seq).await?;
    if terminal(&current) {
        return Err(ApiError::conflict(format!("job {id} is already {current}")));
    }
    jobs::set_class(&mut tx, job.seq, &class).await?;
    jobs::add_event(
        &mut tx,
        job.seq,
        "priority",
        &format!("class {} → {class} by {}", job.class, who.user),
    )
    .await?;
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "job.class",
            target_kind: "job",
            target: &id,
            before: Some(json!({"class": job.class})),
            after: Some(json!({"class": class})),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Json(job_with_events(&state, &id).await?))
}

#[utoipa::path(post, path = "/api/v1/jobs/{id}/cancel", tag = "jobs",
    summary = "Cancel a job (members: their own jobs)",
    description = "Roles: admin, lead, member (own jobs). Recorded as `cancel_requested_at` and a \
        `cancel_requested` event; the worker cancels the job at its next tick (it alone changes \
        a job's state). Asking again changes nothing.",
    params(("id" = String, Path, description = "job id")),
    responses((status = 200, body = api::Job), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn cancel_job(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<api::Job>> {
    who.require(SUBMITTERS, "cancel jobs")?;
    let job = visible_job(&state, &who, &id).await?;
    if who.role == ROLE_MEMBER && job.user != who.user {
        return Err(ApiError::forbidden(
            "",
            format!(
                "job {id}: a member may cancel only their own jobs (it is {}'s)",
                job.user
            ),
        ));
    }
    let mut tx = state.pool.begin().await?;
    let current = jobs::lock(&mut tx, job.seq).await?;
    if terminal(&current) {
        return Err(ApiError::conflict(format!("job {id} is already {current}")));
    }
    // A request, queued or not: the worker alone changes a job's state
    // (it may be starting this job in its tick right now).
    if job.cancel_requested_at.is_none() {
        jobs::request_cancel(&mut tx, job.seq, &who.user).await?;
        let reason = format!("by {}", who.user);
        jobs::add_event(&mut tx, job.seq, "cancel_requested", &reason).await?;
        audit::record(
            &mut *tx,
            actor(&who),
            Change {
                action: "job.cancel",
                target_kind: "job",
                target: &id,
                before: Some(json!({"state": current})),
                after: Some(json!({"state": current, "cancel_requested": true})),
            },
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Json(job_with_events(&state, &id).await?))
}

#[utoipa::path(post, path = "/api/v1/jobs/{id}/move", tag = "jobs",
    summary = "Move a queued job one place up or down in its team's queue, within its class",
    description = "Roles: admin, lead (own team). The job swaps places with the team's queued job of the same class \
        just before (up) or after (down) it, so the team orders its own work without moving ahead of other teams; \
        the scheduler honours the order from its next cycle. 409 when the job is not queued, or is already first \
        (up) or last (down) of its class in the team's queue.",
    params(("id" = String, Path, description = "job id")),
    request_body = api::JobMove,
    responses((status = 200, body = api::Job), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn move_job(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
    body: RawJson,
) -> ApiResult<Json<api::Job>> {
    who.require(LEADS, "order the team's queue")?;
    let job = visible_job(&state, &who, &id).await?;
    let req: api::JobMove = body.decode()?;
    let direction = match req.direction.as_str() {
        "up" => jobs::Direction::Up,
        "down" => jobs::Direction::Down,
        other => {
            return Err(ApiError::bad_request(
                "direction",
                format!("direction: {other:?}; up or down"),
            ));
        }
    };
    let mut tx = state.pool.begin().await?;
    let current = jobs::lock(&mut tx, job.seq).await?;
    if current != STATE_QUEUED {
        return Err(ApiError::conflict(format!(
            "job {id} is {current}: only a queued job has a place in the queue"
        )));
    }
    let Some(other) = jobs::move_in_queue(&mut tx, job.seq, direction).await? else {
        return Err(ApiError::conflict(format!(
            "job {id} is already {} of the {} jobs in team {}'s queue",
            if direction == jobs::Direction::Up {
                "first"
            } else {
                "last"
            },
            job.class,
            job.team
        )));
    };
    let way = &req.direction;
    jobs::add_event(
        &mut tx,
        job.seq,
        "moved",
        &format!(
            "moved {way} past {other} in the team's queue by {}",
            who.user
        ),
    )
    .await?;
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "job.move",
            target_kind: "job",
            target: &id,
            before: None,
            after: Some(json!({"direction": way, "past": other})),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Json(job_with_events(&state, &id).await?))
}

#[utoipa::path(post, path = "/api/v1/jobs/{id}/requeue", tag = "jobs",
    summary = "Put a job that holds resources back in its team's queue (it loses the work since its last checkpoint)",
    description = "Roles: admin, lead (own team). Recorded as `requeue_requested_at` and a `requeue_requested` event; \
        the worker releases the job's resources and queues it again. A queued job is answered as it is.",
    params(("id" = String, Path, description = "job id")),
    responses((status = 200, body = api::Job), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn requeue_job(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<api::Job>> {
    who.require(LEADS, "requeue jobs")?;
    let job = visible_job(&state, &who, &id).await?;
    let mut tx = state.pool.begin().await?;
    let current = jobs::lock(&mut tx, job.seq).await?;
    if terminal(&current) {
        return Err(ApiError::conflict(format!(
            "job {id} is already {current}; submit it again instead"
        )));
    }
    if current != STATE_QUEUED {
        jobs::request_requeue(&mut tx, job.seq, &who.user).await?;
        jobs::add_event(
            &mut tx,
            job.seq,
            "requeue_requested",
            &format!("by {}", who.user),
        )
        .await?;
        audit::record(
            &mut *tx,
            actor(&who),
            Change {
                action: "job.requeue",
                target_kind: "job",
                target: &id,
                before: Some(json!({"state": current})),
                after: Some(json!({"state": current, "requeue_requested": true})),
            },
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Json(job_with_events(&state, &id).await?))
}
