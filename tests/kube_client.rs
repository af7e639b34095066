//! The scheduler's API client (src/k8s/client.rs) against a real
//! kube-apiserver: made from a kubeconfig path, it names itself
//! "partita-scheduler" (the server records the user agent as the field
//! manager of what it writes) and holds to its qps after its burst.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use partita::k8s::client;

#[tokio::test]
async fn a_client_from_a_kubeconfig_names_itself_and_keeps_its_rate() {
    let Some(h) = support::kube::harness() else {
        return;
    };
    let client = client::connect(Some(&h.kubeconfig), 20.0, 5).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("client-test".into()),
            ..ObjectMeta::default()
        },
        // A field set, for the server to record who set it.
        data: Some([("a".to_string(), "b".to_string())].into()),
        ..ConfigMap::default()
    };
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let managers: Vec<String> = created
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, vec!["partita-scheduler".to_string()]);

    // 4 tokens left of the burst of 5, then 20 a second: 25 more
    // requests take at least (25 - 4) / 20 s.
    let start = Instant::now();
    for _ in 0..25 {
        api.get("client-test").await.unwrap();
    }
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1000),
        "25 requests at 20/s took {took:?}"
    );
    assert!(
        took < Duration::from_secs(5),
        "25 requests at 20/s took {took:?}"
    );
}

#[tokio::test]
async fn a_missing_kubeconfig_is_named() {
    let Err(err) = client::connect(
        Some(std::path::Path::new("/nonexistent/kubeconfig")),
        1.0,
        1,
    )
    .await
    else {
        panic!("a client from a missing kubeconfig");
    };
    let err = err.to_string();
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}
