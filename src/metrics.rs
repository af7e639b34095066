//! Prometheus metrics under the Go build's names
//! (`go/internal/server/metrics.go`), on a registry of their own (no
//! global recorder, so tests run side by side).
//!
//! The worker may run in another process than the web server, so each
//! process exposes only what it knows:
//!
//! - **The web server** counts what passes through it: API requests by
//!   route and status (`partita_api_requests_total`), their latency
//!   (`partita_api_request_seconds`) and accepted submissions by team
//!   (`partita_jobs_submitted_total`).
//! - **The worker's events** (`partita_jobs_started_total`,
//!   `partita_jobs_finished_total`, `partita_preemptions_total`,
//!   `partita_mig_reconfigurations_total`, `partita_job_wait_seconds`,
//!   `partita_scheduler_cycle_seconds`) are registered only in a process
//!   that runs the worker (`partita serve` without `--no-worker`): a web
//!   server apart from the worker never sees them happen, and a counter
//!   that stays at 0 there would be a lie.
//! - **The gauges of the world** (`partita_gpus`, `partita_gpu_utilization`,
//!   `partita_queue_depth`, `partita_team_gpus`, `partita_jobs_running`)
//!   are read at scrape time from the view the worker last published to
//!   PostgreSQL (`server::views`), so every web server shows them, at most
//!   about a second old; none before a worker published one.
//!
//! The Go build's `go_*` and `process_*` collectors have no counterpart.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `Content-Type` of what `encode` writes (the Prometheus text format
/// 0.0.4, as the Go build's promhttp serves by default).
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

type Labels = Vec<(&'static str, String)>;
type F64Gauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The metrics of one process.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    submissions: Family<Labels, Counter>,
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram>,
    worker: Option<Arc<WorkerMetrics>>,
}

impl Metrics {
    /// The web server's metrics; with `worker`, also the worker's (the
    /// worker in this process records them).
    pub fn new(worker: bool) -> Metrics {
        let mut registry = Registry::default();
        let submissions = Family::<Labels, Counter>::default();
        registry.register(
            "partita_jobs_submitted",
            "Jobs accepted, by team",
            submissions.clone(),
        );
        let requests = Family::<Labels, Counter>::default();
        registry.register(
            "partita_api_requests",
            "API requests by route and status code",
            requests.clone(),
        );
        let latency = Family::<Labels, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.0005, 2.0, 14))) as fn() -> Histogram,
        );
        registry.register(
            "partita_api_request_seconds",
            "API request latency by route",
            latency.clone(),
        );
        let worker = worker.then(|| Arc::new(WorkerMetrics::register(&mut registry)));
        Metrics {
            registry,
            submissions,
            requests,
            latency,
            worker,
        }
    }

    /// What the worker of this process records into, if it runs here.
    pub fn worker(&self) -> Option<Arc<WorkerMetrics>> {
        self.worker.clone()
    }

    /// A job accepted for `team`.
    pub fn submitted(&self, team: &str) {
        self.submissions
            .get_or_create(&vec![("team", team.to_string())])
            .inc();
    }

    /// One API request. `route` is the route's pattern ("GET
    /// /api/v1/jobs/{id}", as Go's mux names it), never the concrete path,
    /// so that the label set stays bounded.
    pub fn request(&self, route: &str, code: u16, took: Duration) {
        self.requests
            .get_or_create(&vec![
                ("route", route.to_string()),
                ("code", code.to_string()),
            ])
            .inc();
        self.latency
            .get_or_create(&vec![("route", route.to_string())])
            .observe(took.as_secs_f64());
    }

    /// The text of every metric: this process's counters and histograms,
    /// then `gauges` (read from the published view; none without one).
    pub fn encode(&self, gauges: Option<&Gauges>) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        if let Some(g) = gauges {
            let _ = prometheus_text::encode(&mut out, &g.registry());
        }
        out
    }
}

/// What the worker counts: the Go build's Observer.
#[derive(Debug)]
pub struct WorkerMetrics {
    started: Family<Labels, Counter>,
    finished: Family<Labels, Counter>,
    preemptions: Family<Labels, Counter>,
    reconfigs: Counter,
    wait: Family<Labels, Histogram>,
    cycle: Histogram,
}

impl WorkerMetrics {
    fn register(r: &mut Registry) -> WorkerMetrics {
        let m = WorkerMetrics {
            started: Family::default(),
            finished: Family::default(),
            preemptions: Family::default(),
            reconfigs: Counter::default(),
            wait: Family::new_with_constructor(
                (|| Histogram::new(exponential_buckets(1.0, 4.0, 10))) as fn() -> Histogram,
            ),
            cycle: Histogram::new(exponential_buckets(0.0001, 4.0, 10)),
        };
        r.register(
            "partita_jobs_started",
            "Jobs that got all their resources, by team and class",
            m.started.clone(),
        );
        r.register(
            "partita_jobs_finished",
            "Jobs finished, by team, class and final state",
            m.finished.clone(),
        );
        r.register(
            "partita_preemptions",
            "Preemptions, by the victim's team and class",
            m.preemptions.clone(),
        );
        r.register(
            "partita_mig_reconfigurations",
            "MIG layout changes and instance creations",
            m.reconfigs.clone(),
        );
        r.register(
            "partita_job_wait_seconds",
            "Queue wait before a job got all its resources, in cluster seconds, by team and class",
            m.wait.clone(),
        );
        r.register(
            "partita_scheduler_cycle_seconds",
            "Wall time of one scheduling cycle",
            m.cycle.clone(),
        );
        m
    }

    fn team_class(team: &str, class: &str) -> Labels {
        vec![("team", team.to_string()), ("class", class.to_string())]
    }

    /// A job got all its resources after waiting `wait_s` cluster seconds.
    pub fn started(&self, team: &str, class: &str, wait_s: f64) {
        let l = Self::team_class(team, class);
        self.started.get_or_create(&l).inc();
        self.wait.get_or_create(&l).observe(wait_s);
    }

    pub fn finished(&self, team: &str, class: &str, state: &str) {
        let mut l = Self::team_class(team, class);
        l.push(("state", state.to_string()));
        self.finished.get_or_create(&l).inc();
    }

    pub fn preempted(&self, team: &str, class: &str) {
        self.preemptions
            .get_or_create(&Self::team_class(team, class))
            .inc();
    }

    pub fn reconfigured(&self) {
        self.reconfigs.inc();
    }

    pub fn cycle(&self, took: Duration) {
        self.cycle.observe(took.as_secs_f64());
    }
}

/// The gauges of the world, as the worker's published view says.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Gauges {
    pub gpus: i64,
    /// Shares of all GPUs.
    pub allocated: f64,
    pub useful: f64,
    pub running_jobs: i64,
    /// Queued jobs by team and class.
    pub queued: Vec<(String, String, i64)>,
    /// GPUs each team holds (a MIG slice counts its compute share).
    pub held: Vec<(String, f64)>,
}

impl Gauges {
    fn registry(&self) -> Registry {
        let mut r = Registry::default();
        let gpus = Gauge::<i64>::default();
        gpus.set(self.gpus);
        r.register("partita_gpus", "GPUs in the cluster", gpus);
        let util = Family::<Labels, F64Gauge>::default();
        util.get_or_create(&vec![("kind", "allocated".into())])
            .set(self.allocated);
        util.get_or_create(&vec![("kind", "useful".into())])
            .set(self.useful);
        r.register(
            "partita_gpu_utilization",
            "Share of the cluster's GPUs allocated (held) and useful (needed by running tasks)",
            util,
        );
        let queue = Family::<Labels, Gauge>::default();
        for (team, class, n) in &self.queued {
            queue
                .get_or_create(&vec![("team", team.clone()), ("class", class.clone())])
                .set(*n);
        }
        r.register(
            "partita_queue_depth",
            "Queued jobs by team and class",
            queue,
        );
        let held = Family::<Labels, F64Gauge>::default();
        for (team, gpus) in &self.held {
            held.get_or_create(&vec![("team", team.clone())]).set(*gpus);
        }
        r.register(
            "partita_team_gpus",
            "GPUs a team holds (a MIG slice counts its compute share)",
            held,
        );
        let running = Gauge::<i64>::default();
        running.set(self.running_jobs);
        r.register("partita_jobs_running", "Jobs whose tasks all run", running);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_go_builds() {
        let m = Metrics::new(true);
        m.submitted("search");
        m.request("GET /api/v1/jobs", 200, Duration::from_millis(3));
        let w = m.worker().unwrap();
        w.started("search", "batch", 30.0);
        w.cycle(Duration::from_micros(300));
        let text = m.encode(Some(&Gauges {
            gpus: 48,
            queued: vec![("search".into(), "batch".into(), 2)],
            ..Gauges::default()
        }));
        for want in [
            "partita_jobs_submitted_total{team=\"search\"} 1",
            "partita_api_requests_total{route=\"GET /api/v1/jobs\",code=\"200\"} 1",
            "partita_api_request_seconds_bucket{",
            "partita_jobs_started_total{team=\"search\",class=\"batch\"} 1",
            "partita_scheduler_cycle_seconds_count 1",
            "partita_gpus 48",
            "partita_queue_depth{team=\"search\",class=\"batch\"} 2",
        ] {
            assert!(text.contains(want), "no {want:?} in\n{text}");
        }
        let web = Metrics::new(false).encode(None);
        assert!(!web.contains("partita_jobs_started"), "{web}");
    }
}
