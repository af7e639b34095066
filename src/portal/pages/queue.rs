//! Queues (the Go portal's `queue.go`): each visible team's queued jobs
//! in the order the scheduler considers them, with position, estimated
//! start (cluster time, and the wall time it corresponds to) and why each
//! waits. Paged: a team's queue of thousands of jobs shows one page of
//! [`PAGE_SIZE`], and the live refresh re-sends only that page, only when
//! it changed.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::clock::{ClusterClock, Estimate, when};
use super::parts::{self, Live, PAGE_SIZE, Pager};
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Layout, PageError, html};
use crate::portal::session::{Viewer, encode};
use crate::server::AppState;

/// `?team=&page=` (and the live region's `since`).
#[derive(Debug, Default, Deserialize)]
pub struct QueueQuery {
    #[serde(default)]
    pub team: String,
    #[serde(default)]
    pub page: Option<String>,
    #[serde(default)]
    pub since: String,
}

impl QueueQuery {
    pub fn page(&self) -> usize {
        self.page
            .as_deref()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(1)
    }
}

/// One queued job as a row.
#[derive(Debug, Clone)]
pub struct Row {
    pub position: i64,
    pub job: String,
    pub name: String,
    pub project: String,
    pub class: String,
    pub gpus: String,
    /// Cluster time.
    pub submitted: String,
    pub estimate: Estimate,
    pub reason: String,
}

impl Row {
    pub fn new(e: &api::QueueEntry, clock: &ClusterClock) -> Row {
        Row {
            position: e.slot.position,
            job: e.job.clone(),
            name: e.name.clone(),
            project: e.project.clone(),
            class: e.class.clone(),
            gpus: parts::gpus(e.gpus),
            submitted: when(e.submitted_at),
            estimate: clock.estimate(e.slot.estimated_start, e.slot.wait_seconds),
            reason: e.slot.reason.clone(),
        }
    }
}

/// One team's page of its queue.
#[derive(Debug, Clone)]
pub struct Section {
    pub team: String,
    pub rows: Vec<Row>,
    pub pager: Pager,
}

#[derive(Template)]
#[template(path = "queue.html")]
struct QueuePage {
    layout: Layout,
    clock: ClusterClock,
    /// Admins and finance pick a team (every team's first page without).
    teams: Vec<String>,
    team: String,
    live: String,
}

/// What a team is guaranteed and holds, in GPUs (the Go portal's
/// `teamUse`).
#[derive(Debug, Clone)]
pub struct TeamUse {
    pub team: String,
    pub guarantee: f64,
    pub burst: f64,
    pub held: f64,
}

impl TeamUse {
    /// What the team holds beyond its guarantee.
    pub fn over(&self) -> f64 {
        (self.held - self.guarantee).max(0.0)
    }

    /// What it leaves unused of its guarantee.
    pub fn idle(&self) -> f64 {
        (self.guarantee - self.held).max(0.0)
    }

    fn cells(&self) -> [String; 5] {
        [
            parts::gpus(self.guarantee),
            parts::gpus(self.burst),
            parts::gpus(self.held),
            parts::gpus(self.over()),
            parts::gpus(self.idle()),
        ]
    }
}

/// Capacity one team holds beyond its guarantee, attributed to whom it
/// is borrowed from; lender "" is the capacity no team is guaranteed.
#[derive(Debug, Clone, PartialEq)]
pub struct Loan {
    pub borrower: String,
    pub lender: String,
    pub gpus: f64,
}

/// Who borrows how much from whom (the Go portal's `loans`): what teams
/// hold beyond their guarantees comes first from the capacity nobody is
/// guaranteed, then from the idle guarantees of teams under theirs in
/// proportion to what each leaves idle; each borrower takes its share of
/// each source in proportion to what it borrows.
pub fn loans(teams: &[TeamUse], total: f64) -> Vec<Loan> {
    let over: f64 = teams.iter().map(TeamUse::over).sum();
    let idle: f64 = teams.iter().map(TeamUse::idle).sum();
    let guaranteed: f64 = teams.iter().map(|t| t.guarantee).sum();
    if over <= 0.0 {
        return Vec::new();
    }
    let pool = (total - guaranteed).max(0.0).min(over);
    let from_lenders = over - pool;
    let mut sorted = teams.to_vec();
    sorted.sort_by(|a, b| a.team.cmp(&b.team));
    let mut out = Vec::new();
    for b in &sorted {
        let share = b.over() / over;
        if share <= 0.0 {
            continue;
        }
        if pool > 0.0 {
            out.push(Loan {
                borrower: b.team.clone(),
                lender: String::new(),
                gpus: pool * share,
            });
        }
        if from_lenders <= 0.0 || idle <= 0.0 {
            continue;
        }
        for l in sorted.iter().filter(|l| l.idle() > 0.0) {
            out.push(Loan {
                borrower: b.team.clone(),
                lender: l.team.clone(),
                gpus: from_lenders * share * l.idle() / idle,
            });
        }
    }
    out
}

#[derive(Template)]
#[template(path = "parts/queue_live.html")]
struct QueueLive {
    /// The teams the viewer may see, with the cells of the quota table.
    uses: Vec<(String, [String; 5])>,
    /// Loans in words: (borrower, GPUs, lender).
    loans: Vec<(String, String, String)>,
    total: String,
    sections: Vec<Section>,
    team: String,
    all_teams: bool,
    my_team: String,
    as_of: String,
}

/// GET /queue.
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<QueueQuery>,
) -> Result<Response, PageError> {
    let (live, clock) = live(&state, &viewer, &q).await?;
    let teams = if viewer.who.role == api::ROLE_ADMIN || viewer.who.role == api::ROLE_FINANCE {
        apicall::get::<Vec<api::Team>>(&state, &viewer, "/api/v1/teams")
            .await?
            .into_iter()
            .map(|t| t.name)
            .collect()
    } else {
        Vec::new()
    };
    Ok(html(QueuePage {
        layout: Layout::new("Queues", "queue", &viewer),
        clock,
        teams,
        team: q.team.clone(),
        live: live.html(),
    }))
}

/// GET /fragments/queue: the visible page, or 204 when unchanged.
pub async fn fragment(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Query(q): Query<QueueQuery>,
) -> Result<Response, PageError> {
    let (live, _) = live(&state, &viewer, &q).await?;
    Ok(parts::live_answer(live, &q.since, &headers))
}

async fn live(
    state: &AppState,
    viewer: &Viewer,
    q: &QueueQuery,
) -> Result<(Live, ClusterClock), PageError> {
    let team = q.team.trim();
    let mut path = "/api/v1/queue".to_string();
    if !team.is_empty() {
        path.push_str("?team=");
        path.push_str(&encode(team));
    }
    let queue: api::Queue = apicall::get(state, viewer, &path).await?;
    let clock = ClusterClock::read(state).await.with_now(&queue.clock);
    let page = q.page();
    let sections = queue
        .teams
        .iter()
        .map(|tq| {
            // Without a team, every team shows its first page and links
            // to the others.
            let asked = if team.is_empty() { 1 } else { page };
            let pager = Pager::new(
                tq.jobs.len(),
                asked,
                format!("/queue?team={}&", encode(&tq.team)),
            );
            let rows = tq.jobs[pager.range()]
                .iter()
                .map(|e| Row::new(e, &clock))
                .collect();
            Section {
                team: tq.team.clone(),
                rows,
                pager,
            }
        })
        .collect();
    // Quotas: the teams the API shows the viewer; what each holds, from
    // the worker's published gauges. Loans only for those who see every
    // team (they name lenders and borrowers).
    let teams: Vec<api::Team> = apicall::get(state, viewer, "/api/v1/teams").await?;
    let gauges = crate::store::views::gauges(&state.pool)
        .await
        .ok()
        .flatten();
    let held = |t: &str| {
        gauges
            .as_ref()
            .and_then(|g| g.held.iter().find(|(n, _)| n == t).map(|(_, h)| *h))
            .unwrap_or(0.0)
    };
    let total = gauges
        .as_ref()
        .map(|g| g.gpus)
        .unwrap_or(state.cluster.gpus) as f64;
    let uses: Vec<TeamUse> = teams
        .iter()
        .map(|t| TeamUse {
            team: t.name.clone(),
            guarantee: t.guaranteed_gpus,
            burst: t.burst_gpus,
            held: held(&t.name),
        })
        .collect();
    let sees_all = viewer.who.role == api::ROLE_ADMIN || viewer.who.role == api::ROLE_FINANCE;
    let loan_lines = if sees_all {
        loans(&uses, total)
            .into_iter()
            .map(|l| (l.borrower, parts::gpus(l.gpus), l.lender))
            .collect()
    } else {
        Vec::new()
    };
    let d = QueueLive {
        uses: uses.iter().map(|u| (u.team.clone(), u.cells())).collect(),
        loans: loan_lines,
        total: parts::gpus(total),
        sections,
        team: team.to_string(),
        all_teams: sees_all,
        my_team: viewer.who.team.clone(),
        as_of: when(queue.clock.now),
    };
    let inner = d.render().map_err(|e| PageError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: format!("The queue could not be drawn: {e}."),
    })?;
    let mut url = "/fragments/queue?".to_string();
    if !team.is_empty() {
        url.push_str(&format!("team={}&", encode(team)));
    }
    url.push_str(&format!("page={page}"));
    Ok((Live::new("queues", url, inner), clock))
}

/// Jobs per page, for the page's hint.
pub const fn page_size() -> usize {
    PAGE_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn using(team: &str, guarantee: f64, held: f64) -> TeamUse {
        TeamUse {
            team: team.into(),
            guarantee,
            burst: 48.0,
            held,
        }
    }

    #[test]
    fn borrowing_comes_from_the_unguaranteed_pool_then_idle_guarantees() {
        // 48 GPUs, 24 guaranteed: search holds 30 of its 16 (14 over),
        // ads 0 of its 8; the pool of 24 unguaranteed covers it all.
        let l = loans(&[using("search", 16.0, 30.0), using("ads", 8.0, 0.0)], 48.0);
        assert_eq!(
            l,
            [Loan {
                borrower: "search".into(),
                lender: String::new(),
                gpus: 14.0
            }]
        );
        // A cluster all guaranteed: it comes from ads' idle guarantee.
        let l = loans(&[using("search", 16.0, 20.0), using("ads", 8.0, 0.0)], 24.0);
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].lender.as_str(), l[0].gpus), ("ads", 4.0));
        assert!(loans(&[using("search", 16.0, 2.0)], 24.0).is_empty());
    }
}
