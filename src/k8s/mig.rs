//! MIG layout changes through the GPU Operator's MIG manager (port of
//! go/internal/kube/mig.go): Partita writes a node's new layout as a named
//! config into the mig-parted ConfigMap and sets the node's
//! nvidia.com/mig.config label to that name; the MIG manager applies it
//! and reports nvidia.com/mig.config.state=success (the node's view stays
//! `mig_changing`, its GPUs cordoned, until then).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use partita_engine::cluster::Grant;
use partita_engine::gpu::lookup;
use partita_engine::sched::{Decision, WaitReason};

use super::act::error_class;
use super::migconfig::{
    Devices, GpuConfig, MIG_CONFIG_KEY, MigDeviceSpec, MigParted, config_name, counts_of,
    device_specs, pack_layouts, parse_mig_parted,
};
use super::names::{LABEL_MIG_CONFIG, LABEL_MIG_CONFIG_STATE, MIG_STATE_PENDING};
use super::scheduler::{Memory, MigChange, MigReconfigure, Scheduler};
use super::snapshot::Snapshot;

/// How often a write of the ConfigMap is tried when it keeps meeting
/// another writer's (client-go's DefaultRetry: five steps).
const CONFLICT_RETRIES: usize = 5;

/// Why a MIG config could not be written.
#[derive(Debug, thiserror::Error)]
pub enum MigError {
    #[error("create MIG config map {namespace}/{name}: {source}")]
    Create {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("read MIG config map {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("MIG config map {namespace}/{name}: {source}")]
    Parse {
        namespace: String,
        name: String,
        source: super::migconfig::MigPartedError,
    },
    #[error("update MIG config map {namespace}/{name}: {source}")]
    Update {
        namespace: String,
        name: String,
        source: kube::Error,
    },
}

/// The MIG change of one node this cycle.
#[derive(Debug, Default)]
struct NodePlan {
    gpus: Vec<GpuConfig>,
    /// Jobs whose starts need it.
    jobs: Vec<String>,
    reason: Vec<String>,
}

/// The config every MIG manager config has, and the one a new ConfigMap
/// starts with.
fn all_disabled() -> MigParted {
    MigParted {
        version: "v1".to_string(),
        mig_configs: [(
            "all-disabled".to_string(),
            vec![MigDeviceSpec {
                devices: Devices::All,
                mig_enabled: false,
                ..MigDeviceSpec::default()
            }],
        )]
        .into(),
    }
}

impl Scheduler {
    fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.opt.mig_config_namespace)
    }

    /// Partita's configs by name, from the ConfigMap in the store. Only
    /// names Partita made (partita-...) are read: a node on any other
    /// config is read from the device plugin's capacity.
    pub(crate) fn mig_configs(&self) -> BTreeMap<String, Vec<MigDeviceSpec>> {
        let cm = self
            .stores
            .config_maps
            .state()
            .into_iter()
            .find(|cm| cm.metadata.name.as_deref() == Some(self.opt.mig_config_name.as_str()));
        let Some(cm) = cm else {
            return BTreeMap::new();
        };
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(MIG_CONFIG_KEY))
            .map(String::as_str)
            .unwrap_or_default();
        match parse_mig_parted(text.as_bytes()) {
            Ok(c) => c
                .mig_configs
                .into_iter()
                .filter(|(name, _)| name.starts_with("partita-"))
                .collect(),
            Err(e) => {
                tracing::warn!(configmap = %self.opt.mig_config_name, error = %e, "MIG config map unreadable");
                BTreeMap::new()
            }
        }
    }

    /// Creates the mig-parted ConfigMap if it is missing, with the one
    /// layout every MIG manager config has: all-disabled.
    pub(crate) async fn ensure_config_map(&self) -> Result<(), MigError> {
        if self.opt.mig_reconfigure == MigReconfigure::Off {
            return Ok(());
        }
        let (namespace, name) = (
            self.opt.mig_config_namespace.clone(),
            self.opt.mig_config_name.clone(),
        );
        let cms = self.config_maps();
        match cms.get_opt(&name).await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {}
            Err(source) => {
                return Err(MigError::Read {
                    namespace,
                    name,
                    source,
                });
            }
        }
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                labels: Some(
                    [(
                        "app.kubernetes.io/managed-by".to_string(),
                        "partita".to_string(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            data: Some([(MIG_CONFIG_KEY.to_string(), all_disabled().render())].into()),
            ..ConfigMap::default()
        };
        match cms.create(&PostParams::default(), &cm).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(source) => Err(MigError::Create {
                namespace,
                name,
                source,
            }),
        }
    }

    /// Turns the decision's MIG changes, and the starts that need an
    /// instance not yet made, into one config per node, and applies those
    /// the mode allows. It returns the jobs now waiting for a change, by
    /// node, and puts the reasons of the jobs that wait into `waits`.
    pub(crate) async fn change_mig(
        &self,
        mem: &mut Memory,
        snap: &Snapshot,
        d: &Decision,
        starts: &HashMap<String, Vec<usize>>,
        creating: &HashSet<&str>,
        waits: &mut BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let mut plans: BTreeMap<String, NodePlan> = BTreeMap::new();
        let plan = |plans: &mut BTreeMap<String, NodePlan>, node: &str| -> bool {
            if plans.contains_key(node) {
                return true;
            }
            let Some(v) = snap.views.get(node) else {
                return false;
            };
            plans.insert(
                node.to_string(),
                NodePlan {
                    gpus: v.configs(),
                    ..NodePlan::default()
                },
            );
            true
        };
        for rc in &d.reconfigs {
            if !plan(&mut plans, &rc.node) {
                continue;
            }
            let p = plans.get_mut(&rc.node).expect("planned above");
            if rc.gpu < p.gpus.len() {
                p.gpus[rc.gpu] = GpuConfig {
                    mig: rc.mig,
                    counts: counts_of(&rc.layout),
                };
                p.reason.push(format!("GPU {} for {}", rc.gpu, rc.for_job));
            }
        }
        // Nodes that get a bind this cycle.
        let mut starts_on: HashSet<&str> = HashSet::new();
        let mut jobs: Vec<&String> = starts.keys().collect();
        jobs.sort();
        for job in jobs {
            for &i in &starts[job] {
                let st = &d.starts[i];
                let node = st.assignment.node.as_str();
                if !creating.contains(job.as_str()) {
                    starts_on.insert(node);
                    continue;
                }
                if !plan(&mut plans, node) {
                    continue;
                }
                let p = plans.get_mut(node).expect("planned above");
                p.jobs.push(job.clone());
                for g in &st.assignment.grants {
                    let Some(slice) = &g.slice else {
                        continue;
                    };
                    let Ok(gpu) = usize::try_from(g.gpu) else {
                        continue;
                    };
                    if gpu >= p.gpus.len() || has_instance(snap, node, g) {
                        continue;
                    }
                    let mut counts = p.gpus[gpu].counts.clone();
                    *counts.entry(slice.profile.to_string()).or_insert(0) += 1;
                    p.gpus[gpu] = GpuConfig { mig: true, counts };
                    p.reason.push(format!(
                        "a {} instance on GPU {gpu} for {job}",
                        slice.profile
                    ));
                }
            }
        }
        let mut waiting = BTreeMap::new();
        for (node, p) in &plans {
            let why = self
                .apply_plan(mem, snap, node, p, starts_on.contains(node.as_str()))
                .await;
            for job in &p.jobs {
                match &why {
                    None => {
                        waiting.insert(job.clone(), node.clone());
                        waits.insert(
                            job.clone(),
                            format!(
                                "{}: node {node} is being re-partitioned for it",
                                WaitReason::Reconfig
                            ),
                        );
                    }
                    Some(why) => {
                        waits.insert(job.clone(), format!("{}: {why}", WaitReason::NoSlice));
                    }
                }
            }
        }
        waiting
    }

    /// Writes a node's new config and label; `Some(why)` when it may not
    /// or could not.
    async fn apply_plan(
        &self,
        mem: &mut Memory,
        snap: &Snapshot,
        node: &str,
        p: &NodePlan,
        binding: bool,
    ) -> Option<String> {
        let v = snap.views.get(node)?;
        let model = lookup(&v.spec.gpu_model);
        for (i, g) in p.gpus.iter().enumerate() {
            if !g.mig {
                continue;
            }
            if let Err(e) = pack_layouts(&model, &g.counts, 1) {
                self.metrics.mig_change("invalid");
                return Some(format!("node {node} GPU {i}: {e}"));
            }
        }
        match self.opt.mig_reconfigure {
            MigReconfigure::Off => {
                self.metrics.mig_change("declined");
                return Some("MIG changes are off (--mig-reconfigure=off)".to_string());
            }
            MigReconfigure::IdleNodes if snap.busy.contains(node) || binding => {
                self.metrics.mig_change("declined");
                tracing::info!(node, r#for = %p.reason.join("; "), "MIG change declined: node runs GPU pods");
                return Some(format!(
                    "node {node} runs GPU pods and the MIG manager would stop them (--mig-reconfigure={})",
                    MigReconfigure::IdleNodes
                ));
            }
            _ => {}
        }
        let name = config_name(&p.gpus);
        if name == v.config && !v.mig_changing && !v.mig_failed {
            return None;
        }
        // The configs in flight must survive the clean-up of unused ones.
        let in_flight: Vec<String> = mem.changes.values().map(|c| c.name.clone()).collect();
        if let Err(e) = self
            .write_config(&in_flight, &name, device_specs(&p.gpus))
            .await
        {
            self.metrics.mig_change("error");
            tracing::error!(node, error = %e, "MIG config not written");
            return Some(format!("the MIG config could not be written: {e}"));
        }
        let patch = serde_json::json!({"metadata": {"labels": {
            LABEL_MIG_CONFIG: name,
            LABEL_MIG_CONFIG_STATE: MIG_STATE_PENDING,
        }}});
        let nodes: Api<Node> = Api::all(self.client.clone());
        if let Err(e) = nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            self.metrics.mig_change("error");
            tracing::error!(node, error = %e, class = error_class(&e), "MIG label not set");
            return Some(format!("the node label could not be set: {e}"));
        }
        mem.changes.insert(
            node.to_string(),
            MigChange {
                name: name.clone(),
                at: Instant::now(),
            },
        );
        self.metrics.mig_change("ok");
        tracing::info!(node, config = %name, r#for = %p.reason.join("; "), "MIG change");
        None
    }

    /// Adds a named layout to the mig-parted ConfigMap, and drops
    /// Partita's layouts no node uses (nor a change `in_flight`) any more. Entries Partita did not
    /// make are left alone.
    async fn write_config(
        &self,
        in_flight: &[String],
        name: &str,
        specs: Vec<MigDeviceSpec>,
    ) -> Result<(), MigError> {
        let mut in_use: HashSet<String> = HashSet::from([name.to_string()]);
        for n in self.stores.nodes.state() {
            if let Some(c) = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_MIG_CONFIG))
            {
                in_use.insert(c.clone());
            }
        }
        in_use.extend(in_flight.iter().cloned());
        self.ensure_config_map().await?;
        let (namespace, cm_name) = (
            self.opt.mig_config_namespace.clone(),
            self.opt.mig_config_name.clone(),
        );
        let cms = self.config_maps();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut cm = cms.get(&cm_name).await.map_err(|source| MigError::Read {
                namespace: namespace.clone(),
                name: cm_name.clone(),
                source,
            })?;
            let old = cm
                .data
                .as_ref()
                .and_then(|d| d.get(MIG_CONFIG_KEY))
                .cloned()
                .unwrap_or_default();
            let mut c = parse_mig_parted(old.as_bytes()).map_err(|source| MigError::Parse {
                namespace: namespace.clone(),
                name: cm_name.clone(),
                source,
            })?;
            c.mig_configs.insert(name.to_string(), specs.clone());
            c.mig_configs
                .retain(|n, _| !n.starts_with("partita-") || in_use.contains(n));
            let text = c.render();
            if text == old {
                return Ok(());
            }
            cm.data
                .get_or_insert_with(BTreeMap::new)
                .insert(MIG_CONFIG_KEY.to_string(), text);
            match cms.replace(&cm_name, &PostParams::default(), &cm).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < CONFLICT_RETRIES => {}
                Err(source) => {
                    return Err(MigError::Update {
                        namespace,
                        name: cm_name,
                        source,
                    });
                }
            }
        }
    }
}

/// Whether the node already has the instance a grant names.
fn has_instance(snap: &Snapshot, node: &str, g: &Grant) -> bool {
    let (Some(n), Some(slice), Ok(gpu)) = (
        snap.state.node_by_name(node),
        &g.slice,
        usize::try_from(g.gpu),
    ) else {
        return false;
    };
    n.gpus()
        .get(gpu)
        .is_some_and(|gp| gp.slices().iter().any(|s| s.placement() == slice))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The ConfigMap a new install starts with holds the config every MIG
    // manager config has.
    #[test]
    fn a_new_config_map_holds_all_disabled() {
        let text = all_disabled().render();
        assert_eq!(
            text,
            "version: v1\nmig-configs:\n    all-disabled:\n        - devices: all\n          mig-enabled: false\n"
        );
        let back = parse_mig_parted(text.as_bytes()).unwrap();
        assert_eq!(back, all_disabled());
    }
    /// A client whose every call fails: the paths tested here make none.
    fn no_api() -> kube::Client {
        let svc = tower::service_fn(|_req: axum::http::Request<kube::client::Body>| async {
            let body = http_body_util::Full::new(bytes::Bytes::from_static(b"{}"));
            Ok::<_, std::convert::Infallible>(
                axum::http::Response::builder()
                    .status(500)
                    .body(body)
                    .expect("a response"),
            )
        });
        kube::Client::new(svc, "default")
    }

    /// A one-GPU MIG node "m" split into `small` 1g.10gb, one of them held
    /// by a running pod (when `busy`), and a decision that starts a job
    /// on a 3g.40gb instance the node does not have.
    fn mig_case(small: i64, busy: bool) -> (Snapshot, Decision) {
        use crate::k8s::fixtures::{gpu_node, must_snapshot, pod};
        use crate::k8s::names::ANNOTATION_MIG_SLICE;
        use crate::k8s::snapshot::{Objects, SnapshotOptions};
        use partita_engine::cluster::Assignment;
        use partita_engine::gpu::Placement;
        use partita_engine::sched::Start;
        let mut pods = vec![pod("llm").mig_profile("3g.40gb").obj()];
        if busy {
            pods.push(
                pod("small")
                    .mig_profile("1g.10gb")
                    .on("m", &[(ANNOTATION_MIG_SLICE, "0:1g.10gb@0")])
                    .obj(),
            );
        }
        let obj = Objects {
            nodes: vec![gpu_node("m", 1).mig(1, &[("1g.10gb", small)]).obj()],
            pods,
            ..Objects::default()
        };
        let snap = must_snapshot(obj, SnapshotOptions::default());
        let d = Decision {
            starts: vec![Start {
                job: "pod:ns/llm".into(),
                task: 0,
                assignment: Assignment {
                    task: "ns/llm".into(),
                    node: "m".into(),
                    grants: vec![Grant {
                        gpu: 0,
                        milli: 0,
                        slice: Some(Placement {
                            profile: "3g.40gb".into(),
                            start: 4,
                        }),
                    }],
                    ..Assignment::default()
                },
                creates: true,
            }],
            ..Decision::default()
        };
        (snap, d)
    }

    async fn waits_for(
        mode: MigReconfigure,
        small: i64,
        busy: bool,
    ) -> (BTreeMap<String, String>, String) {
        use crate::k8s::cycle::starts_by_job;
        use crate::k8s::events::Events;
        use crate::k8s::metrics::Metrics;
        use crate::k8s::scheduler::Options;
        use std::sync::Arc;
        let client = no_api();
        let metrics = Arc::new(Metrics::new());
        let (events, _writer) = Events::start(client.clone(), "partita", 10.0, 10, metrics.clone());
        let opt = Options {
            mig_reconfigure: mode,
            ..Options::default()
        };
        let s = Scheduler::new(client, opt, metrics.clone(), events).unwrap();
        let (snap, d) = mig_case(small, busy);
        let (_, starts) = starts_by_job(&d);
        let creating: HashSet<&str> = HashSet::from(["pod:ns/llm"]);
        let mut waits = BTreeMap::new();
        let mut mem = s.memory.lock().await;
        let waiting = s
            .change_mig(&mut mem, &snap, &d, &starts, &creating, &mut waits)
            .await;
        assert!(waiting.is_empty(), "no change was made: {waiting:?}");
        (waits, metrics.encode())
    }

    // A node whose GPU runs a pod is not re-partitioned in idle-nodes
    // mode (the MIG manager would stop the pod): the job waits, told why.
    #[tokio::test]
    async fn idle_nodes_mode_declines_a_busy_node() {
        let (waits, metrics) = waits_for(MigReconfigure::IdleNodes, 2, true).await;
        assert_eq!(
            waits["pod:ns/llm"],
            "no fitting MIG slice yet: node m runs GPU pods and the MIG manager would stop them (--mig-reconfigure=idle-nodes)"
        );
        assert!(
            metrics.contains("partita_kube_mig_changes_total{result=\"declined\"} 1"),
            "{metrics}"
        );
    }

    #[tokio::test]
    async fn off_mode_declines_every_change() {
        let (waits, _) = waits_for(MigReconfigure::Off, 2, false).await;
        assert_eq!(
            waits["pod:ns/llm"],
            "no fitting MIG slice yet: MIG changes are off (--mig-reconfigure=off)"
        );
    }

    // A layout that no GPU can hold is refused before any API call: the
    // 1g.10gb instances plus a 3g.40gb do not fit one H100.
    #[tokio::test]
    async fn an_impossible_layout_is_invalid() {
        let (waits, metrics) = waits_for(MigReconfigure::KeepInstances, 7, true).await;
        assert!(
            waits["pod:ns/llm"].starts_with("no fitting MIG slice yet: node m GPU 0: H100-80GB:"),
            "{waits:?}"
        );
        assert!(
            metrics.contains("partita_kube_mig_changes_total{result=\"invalid\"} 1"),
            "{metrics}"
        );
    }
}
