//! Fake GPU nodes as the NVIDIA device plugin and GPU Feature Discovery
//! describe real ones (port of go/test/integration/kubetest/nodes.go):
//! capacity and allocatable, the GFD labels, MIG slices under the mixed
//! strategy. Nodes accept status on create, so the capacity is kept;
//! later changes need the status subresource.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// Resource and label names of the device plugin and GFD.
pub const RESOURCE_GPU: &str = "nvidia.com/gpu";
pub const LABEL_GPU_PRODUCT: &str = "nvidia.com/gpu.product";
pub const LABEL_GPU_COUNT: &str = "nvidia.com/gpu.count";
/// MiB per GPU.
pub const LABEL_GPU_MEMORY: &str = "nvidia.com/gpu.memory";
pub const LABEL_MIG_CAPABLE: &str = "nvidia.com/mig.capable";
pub const LABEL_MIG_STRATEGY: &str = "nvidia.com/mig.strategy";
const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";

/// The extended resource of one MIG slice of `profile` under the mixed
/// strategy, e.g. "nvidia.com/mig-1g.10gb".
pub fn mig_resource(profile: &str) -> String {
    format!("nvidia.com/mig-{profile}")
}

/// A Ready node with `gpus` whole H100 80GB GPUs: cpu, memory, pods and
/// nvidia.com/gpu in capacity and allocatable, and the GFD labels.
/// `labels` are applied last, so they can override the defaults.
pub fn gpu_node(name: &str, gpus: i64, labels: &[(&str, &str)]) -> Node {
    let res: BTreeMap<String, Quantity> = [
        ("cpu", "64".to_string()),
        ("memory", "512Gi".to_string()),
        ("pods", "110".to_string()),
        (RESOURCE_GPU, gpus.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Quantity(v)))
    .collect();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut node_labels: BTreeMap<String, String> = [
        (LABEL_HOSTNAME, name.to_string()),
        (LABEL_GPU_PRODUCT, "NVIDIA-H100-80GB-HBM3".to_string()),
        (LABEL_GPU_COUNT, gpus.to_string()),
        (LABEL_GPU_MEMORY, "81559".to_string()),
        (LABEL_MIG_CAPABLE, "true".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (k, v) in labels {
        node_labels.insert(k.to_string(), v.to_string());
    }
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(node_labels),
            ..Default::default()
        },
        status: Some(NodeStatus {
            capacity: Some(res.clone()),
            allocatable: Some(res),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                last_heartbeat_time: Some(now.clone()),
                last_transition_time: Some(now),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A node under the GPU Operator's mixed MIG strategy: `whole_gpus`
/// GPUs without MIG as nvidia.com/gpu, and each MIG profile as its own
/// resource, e.g. `[("1g.10gb", 7)]` gives nvidia.com/mig-1g.10gb: 7 and
/// the GFD label nvidia.com/mig-1g.10gb.count=7. `labels` are applied last.
pub fn mig_node(
    name: &str,
    whole_gpus: i64,
    slices: &[(&str, i64)],
    labels: &[(&str, &str)],
) -> Node {
    let mut n = gpu_node(name, whole_gpus, &[]);
    let node_labels = n.metadata.labels.get_or_insert_default();
    node_labels.insert(LABEL_MIG_STRATEGY.into(), "mixed".into());
    for (profile, count) in slices {
        node_labels.insert(format!("nvidia.com/mig-{profile}.count"), count.to_string());
    }
    for (k, v) in labels {
        node_labels.insert(k.to_string(), v.to_string());
    }
    let status = n.status.get_or_insert_default();
    for list in [&mut status.capacity, &mut status.allocatable] {
        let list = list.get_or_insert_default();
        for (profile, count) in slices {
            list.insert(mig_resource(profile), Quantity(count.to_string()));
        }
    }
    n
}
