//! Submit a job (the Go portal's `submit.go`): training or inference,
//! tasks and gang size, GPUs per task (whole GPUs, a MIG profile, peak
//! memory, or a workload profile), class and project of the team,
//! allowed GPU models, duration and checkpoint interval, and the
//! placement preview beside the form: rendered with the page (the
//! form's defaults), then updated by htmx as the user types.
//!
//! Errors are shown together, beside their fields: the form's own
//! fields are checked first (numbers, required fields), then the API
//! is asked for a preview, and each error it names is set aside (its
//! field reset to its default) to ask again, so that every API error is
//! found, not only the first. A hidden idempotency key, fresh on every
//! rendering of the form, makes a double submit one job.

use std::collections::{BTreeMap, BTreeSet};

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::clock::ClusterClock;
use super::parts::{self, mib};
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Layout, PageError, html_with};
use crate::portal::session::{Posted, Viewer, encode, random_secret};
use crate::server::AppState;
use crate::server::error::ApiError;

/// The form's fields, as typed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SubmitForm {
    pub kind: String,
    pub team: String,
    pub project: String,
    pub name: String,
    pub image: String,
    pub command: String,
    pub class: String,
    pub gpu_mode: String,
    pub gpu_count: String,
    pub gpu_mig: String,
    pub gpu_memory: String,
    pub gpu_compute: String,
    pub gpu_profile: String,
    pub models: Vec<String>,
    pub tasks: String,
    pub gang: String,
    pub cpu: String,
    pub memory: String,
    pub duration: String,
    pub checkpoint_every: String,
    pub idempotency_key: String,
}

/// Messages by form field; "" is the form as a whole.
pub type Errors = BTreeMap<String, String>;

impl SubmitForm {
    /// The Go portal's defaults: one inference replica of 20 GiB peak
    /// memory and a quarter of a GPU's compute, for 2 hours.
    pub fn defaults(team: &str) -> SubmitForm {
        SubmitForm {
            kind: "inference".into(),
            team: team.into(),
            project: "default".into(),
            class: "batch".into(),
            gpu_mode: "memory".into(),
            gpu_memory: "20Gi".into(),
            gpu_compute: "0.25".into(),
            gpu_count: "1".into(),
            tasks: "1".into(),
            gang: "0".into(),
            duration: "2h".into(),
            ..SubmitForm::default()
        }
    }

    fn trimmed(mut self) -> SubmitForm {
        for f in [
            &mut self.kind,
            &mut self.team,
            &mut self.project,
            &mut self.name,
            &mut self.image,
            &mut self.command,
            &mut self.class,
            &mut self.gpu_mode,
            &mut self.gpu_count,
            &mut self.gpu_mig,
            &mut self.gpu_memory,
            &mut self.gpu_compute,
            &mut self.gpu_profile,
            &mut self.tasks,
            &mut self.gang,
            &mut self.cpu,
            &mut self.memory,
            &mut self.duration,
            &mut self.checkpoint_every,
            &mut self.idempotency_key,
        ] {
            *f = f.trim().to_string();
        }
        self.models.retain(|m| !m.trim().is_empty());
        self
    }

    /// The API's request, and every problem of the form's own fields
    /// (a field in error keeps its default in the request, so that the
    /// API can still be asked about the others).
    pub fn request(&self) -> (api::SubmitRequest, Errors) {
        let mut errs = Errors::new();
        let mut whole = |field: &str, s: &str, default: i64, least: i64, what: &str| -> i64 {
            if s.is_empty() {
                return default;
            }
            match s.parse::<i64>() {
                Ok(n) if n >= least => n,
                Ok(_) | Err(_) => {
                    errs.insert(
                        field.into(),
                        format!("{s:?} is not a whole number of {what} ({least} or more)."),
                    );
                    default
                }
            }
        };
        let tasks = whole("tasks", &self.tasks, 1, 1, "tasks");
        let gang = whole("gang", &self.gang, 0, 0, "tasks");
        let count = if self.gpu_mode == "count" {
            whole("gpu_count", &self.gpu_count, 1, 1, "GPUs")
        } else {
            0
        };
        let mut req = api::SubmitRequest {
            team: self.team.clone(),
            project: self.project.clone(),
            name: self.name.clone(),
            image: self.image.clone(),
            command: self.command.clone(),
            class: self.class.clone(),
            gang,
            cpu: self.cpu.clone(),
            memory: self.memory.clone(),
            duration: self.duration.clone(),
            checkpoint_every: self.checkpoint_every.clone(),
            idempotency_key: self.idempotency_key.clone(),
            ..api::SubmitRequest::default()
        };
        if self.kind == "training" {
            req.tasks = tasks;
        } else {
            req.replicas = tasks;
        }
        req.gpu.models = self.models.clone();
        match self.gpu_mode.as_str() {
            "count" => req.gpu.count = count,
            "mig" => {
                if self.gpu_mig.is_empty() {
                    errs.insert("gpu_mig".into(), "Pick a MIG profile.".into());
                    req.gpu.count = 1;
                } else {
                    req.gpu.mig = self.gpu_mig.clone();
                }
            }
            "memory" => {
                if self.gpu_memory.is_empty() {
                    errs.insert(
                        "gpu_memory".into(),
                        "Say the peak GPU memory of one task, e.g. 20Gi.".into(),
                    );
                    req.gpu.count = 1;
                } else {
                    req.gpu.memory = self.gpu_memory.clone();
                    if !self.gpu_compute.is_empty() {
                        match self.gpu_compute.parse::<f64>() {
                            Ok(c) if (0.0..=1.0).contains(&c) => req.gpu.compute = c,
                            _ => {
                                errs.insert(
                                    "gpu_compute".into(),
                                    format!("{:?} is not a number from 0 to 1.", self.gpu_compute),
                                );
                            }
                        }
                    }
                }
            }
            "profile" => {
                if self.gpu_profile.is_empty() {
                    errs.insert("gpu_profile".into(), "Pick a workload profile.".into());
                    req.gpu.count = 1;
                } else {
                    req.gpu.profile = self.gpu_profile.clone();
                }
            }
            "none" => req.gpu.models.clear(),
            _ => {
                errs.insert("gpu_mode".into(), "Say how each task asks for GPUs.".into());
                req.gpu.count = 1;
            }
        }
        (req, errs)
    }

    /// Where the form shows an API error about `api_field`: an error about
    /// the GPU request as a whole goes beside the chosen mode's input.
    pub fn place(&self, api_field: &str) -> String {
        match api_field {
            "tasks" | "replicas" => "tasks".into(),
            "gpu.models" => "models".into(),
            "gpu.count" | "gpu.mig" | "gpu.memory" | "gpu.compute" | "gpu.profile" => {
                api_field.replacen('.', "_", 1)
            }
            "gpu" | "gpu.milli" => match self.gpu_mode.as_str() {
                "count" | "mig" | "memory" | "profile" => format!("gpu_{}", self.gpu_mode),
                _ => "gpu_mode".into(),
            },
            "team" | "project" | "name" | "image" | "command" | "class" | "gang" | "cpu"
            | "memory" | "duration" | "checkpoint_every" => api_field.into(),
            _ => String::new(),
        }
    }
}

/// Resets the request's `api_field` to its default, so that the API can
/// be asked about the rest; false when it cannot be.
fn set_aside(req: &mut api::SubmitRequest, api_field: &str) -> bool {
    match api_field {
        "project" => req.project.clear(),
        "name" => req.name.clear(),
        "image" => req.image.clear(),
        "command" => req.command.clear(),
        "class" => req.class.clear(),
        "cpu" => req.cpu.clear(),
        "memory" => req.memory.clear(),
        "duration" => req.duration.clear(),
        "checkpoint_every" => req.checkpoint_every.clear(),
        "fail_after" => req.fail_after.clear(),
        "tasks" | "replicas" => {
            req.tasks = 0;
            req.replicas = 0;
        }
        "gang" => req.gang = 0,
        "gpu.models" => req.gpu.models.clear(),
        "gpu.compute" => req.gpu.compute = 0.0,
        "gpu" | "gpu.count" | "gpu.mig" | "gpu.memory" | "gpu.profile" | "gpu.milli" => {
            req.gpu = api::GpuRequest {
                count: 1,
                ..api::GpuRequest::default()
            };
        }
        _ => return false,
    }
    true
}

/// Asks the API for a preview of `req`, collecting every error it names
/// into `errs` (each field set aside in turn). A refusal that is not
/// about the form (403: the viewer may not submit) is returned.
async fn check(
    state: &AppState,
    viewer: &Viewer,
    form: &SubmitForm,
    mut req: api::SubmitRequest,
    errs: &mut Errors,
) -> Result<Option<api::JobPreview>, ApiError> {
    req.idempotency_key.clear();
    let mut seen = BTreeSet::new();
    for _ in 0..12 {
        match apicall::call::<_, api::JobPreview>(
            state,
            viewer,
            Method::POST,
            "/api/v1/jobs/preview",
            &req,
        )
        .await
        {
            Ok(p) => return Ok((errs.is_empty()).then_some(p)),
            Err(e) if e.status == StatusCode::BAD_REQUEST => {
                let place = form.place(&e.field);
                errs.entry(place.clone())
                    .or_insert_with(|| parts::words(&e.message, &e.field));
                if e.field.is_empty()
                    || !seen.insert(e.field.clone())
                    || !set_aside(&mut req, &e.field)
                {
                    return Ok(None);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// What the form offers: teams, projects, classes, profiles, models.
#[derive(Template)]
#[template(path = "submit.html")]
struct SubmitPage {
    layout: Layout,
    clock: ClusterClock,
    form: SubmitForm,
    errors: Errors,
    can_submit: bool,
    admin: bool,
    teams: Vec<String>,
    projects: Vec<String>,
    classes: Vec<String>,
    profiles: Vec<(String, String)>,
    mig_profiles: Vec<String>,
    gpu_models: Vec<String>,
    preview: String,
}

impl SubmitPage {
    fn err(&self, field: &str) -> &str {
        self.errors.get(field).map(String::as_str).unwrap_or("")
    }

    fn bad(&self, field: &str) -> bool {
        self.errors.contains_key(field)
    }

    fn model_checked(&self, m: &str) -> bool {
        self.form.models.iter().any(|x| x == m)
    }

    fn mode_is(&self, m: &str) -> bool {
        self.form.gpu_mode == m
    }

    fn role(&self) -> &str {
        self.layout
            .who
            .as_ref()
            .map(|w| w.role.as_str())
            .unwrap_or("")
    }

    /// The error beside `field`, if any.
    fn ferr(&self, field: &str) -> String {
        match self.errors.get(field) {
            Some(m) => format!(
                "<p class=\"ferr\" id=\"err-{field}\" data-for=\"{field}\">{}</p>",
                parts::escape(m)
            ),
            None => String::new(),
        }
    }

    /// An input's attributes when its field is in error.
    fn invalid(&self, field: &str) -> String {
        if self.bad(field) {
            format!(" aria-invalid=\"true\" aria-describedby=\"err-{field}\"")
        } else {
            String::new()
        }
    }
}

#[derive(Template)]
#[template(path = "parts/preview.html")]
struct PreviewPart {
    preview: Option<api::JobPreview>,
    errors: Vec<(String, String)>,
}

impl PreviewPart {
    fn render_html(&self) -> String {
        self.render().unwrap_or_default()
    }

    fn mib(&self, m: &i64) -> String {
        mib(*m)
    }

    fn cpu(&self, m: &i64) -> String {
        parts::cpu(*m)
    }

    fn gpus(&self, g: &f64) -> String {
        parts::gpus(*g)
    }

    fn f2(&self, f: &f64) -> String {
        format!("{f:.2}")
    }
}

fn submitter(v: &Viewer) -> bool {
    crate::server::auth::SUBMITTERS.contains(&v.who.role.as_str())
}

/// `?team=`: an admin's choice of team.
#[derive(Debug, Default, Deserialize)]
pub struct TeamChoice {
    #[serde(default)]
    pub team: String,
}

/// GET /submit: the form with its defaults and their preview.
pub async fn form(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<TeamChoice>,
) -> Result<Response, PageError> {
    let mut form = SubmitForm::defaults(&viewer.who.team);
    if viewer.who.role == api::ROLE_ADMIN {
        form.team = q.team.trim().to_string();
    }
    page(&state, &viewer, form, Errors::new(), StatusCode::OK, true).await
}

/// POST /submit: checks every field, then submits; a new job goes to its
/// page, errors come back beside their fields.
pub async fn submit(State(state): State<AppState>, posted: Posted<SubmitForm>) -> Response {
    let Posted { viewer, form } = posted;
    let form = form.trimmed();
    let (req, mut errs) = form.request();
    if let Err(e) = check(&state, &viewer, &form, req.clone(), &mut errs).await {
        return PageError {
            status: e.status,
            message: parts::words(&e.message, &e.field),
        }
        .into_response();
    }
    if errs.is_empty() {
        match apicall::call::<_, api::Job>(&state, &viewer, Method::POST, "/api/v1/jobs", &req)
            .await
        {
            Ok(job) => {
                let mut msg = format!("Submitted job {}.", job.id);
                if let Some(q) = &job.queue {
                    msg.push_str(&format!(
                        " Position {} in team {}'s queue.",
                        q.position, job.team
                    ));
                }
                let tag = parts::flash_tag(&viewer.csrf, "done", &msg);
                return Redirect::to(&format!(
                    "/jobs/{}?done={}&tag={tag}",
                    encode(&job.id),
                    encode(&msg)
                ))
                .into_response();
            }
            Err(e) if e.status.is_client_error() && e.status != StatusCode::FORBIDDEN => {
                errs.insert(form.place(&e.field), parts::words(&e.message, &e.field));
            }
            Err(e) => {
                return PageError {
                    status: e.status,
                    message: parts::words(&e.message, &e.field),
                }
                .into_response();
            }
        }
    }
    match page(&state, &viewer, form, errs, StatusCode::BAD_REQUEST, false).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// POST /submit/preview (htmx, as the user types): the preview or the
/// form's errors.
pub async fn preview(State(state): State<AppState>, posted: Posted<SubmitForm>) -> Response {
    let Posted { viewer, form } = posted;
    let form = form.trimmed();
    let part = preview_of(&state, &viewer, &form).await;
    Html(part.render_html()).into_response()
}

async fn preview_of(state: &AppState, viewer: &Viewer, form: &SubmitForm) -> PreviewPart {
    let (req, mut errs) = form.request();
    let preview = match check(state, viewer, form, req, &mut errs).await {
        Ok(p) => p,
        Err(e) => {
            errs.insert(String::new(), parts::words(&e.message, &e.field));
            None
        }
    };
    PreviewPart {
        preview,
        errors: errs.into_iter().collect(),
    }
}

async fn page(
    state: &AppState,
    viewer: &Viewer,
    mut form: SubmitForm,
    errors: Errors,
    status: StatusCode,
    with_preview: bool,
) -> Result<Response, PageError> {
    let clock = ClusterClock::read(state).await;
    let admin = viewer.who.role == api::ROLE_ADMIN;
    let can_submit = submitter(viewer);
    // Fresh for every rendering: a double click submits once, and a
    // corrected form is a new submission.
    form.idempotency_key = format!("portal-{}", &random_secret()[..24]);
    let teams: Vec<api::Team> = apicall::get(state, viewer, "/api/v1/teams").await?;
    if admin && form.team.is_empty() {
        form.team = teams.first().map(|t| t.name.clone()).unwrap_or_default();
    }
    let mine = teams.iter().find(|t| t.name == form.team);
    let projects = mine.map(|t| t.projects.clone()).unwrap_or_default();
    let classes = mine.map(|t| t.classes.clone()).unwrap_or_default();
    if !classes.is_empty() && !classes.contains(&form.class) {
        form.class = if classes.iter().any(|c| c == "batch") {
            "batch".into()
        } else {
            classes[0].clone()
        };
    }
    let profiles: Vec<api::Profile> = apicall::get(state, viewer, "/api/v1/profiles").await?;
    let profiles = profiles
        .into_iter()
        .map(|p| {
            let what = if p.gpus > 0 {
                format!("{}, {} GPU", p.kind, p.gpus)
            } else {
                format!("{}, {} peak", p.kind, mib(p.peak_memory_mib))
            };
            (p.name, what)
        })
        .collect();
    let gpu_models: Vec<String> = state
        .cluster
        .nodes
        .values()
        .flat_map(|n| n.models.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let preview = if with_preview && can_submit && !form.team.is_empty() {
        preview_of(state, viewer, &form).await.render_html()
    } else if !errors.is_empty() {
        PreviewPart {
            preview: None,
            errors: errors.clone().into_iter().collect(),
        }
        .render_html()
    } else {
        String::new()
    };
    Ok(html_with(
        status,
        SubmitPage {
            layout: Layout::new("Submit a job", "submit", viewer),
            clock,
            mig_profiles: mig_profiles(&gpu_models),
            gpu_models,
            teams: teams.into_iter().map(|t| t.name).collect(),
            form,
            errors,
            can_submit,
            admin,
            projects,
            classes,
            profiles,
            preview,
        },
    ))
}

/// The MIG profiles the cluster's GPU models offer, small to large.
fn mig_profiles(models: &[String]) -> Vec<String> {
    let mut seen: BTreeMap<String, (i32, i32)> = BTreeMap::new();
    for m in models {
        let model = partita_engine::gpu::lookup(m);
        for p in model.profiles.iter().filter(|p| !p.media_ext) {
            seen.insert(p.name.to_string(), (p.memory, p.compute));
        }
    }
    let mut names: Vec<(String, (i32, i32))> = seen.into_iter().collect();
    names.sort_by_key(|(_, k)| *k);
    names.into_iter().map(|(n, _)| n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_own_fields_are_checked_all_at_once() {
        let mut f = SubmitForm::defaults("search");
        f.tasks = "two".into();
        f.gang = "-1".into();
        f.gpu_compute = "3".into();
        let (req, errs) = f.request();
        assert_eq!(
            errs.keys().map(String::as_str).collect::<Vec<_>>(),
            ["gang", "gpu_compute", "tasks"]
        );
        // The request still holds the defaults of the fields in error.
        assert_eq!((req.replicas, req.gang, req.gpu.compute), (1, 0, 0.0));
        assert_eq!(f.place("gpu"), "gpu_memory");
        assert_eq!(f.place("replicas"), "tasks");
    }
}
