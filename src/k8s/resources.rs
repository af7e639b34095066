//! The custom resources of group `partita.dev`, version `v1alpha1`: a
//! team's `Queue` and a gang's `PodGroup`. Their CRDs
//! (`deploy/kubernetes/crds.yaml`) are generated from these types by
//! `partita crdgen`, and a test fails when the committed file differs.
//! The API server enforces every rule declared here (schemas and CEL);
//! `kubectl explain queue.spec` shows the doc comments.
//!
//! The Go build's types (`go/internal/kube/api/v1alpha1`) are the same
//! on the wire: the Go build's integration tests install this file.

use kube::CustomResource;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// A team's share of the cluster's GPUs.
// `printcolumn(name = …, type_ = …)` repeats its keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "partita.dev",
    version = "v1alpha1",
    kind = "Queue",
    plural = "queues",
    status = "QueueStatus",
    doc = "A team's share of the cluster's GPUs. Pods name their queue with the label partita.dev/queue.",
    printcolumn(name = "Team", type_ = "string", json_path = ".spec.team"),
    printcolumn(
        name = "Guaranteed",
        type_ = "integer",
        json_path = ".spec.guaranteedGPUs"
    ),
    printcolumn(name = "Burst", type_ = "integer", json_path = ".spec.burstGPUs"),
    printcolumn(name = "Used", type_ = "string", json_path = ".status.usedGPUs"),
    printcolumn(name = "Pending", type_ = "integer", json_path = ".status.pendingPods")
)]
#[x_kube(validation = kube::core::Rule::new(
    "!has(self.burstGPUs) || self.burstGPUs == 0 || self.burstGPUs >= self.guaranteedGPUs"
).message("burstGPUs must be 0 (no borrowing) or at least guaranteedGPUs"))]
pub struct QueueSpec {
    /// The team that owns the queue.
    #[schemars(length(min = 1, max = 253))]
    pub team: String,
    /// GPUs the team can always get; borrowers are preempted to make room. A MIG instance counts as its compute share (3g = 3/7).
    #[serde(rename = "guaranteedGPUs")]
    #[schemars(range(min = 0))]
    pub guaranteed_gpus: i64,
    /// The most the team may hold, borrowed capacity included. 0 or unset means guaranteedGPUs is also the limit.
    #[serde(rename = "burstGPUs", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub burst_gpus: Option<i64>,
    /// Orders teams above their guarantee (GPU held over weight); greater than 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true, "default" = 1))]
    pub weight: Option<f64>,
    /// PriorityClass names the queue's pods may use; empty allows any.
    #[serde(
        rename = "allowedPriorityClasses",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(length(max = 64), inner(length(min = 1)))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Set)]
    pub allowed_priority_classes: Vec<String>,
}

/// What the scheduler last saw of a queue.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct QueueStatus {
    /// GPUs held by the queue's pods, as a decimal.
    #[serde(rename = "usedGPUs", default, skip_serializing_if = "Option::is_none")]
    pub used_gpus: Option<String>,
    #[serde(
        rename = "runningPods",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub running_pods: Option<i64>,
    #[serde(
        rename = "pendingPods",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pending_pods: Option<i64>,
}

/// A gang.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "partita.dev",
    version = "v1alpha1",
    kind = "PodGroup",
    plural = "podgroups",
    namespaced,
    shortname = "pg",
    status = "PodGroupStatus",
    doc = "A gang. Pods labelled partita.dev/pod-group=<name> in the group's namespace start together, at least minMember of them at once, or not at all.",
    printcolumn(name = "MinMember", type_ = "integer", json_path = ".spec.minMember"),
    printcolumn(name = "Queue", type_ = "string", json_path = ".spec.queue"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Scheduled", type_ = "integer", json_path = ".status.scheduled")
)]
pub struct PodGroupSpec {
    /// How many pods must start together.
    #[serde(rename = "minMember")]
    #[schemars(range(min = 1))]
    pub min_member: i32,
    /// The Queue of the group's pods, unless they carry the label partita.dev/queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// Whether a gang has started.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodGroupPhase {
    Pending,
    Running,
}

/// What the scheduler last saw of a gang.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct PodGroupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<PodGroupPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The committed CRD file: its header and both CRDs, as YAML documents.
pub fn crds_yaml() -> Result<String, String> {
    use kube::CustomResourceExt;
    let mut out = String::from(
        "# Partita's custom resources, group partita.dev, version v1alpha1.\n\
         # Generated by `partita crdgen` from src/k8s/resources.rs: edit the\n\
         # types, not this file (a test fails when they differ).\n",
    );
    for crd in [Queue::crd(), PodGroup::crd()] {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd).map_err(|e| e.to_string())?);
    }
    Ok(out)
}
