//! The background worker: turns queued jobs in PostgreSQL into placement
//! decisions on the virtual cluster, and records what follows (job states
//! and events, the usage ledger) back in PostgreSQL. The port of the Go
//! build's standalone world (`go/internal/standalone`), with the database
//! as the source of truth.
//!
//! - **One active worker.** A worker first takes a PostgreSQL session
//!   advisory lock (`LOCK_KEY`) on a connection of its own, polling
//!   `pg_try_advisory_lock` every `lock_poll` while another holds it. Every
//!   write it then makes goes through that same connection: if the
//!   connection dies, the lock goes with it and so does the worker's
//!   ability to write, so two workers never both act. A waiting worker
//!   takes over within about `lock_poll` of the active one's death (its
//!   connection closing).
//! - **Recovery.** On taking the lock, the worker rebuilds the world from
//!   the database (`world.rs`, `World::add`): queued jobs wait, jobs that
//!   hold resources go back where their runtime says, with their clocks
//!   and timers; cluster time resumes where the last worker stopped it.
//! - **Each tick:** read new queued jobs, cancel and requeue requests and
//!   the teams' quotas; fire the timers due by the cluster time now; run a
//!   cycle; write every change, the clock and the heartbeat in one
//!   transaction. If any of it fails, the worker drops its connection (and
//!   so the lock), forgets its world, and starts over from the database.
//! - **Views.** About once a second a tick also publishes the world as the
//!   web servers show it (`views.rs`: the cluster, each team's queue with
//!   estimated starts), in the same transaction.

pub mod clock;
pub mod estimate;
pub mod kube;
pub mod kube_loop;
pub mod spec;
pub mod store;
pub mod views;
pub mod world;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use partita_engine::random::Rand;
use partita_engine::scenario::{self, Scenario};
use partita_engine::sched::{self, Nanos, SECOND, Scheduler};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection, PgPool};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::metrics::WorkerMetrics;
use estimate::Recipe;
use views::Publisher;
use world::World;

/// The key of the advisory lock held by the active worker: "partita" in
/// ASCII, so that it is recognisable in `pg_locks` (objid 1953069409 with
/// classid 7365234) and unlikely to collide with another application's.
pub const LOCK_KEY: i64 = 0x0070_6172_7469_7461;

/// The built-in virtual cluster (`scenarios/demo.yaml`, as the Go build's
/// `standalone.DemoYAML`).
pub const DEMO_YAML: &str = include_str!("../../scenarios/demo.yaml");

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The virtual cluster: its nodes, and its teams for a new database.
    pub scenario: Scenario,
    /// Cluster seconds per wall second.
    pub speed: f64,
    /// The placement policy's random seed.
    pub seed: i64,
    /// Wall time between ticks (at most; a timer due sooner wakes it).
    pub tick: Duration,
    /// Wall time between two tries for the lock while another holds it.
    pub lock_poll: Duration,
    /// How long a MIG change takes, in cluster time (Go: 30 s).
    pub reconfig_delay: Nanos,
    /// This worker's name in the `workers` table.
    pub id: String,
    /// Where the worker counts what happens, when its process exposes
    /// the worker's metrics (`partita serve` with the worker in it).
    pub metrics: Option<Arc<WorkerMetrics>>,
    /// Run the jobs on a Kubernetes cluster instead of the virtual one
    /// (`--cluster kubernetes`).
    pub kube: Option<kube_loop::KubeOptions>,
}

impl Options {
    /// The defaults of `partita serve`: the demo cluster at `speed`.
    pub fn new(scenario: Scenario, speed: f64) -> Options {
        Options {
            scenario,
            speed,
            seed: 1,
            tick: Duration::from_millis(100),
            lock_poll: Duration::from_secs(1),
            reconfig_delay: 30 * SECOND,
            id: default_id(),
            metrics: None,
            kube: None,
        }
    }
}

/// `host:pid:random`, unique per worker process.
pub fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!(
        "{host}:{}:{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

/// Reads a scenario file, or the demo cluster when `path` is `None`.
pub fn load_scenario(path: Option<&std::path::Path>) -> anyhow::Result<Scenario> {
    match path {
        None => scenario::parse(DEMO_YAML, "demo.yaml").context("the built-in demo cluster"),
        Some(p) => {
            let text =
                std::fs::read(p).with_context(|| format!("reading the cluster {}", p.display()))?;
            Ok(scenario::parse(text, &p.display().to_string())?)
        }
    }
}

/// A running worker: stop it with `stop` (it finishes its tick and lets go
/// of the lock), or `abort` it (as a crash: its connection just closes).
pub struct Handle {
    stop: watch::Sender<bool>,
    abort: AbortHandle,
    thread: std::thread::JoinHandle<()>,
}

impl Handle {
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let thread = self.thread;
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }

    pub fn abort(&self) {
        self.abort.abort();
    }

    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }
}

/// Starts a worker on a thread of its own, with its own (single-threaded)
/// async runtime and its own two connections to `pool`'s database; it runs
/// until stopped. A cycle is a stretch of computing that holds its thread
/// (tens of milliseconds on a long queue): on a thread of the web
/// server's runtime it would hold up the requests queued behind it.
pub fn spawn(pool: PgPool, opt: Options) -> Handle {
    let (stop, stopped) = watch::channel(false);
    let connect = (*pool.connect_options()).clone();
    let (aborts, abort) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("partita-worker".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "worker: no runtime");
                    return;
                }
            };
            runtime.block_on(async move {
                let pool = PgPoolOptions::new()
                    .max_connections(2)
                    .connect_lazy_with(connect);
                let task = tokio::spawn(run(pool, opt, stopped));
                let _ = aborts.send(task.abort_handle());
                let _ = task.await;
            });
        })
        .expect("a thread for the worker");
    let abort = abort.recv().expect("the worker's task started");
    Handle {
        stop,
        abort,
        thread,
    }
}

/// Runs a worker until `stopped` turns true: waits for the lock, then
/// works; after an error, starts over.
pub async fn run(pool: PgPool, opt: Options, mut stopped: watch::Receiver<bool>) {
    let mut waiting_logged = false;
    while !*stopped.borrow() {
        match try_lock(&pool, &opt).await {
            Ok(Some(conn)) => {
                waiting_logged = false;
                tracing::info!(worker = %opt.id, "worker: active (holds the advisory lock)");
                let life = match &opt.kube {
                    Some(k) => kube_loop::active(conn, &opt, k, &mut stopped).await,
                    None => active(conn, &pool, &opt, &mut stopped).await,
                };
                match life {
                    Ok(()) => return,
                    Err(e) => tracing::error!(
                        worker = %opt.id,
                        error = format!("{e:#}"),
                        "worker: stopped acting, its state will be read again from the database"
                    ),
                }
            }
            Ok(None) => {
                if !waiting_logged {
                    tracing::info!(worker = %opt.id, "worker: another worker is active; waiting for the lock");
                    waiting_logged = true;
                }
            }
            Err(e) => {
                tracing::warn!(worker = %opt.id, error = format!("{e:#}"), "worker: database")
            }
        }
        tokio::select! {
            () = tokio::time::sleep(opt.lock_poll) => {}
            _ = stopped.changed() => {}
        }
    }
}

/// A connection of its own holding the lock, or `None` while another
/// worker holds it.
async fn try_lock(pool: &PgPool, opt: &Options) -> anyhow::Result<Option<PgConnection>> {
    store::heartbeat_standby(&mut *pool.acquire().await?, &opt.id).await?;
    // Detached: the pool must never hand this session (and its lock) to
    // anyone else, and closing it must release the lock.
    let mut conn = pool.acquire().await?.detach();
    let locked = sqlx::query_scalar!(r#"SELECT pg_try_advisory_lock($1) AS "locked!""#, LOCK_KEY)
        .fetch_one(&mut conn)
        .await?;
    if locked {
        Ok(Some(conn))
    } else {
        let _ = conn.close().await;
        Ok(None)
    }
}

/// The active worker's life: recover, then tick until stopped.
async fn active(
    mut conn: PgConnection,
    pool: &PgPool,
    opt: &Options,
    stopped: &mut watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let _ = pool; // reads and writes go through the locked connection only
    store::become_active(&mut conn, &opt.id).await?;
    if store::seed_teams(&mut conn, &opt.scenario.teams).await? {
        tracing::info!("worker: a new database: seeded the cluster's teams");
    }
    let (epoch, base) = clock::load(&mut conn).await?;
    let clock = clock::Clock::new(epoch, base, opt.speed);
    let (mut world, recipe) = build_world(opt, clock.now())?;
    world.set_metrics(opt.metrics.clone());
    let mut publisher = Publisher::new(recipe);
    world.set_teams(store::teams(&mut conn).await?);
    let mut since = store::xmin(&mut conn).await?;
    let unfinished = store::unfinished_jobs(&mut conn, epoch).await?;
    let (mut queued, mut holding) = (0_usize, 0_usize);
    for rec in unfinished {
        if rec.state == world::QUEUED {
            queued += 1;
        } else {
            holding += 1;
        }
        world.add(rec);
    }
    for note in std::mem::take(&mut world.recovered) {
        tracing::info!("worker: recovered {note}");
    }
    tracing::info!(
        queued,
        holding_resources = holding,
        cluster_time_s = base / SECOND,
        "worker: recovered from the database"
    );
    let mut stats = JobStats::new(queued + holding);
    // Whatever recovery changed (a placement lost) is written at once.
    let mut cadence = Cadence::new();
    tick(
        &mut conn,
        &mut world,
        &mut publisher,
        &mut cadence,
        &clock,
        opt,
        None,
    )
    .await?;
    loop {
        let mut wait = match world.next_timer() {
            Some(at) => clock.wall_until(at).min(opt.tick),
            None => opt.tick,
        };
        if let Some(gap) = cadence.wanted_in() {
            wait = wait.min(gap);
        }
        tokio::select! {
            () = tokio::time::sleep(wait.max(Duration::from_millis(1))) => {}
            _ = stopped.changed() => {}
        }
        if *stopped.borrow() {
            // The last tick stored the clock; closing the connection
            // releases the lock at once for a waiting worker.
            let _ = sqlx::query!("UPDATE workers SET active = false WHERE id = $1", opt.id)
                .execute(&mut conn)
                .await;
            let _ = conn.close().await;
            tracing::info!(worker = %opt.id, "worker: stopped");
            return Ok(());
        }
        let added = tick(
            &mut conn,
            &mut world,
            &mut publisher,
            &mut cadence,
            &clock,
            opt,
            Some(&mut since),
        )
        .await?;
        stats.added(&mut conn, added).await?;
    }
}

/// The cluster and a fresh scheduler (preset `partita`, told the
/// scenario's request mix, moves off: as Go's `schedulerConfig`), and how
/// to build another like it (for the projection of estimated starts).
fn build_world(opt: &Options, now: Nanos) -> anyhow::Result<(World, Recipe)> {
    let sc = &opt.scenario;
    let st = partita_engine::cluster::State::new(sc.nodes()?)?;
    let mut no_files = |path: &str| Err(format!("open {path}: trace files are not read here"));
    let arrivals = sc.jobs(sc.seed, &mut no_files).unwrap_or_default();
    let mut shapes = Vec::new();
    for a in &arrivals {
        shapes.extend(sched::shapes_of(std::slice::from_ref(&a.job)));
    }
    let (mut cfg, policy) = sched::build("partita", &st, &shapes)?;
    cfg.migrate = false; // moving running replicas is not carried out here
    cfg.production_reserve = sc.production_reserve_gpus * 1000;
    let recipe = Recipe {
        config: cfg.clone(),
        shapes,
        seed: opt.seed,
    };
    let sch = Scheduler::new(cfg, policy, Rand::new(opt.seed));
    Ok((World::new(st, sch, now, opt.reconfig_delay), recipe))
}

/// One tick: take up what the database says changed, advance to the
/// cluster time now, run a cycle, write it all in one transaction. With
/// `since` (the mark of the previous read of new jobs, moved on here) it
/// reads the database's changes first; without, it only writes.
async fn tick(
    conn: &mut PgConnection,
    world: &mut World,
    publisher: &mut Publisher,
    cadence: &mut Cadence,
    clock: &clock::Clock,
    opt: &Options,
    since: Option<&mut i64>,
) -> anyhow::Result<usize> {
    let mut tx = conn.begin().await?;
    let mut changed = false;
    let mut added = 0;
    let read = since.is_some();
    if let Some(since) = since {
        world.set_teams(store::teams(&mut tx).await?);
        let mark = store::xmin(&mut tx).await?;
        for rec in store::new_jobs(&mut tx, clock.epoch, *since).await? {
            if !world.knows(rec.seq) {
                world.add(rec);
                changed = true;
                added += 1;
            }
        }
        *since = mark;
    }
    let now = clock.now();
    changed |= world.advance(now);
    if read {
        for r in store::requests(&mut tx).await? {
            if !world.knows(r.seq) {
                continue;
            }
            if let Some(by) = &r.cancel_by {
                world.cancel(r.seq, by);
            } else if let Some(by) = &r.requeue_by {
                world.requeue(r.seq, by);
            }
            changed = true;
        }
        let moved = store::queue_changes(&mut tx, clock.epoch).await?;
        for c in &moved {
            changed |= world.change_queue_place(c.seq, c.class, c.queue_key);
        }
        store::queue_changes_seen(&mut tx, &moved).await?;
    }
    cadence.want |= changed;
    if cadence.due(opt.tick, || world.any_pending()) {
        let began = Instant::now();
        world.cycle();
        cadence.cycled(began);
    }
    let changes = world.take_changes();
    store::write(&mut tx, clock, world.now(), &changes, &opt.id).await?;
    if publisher.due() {
        let rows = publisher.rows(world, clock, world.now())?;
        publisher.write(&mut tx, rows, &opt.id).await?;
    }
    tx.commit().await?;
    Ok(added)
}

/// When the worker runs a cycle (the Go build's rule, `standalone/loop.go`):
/// when something changed (a submission, a request, a timer fired) or,
/// with jobs waiting, a tick has passed since the last; but never sooner
/// than [`Cadence::MIN_GAP`] after the last, nor sooner than nine times
/// what the last took. A cycle looks at every waiting job and holds its
/// thread meanwhile: on a long queue this keeps the scheduler to a tenth
/// of the CPU, which the web server and PostgreSQL need too, and a burst
/// of submissions is scheduled in a few cycles, not one each.
struct Cadence {
    want: bool,
    last: Option<Instant>,
    took: Duration,
}

impl Cadence {
    const MIN_GAP: Duration = Duration::from_millis(100);

    fn new() -> Cadence {
        Cadence {
            want: true,
            last: None,
            took: Duration::ZERO,
        }
    }

    fn gap(&self) -> Duration {
        Self::MIN_GAP.max(self.took * 9)
    }

    /// Whether to cycle now; `pending` (whether any job waits) is asked
    /// only when it matters, since it looks at every job.
    fn due(&self, tick: Duration, pending: impl FnOnce() -> bool) -> bool {
        let Some(last) = self.last else {
            return true;
        };
        let since = last.elapsed();
        since >= self.gap() && (self.want || (since >= tick && pending()))
    }

    fn cycled(&mut self, began: Instant) {
        self.want = false;
        self.took = began.elapsed();
        self.last = Some(began);
    }

    /// How long until a wanted cycle may run.
    fn wanted_in(&self) -> Option<Duration> {
        let last = self.last?;
        self.want.then(|| self.gap().saturating_sub(last.elapsed()))
    }
}

/// Keeps PostgreSQL's statistics of `jobs` up to date while it grows fast.
/// The worker's reads are planned from them at each tick (see
/// `store::become_active`); without any, PostgreSQL takes a column such as
/// `cancel_requested_by` to be nearly never NULL and scans the whole table
/// for the rare cancel request, every tick. Autovacuum analyzes a table
/// at most once a minute (its default `autovacuum_naptime`), an age when
/// a burst of submissions grows `jobs` from nothing to tens of thousands
/// of rows; so the worker analyzes it itself each time the jobs it has
/// taken in since the last time outnumber those it knew then.
struct JobStats {
    known: usize,
    added: usize,
}

impl JobStats {
    /// The least growth worth an ANALYZE (it samples at most 30,000 rows,
    /// tens of milliseconds).
    const MIN_GROWTH: usize = 1000;

    fn new(known: usize) -> JobStats {
        JobStats { known, added: 0 }
    }

    async fn added(&mut self, conn: &mut PgConnection, n: usize) -> anyhow::Result<()> {
        self.added += n;
        if self.added < self.known.max(Self::MIN_GROWTH) {
            return Ok(());
        }
        store::analyze_jobs(conn).await?;
        self.known += self.added;
        self.added = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_engine::sched::{SECOND, Team};
    use partita_engine::workload::Class;

    /// Three 3g.40gb jobs whose specs all name their task "t0" (as the
    /// API stores them) run side by side on the demo cluster: the second
    /// and third start once their MIG changes are done, not after the
    /// first ends. (Until the worker named tasks per job, the cluster took
    /// the second "t0" on a node for the first and refused it.)
    #[test]
    fn jobs_whose_tasks_share_a_name_run_side_by_side() {
        let opt = Options::new(load_scenario(None).unwrap(), 60.0);
        let (mut w, _) = build_world(&opt, 0).unwrap();
        w.set_teams(vec![Team {
            name: "research".into(),
            guarantee: 8000,
            burst: 48000,
            weight: 1.0,
        }]);
        for k in 0..3i64 {
            let spec: spec::JobSpec = serde_json::from_value(serde_json::json!({
                "tasks": [{"Name": "t0", "CPUMilli": 1000, "MemoryMiB": 1024,
                    "GPU": {"Kind": 2, "Count": 0, "Milli": 0, "Profile": "3g.40gb",
                            "PeakMemoryMiB": 0, "Compute": 0, "Models": null}}],
                "duration": 1800 * SECOND,
            }))
            .unwrap();
            w.add(world::JobRecord {
                seq: k + 1,
                id: format!("job-{k}"),
                team: "research".into(),
                team_id: 1,
                project: "default".into(),
                project_id: 1,
                user_id: 1,
                class: Class::Batch,
                state: world::QUEUED.into(),
                reason: String::new(),
                spec,
                submitted: 0,
                queue_key: 0,
                started: None,
                attempts: 0,
                runtime: spec::Runtime::default(),
                cluster_job: None,
            });
        }
        let mut running_at = std::collections::BTreeMap::new();
        for s in 1..=120 {
            w.advance(s * SECOND);
            w.cycle();
            for e in w.take_changes().events {
                if e.state == world::RUNNING {
                    running_at.entry(e.job_seq).or_insert(e.at / SECOND);
                }
            }
        }
        assert_eq!(running_at.len(), 3, "running by 120 s: {running_at:?}");
        assert!(
            running_at.values().all(|&at| at < 1800),
            "a job waited for another to end: {running_at:?}"
        );
    }
}
