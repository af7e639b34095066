//! The committed CRDs (deploy/kubernetes/crds.yaml) are what the Rust
//! types of src/k8s/resources.rs generate, and the objects the docs show
//! read into those types. (The Go build's integration tests install the
//! same file into a real kube-apiserver and check its validation.)

use partita::k8s::resources::{PodGroup, Queue, crds_yaml};

#[test]
fn the_committed_crds_are_the_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kubernetes/crds.yaml");
    let committed = std::fs::read_to_string(path).unwrap();
    let generated = crds_yaml().unwrap();
    assert!(
        committed == generated,
        "deploy/kubernetes/crds.yaml differs from src/k8s/resources.rs: run `partita crdgen`\n\
         --- generated ---\n{generated}"
    );
    // The rules the API server is to enforce are in it.
    for rule in [
        "self.burstGPUs >= self.guaranteedGPUs",
        "x-kubernetes-list-type: set",
        "exclusiveMinimum: true",
        "minimum: 1",
        "scope: Namespaced",
        "- pg",
    ] {
        assert!(generated.contains(rule), "no {rule:?} in:\n{generated}");
    }
}

#[test]
fn the_documented_objects_read_into_the_types() {
    let queue: Queue = serde_saphyr::from_str(
        "apiVersion: partita.dev/v1alpha1
kind: Queue
metadata: {name: research}
spec:
  team: research
  guaranteedGPUs: 16
  burstGPUs: 48
  weight: 1
  allowedPriorityClasses: [partita-batch, partita-best-effort]
",
    )
    .unwrap();
    assert_eq!(queue.spec.team, "research");
    assert_eq!(queue.spec.guaranteed_gpus, 16);
    assert_eq!(queue.spec.burst_gpus, Some(48));
    assert_eq!(queue.spec.allowed_priority_classes.len(), 2);
    let group: PodGroup = serde_saphyr::from_str(
        "apiVersion: partita.dev/v1alpha1
kind: PodGroup
metadata: {name: llama-ft, namespace: ml}
spec:
  minMember: 4
  queue: research
",
    )
    .unwrap();
    assert_eq!(group.spec.min_member, 4);
    assert_eq!(group.spec.queue.as_deref(), Some("research"));
}
