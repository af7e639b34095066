//! Builders of fake API objects for the pure translation tests (port of
//! go/internal/kube/helpers_test.go); the behaviour against a real API
//! server is tested elsewhere.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use k8s_openapi::api::core::v1::{
    Affinity, Container, Node, NodeAffinity, NodeCondition, NodeSelector, NodeSpec, NodeStatus,
    Pod, PodSpec, PodStatus, ResourceRequirements, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::names::{
    DEFAULT_SCHEDULER_NAME, LABEL_GPU_COUNT, LABEL_GPU_PRODUCT, LABEL_MIG_STRATEGY,
    LABEL_POD_GROUP, LABEL_QUEUE, RESOURCE_GPU, RESOURCE_MIG_PREFIX,
};
use super::resources::{PodGroup, PodGroupSpec, Queue, QueueSpec};
use super::snapshot::{Objects, Snapshot, SnapshotOptions, build_snapshot};

pub(crate) fn q(s: impl Into<String>) -> Quantity {
    Quantity(s.into())
}

pub(crate) struct NodeBuilder(Node);

/// A Ready H100 node with whole GPUs, as the device plugin and GFD
/// describe it.
pub(crate) fn gpu_node(name: &str, gpus: i64) -> NodeBuilder {
    let res: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), q("64")),
        ("memory".to_string(), q("512Gi")),
        (RESOURCE_GPU.to_string(), q(gpus.to_string())),
    ]
    .into();
    let labels: BTreeMap<String, String> = [
        (
            LABEL_GPU_PRODUCT.to_string(),
            "NVIDIA-H100-80GB-HBM3".to_string(),
        ),
        (LABEL_GPU_COUNT.to_string(), gpus.to_string()),
    ]
    .into();
    NodeBuilder(Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            capacity: Some(res.clone()),
            allocatable: Some(res),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".to_string(),
                status: "True".to_string(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
    })
}

impl NodeBuilder {
    /// Makes k of the node's GPUs MIG GPUs advertising the instances.
    pub(crate) fn mig(mut self, k: i64, instances: &[(&str, i64)]) -> Self {
        let st = self.0.status.get_or_insert_default();
        let whole: i64 = st
            .capacity
            .as_ref()
            .and_then(|c| c.get(RESOURCE_GPU))
            .and_then(|q| q.0.parse().ok())
            .unwrap_or(0);
        for list in [
            st.capacity.get_or_insert_default(),
            st.allocatable.get_or_insert_default(),
        ] {
            list.insert(RESOURCE_GPU.to_string(), q((whole - k).to_string()));
            for (p, c) in instances {
                list.insert(format!("{RESOURCE_MIG_PREFIX}{p}"), q(c.to_string()));
            }
        }
        self.label(LABEL_MIG_STRATEGY, "mixed")
    }

    pub(crate) fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_default()
            .insert(k.to_string(), v.to_string());
        self
    }

    pub(crate) fn taint(mut self, key: &str) -> Self {
        let spec = self.0.spec.get_or_insert_default();
        spec.taints.get_or_insert_default().push(Taint {
            key: key.to_string(),
            effect: "NoSchedule".to_string(),
            ..Taint::default()
        });
        self
    }

    pub(crate) fn cordoned(mut self) -> Self {
        self.0.spec.get_or_insert_default().unschedulable = Some(true);
        self
    }

    pub(crate) fn obj(self) -> Arc<Node> {
        Arc::new(self.0)
    }
}

pub(crate) struct PodBuilder(Pod);

/// Numbers the pods built, one creation second apart.
static POD_SEQ: AtomicI64 = AtomicI64::new(0);

/// 2026-01-01T00:00:00Z, when the fake pods are created.
const CREATED: i64 = 1_767_225_600;

/// A pending pod for Partita in namespace "ns", asking 1 CPU and 1 GiB.
pub(crate) fn pod(name: &str) -> PodBuilder {
    let seq = POD_SEQ.fetch_add(1, Ordering::Relaxed) + 1;
    let created = Timestamp::from_second(CREATED + seq).expect("a time in range");
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("ns".to_string()),
            uid: Some(format!("uid-{name}")),
            creation_timestamp: Some(Time(created)),
            labels: Some(BTreeMap::new()),
            annotations: Some(BTreeMap::new()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(DEFAULT_SCHEDULER_NAME.to_string()),
            containers: vec![Container {
                name: "main".to_string(),
                resources: Some(ResourceRequirements {
                    requests: Some(
                        [
                            ("cpu".to_string(), q("1")),
                            ("memory".to_string(), q("1Gi")),
                        ]
                        .into(),
                    ),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".to_string()),
            ..PodStatus::default()
        }),
    })
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_default()
    }

    /// Sets the main container's limit of `name` to `n`.
    pub(crate) fn limit(mut self, name: &str, n: i64) -> Self {
        let c = &mut self.spec().containers[0];
        c.resources
            .get_or_insert_default()
            .limits
            .get_or_insert_default()
            .insert(name.to_string(), q(n.to_string()));
        self
    }

    pub(crate) fn gpus(self, n: i64) -> Self {
        self.limit(RESOURCE_GPU, n)
    }

    pub(crate) fn mig_profile(self, p: &str) -> Self {
        self.limit(&format!("{RESOURCE_MIG_PREFIX}{p}"), 1)
    }

    pub(crate) fn ann(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(k.to_string(), v.to_string());
        self
    }

    pub(crate) fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_default()
            .insert(k.to_string(), v.to_string());
        self
    }

    pub(crate) fn scheduler(mut self, name: &str) -> Self {
        self.spec().scheduler_name = Some(name.to_string());
        self
    }

    pub(crate) fn group(self, g: &str) -> Self {
        self.label(LABEL_POD_GROUP, g)
    }

    pub(crate) fn queue(self, q: &str) -> Self {
        self.label(LABEL_QUEUE, q)
    }

    pub(crate) fn priority_class(mut self, c: &str) -> Self {
        self.spec().priority_class_name = Some(c.to_string());
        self
    }

    pub(crate) fn priority(mut self, p: Option<i32>) -> Self {
        self.spec().priority = p;
        self
    }

    pub(crate) fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_default()
            .insert(k.to_string(), v.to_string());
        self
    }

    pub(crate) fn required_node_affinity(mut self) -> Self {
        self.spec().affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector::default()),
                ..NodeAffinity::default()
            }),
            ..Affinity::default()
        });
        self
    }

    pub(crate) fn phase(mut self, ph: &str) -> Self {
        self.0.status.get_or_insert_default().phase = Some(ph.to_string());
        self
    }

    /// Binds the pod to a node, with Partita's device annotations.
    pub(crate) fn on(mut self, node: &str, ann: &[(&str, &str)]) -> Self {
        self.spec().node_name = Some(node.to_string());
        for (k, v) in ann {
            self = self.ann(k, v);
        }
        self.phase("Running")
    }

    pub(crate) fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        self
    }

    /// The pod as it is, to change by hand.
    pub(crate) fn pod(self) -> Pod {
        self.0
    }

    pub(crate) fn obj(self) -> Arc<Pod> {
        Arc::new(self.0)
    }
}

/// A PodGroup in namespace "ns".
pub(crate) fn pod_group(name: &str, min_member: i32, queue: &str) -> Arc<PodGroup> {
    let mut pg = PodGroup::new(
        name,
        PodGroupSpec {
            min_member,
            queue: (!queue.is_empty()).then(|| queue.to_string()),
        },
    );
    pg.metadata.namespace = Some("ns".to_string());
    Arc::new(pg)
}

/// A Queue.
pub(crate) fn queue(name: &str, spec: QueueSpec) -> Arc<Queue> {
    Arc::new(Queue::new(name, spec))
}

/// Builds a snapshot with the test defaults (Partita's scheduler name,
/// 10 % headroom) and checks the State's invariants.
pub(crate) fn must_snapshot(obj: Objects, mut opt: SnapshotOptions) -> Snapshot {
    if opt.scheduler_name.is_empty() {
        opt.scheduler_name = DEFAULT_SCHEDULER_NAME.to_string();
    }
    if opt.headroom == 0.0 {
        opt.headroom = 0.1;
    }
    let s = build_snapshot(&obj, &opt).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = s.state.check() {
        panic!("snapshot state breaks an invariant: {e}");
    }
    s
}
