//! The Kubernetes scheduler's Prometheus metrics, under the Go build's
//! names (go/internal/kube/metrics.go), on a registry of their own.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `Content-Type` of what [`Metrics::encode`] writes.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

type ResultLabel = Vec<(&'static str, &'static str)>;

/// The scheduler's metrics; `registry` is what /metrics serves.
#[derive(Debug)]
pub struct Metrics {
    pub registry: Registry,
    pub cycles: Counter,
    pub cycle_seconds: Histogram,
    pub engine_seconds: Histogram,
    binds: Family<ResultLabel, Counter>,
    evictions: Family<ResultLabel, Counter>,
    mig_changes: Family<ResultLabel, Counter>,
    pub pending_pods: Gauge,
    pub leader: Gauge,
    /// Events the recorder could not deliver, by why (beyond the Go
    /// build: it dropped them without a word).
    events: Family<ResultLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        // 1 ms .. 33 s, as the Go build's.
        let histogram = || Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let m = Metrics {
            cycles: Counter::default(),
            cycle_seconds: histogram(),
            engine_seconds: histogram(),
            binds: Family::default(),
            evictions: Family::default(),
            mig_changes: Family::default(),
            pending_pods: Gauge::default(),
            leader: Gauge::default(),
            events: Family::default(),
            registry: Registry::default(),
        };
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "partita_kube_cycles",
            "Scheduling cycles run.",
            m.cycles.clone(),
        );
        registry.register(
            "partita_kube_cycle_seconds",
            "Time of a whole cycle: snapshot, engine, binds, evictions, MIG changes.",
            m.cycle_seconds.clone(),
        );
        registry.register(
            "partita_kube_engine_seconds",
            "Time the engine took to decide, per cycle.",
            m.engine_seconds.clone(),
        );
        registry.register(
            "partita_kube_binds",
            "Binds through pods/binding, by result.",
            m.binds.clone(),
        );
        registry.register(
            "partita_kube_evictions",
            "Evictions through the Eviction API, by result.",
            m.evictions.clone(),
        );
        registry.register(
            "partita_kube_mig_changes",
            "MIG layout changes asked of the MIG manager, by result (ok, declined, invalid, error).",
            m.mig_changes.clone(),
        );
        registry.register(
            "partita_kube_pending_pods",
            "Pods waiting to be scheduled, after the last cycle.",
            m.pending_pods.clone(),
        );
        registry.register(
            "partita_kube_leader",
            "1 while this replica holds the leader lease.",
            m.leader.clone(),
        );
        registry.register(
            "partita_kube_events",
            "Events written to the API server, by result (written, aggregated, failed).",
            m.events.clone(),
        );
        Metrics { registry, ..m }
    }

    pub fn bind(&self, result: &'static str) {
        self.binds.get_or_create(&vec![("result", result)]).inc();
    }

    pub fn eviction(&self, result: &'static str) {
        self.evictions
            .get_or_create(&vec![("result", result)])
            .inc();
    }

    pub fn mig_change(&self, result: &'static str) {
        self.mig_changes
            .get_or_create(&vec![("result", result)])
            .inc();
    }

    pub fn event(&self, result: &'static str) {
        self.events.get_or_create(&vec![("result", result)]).inc();
    }

    /// `n` events at once with the same result (an aggregated series).
    pub fn events(&self, result: &'static str, n: u64) {
        self.events
            .get_or_create(&vec![("result", result)])
            .inc_by(n);
    }

    /// The count of events with `result` so far (for tests and logs).
    pub fn events_total(&self, result: &'static str) -> u64 {
        self.events.get_or_create(&vec![("result", result)]).get()
    }

    /// The Prometheus text format (0.0.4, as the Go build's promhttp
    /// serves by default) of every metric; its Content-Type is
    /// [`CONTENT_TYPE`].
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_go_builds() {
        let m = Metrics::new();
        m.cycles.inc();
        m.bind("ok");
        m.eviction("error");
        m.mig_change("declined");
        let text = m.encode();
        for name in [
            "partita_kube_cycles_total 1",
            "partita_kube_cycle_seconds_bucket",
            "partita_kube_engine_seconds_count",
            "partita_kube_binds_total{result=\"ok\"} 1",
            "partita_kube_evictions_total{result=\"error\"} 1",
            "partita_kube_mig_changes_total{result=\"declined\"} 1",
            "partita_kube_pending_pods 0",
            "partita_kube_leader 0",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
    }
}
