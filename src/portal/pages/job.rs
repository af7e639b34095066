//! A job (the Go portal's `job.go`): its spec, state, place in its
//! team's queue (position, why it waits, estimated start) and timeline,
//! and what the viewer may do to it (the forms post to the team page's
//! actions and come back here).

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::clock::{ClusterClock, Estimate, when};
use super::parts::{self, FlashQuery};
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Layout, PageError, html};
use crate::portal::session::{Viewer, encode};
use crate::server::AppState;

/// One line of the timeline, its clock said.
#[derive(Debug, Clone)]
pub struct Line {
    pub state: String,
    pub reason: String,
    pub time: String,
    /// "cluster" or "wall".
    pub clock: String,
}

/// One task and where it runs.
#[derive(Debug, Clone)]
pub struct TaskLine {
    pub name: String,
    pub gpu: String,
    pub cpu: String,
    pub memory: String,
    pub placed: String,
    pub tier: String,
}

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    layout: Layout,
    clock: ClusterClock,
    job: api::Job,
    gpus: String,
    submitted: String,
    started: String,
    finished: String,
    /// Wall time: a cancel or requeue asked for, not yet done.
    cancel_asked: String,
    requeue_asked: String,
    estimate: Estimate,
    tasks: Vec<TaskLine>,
    timeline: Vec<Line>,
    classes: Vec<String>,
    can_lead: bool,
    can_cancel: bool,
    back: String,
    viewer_role: String,
}

impl JobPage {
    fn queued(&self) -> bool {
        self.job.state == api::STATE_QUEUED
    }

    fn terminal(&self) -> bool {
        api::terminal(&self.job.state)
    }
}

/// GET /jobs/{id}.
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(q): Query<FlashQuery>,
) -> Result<Response, PageError> {
    let job: api::Job =
        apicall::get(&state, &viewer, &format!("/api/v1/jobs/{}", encode(&id))).await?;
    let clock = ClusterClock::read(&state).await;
    let lead = viewer.who.role == api::ROLE_ADMIN || viewer.who.role == api::ROLE_LEAD;
    let live = !api::terminal(&job.state);
    let can_lead = lead && live;
    let can_cancel =
        live && (lead || (viewer.who.role == api::ROLE_MEMBER && job.user == viewer.who.user));
    let classes = if can_lead {
        apicall::get::<api::Team>(
            &state,
            &viewer,
            &format!("/api/v1/teams/{}", encode(&job.team)),
        )
        .await?
        .classes
    } else {
        Vec::new()
    };
    let estimate = match &job.queue {
        Some(slot) => clock.estimate(slot.estimated_start, slot.wait_seconds),
        None => Estimate::default(),
    };
    let tasks = job
        .tasks
        .iter()
        .map(|t| {
            let (placed, tier) = match &t.placement {
                Some(p) => {
                    let mut s = p.node.clone();
                    for g in &p.grants {
                        s.push_str(&format!(" · GPU {} {}", g.gpu, g.model));
                        if !g.slice.is_empty() {
                            s.push_str(&format!(" MIG {}", g.slice));
                        } else if g.milli > 0 && g.milli < 1000 {
                            s.push_str(&format!(" {}‰", g.milli));
                        }
                    }
                    (s, p.tier.clone())
                }
                None => (String::new(), String::new()),
            };
            TaskLine {
                name: t.name.clone(),
                gpu: t.gpu.clone(),
                cpu: parts::cpu(t.cpu_milli),
                memory: parts::mib(t.memory_mib),
                placed,
                tier,
            }
        })
        .collect();
    let timeline = job
        .events
        .iter()
        .map(|e| Line {
            state: e.state.clone(),
            reason: e.reason.clone(),
            time: when(e.time),
            clock: if e.clock == "wall" {
                "wall".into()
            } else {
                "cluster".into()
            },
        })
        .collect();
    let mut layout = Layout::new(format!("Job {}", job.id), "", &viewer);
    layout.flash = q.flash(&viewer);
    Ok(html(JobPage {
        layout,
        clock,
        gpus: parts::gpus(job.gpus),
        submitted: when(job.submitted_at),
        started: job.started_at.map(when).unwrap_or_default(),
        finished: job.finished_at.map(when).unwrap_or_default(),
        cancel_asked: job.cancel_requested_at.map(when).unwrap_or_default(),
        requeue_asked: job.requeue_requested_at.map(when).unwrap_or_default(),
        estimate,
        tasks,
        timeline,
        classes,
        can_lead,
        can_cancel,
        back: format!("/jobs/{}", encode(&job.id)),
        viewer_role: viewer.who.role.clone(),
        job,
    }))
}
