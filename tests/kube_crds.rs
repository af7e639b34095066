//! The generated CRDs (src/k8s/resources.rs) in a real kube-apiserver:
//! installed with kube-rs, and every rule they declare enforced by the
//! server (the CEL rule on burst, ranges, the set of classes), with the
//! objects read back into the Rust types and their status subresource.

mod support;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use partita::k8s::resources::{PodGroup, PodGroupSpec, Queue, QueueSpec, QueueStatus};
use serde_json::json;

fn queue(name: &str, spec: QueueSpec) -> Queue {
    Queue::new(name, spec)
}

fn spec(guaranteed: i64, burst: Option<i64>, weight: Option<f64>, classes: &[&str]) -> QueueSpec {
    QueueSpec {
        team: "research".into(),
        guaranteed_gpus: guaranteed,
        burst_gpus: burst,
        weight,
        allowed_priority_classes: classes.iter().map(|c| c.to_string()).collect(),
    }
}

/// The API server's refusal of a create, as text.
async fn refused<K>(api: &Api<K>, obj: &K) -> String
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(o) => panic!("accepted: {o:?}"),
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            e.message
        }
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn the_generated_crds_are_enforced_by_a_real_api_server() {
    let Some(h) = support::kube::harness() else {
        return;
    };
    let client = support::kube::client(h).await;
    support::kube::install_crds(&client).await;
    let queues: Api<Queue> = Api::all(client.clone());

    let why = refused(&queues, &queue("burst-below", spec(16, Some(8), None, &[]))).await;
    assert!(
        why.contains("burstGPUs must be 0 (no borrowing) or at least guaranteedGPUs"),
        "{why}"
    );
    let why = refused(&queues, &queue("weightless", spec(1, None, Some(0.0), &[]))).await;
    assert!(why.contains("weight"), "{why}");
    let why = refused(&queues, &queue("negative", spec(-1, None, None, &[]))).await;
    assert!(why.contains("guaranteedGPUs"), "{why}");
    let why = refused(&queues, &queue("twice", spec(1, None, None, &["a", "a"]))).await;
    assert!(why.contains("allowedPriorityClasses"), "{why}");
    let mut no_team = queue("no-team", spec(1, None, None, &[]));
    no_team.spec.team.clear();
    let why = refused(&queues, &no_team).await;
    assert!(why.contains("team"), "{why}");

    // A good one reads back as written, with the server's default weight.
    let made = queues
        .create(
            &PostParams::default(),
            &queue("research", spec(16, Some(48), None, &["partita-batch"])),
        )
        .await
        .unwrap();
    assert_eq!(made.spec.guaranteed_gpus, 16);
    assert_eq!(made.spec.burst_gpus, Some(48));
    assert_eq!(made.spec.weight, Some(1.0), "the CRD's default");
    assert_eq!(made.spec.allowed_priority_classes, ["partita-batch"]);
    // Its status is a subresource.
    let status = json!({"status": QueueStatus {
        used_gpus: Some("3.43".into()),
        running_pods: Some(4),
        pending_pods: Some(2),
    }});
    queues
        .patch_status("research", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let got = queues.get("research").await.unwrap();
    assert_eq!(got.status.unwrap().used_gpus.as_deref(), Some("3.43"));

    // PodGroups are namespaced, at least one member.
    let groups: Api<PodGroup> = Api::namespaced(client.clone(), "default");
    let why = refused(
        &groups,
        &PodGroup::new(
            "empty",
            PodGroupSpec {
                min_member: 0,
                queue: None,
            },
        ),
    )
    .await;
    assert!(why.contains("minMember"), "{why}");
    let pg = groups
        .create(
            &PostParams::default(),
            &PodGroup::new(
                "llama-ft",
                PodGroupSpec {
                    min_member: 4,
                    queue: Some("research".into()),
                },
            ),
        )
        .await
        .unwrap();
    assert_eq!(pg.spec.min_member, 4);
    assert_eq!(pg.namespace().as_deref(), Some("default"));
}
