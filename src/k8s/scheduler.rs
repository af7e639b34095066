//! The Kubernetes scheduler (port of go/internal/kube/scheduler.go and the
//! scheduling part of run.go): reflectors in, API calls out, the engine's
//! cycle in between. `Scheduler::run` drives it; the process around it
//! (CLI, leader election, metrics and webhook servers) is the caller's.
//!
//! A cycle (cycle.rs) reads the reflectors' stores, overlaid with what this
//! scheduler did that they do not show yet, builds the engine's input
//! (snapshot.rs), runs the engine and carries its decision out: MIG
//! changes (mig.rs), binds and evictions (act.rs). Queue and PodGroup
//! status is written by a task of its own (status.rs).

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use partita_engine::cluster::{self, Assignment};
use partita_engine::frag::{self, Shape};
use partita_engine::placement::{Code, Filter, Policy, Reason, Request};
use partita_engine::policies;
use partita_engine::random::Rand;
use partita_engine::sched;
use tokio::sync::Notify;

use super::events::Events;
use super::metrics::Metrics;
use super::names::DEFAULT_SCHEDULER_NAME;
use super::resources::{PodGroup, Queue};
use super::snapshot::{Assumed, LABEL_UNSCHEDULABLE, engine_time};
use super::status::StatusCache;

/// How MIG layouts may be changed (`--mig-reconfigure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigReconfigure {
    /// Change a node's MIG layout only while no pod holds a GPU there: the
    /// GPU Operator's MIG manager stops GPU pods while it applies a
    /// layout. The default, and the only safe mode with the stock
    /// operator.
    #[default]
    IdleNodes,
    /// Also change busy nodes, keeping every instance a pod uses: for a
    /// MIG agent that changes only the affected GPUs and leaves running
    /// pods alone. The stock MIG manager is not one.
    KeepInstances,
    /// Never change layouts; pods use the instances there are.
    Off,
}

impl MigReconfigure {
    pub fn as_str(self) -> &'static str {
        match self {
            MigReconfigure::IdleNodes => "idle-nodes",
            MigReconfigure::KeepInstances => "keep-instances",
            MigReconfigure::Off => "off",
        }
    }
}

impl fmt::Display for MigReconfigure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MigReconfigure {
    type Err = SchedulerError;
    fn from_str(s: &str) -> Result<MigReconfigure, SchedulerError> {
        match s {
            "" | "idle-nodes" => Ok(MigReconfigure::IdleNodes),
            "keep-instances" => Ok(MigReconfigure::KeepInstances),
            "off" => Ok(MigReconfigure::Off),
            other => Err(SchedulerError::MigMode(other.to_string())),
        }
    }
}

/// Runs before each bind; an error skips the bind (tests inject faults
/// with it).
pub type BeforeBind = Arc<dyn Fn(&Pod) -> Result<(), String> + Send + Sync>;

/// What configures a Scheduler. `Options::default()` holds the Go
/// build's defaults.
#[derive(Clone)]
pub struct Options {
    pub scheduler_name: String,
    /// The engine configuration: partita (default), gang-drf or naive.
    pub preset: String,
    /// What an evicted pod gets to checkpoint and exit.
    pub grace: Duration,
    /// Overrides the preset's least time between two MIG changes of one
    /// GPU; zero keeps the preset's.
    pub reconfig_cooldown: Duration,
    /// Where the mig-parted config lives, the one the GPU Operator's MIG
    /// manager reads.
    pub mig_config_namespace: String,
    pub mig_config_name: String,
    pub mig_reconfigure: MigReconfigure,
    /// Bounds the concurrent binds and evictions.
    pub bind_workers: usize,
    /// The longest time between cycles when nothing changes, for
    /// time-based rules (reservations, cooldowns).
    pub interval: Duration,
    /// Taint keys Partita ignores on nodes.
    pub tolerated_taints: Vec<String>,
    pub seed: i64,
    pub before_bind: Option<BeforeBind>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            scheduler_name: DEFAULT_SCHEDULER_NAME.to_string(),
            preset: "partita".to_string(),
            grace: Duration::from_secs(30),
            reconfig_cooldown: Duration::ZERO,
            mig_config_namespace: "gpu-operator".to_string(),
            mig_config_name: "partita-mig-parted".to_string(),
            mig_reconfigure: MigReconfigure::IdleNodes,
            bind_workers: 32,
            interval: Duration::from_secs(2),
            tolerated_taints: Vec::new(),
            seed: 0,
            before_bind: None,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("scheduler_name", &self.scheduler_name)
            .field("preset", &self.preset)
            .field("grace", &self.grace)
            .field("reconfig_cooldown", &self.reconfig_cooldown)
            .field("mig_config_namespace", &self.mig_config_namespace)
            .field("mig_config_name", &self.mig_config_name)
            .field("mig_reconfigure", &self.mig_reconfigure)
            .field("bind_workers", &self.bind_workers)
            .field("interval", &self.interval)
            .field("tolerated_taints", &self.tolerated_taints)
            .field("seed", &self.seed)
            .field("before_bind", &self.before_bind.is_some())
            .finish()
    }
}

impl Options {
    /// Fills what a caller left empty or zero with the defaults, as Go's
    /// `defaults`.
    fn with_defaults(mut self) -> Options {
        let d = Options::default();
        if self.scheduler_name.is_empty() {
            self.scheduler_name = d.scheduler_name;
        }
        if self.preset.is_empty() {
            self.preset = d.preset;
        }
        if self.grace.is_zero() {
            self.grace = d.grace;
        }
        if self.mig_config_namespace.is_empty() {
            self.mig_config_namespace = d.mig_config_namespace;
        }
        if self.mig_config_name.is_empty() {
            self.mig_config_name = d.mig_config_name;
        }
        if self.bind_workers == 0 {
            self.bind_workers = d.bind_workers;
        }
        if self.interval.is_zero() {
            self.interval = d.interval;
        }
        self
    }
}

/// Why a Scheduler cannot be built or started.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("MIG reconfigure mode {0:?}: want idle-nodes, keep-instances or off")]
    MigMode(String),
    #[error("engine preset {preset:?}: {source}")]
    Preset {
        preset: String,
        source: sched::SchedError,
    },
    #[error("placement policy {policy:?}: {source}")]
    Policy {
        policy: String,
        source: policies::PolicyError,
    },
    #[error("the {0} reflector stopped before it synced")]
    NotSynced(&'static str),
    #[error("start: the reflectors were started already")]
    Started,
}

/// The engine's configuration: the preset with its placement policy
/// (Partita's own for partita, stock Kubernetes placement for the others,
/// as in the simulator), plus a filter that keeps new work off nodes
/// Kubernetes says take none.
pub fn engine_config(opt: &Options) -> Result<(sched::Config, Policy), SchedulerError> {
    let placement = if opt.preset == "partita" {
        "partita"
    } else {
        "k8s-default"
    };
    // The expected workload is not known in advance on Kubernetes: take
    // one-GPU tasks, the neutral choice (the simulator's default too).
    let shapes = vec![Shape {
        milli: 1000,
        num: 1,
        ..Shape::default()
    }];
    let pc = policies::Config {
        typical: Some(Arc::new(frag::typicals(
            &shapes,
            frag::DEFAULT_THRESHOLD,
            None,
        ))),
        shapes,
        canonical: None,
        norm_cpu: 1,
        norm_gpu: 1,
    };
    let mut pol = policies::new(placement, pc).map_err(|source| SchedulerError::Policy {
        policy: placement.to_string(),
        source,
    })?;
    pol.filters.insert(0, Box::new(NodeFilter));
    let mut cfg = sched::preset(&opt.preset).map_err(|source| SchedulerError::Preset {
        preset: opt.preset.clone(),
        source,
    })?;
    cfg.grace = nanos(opt.grace);
    // Moving running replicas (a second pod, then deleting the first) is
    // not carried out by this scheduler yet.
    cfg.migrate = false;
    if !opt.reconfig_cooldown.is_zero() {
        cfg.reconfig_cooldown = nanos(opt.reconfig_cooldown);
    }
    if opt.mig_reconfigure == MigReconfigure::Off {
        cfg.mig = false;
    }
    Ok((cfg, pol))
}

/// A duration in the engine's nanoseconds, saturating.
pub(crate) fn nanos(d: Duration) -> sched::Nanos {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// A duration from the engine's nanoseconds (negative is zero).
pub(crate) fn duration(n: sched::Nanos) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(0))
}

/// Rules out nodes that take no new pods (not Ready, cordoned, an
/// untolerated taint), whatever the pod asks.
#[derive(Debug, Clone, Copy)]
pub struct NodeFilter;

impl Filter for NodeFilter {
    fn name(&self) -> &'static str {
        "kubernetes-node"
    }

    fn filter(&self, n: &cluster::Node, _: &Request) -> Result<(), Reason> {
        if n.labels()
            .get(LABEL_UNSCHEDULABLE)
            .is_some_and(|v| !v.is_empty())
        {
            return Err(Reason {
                filter: "kubernetes-node",
                code: Code::Policy,
            });
        }
        Ok(())
    }
}

/// How long a bind, eviction or label change is taken as done without
/// the reflector showing it; past it the reflector's view wins.
pub(crate) const ASSUME_TTL: Duration = Duration::from_secs(30);

/// A bind made, with when.
#[derive(Debug, Clone)]
pub(crate) struct AssumedBind {
    pub assumed: Assumed,
    pub at: Instant,
}

/// A MIG label Partita set that the reflector may not show yet.
#[derive(Debug, Clone)]
pub(crate) struct MigChange {
    pub name: String,
    pub at: Instant,
}

/// The reflectors' stores.
#[derive(Clone)]
pub(crate) struct Stores {
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub config_maps: Store<ConfigMap>,
    pub queues: Store<Queue>,
    pub pod_groups: Store<PodGroup>,
}

/// The stores' writers, until `start` hands them to the reflectors.
struct Writers {
    pods: reflector::store::Writer<Pod>,
    nodes: reflector::store::Writer<Node>,
    config_maps: reflector::store::Writer<ConfigMap>,
    queues: reflector::store::Writer<Queue>,
    pod_groups: reflector::store::Writer<PodGroup>,
}

/// The memory between cycles that only the cycle touches.
pub(crate) struct Memory {
    pub engine: sched::Scheduler,
    /// node -> MIG change in flight.
    pub changes: HashMap<String, MigChange>,
    /// job -> node whose MIG change it waits for.
    pub wait_for: HashMap<String, String>,
    /// The last wait reason reported, by pod UID.
    pub reasons: HashMap<String, String>,
    /// The gangs (namespace/name) whose PodGroup the API server did not
    /// have when asked (`confirm_pod_groups`).
    pub no_group: BTreeSet<String>,
    pub placed: HashMap<String, Arc<Assignment>>,
}

/// The memory that binds and evictions, running concurrently, write.
#[derive(Default)]
pub(crate) struct Acted {
    /// Binds made, by pod UID.
    pub assumed: HashMap<String, AssumedBind>,
    /// Evictions made, by pod UID.
    pub evicting: HashMap<String, Instant>,
}

/// The Kubernetes world of the engine. Build it with `new`, `start` it
/// (followers too, so the webhook can read nodes and a new leader starts
/// warm), then `run` it while leading.
pub struct Scheduler {
    pub(crate) opt: Options,
    pub(crate) client: kube::Client,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) events: Events,
    pub(crate) stores: Stores,
    writers: Mutex<Option<Writers>>,
    /// The reflectors' tasks, stopped when the Scheduler is dropped.
    reflectors: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    wake: Arc<Notify>,
    ready: Arc<AtomicBool>,
    pub(crate) headroom: f64,
    pub(crate) memory: tokio::sync::Mutex<Memory>,
    pub(crate) acted: Arc<Mutex<Acted>>,
    pub(crate) statuses: Arc<StatusCache>,
}

impl Scheduler {
    /// A scheduler talking to the API server through `client`; nothing
    /// runs until `start`.
    pub fn new(
        client: kube::Client,
        opt: Options,
        metrics: Arc<Metrics>,
        events: Events,
    ) -> Result<Scheduler, SchedulerError> {
        let opt = opt.with_defaults();
        let (cfg, policy) = engine_config(&opt)?;
        let headroom = cfg.headroom;
        let engine = sched::Scheduler::new(cfg, policy, Rand::new(opt.seed));
        let (pods, pods_w) = reflector::store();
        let (nodes, nodes_w) = reflector::store();
        let (config_maps, config_maps_w) = reflector::store();
        let (queues, queues_w) = reflector::store();
        let (pod_groups, pod_groups_w) = reflector::store();
        Ok(Scheduler {
            opt,
            client,
            metrics,
            events,
            stores: Stores {
                pods,
                nodes,
                config_maps,
                queues,
                pod_groups,
            },
            writers: Mutex::new(Some(Writers {
                pods: pods_w,
                nodes: nodes_w,
                config_maps: config_maps_w,
                queues: queues_w,
                pod_groups: pod_groups_w,
            })),
            reflectors: Mutex::new(Vec::new()),
            wake: Arc::new(Notify::new()),
            ready: Arc::new(AtomicBool::new(false)),
            headroom,
            memory: tokio::sync::Mutex::new(Memory {
                engine,
                changes: HashMap::new(),
                wait_for: HashMap::new(),
                reasons: HashMap::new(),
                no_group: BTreeSet::new(),
                placed: HashMap::new(),
            }),
            acted: Arc::new(Mutex::new(Acted::default())),
            statuses: Arc::new(StatusCache::default()),
        })
    }

    /// The options in force (defaults filled in).
    pub fn options(&self) -> &Options {
        &self.opt
    }

    /// The headroom the engine keeps on each GPU (for the webhook).
    pub fn headroom(&self) -> f64 {
        self.headroom
    }

    /// Starts the reflectors (on the tokio runtime; they run until the
    /// Scheduler is dropped) and waits until each has listed its objects
    /// once. It does not return while a resource cannot be listed (the
    /// CRDs not installed, no permission): wrap it in a timeout to say so.
    pub async fn start(&self) -> Result<(), SchedulerError> {
        let Some(w) = self
            .writers
            .lock()
            .map_err(|_| SchedulerError::Started)?
            .take()
        else {
            return Err(SchedulerError::Started);
        };
        let c = &self.client;
        self.reflect(Api::<Pod>::all(c.clone()), w.pods);
        self.reflect(Api::<Node>::all(c.clone()), w.nodes);
        self.reflect(
            Api::<ConfigMap>::namespaced(c.clone(), &self.opt.mig_config_namespace),
            w.config_maps,
        );
        self.reflect(Api::<Queue>::all(c.clone()), w.queues);
        self.reflect(Api::<PodGroup>::all(c.clone()), w.pod_groups);
        let s = &self.stores;
        let synced = [
            ("pod", s.pods.wait_until_ready().await.is_ok()),
            ("node", s.nodes.wait_until_ready().await.is_ok()),
            ("config map", s.config_maps.wait_until_ready().await.is_ok()),
            ("queue", s.queues.wait_until_ready().await.is_ok()),
            ("pod group", s.pod_groups.wait_until_ready().await.is_ok()),
        ];
        for (what, ok) in synced {
            if !ok {
                return Err(SchedulerError::NotSynced(what));
            }
        }
        self.ready.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Runs one reflector: every event it sees wakes the loop. A watch
    /// error is retried with kube-runtime's default backoff.
    fn reflect<K>(&self, api: Api<K>, writer: reflector::store::Writer<K>)
    where
        K: kube::Resource
            + Clone
            + fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    {
        let wake = self.wake.clone();
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer);
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                if let Err(e) = ev {
                    tracing::warn!(error = %e, "watch failed; retrying");
                }
                wake.notify_one();
            }
        });
        self.reflectors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
    }

    /// Whether the reflectors have synced.
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The nodes the reflector holds (for the webhook).
    pub fn nodes(&self) -> Vec<Arc<Node>> {
        self.stores.nodes.state()
    }

    /// Wakes the loop for a cycle now.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Schedules until `shutdown` completes. `start` must have returned
    /// first.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        if let Err(e) = self.ensure_config_map().await {
            // Not fatal: binds and evictions work without it, and each MIG
            // change tries again.
            tracing::warn!(error = %e, "MIG config map not ready; MIG changes will retry");
        }
        let status = tokio::spawn(self.status_loop());
        let mut tick = tokio::time::interval(self.opt.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                r = self.cycle() => {
                    if let Err(e) = r {
                        tracing::error!(error = %e, "cycle failed");
                    }
                }
            }
            tokio::select! {
                _ = &mut shutdown => break,
                _ = self.wake.notified() => {}
                _ = tick.tick() => {}
            }
        }
        status.abort();
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        for task in self
            .reflectors
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}

/// The engine's clock now: nanoseconds since the Unix epoch, as the
/// snapshot reads the pods' times (`engine_time`).
pub(crate) fn engine_now() -> sched::Nanos {
    engine_time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_engine::sched::SECOND;

    #[test]
    fn options_default_to_the_go_builds() {
        let o = Options::default();
        assert_eq!(o.scheduler_name, "partita");
        assert_eq!(o.preset, "partita");
        assert_eq!(o.grace, Duration::from_secs(30));
        assert_eq!(o.mig_config_namespace, "gpu-operator");
        assert_eq!(o.mig_config_name, "partita-mig-parted");
        assert_eq!(o.mig_reconfigure, MigReconfigure::IdleNodes);
        assert_eq!(o.bind_workers, 32);
        assert_eq!(o.interval, Duration::from_secs(2));
        let filled = Options {
            scheduler_name: String::new(),
            bind_workers: 0,
            interval: Duration::ZERO,
            ..Options::default()
        }
        .with_defaults();
        assert_eq!(filled.scheduler_name, "partita");
        assert_eq!(filled.bind_workers, 32);
        assert_eq!(filled.interval, Duration::from_secs(2));
    }

    #[test]
    fn mig_modes_parse_and_refuse_in_words() {
        for m in [
            MigReconfigure::IdleNodes,
            MigReconfigure::KeepInstances,
            MigReconfigure::Off,
        ] {
            assert_eq!(m.as_str().parse::<MigReconfigure>().unwrap(), m);
        }
        let err = "sometimes".parse::<MigReconfigure>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "MIG reconfigure mode \"sometimes\": want idle-nodes, keep-instances or off"
        );
    }

    #[test]
    fn engine_config_follows_the_options() {
        let (cfg, pol) = engine_config(&Options::default()).unwrap();
        assert_eq!(cfg.grace, 30 * SECOND);
        assert!(!cfg.migrate, "moves are not carried out");
        assert!(cfg.mig);
        assert_eq!(pol.filters[0].name(), "kubernetes-node");
        let preset_cooldown = cfg.reconfig_cooldown;
        let (cfg, pol) = engine_config(&Options {
            preset: "gang-drf".into(),
            mig_reconfigure: MigReconfigure::Off,
            reconfig_cooldown: Duration::from_secs(7),
            grace: Duration::from_secs(5),
            ..Options::default()
        })
        .unwrap();
        assert!(!cfg.mig, "MIG changes off");
        assert_eq!(cfg.reconfig_cooldown, 7 * SECOND);
        assert_ne!(preset_cooldown, 7 * SECOND);
        assert_eq!(cfg.grace, 5 * SECOND);
        assert_eq!(pol.filters[0].name(), "kubernetes-node");
        let err = engine_config(&Options {
            preset: "nonesuch".into(),
            ..Options::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("nonesuch"), "{err}");
    }

    #[test]
    fn node_filter_reads_the_unschedulable_mark() {
        use partita_engine::cluster::{NodeSpec, build_node};
        let mut spec = NodeSpec {
            name: "n".into(),
            cpu_milli: 8000,
            memory_mib: 1 << 16,
            ..NodeSpec::default()
        };
        let task = partita_engine::workload::Task {
            name: "t".into(),
            cpu_milli: 100,
            ..partita_engine::workload::Task::default()
        };
        let req = Request::new(task, 0.0).unwrap();
        let n = build_node(&spec).unwrap();
        assert!(NodeFilter.filter(&n, &req).is_ok());
        spec.labels
            .insert(LABEL_UNSCHEDULABLE.into(), "true".into());
        let n = build_node(&spec).unwrap();
        let r = NodeFilter.filter(&n, &req).unwrap_err();
        assert_eq!((r.filter, r.code), ("kubernetes-node", Code::Policy));
    }
}
