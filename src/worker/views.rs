//! What the worker publishes for the web servers (`worker_views`,
//! `migrations/0008_views.sql`): the worker may run in another process
//! than the API, so its world is shown from PostgreSQL, as it was at the
//! tick of the last publication.
//!
//! - `('cluster', '')`: every node, GPU and slice with the job and team
//!   on it ([`api::Cluster`], unfiltered: the API hides other teams'
//!   jobs per caller), with the gauges `/metrics` shows.
//! - `('queue', team)`, one row per team with queued jobs: each pending
//!   job's place (position, why it waits, estimated start and the wait in
//!   wall seconds), and how many the last full cycle left waiting. One row
//!   per team, so that a caller's answer reads its own team's row only.
//!
//! Publishing is bounded so that ticks stay cheap on large queues: at most
//! once per `MIN_INTERVAL` of wall time, and the next no sooner than
//! `COST_FACTOR` times what the last publication took after it; the
//! projection of estimated starts (`estimate.rs`) runs on a thread of its
//! own, bounded the same way (`PROJECTION_COST_FACTOR`), and its latest
//! result is published with the places.

use std::collections::BTreeMap;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use partita_engine::cluster::State;
use partita_engine::gpu::MEMORY_SLICES;
use partita_engine::placement::need;
use partita_engine::sched::{Job, Nanos, Phase, SECOND};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use super::clock::Clock;
use super::estimate::{self, Recipe};
use super::world::World;
use crate::api;
use crate::metrics::Gauges;

/// The least wall time between two publications (Go recomputes its
/// estimates at most once a second too).
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// A publication that took `d` is followed by the next no sooner than
/// `COST_FACTOR * d`: publishing stays under about 5 % of the worker's
/// time however large the world.
const COST_FACTOR: u32 = 20;
/// A projection that took `d` is followed by the next no sooner than
/// `PROJECTION_COST_FACTOR * d`: it runs on a thread of its own, beside
/// the web server on a small machine, so it keeps to about a tenth of a
/// core.
const PROJECTION_COST_FACTOR: u32 = 10;

/// The reason of a job the last full cycle has not seen (the Go build's).
pub const NOT_CYCLED: &str = "submitted; waiting for the next scheduling cycle";

/// The place of a queued job that the published queue does not list (it
/// came after the last full cycle or the last publication): after the
/// `waiting` jobs of its team, as Go places it.
pub fn unseen_slot(waiting: i64) -> api::QueueSlot {
    api::QueueSlot {
        position: waiting + 1,
        reason: NOT_CYCLED.to_string(),
        estimated_start: None,
        wait_seconds: None,
    }
}

/// The published cluster row's body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterView {
    pub cluster: api::Cluster,
    pub gauges: Gauges,
}

/// A published queue row's body: one team's queue.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TeamQueueView {
    /// How many of the team's jobs the last full cycle left waiting.
    pub waiting: i64,
    /// Each pending job's place, by job ID.
    pub slots: BTreeMap<String, api::QueueSlot>,
}

/// A job as the views count it: its portal ID and team, and the engine's
/// view of it.
pub struct ViewJob<'a> {
    /// The portal's job ID; "" for work the portal does not know (a pod
    /// of Partita's scheduler that no job stored in the database owns).
    pub id: &'a str,
    pub team: &'a str,
    pub class: &'a str,
    pub job: &'a Job,
    /// Started and holding its placement (not pending).
    pub running: bool,
}

/// The virtual cluster's jobs, for `cluster_view`.
fn world_jobs(w: &World) -> Vec<ViewJob<'_>> {
    w.jobs()
        .map(|(rec, j)| ViewJob {
            id: &rec.id,
            team: &rec.team,
            class: rec.class.as_str(),
            job: j,
            running: j.phase != Phase::Pending && rec.runtime.run_since >= 0,
        })
        .collect()
}

/// The cluster `st` with `jobs` on it, at `clock`; `teams` are counted
/// even when they hold nothing.
pub fn cluster_view<'a>(
    st: &State,
    teams: impl Iterator<Item = &'a str>,
    jobs: &[ViewJob<'_>],
    clock: api::Clock,
) -> ClusterView {
    let mut owner: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for v in jobs {
        for a in v.job.placed.iter().flatten() {
            owner.insert(&a.task, (v.id, v.team));
        }
    }
    let who = |task: &str| -> (String, String) {
        owner
            .get(task)
            .map(|(j, t)| (j.to_string(), t.to_string()))
            .unwrap_or_default()
    };
    let mut gpus = 0i64;
    let mut allocated = 0.0;
    let mut nodes = Vec::with_capacity(st.len());
    for n in st.nodes() {
        let mut gv = Vec::with_capacity(n.gpus().len());
        for g in n.gpus() {
            gpus += 1;
            let mut slices = Vec::new();
            for s in g.slices() {
                let (job, team) = s.task().map(who).unwrap_or_default();
                if s.task().is_some()
                    && let Some(p) = g.model().find(s.profile())
                {
                    // Either the compute or the memory may be what stops
                    // another from fitting.
                    allocated += p
                        .compute_share()
                        .max(f64::from(p.memory) / f64::from(MEMORY_SLICES));
                }
                slices.push(api::Slice {
                    slice: s.placement().to_string(),
                    busy: s.task().is_some(),
                    job,
                    team,
                });
            }
            if !g.mig() {
                allocated += f64::from(g.used()) / 1000.0;
            }
            let holders = g
                .holders()
                .iter()
                .map(|h| {
                    let (job, team) = who(h.task());
                    api::Hold {
                        milli: i64::from(h.milli()),
                        job,
                        team,
                    }
                })
                .collect();
            gv.push(api::Gpu {
                index: g.index() as i64,
                model: g.model().name.to_string(),
                mig: g.mig(),
                cordoned: g.cordoned(),
                used_milli: i64::from(g.used()),
                slices,
                holders,
            });
        }
        nodes.push(api::Node {
            name: n.name().to_string(),
            tier: n.tier().as_str().to_string(),
            leaf: n.topology().leaf.clone(),
            cpu_milli: n.cpu_milli(),
            cpu_used_milli: n.cpu_used(),
            memory_mib: n.memory_mib(),
            memory_used_mib: n.mem_used(),
            gpus: gv,
        });
    }
    let mut u = api::Utilization {
        allocated_gpus: allocated,
        ..api::Utilization::default()
    };
    let mut queued: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut held: BTreeMap<String, f64> = teams.map(|t| (t.to_string(), 0.0)).collect();
    for v in jobs {
        let j = v.job;
        *held.entry(v.team.to_string()).or_default() += j.held(st) as f64 / 1000.0;
        if j.phase == Phase::Pending {
            u.queued_jobs += 1;
            *queued
                .entry((v.team.to_string(), v.class.to_string()))
                .or_default() += 1;
        } else if v.running {
            u.running_jobs += 1;
            for (i, a) in j.placed.iter().enumerate() {
                if let (Some(a), Some(t)) = (a, j.spec.tasks.get(i))
                    && let Some(n) = st.node_by_name(&a.node)
                {
                    u.useful_gpus += need(n, a, t);
                }
            }
        }
    }
    if gpus > 0 {
        u.allocated = u.allocated_gpus / gpus as f64;
        u.useful = u.useful_gpus / gpus as f64;
    }
    let gauges = Gauges {
        gpus,
        allocated: u.allocated,
        useful: u.useful,
        running_jobs: u.running_jobs,
        queued: queued.into_iter().map(|((t, c), n)| (t, c, n)).collect(),
        held: held.into_iter().collect(),
    };
    ClusterView {
        cluster: api::Cluster {
            clock,
            gpus,
            utilization: u,
            nodes,
        },
        gauges,
    }
}

/// Each team's queue at cluster time `now`, with the projected `starts`.
fn queue_views(
    w: &World,
    clock: &Clock,
    now: Nanos,
    starts: &BTreeMap<String, Nanos>,
) -> BTreeMap<String, TeamQueueView> {
    let mut teams: BTreeMap<String, TeamQueueView> = BTreeMap::new();
    for (rec, j) in w.jobs() {
        if j.phase == Phase::Pending && w.wait(rec.seq).is_some() {
            teams.entry(rec.team.clone()).or_default().waiting += 1;
        }
    }
    for (rec, j) in w.jobs() {
        if j.phase != Phase::Pending {
            continue;
        }
        let q = teams.entry(rec.team.clone()).or_default();
        let mut slot = match w.wait(rec.seq) {
            Some(wait) => api::QueueSlot {
                position: wait.position as i64,
                reason: wait.reason.as_str().to_string(),
                estimated_start: None,
                wait_seconds: None,
            },
            None => unseen_slot(q.waiting),
        };
        if let Some(&at) = starts.get(&rec.id) {
            slot.estimated_start = Some(clock.at(at));
            let secs = (at - now).max(0) as f64 / SECOND as f64;
            slot.wait_seconds = Some(secs / clock.speed());
        }
        q.slots.insert(rec.id.clone(), slot);
    }
    teams
}

/// When and what the worker publishes, and the projection in flight.
pub struct Publisher {
    /// How to project estimated starts; None where the worker runs no
    /// engine (on Kubernetes the scheduler places the work).
    recipe: Option<Arc<Recipe>>,
    next_at: Option<Instant>,
    /// When the next projection may start.
    project_at: Option<Instant>,
    /// Where the projection in flight sends its result and how long it
    /// took.
    projection: Option<mpsc::Receiver<(BTreeMap<String, Nanos>, Duration)>>,
    starts: BTreeMap<String, Nanos>,
}

/// The rows of one publication, built from the world.
pub struct Rows {
    began: Instant,
    at: DateTime<Utc>,
    speed: f64,
    kinds: Vec<String>,
    teams: Vec<String>,
    bodies: Vec<serde_json::Value>,
}

impl Rows {
    /// The rows of `cluster` and `queues`, published as of cluster time
    /// `now`; `began` is when building them began (what it costs bounds
    /// the next publication).
    pub fn of(
        began: Instant,
        clock: &Clock,
        now: Nanos,
        cluster: &ClusterView,
        queues: &BTreeMap<String, TeamQueueView>,
    ) -> Result<Rows, sqlx::Error> {
        let mut rows = Rows {
            began,
            at: clock.at(now),
            speed: clock.speed(),
            kinds: vec!["cluster".to_string()],
            teams: vec![String::new()],
            bodies: vec![to_json(cluster)?],
        };
        for (team, q) in queues {
            rows.kinds.push("queue".to_string());
            rows.teams.push(team.clone());
            rows.bodies.push(to_json(q)?);
        }
        Ok(rows)
    }
}

impl Publisher {
    pub fn new(recipe: Recipe) -> Publisher {
        Publisher {
            recipe: Some(Arc::new(recipe)),
            next_at: None,
            project_at: None,
            projection: None,
            starts: BTreeMap::new(),
        }
    }

    /// A publisher of views built elsewhere (`Rows::of`), with no
    /// projection of estimated starts.
    pub fn views_only() -> Publisher {
        Publisher {
            recipe: None,
            next_at: None,
            project_at: None,
            projection: None,
            starts: BTreeMap::new(),
        }
    }

    /// Whether a publication is due.
    pub fn due(&self) -> bool {
        self.next_at.is_none_or(|at| Instant::now() >= at)
    }

    /// Takes a finished projection's result, and starts another when none
    /// runs and one is due.
    fn project(&mut self, w: &World) {
        if let Some(rx) = &self.projection {
            match rx.try_recv() {
                Ok((starts, took)) => {
                    self.starts = starts;
                    self.projection = None;
                    self.project_at =
                        Some(Instant::now() + MIN_INTERVAL.max(took * PROJECTION_COST_FACTOR));
                }
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => {
                    tracing::error!("worker: the projection of estimated starts failed");
                    self.projection = None;
                }
            }
        }
        let Some(recipe) = &self.recipe else {
            return;
        };
        if !w.any_pending() {
            // Nothing waits: nothing to estimate.
            self.starts.clear();
            return;
        }
        let due = self.project_at.is_none_or(|at| Instant::now() >= at);
        if self.projection.is_none() && due {
            let inputs = estimate::inputs(w, recipe.clone());
            let (tx, rx) = mpsc::channel();
            self.projection = Some(rx);
            // Off the tick and off the async runtime's threads: a
            // projection runs up to hundreds of cycles.
            let spawned = std::thread::Builder::new()
                .name("partita-projection".into())
                .spawn(move || {
                    let began = Instant::now();
                    match estimate::project(inputs) {
                        Ok(starts) => {
                            let _ = tx.send((starts, began.elapsed()));
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "worker: the projection's scheduler");
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "worker: starting the projection");
                self.projection = None;
            }
        }
    }

    /// The views of `w` at cluster time `now`. Synchronous: the world is
    /// not shared across the writes' awaits.
    pub fn rows(&mut self, w: &World, clock: &Clock, now: Nanos) -> Result<Rows, sqlx::Error> {
        let began = Instant::now();
        self.project(w);
        let at = clock.at(now);
        let cluster = cluster_view(
            w.cluster(),
            w.teams().iter().map(|t| t.name.as_str()),
            &world_jobs(w),
            api::Clock {
                now: at,
                speed: clock.speed(),
            },
        );
        let queues = queue_views(w, clock, now, &self.starts);
        Rows::of(began, clock, now, &cluster, &queues)
    }

    /// Writes a publication (in the caller's transaction: the tick's),
    /// replacing the last, and sets when the next is due.
    pub async fn write(
        &mut self,
        conn: &mut PgConnection,
        rows: Rows,
        worker_id: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query!(
            "DELETE FROM worker_views WHERE kind = 'queue' AND team <> ALL($1)",
            &rows.teams
        )
        .execute(&mut *conn)
        .await?;
        sqlx::query!(
            "INSERT INTO worker_views (kind, team, worker_id, cluster_time, speed, published_at, body)
             SELECT k, t, $3, $4, $5, now(), b
             FROM UNNEST($1::text[], $2::text[], $6::jsonb[]) AS v(k, t, b)
             ON CONFLICT (kind, team) DO UPDATE SET
                worker_id = excluded.worker_id, cluster_time = excluded.cluster_time,
                speed = excluded.speed, published_at = excluded.published_at, body = excluded.body",
            &rows.kinds,
            &rows.teams,
            worker_id,
            rows.at,
            rows.speed,
            &rows.bodies,
        )
        .execute(&mut *conn)
        .await?;
        let took = rows.began.elapsed();
        self.next_at = Some(Instant::now() + MIN_INTERVAL.max(took * COST_FACTOR));
        Ok(())
    }
}

fn to_json(v: &impl Serialize) -> Result<serde_json::Value, sqlx::Error> {
    serde_json::to_value(v).map_err(|e| sqlx::Error::Protocol(format!("a view: {e}")))
}
