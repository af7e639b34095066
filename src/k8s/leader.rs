//! Leader election on a coordination.k8s.io/v1 Lease: a port of what the
//! Go build takes from client-go (go/internal/kube/run.go `lead`, with
//! client-go's `leaderelection` and `resourcelock.LeaseLock`), with the
//! same semantics and timings.
//!
//! A candidate reads the Lease every retry period. It takes the Lease when
//! there is none, when its holder is empty (released), or when the record
//! has not changed for `leaseDurationSeconds` as this candidate observed it
//! (its own clock, never the holder's timestamps: clocks differ). Writes
//! carry the resourceVersion read, so of two candidates one wins and the
//! other gets a conflict. The leader renews every retry period; a renewal
//! that has not succeeded within the renew deadline loses the lease. On
//! shutdown the leader releases the Lease (empty holder, 1 s duration) so
//! that another replica takes it at once.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use super::metrics::Metrics;

/// client-go's recommended lease duration (as kube-scheduler's).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long the leader keeps trying to renew before it gives up.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often candidates try to acquire and the leader renews.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// client-go's jitter of the acquire loop: a wait of retry × (1 + 1.2 × rand).
const JITTER_FACTOR: f64 = 1.2;
/// How long past the lease the health check tolerates a leader that has
/// not renewed (the Go build's `NewLeaderHealthzAdaptor(20 * time.Second)`).
pub const WATCHDOG_TOLERANCE: Duration = Duration::from_secs(20);

/// Which Lease, who we are, and the timings.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// client-go's timings: lease 15 s, renew deadline 10 s, retry 2 s.
    pub fn new(namespace: &str, name: &str, identity: &str) -> LeaseConfig {
        LeaseConfig {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            lease_duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY_PERIOD,
        }
    }
}

/// The identity the Go build uses when none is given: the host name and a
/// random suffix, so two processes on one host differ.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "partita".to_string());
    format!("{host}_{:016x}", rand::random::<u64>())
}

/// Why `lead` returned without a release: the lease was lost.
#[derive(Debug, thiserror::Error)]
#[error("lost the leader lease {namespace}/{name}: {reason}")]
pub struct LostLease {
    pub namespace: String,
    pub name: String,
    pub reason: String,
}

/// What the health endpoint asks: is this replica, if it leads, still
/// renewing? Cheap to clone; shared between `lead` and the HTTP server.
#[derive(Debug, Clone)]
pub struct Watchdog {
    inner: Arc<Mutex<WatchState>>,
    tolerance: Duration,
}

#[derive(Debug, Default)]
struct WatchState {
    name: String,
    leading: bool,
    lease_duration: Duration,
    last_renewal: Option<Instant>,
}

impl Default for Watchdog {
    fn default() -> Watchdog {
        Watchdog::new(WATCHDOG_TOLERANCE)
    }
}

impl Watchdog {
    pub fn new(tolerance: Duration) -> Watchdog {
        Watchdog {
            inner: Arc::default(),
            tolerance,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, WatchState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// client-go's `LeaderElector.Check`: healthy unless leading and the
    /// last renewal is older than the lease duration plus the tolerance (a
    /// leader that should have stepped down but is stuck, say deadlocked).
    pub fn check(&self) -> Result<(), String> {
        let state = self.state();
        if !state.leading {
            return Ok(());
        }
        let stale = state
            .last_renewal
            .is_none_or(|t| t.elapsed() > state.lease_duration + self.tolerance);
        if stale {
            return Err(format!(
                "failed election to renew leadership on lease {}",
                state.name
            ));
        }
        Ok(())
    }

    /// Whether this replica holds the lease now.
    pub fn leading(&self) -> bool {
        self.state().leading
    }

    pub(crate) fn renewed(&self, config: &LeaseConfig) {
        let mut state = self.state();
        state.name = config.name.clone();
        state.lease_duration = config.lease_duration;
        state.leading = true;
        state.last_renewal = Some(Instant::now());
    }

    fn stopped(&self) {
        self.state().leading = false;
    }
}

/// Runs `work` only while holding the Lease. Returns Ok(Some(output))
/// when `work` finished (the lease is then released), Ok(None) when
/// `shutdown` came first (released too, if held), and Err when the lease
/// was lost: `work` is then dropped mid-way, and the caller should exit as
/// kube-scheduler does (its Deployment restarts it).
pub async fn lead<F, Fut, T>(
    client: kube::Client,
    config: &LeaseConfig,
    metrics: &Metrics,
    watchdog: &Watchdog,
    shutdown: impl Future<Output = ()>,
    work: F,
) -> Result<Option<T>, LostLease>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let mut elector = Elector::new(client, config.clone());
    tokio::pin!(shutdown);
    let acquired = tokio::select! {
        _ = &mut shutdown => false,
        () = elector.acquire() => true,
    };
    if !acquired {
        // A shutdown just as a try succeeded must not leave the lease held
        // for its whole duration.
        elector.release().await;
        return Ok(None);
    }
    metrics.leader.set(1);
    watchdog.renewed(config);
    tracing::info!(identity = %config.identity, lease = %config.name, "leading");
    let work = work();
    tokio::pin!(work);
    let result = tokio::select! {
        output = &mut work => Ok(Some(output)),
        _ = &mut shutdown => Ok(None),
        reason = elector.keep_renewing(watchdog) => Err(LostLease {
            namespace: config.namespace.clone(),
            name: config.name.clone(),
            reason,
        }),
    };
    metrics.leader.set(0);
    watchdog.stopped();
    if result.is_ok() {
        elector.release().await;
    }
    result
}

/// The fields of a Lease that election reads and writes (client-go's
/// `LeaderElectionRecord`).
#[derive(Debug, Clone, PartialEq)]
struct Record {
    holder: String,
    lease_duration_seconds: i32,
    acquire_time: Option<Timestamp>,
    renew_time: Option<Timestamp>,
    transitions: i32,
}

impl Record {
    fn of(lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    fn spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.transitions),
            ..LeaseSpec::default()
        }
    }
}

/// One candidate's view of the Lease (client-go's `LeaderElector`).
struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The Lease as last read or written, for its resourceVersion.
    lease: Option<Lease>,
    /// The record last seen and when it was first seen (our clock).
    observed: Option<(Record, Instant)>,
}

impl Elector {
    fn new(client: kube::Client, config: LeaseConfig) -> Elector {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            lease: None,
            observed: None,
        }
    }

    fn observe(&mut self, lease: Lease) {
        let record = Record::of(&lease);
        if self.observed.as_ref().is_none_or(|(r, _)| *r != record) {
            self.observed = Some((record, Instant::now()));
        }
        self.lease = Some(lease);
    }

    fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|(r, _)| r.holder == self.config.identity)
    }

    /// Whether the observed holder's lease still runs, by our clock.
    fn lease_valid(&self) -> bool {
        self.observed.as_ref().is_some_and(|(r, seen)| {
            let secs = u64::try_from(r.lease_duration_seconds).unwrap_or(0);
            seen.elapsed() < Duration::from_secs(secs)
        })
    }

    /// One try (client-go's `tryAcquireOrRenew`): true when this
    /// candidate holds the lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, String> {
        let now = Timestamp::now();
        let duration = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let mut desired = Record {
            holder: self.config.identity.clone(),
            lease_duration_seconds: duration,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 0,
        };
        let current = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| format!("reading lease {}: {e}", self.config.name))?;
        let Some(current) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(desired.spec()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created);
                    Ok(true)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(format!("creating lease {}: {e}", self.config.name)),
            };
        };
        let record = Record::of(&current);
        self.observe(current.clone());
        if !record.holder.is_empty() && record.holder != self.config.identity && self.lease_valid()
        {
            return Ok(false);
        }
        if record.holder == self.config.identity {
            desired.acquire_time = record.acquire_time;
            desired.transitions = record.transitions;
        } else {
            desired.transitions = record.transitions + 1;
        }
        let mut lease = current;
        lease.spec = Some(desired.spec());
        self.write(lease).await
    }

    /// Replaces the Lease, resourceVersion and all: a conflict means
    /// someone else wrote it first.
    async fn write(&mut self, lease: Lease) -> Result<bool, String> {
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(written);
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(format!("updating lease {}: {e}", self.config.name)),
        }
    }

    /// Tries every retry period, with client-go's jitter, until acquired.
    async fn acquire(&mut self) {
        loop {
            match tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew())
                .await
            {
                Ok(Ok(true)) => return,
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "acquiring the leader lease"),
                Err(_) => tracing::warn!("acquiring the leader lease: timed out"),
            }
            let jitter = 1.0 + JITTER_FACTOR * rand::random::<f64>();
            tokio::time::sleep(self.config.retry_period.mul_f64(jitter)).await;
        }
    }

    /// Renews every retry period; returns why when a renewal has not
    /// succeeded within the renew deadline (client-go's `renew`).
    async fn keep_renewing(&mut self, watchdog: &Watchdog) -> String {
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let deadline = Instant::now() + self.config.renew_deadline;
            let mut last = String::from("no renewal succeeded");
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                    Ok(Ok(true)) => break,
                    Ok(Ok(false)) => last = "another holder took the lease".to_string(),
                    Ok(Err(e)) => last = e,
                    Err(_) => {}
                }
                if Instant::now() + self.config.retry_period >= deadline {
                    return format!(
                        "not renewed within {:?}: {last}",
                        self.config.renew_deadline
                    );
                }
                tokio::time::sleep(self.config.retry_period).await;
            }
            watchdog.renewed(&self.config);
        }
    }

    /// Gives the lease up for another replica to take at once: an empty
    /// holder with a 1 s duration (client-go's `release`).
    async fn release(&mut self) {
        if !self.is_leader() {
            return;
        }
        let Some(mut lease) = self.lease.clone() else {
            return;
        };
        let transitions = self.observed.as_ref().map_or(0, |(r, _)| r.transitions);
        let now = Timestamp::now();
        lease.spec = Some(
            Record {
                holder: String::new(),
                lease_duration_seconds: 1,
                acquire_time: Some(now),
                renew_time: Some(now),
                transitions,
            }
            .spec(),
        );
        match tokio::time::timeout(self.config.renew_deadline, self.write(lease)).await {
            Ok(Ok(true)) => tracing::info!(lease = %self.config.name, "released the leader lease"),
            Ok(Ok(false)) => {
                tracing::warn!(lease = %self.config.name, "releasing: another holder wrote the lease")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "releasing the leader lease"),
            Err(_) => tracing::warn!("releasing the leader lease: timed out"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timings_are_client_gos() {
        let c = LeaseConfig::new("partita-system", "partita-scheduler", "a");
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
    }

    #[test]
    fn identities_differ_on_one_host() {
        assert_ne!(default_identity(), default_identity());
    }

    #[tokio::test(start_paused = true)]
    async fn the_watchdog_fails_a_leader_that_stopped_renewing() {
        let w = Watchdog::default();
        assert!(w.check().is_ok(), "not leading is healthy");
        let c = LeaseConfig::new("ns", "lease", "a");
        w.renewed(&c);
        tokio::time::advance(Duration::from_secs(34)).await;
        assert!(w.check().is_ok());
        tokio::time::advance(Duration::from_secs(2)).await;
        let err = w.check().unwrap_err();
        assert!(err.contains("lease"), "{err}");
        w.stopped();
        assert!(w.check().is_ok(), "a replica that stepped down is healthy");
    }
}
