//! Events on pods ("Scheduled", "FailedScheduling", "Preempting"), written
//! with a budget of their own so that they never slow binds, and
//! aggregated rather than dropped (issue 48, item 6: the Go build's
//! recorder shared the bind client's rate limit and lost most `Scheduled`
//! events of a burst).
//!
//! A port of what the Go build took from client-go's record.EventBroadcaster
//! (go/internal/kube/scheduler.go), written instead as kube-scheduler does
//! today: events.k8s.io/v1 Events (client-go's tools/events). That API is
//! the one with a documented aggregation, `series` (count and last time
//! observed), which is how repeats of one (pod, reason, note) become one
//! Event; `kubectl describe pod` shows them all the same, since core/v1
//! Events are a view of the same objects.
//!
//! `record` only puts the event in a bounded map in memory, folding it into
//! an entry of the same (pod, type, reason, note) when there is one, and
//! wakes the writer: it never blocks on the API. The writer takes all that
//! is pending, waits for a token of its own bucket before each write (its
//! `qps`/`burst` are not the binds'), and creates an Event, or patches the
//! series of the one it wrote for the same key in the last 6 minutes
//! (client-go's window). Every record ends in exactly one of the counts
//! of `partita_kube_events_total`: written (the first of an Event),
//! aggregated (folded into a series), failed (could not be written, or no
//! room in memory).
//!
//! While the scheduler binds (`Events::binding`), the writer waits:
//! Events then do not compete with binds for the API server, and are
//! written in the gap after the burst (the Rust build writes every
//! `Scheduled` Event, about four times the Go build's writes in a
//! 5,000-pod burst, which cost binds on a small API server). Binding
//! without a gap for `MAX_HOLD` lets them through until the next gap:
//! held longer, a long burst's Events would all wait for its end.
//!
//! `record_waiting` also sets the pod's `PodScheduled` condition to False,
//! reason `Unschedulable`, with the same words, as kube-scheduler does:
//! `kubectl get pod` shows it, autoscalers look for it, and it outlives
//! the Event (Events expire after an hour), so the worker reads it back
//! for the portal's queue (`crate::k8s::waiting`). It goes with the
//! Event, after a token of the same bucket.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use super::client::TokenBucket;
use super::metrics::Metrics;

/// The most distinct (pod, type, reason, note) waiting to be written; a
/// record past it is counted failed at once. Repeats of a waiting key take
/// no room.
pub const MAX_PENDING: usize = 50_000;
/// The most Events remembered for their series.
const MAX_SERIES: usize = 20_000;
/// How long an Event takes repeats into its series (client-go's 6 min).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Writes in flight at once (each still waits for its token).
const WRITERS: usize = 8;
/// Tries of a write that failed for a reason that may pass (a timeout, a
/// 5xx, 429).
const TRIES: u32 = 3;
/// The API server refuses a note over 1 kB.
const MAX_NOTE: usize = 1024;
/// The longest the writer holds back while binds are in flight without
/// a gap: about the binds of a 5,000-pod burst with no rate limit on two
/// cores (3 to 4 s), well short of those at 500 QPS (10 s), where the
/// binds' own rate limit, not the API server, is what holds them (held
/// 5 s there, 11 to 27 of 5,000 Events came after the benchmark's 5-s
/// settle).
const MAX_HOLD: Duration = Duration::from_secs(3);

/// The event type: Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// A handle to the recorder; cheap to clone. `record` never blocks and
/// never makes an API call itself.
#[derive(Debug, Clone)]
pub struct Events {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the writer: something is pending, or the recorder closed.
    wake: Notify,
    /// Wakes `flush`: nothing pending, nothing in flight.
    idle: Notify,
    metrics: Arc<Metrics>,
    /// Binds in flight (`Binding` guards alive), and what wakes the writer
    /// when they end.
    binding: AtomicUsize,
    bound: Notify,
}

/// Holds the Events back while alive (see `Events::binding`).
#[derive(Debug)]
pub struct Binding {
    shared: Arc<Shared>,
}

impl Drop for Binding {
    fn drop(&mut self) {
        if self.shared.binding.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.bound.notify_waiters();
        }
    }
}

#[derive(Debug, Default)]
struct State {
    pending: HashMap<Key, Pending>,
    /// The pending keys in the order they came.
    order: VecDeque<Key>,
    /// Entries taken by the writer and not yet written or failed.
    in_flight: usize,
    closed: bool,
}

/// What makes two records the same Event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    name: String,
    uid: String,
    kind: EventType,
    reason: String,
    note: String,
}

#[derive(Debug, Clone)]
struct Pending {
    count: u32,
    /// Set the pod's PodScheduled condition too, unless the pod has
    /// changed since this resourceVersion (it may have been bound).
    condition: Option<String>,
}

/// An Event written, for its series.
#[derive(Debug, Clone)]
struct Written {
    name: String,
    count: i32,
    at: Instant,
}

impl Events {
    /// Starts the writer on the current runtime. `component` names the
    /// reporting controller ("partita-scheduler"); `qps`/`burst` are the
    /// events' own budget. Give it a client whose own rate limit is not the
    /// binds' (another `client::build`), or events still queue behind binds.
    pub fn start(
        client: kube::Client,
        component: &str,
        qps: f64,
        burst: u32,
        metrics: Arc<Metrics>,
    ) -> (Events, JoinHandle<()>) {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            wake: Notify::new(),
            idle: Notify::new(),
            metrics,
            binding: AtomicUsize::new(0),
            bound: Notify::new(),
        });
        let writer = Writer {
            client,
            controller: component.to_string(),
            instance: format!("{component}-{}", hostname()),
            bucket: TokenBucket::new(qps, burst),
            series: HashMap::new(),
            series_order: VecDeque::new(),
            held_since: None,
        };
        let task = tokio::spawn(writer.run(shared.clone()));
        (Events { shared }, task)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an event on `pod`: `reason` is a CamelCase word
    /// ("Scheduled"), `note` the human text.
    pub fn record(&self, pod: &Pod, kind: EventType, reason: &str, note: &str) {
        self.add(pod, kind, reason, note, None);
    }

    /// Records why `pod` waits (a Warning, FailedScheduling) and sets its
    /// PodScheduled condition to say the same.
    pub fn record_waiting(&self, pod: &Pod, note: &str) {
        let version = pod.metadata.resource_version.clone().unwrap_or_default();
        self.add(
            pod,
            EventType::Warning,
            "FailedScheduling",
            note,
            Some(version),
        );
    }

    fn add(&self, pod: &Pod, kind: EventType, reason: &str, note: &str, condition: Option<String>) {
        let metrics = &self.shared.metrics;
        let Some(name) = pod.metadata.name.clone() else {
            tracing::warn!(reason, "an event on a pod without a name: not written");
            metrics.event("failed");
            return;
        };
        let key = Key {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name,
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            kind,
            reason: reason.to_string(),
            note: truncate(note, MAX_NOTE),
        };
        let mut state = self.state();
        if state.closed {
            drop(state);
            tracing::warn!(pod = %key.name, reason, "an event after the recorder closed: not written");
            metrics.event("failed");
            return;
        }
        if let Some(p) = state.pending.get_mut(&key) {
            p.count = p.count.saturating_add(1);
            if condition.is_some() {
                p.condition = condition;
            }
        } else if state.pending.len() >= MAX_PENDING {
            drop(state);
            tracing::warn!(pod = %key.name, reason, "too many events waiting: not written");
            metrics.event("failed");
            return;
        } else {
            state.order.push_back(key.clone());
            state.pending.insert(
                key,
                Pending {
                    count: 1,
                    condition,
                },
            );
        }
        drop(state);
        self.shared.wake.notify_one();
    }

    /// Binds are in flight until the guard is dropped: the writer waits
    /// (see `MAX_HOLD`) so that Events do not slow them.
    pub fn binding(&self) -> Binding {
        self.shared.binding.fetch_add(1, Ordering::AcqRel);
        Binding {
            shared: self.shared.clone(),
        }
    }

    /// Waits until every event recorded so far has been written (or
    /// counted failed).
    pub async fn flush(&self) {
        loop {
            let idle = self.shared.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            {
                let state = self.state();
                if state.pending.is_empty() && state.in_flight == 0 {
                    return;
                }
            }
            idle.await;
        }
    }

    /// Stops taking events and writes what is pending, for at most
    /// `within`; what is still pending then is counted failed. Await the
    /// writer's JoinHandle afterwards to let a write in flight finish.
    pub async fn shutdown(&self, within: Duration) {
        self.state().closed = true;
        self.shared.wake.notify_one();
        if tokio::time::timeout(within, self.flush()).await.is_ok() {
            return;
        }
        let mut state = self.state();
        let lost: u64 = state.pending.values().map(|p| u64::from(p.count)).sum();
        state.pending.clear();
        state.order.clear();
        drop(state);
        tracing::warn!(events = lost, "shutting down: events not written in time");
        self.shared.metrics.events("failed", lost);
        self.shared.wake.notify_one();
    }
}

/// The background task that writes Events.
struct Writer {
    client: kube::Client,
    controller: String,
    instance: String,
    bucket: TokenBucket,
    /// Events written lately, for their series; bounded, oldest out first.
    series: HashMap<Key, Written>,
    series_order: VecDeque<Key>,
    /// Since when binds without a gap have held the writer back.
    held_since: Option<Instant>,
}

/// Takes all that is pending, in the order it came, as in flight.
fn take_pending(shared: &Shared) -> Vec<(Key, Pending)> {
    let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    let keys: Vec<Key> = state.order.drain(..).collect();
    let mut batch = Vec::with_capacity(keys.len());
    for key in keys {
        if let Some(p) = state.pending.remove(&key) {
            batch.push((key, p));
        }
    }
    state.in_flight = batch.len();
    batch
}

/// The outcome of one write.
enum Outcome {
    /// A new Event holding `count` records.
    Created(Written),
    /// `count` more records in the series of an Event.
    Patched(Written, u32),
    Failed(String),
}

impl Writer {
    async fn run(mut self, shared: Arc<Shared>) {
        loop {
            let batch = take_pending(&shared);
            if batch.is_empty() {
                let closed = shared
                    .state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .closed;
                shared.idle.notify_waiters();
                if closed {
                    return;
                }
                shared.wake.notified().await;
                continue;
            }
            self.write_batch(batch, &shared).await;
            shared
                .state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .in_flight = 0;
        }
    }

    /// Writes a batch of distinct keys, a few at a time, each after a token.
    async fn write_batch(&mut self, batch: Vec<(Key, Pending)>, shared: &Shared) {
        let metrics = &shared.metrics;
        let mut tasks = JoinSet::new();
        let account = |writer: &mut Writer, key: Key, pending: Pending, outcome: Outcome| {
            match outcome {
                Outcome::Created(w) => {
                    metrics.event("written");
                    metrics.events("aggregated", u64::from(pending.count - 1));
                    writer.remember(key, w);
                }
                Outcome::Patched(w, n) => {
                    metrics.events("aggregated", u64::from(n));
                    writer.remember(key, w);
                }
                Outcome::Failed(why) => {
                    tracing::warn!(pod = %key.name, namespace = %key.namespace, reason = %key.reason,
                        events = pending.count, error = %why, "an event could not be written");
                    metrics.events("failed", u64::from(pending.count));
                }
            }
        };
        for (key, pending) in batch {
            self.bucket.acquire().await;
            wait_for_binds(shared, &mut self.held_since).await;
            while tasks.len() >= WRITERS {
                if let Some(Ok((k, p, o))) = tasks.join_next().await {
                    account(self, k, p, o);
                }
            }
            let previous = self
                .series
                .get(&key)
                .filter(|w| w.at.elapsed() < SERIES_WINDOW)
                .cloned();
            let api: Api<Event> = Api::namespaced(self.client.clone(), &key.namespace);
            let (controller, instance) = (self.controller.clone(), self.instance.clone());
            if pending.condition.is_some() {
                self.bucket.acquire().await;
            }
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
            tasks.spawn(async move {
                let outcome =
                    write(&api, &key, pending.count, previous, &controller, &instance).await;
                if let Some(version) = &pending.condition {
                    set_unschedulable(&pods, &key.name, version, &key.note).await;
                }
                (key, pending, outcome)
            });
        }
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((k, p, o)) => account(self, k, p, o),
                // A write that panicked: its records are lost, say so.
                Err(e) => {
                    tracing::error!(error = %e, "an event writer failed");
                    metrics.event("failed");
                }
            }
        }
    }

    fn remember(&mut self, key: Key, written: Written) {
        if self.series.insert(key.clone(), written).is_none() {
            self.series_order.push_back(key);
        }
        while self.series.len() > MAX_SERIES {
            match self.series_order.pop_front() {
                Some(old) => {
                    self.series.remove(&old);
                }
                None => break,
            }
        }
    }
}

/// Writes `count` records of `key`: into the series of `previous` when
/// there is one, else as a new Event. Retries what may pass.
async fn write(
    api: &Api<Event>,
    key: &Key,
    count: u32,
    mut previous: Option<Written>,
    controller: &str,
    instance: &str,
) -> Outcome {
    let n = i32::try_from(count).unwrap_or(i32::MAX);
    let mut last = String::new();
    for attempt in 0..TRIES {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1) * attempt).await;
        }
        let now = MicroTime(Timestamp::now());
        let result = match &previous {
            Some(w) => {
                let total = w.count.saturating_add(n);
                let series = EventSeries {
                    count: total,
                    last_observed_time: now,
                };
                let patch = serde_json::json!({ "series": series });
                api.patch(&w.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| {
                        Outcome::Patched(
                            Written {
                                name: w.name.clone(),
                                count: total,
                                at: Instant::now(),
                            },
                            count,
                        )
                    })
            }
            None => {
                let event = new_event(key, n, now, controller, instance);
                let name = event.metadata.name.clone().unwrap_or_default();
                api.create(&PostParams::default(), &event).await.map(|_| {
                    Outcome::Created(Written {
                        name,
                        count: n,
                        at: Instant::now(),
                    })
                })
            }
        };
        match result {
            Ok(outcome) => return outcome,
            // The Event we meant to add to is gone (expired): a new one.
            Err(kube::Error::Api(e)) if e.code == 404 && previous.is_some() => {
                previous = None;
                last = e.message;
            }
            // A name taken (two in one nanosecond): a new name next try.
            Err(kube::Error::Api(e)) if e.code == 409 => last = e.message,
            Err(kube::Error::Api(e)) if e.code == 429 || e.code >= 500 => {
                last = format!("{} ({})", e.message, e.code);
            }
            Err(kube::Error::Api(e)) => {
                return Outcome::Failed(format!("{} ({})", e.message, e.code));
            }
            Err(e) => last = e.to_string(),
        }
    }
    Outcome::Failed(last)
}

/// Waits while binds are in flight, unless they have been for
/// `MAX_HOLD` without a gap (`held_since`: when this stretch of binds
/// began holding the writer).
async fn wait_for_binds(shared: &Shared, held_since: &mut Option<Instant>) {
    loop {
        let bound = shared.bound.notified();
        tokio::pin!(bound);
        bound.as_mut().enable();
        if shared.binding.load(Ordering::Acquire) == 0 {
            *held_since = None;
            return;
        }
        let deadline = *held_since.get_or_insert_with(Instant::now) + MAX_HOLD;
        if tokio::time::timeout_at(deadline, bound).await.is_err() {
            return;
        }
    }
}

/// Sets the pod's PodScheduled condition to False, reason Unschedulable,
/// with `note`, if the pod is still at `version`: a pod bound since has
/// PodScheduled True, which this must not undo (the resourceVersion in a
/// patch is a precondition; a 409 means the pod changed, and the next
/// change of reason writes again). A failure is logged, not retried: the
/// Event says the same.
async fn set_unschedulable(pods: &Api<Pod>, name: &str, version: &str, note: &str) {
    let now = Timestamp::now();
    let mut patch = serde_json::json!({
        "status": {"conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": note,
            "lastTransitionTime": now.to_string(),
        }]}
    });
    if !version.is_empty() {
        patch["metadata"] = serde_json::json!({"resourceVersion": version});
    }
    match pods
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {}
        Err(e) => {
            tracing::warn!(pod = %name, error = %e, "the pod's PodScheduled condition could not be set");
        }
    }
}

/// A new Event on the pod of `key`; a series when it holds repeats (the
/// API requires a series count of at least 2).
fn new_event(key: &Key, count: i32, now: MicroTime, controller: &str, instance: &str) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(&key.name)),
            namespace: Some(key.namespace.clone()),
            ..ObjectMeta::default()
        },
        event_time: Some(now.clone()),
        series: (count > 1).then_some(EventSeries {
            count,
            last_observed_time: now,
        }),
        regarding: Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(key.namespace.clone()),
            name: Some(key.name.clone()),
            uid: (!key.uid.is_empty()).then(|| key.uid.clone()),
            ..ObjectReference::default()
        }),
        reason: Some(key.reason.clone()),
        note: Some(key.note.clone()),
        type_: Some(key.kind.as_str().into()),
        action: Some(action(&key.reason).into()),
        reporting_controller: Some(controller.into()),
        reporting_instance: Some(instance.into()),
        ..Event::default()
    }
}

/// What the scheduler was doing when the event happened (events.k8s.io
/// requires an action): kube-scheduler's words.
fn action(reason: &str) -> &'static str {
    match reason {
        "Scheduled" => "Binding",
        "Preempted" | "Preempting" | "PreemptionBlocked" => "Preempting",
        _ => "Scheduling",
    }
}

/// client-go's name, `<pod>.<hex nanoseconds>`, made unique within this
/// process by a counter, and short enough for a name (253).
fn event_name(pod: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = Timestamp::now().as_nanosecond() as u64;
    let unique = nanos.wrapping_add(SEQ.fetch_add(1, Ordering::Relaxed));
    format!("{}.{unique:x}", truncate(pod, 200))
}

/// `text` cut to at most `max` bytes at a character boundary.
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_cut_at_a_character_boundary() {
        let note = "é".repeat(600);
        let cut = truncate(&note, MAX_NOTE);
        assert!(cut.len() <= MAX_NOTE);
        assert_eq!(cut.chars().count(), 512);
        assert_eq!(truncate("short", MAX_NOTE), "short");
    }

    #[test]
    fn event_names_are_unique_and_valid() {
        let long = "p".repeat(253);
        let a = event_name(&long);
        let b = event_name(&long);
        assert_ne!(a, b);
        assert!(a.len() <= 253, "{}", a.len());
    }

    #[test]
    fn a_repeat_makes_a_series_and_a_single_does_not() {
        let key = Key {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
            kind: EventType::Warning,
            reason: "FailedScheduling".into(),
            note: "partita: no room".into(),
        };
        let now = MicroTime(Timestamp::now());
        let one = new_event(&key, 1, now.clone(), "partita-scheduler", "i");
        assert!(one.series.is_none());
        assert_eq!(one.action.as_deref(), Some("Scheduling"));
        assert_eq!(one.type_.as_deref(), Some("Warning"));
        let five = new_event(&key, 5, now, "partita-scheduler", "i");
        assert_eq!(five.series.map(|s| s.count), Some(5));
    }
}
