//! The event recorder (src/k8s/events.rs) against a real kube-apiserver:
//! a burst of 2,000 `Scheduled` events on 2,000 pods reaches the server,
//! every pod with its Event, and a burst of repeats on one pod becomes one
//! Event whose series counts them all; Events wait while binds are in
//! flight; a waiting pod gets its PodScheduled condition unless it changed.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodSpec};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use partita::k8s::events::{EventType, Events};
use partita::k8s::metrics::Metrics;
use tokio::task::JoinSet;

async fn namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    api.create(&PostParams::default(), &ns).await.unwrap();
}

fn pod(namespace: &str, name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some("partita".into()),
            containers: vec![Container {
                name: "main".into(),
                image: Some("registry.invalid/none".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// A client of the test cluster, and `n` new pods in new namespace `ns`;
/// None without the harness (no Go).
async fn pods_in(ns: &str, n: usize) -> Option<(kube::Client, Vec<Pod>)> {
    let client = support::kube::client(support::kube::harness()?).await;
    namespace(&client, ns).await;
    let pods = create_pods(&client, ns, n).await;
    Some((client, pods))
}

/// Creates `n` unbound pods, 32 at a time; returns them as the server has
/// them (with their uid).
async fn create_pods(client: &kube::Client, ns: &str, n: usize) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut tasks = JoinSet::new();
    let mut pods = Vec::with_capacity(n);
    for i in 0..n {
        if tasks.len() >= 32
            && let Some(p) = tasks.join_next().await
        {
            pods.push(p.unwrap());
        }
        let api = api.clone();
        let p = pod(ns, &format!("p-{i:04}"));
        tasks.spawn(async move { api.create(&PostParams::default(), &p).await.unwrap() });
    }
    while let Some(p) = tasks.join_next().await {
        pods.push(p.unwrap());
    }
    pods
}

/// Every Event in `ns`, listed in pages.
async fn events(client: &kube::Client, ns: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut all = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await.unwrap();
        all.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return all,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_2000_scheduled_events_all_reach_the_server() {
    let ns = "events-burst";
    let Some((client, pods)) = pods_in(ns, 2000).await else {
        return;
    };
    assert_eq!(pods.len(), 2000);

    let metrics = Arc::new(Metrics::new());
    let (recorder, writer) = Events::start(
        client.clone(),
        "partita-scheduler",
        200.0,
        400,
        metrics.clone(),
    );
    // The burst: record never waits on the server.
    let start = Instant::now();
    for p in &pods {
        let node = "node-a";
        let note = format!(
            "partita: assigned {ns}/{} to {node}",
            p.metadata.name.as_deref().unwrap()
        );
        recorder.record(p, EventType::Normal, "Scheduled", &note);
    }
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "recording 2,000 events took {:?}",
        start.elapsed()
    );
    tokio::time::timeout(Duration::from_secs(60), recorder.flush())
        .await
        .expect("2,000 events not written within 60 s");

    let written = events(&client, ns).await;
    let mut by_pod: HashMap<String, Vec<&Event>> = HashMap::new();
    for e in &written {
        let r = e.regarding.as_ref().unwrap();
        assert_eq!(r.kind.as_deref(), Some("Pod"));
        by_pod.entry(r.name.clone().unwrap()).or_default().push(e);
    }
    for p in &pods {
        let name = p.metadata.name.as_deref().unwrap();
        let got = by_pod.get(name).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(got.len(), 1, "pod {name} has {} Events", got.len());
        let e = got[0];
        assert_eq!(e.reason.as_deref(), Some("Scheduled"));
        assert_eq!(e.type_.as_deref(), Some("Normal"));
        assert_eq!(e.reporting_controller.as_deref(), Some("partita-scheduler"));
        assert_eq!(e.regarding.as_ref().unwrap().uid, p.metadata.uid);
        assert!(e.note.as_deref().unwrap().ends_with("to node-a"));
        assert!(e.series.is_none());
    }
    assert_eq!(metrics.events_total("written"), 2000);
    assert_eq!(metrics.events_total("failed"), 0);

    // The core/v1 view shows the same Events on the pod, for kubectl describe.
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let on_first = core
        .list(&ListParams::default().fields("involvedObject.name=p-0000"))
        .await
        .unwrap();
    assert_eq!(on_first.items.len(), 1);
    assert_eq!(on_first.items[0].reason.as_deref(), Some("Scheduled"));

    recorder.shutdown(Duration::from_secs(5)).await;
    writer.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_on_one_pod_become_one_event_with_a_count() {
    let ns = "events-repeats";
    let Some((client, pods)) = pods_in(ns, 2).await else {
        return;
    };
    let (waiting, other) = (&pods[0], &pods[1]);

    let metrics = Arc::new(Metrics::new());
    // A small budget, so most repeats arrive while the first write waits.
    let (recorder, writer) =
        Events::start(client.clone(), "partita-scheduler", 5.0, 1, metrics.clone());
    let note = "partita: waiting for 8 GPUs of class training";
    for _ in 0..500 {
        recorder.record(waiting, EventType::Warning, "FailedScheduling", note);
    }
    recorder.record(other, EventType::Warning, "FailedScheduling", note);
    recorder.flush().await;
    // More repeats after the Event exists: they go into its series.
    for _ in 0..250 {
        recorder.record(waiting, EventType::Warning, "FailedScheduling", note);
    }
    // A different note is another Event.
    recorder.record(
        waiting,
        EventType::Warning,
        "FailedScheduling",
        "partita: quota",
    );
    recorder.shutdown(Duration::from_secs(30)).await;
    writer.await.unwrap();

    let written = events(&client, ns).await;
    let on = |pod: &Pod| -> Vec<&Event> {
        written
            .iter()
            .filter(|e| e.regarding.as_ref().unwrap().name == pod.metadata.name)
            .collect()
    };
    let waiting_events = on(waiting);
    assert_eq!(waiting_events.len(), 2, "{waiting_events:#?}");
    let repeated = waiting_events
        .iter()
        .find(|e| e.note.as_deref() == Some(note))
        .unwrap();
    let series = repeated
        .series
        .as_ref()
        .expect("no series on the repeated Event");
    assert_eq!(series.count, 750);
    let other_events = on(other);
    assert_eq!(other_events.len(), 1);
    assert!(other_events[0].series.is_none());
    assert_eq!(metrics.events_total("written"), 3);
    assert_eq!(metrics.events_total("aggregated"), 749);
    assert_eq!(metrics.events_total("failed"), 0);
}

/// An event that the server refuses (the namespace does not exist) is
/// counted failed, not lost without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_the_server_refuses_are_counted_failed() {
    let Some(h) = support::kube::harness() else {
        return;
    };
    let client = support::kube::client(h).await;
    let metrics = Arc::new(Metrics::new());
    let (recorder, writer) =
        Events::start(client, "partita-scheduler", 100.0, 100, metrics.clone());
    let ghost = pod("no-such-namespace", "ghost");
    for _ in 0..3 {
        recorder.record(&ghost, EventType::Normal, "Scheduled", "partita: assigned");
    }
    recorder.shutdown(Duration::from_secs(20)).await;
    writer.await.unwrap();
    assert_eq!(metrics.events_total("failed"), 3);
    assert_eq!(metrics.events_total("written"), 0);
}

/// While binds are in flight the writer holds Events back (they must not
/// slow binds), and writes them when the binds end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_wait_for_binds_in_flight() {
    let ns = "events-binds-first";
    let Some((client, pods)) = pods_in(ns, 1).await else {
        return;
    };
    let metrics = Arc::new(Metrics::new());
    let (recorder, writer) = Events::start(
        client.clone(),
        "partita-scheduler",
        100.0,
        100,
        metrics.clone(),
    );

    let binding = recorder.binding();
    recorder.record(
        &pods[0],
        EventType::Normal,
        "Scheduled",
        "partita: assigned",
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(events(&client, ns).await.len(), 0, "written while binding");
    drop(binding);
    tokio::time::timeout(Duration::from_secs(30), recorder.flush())
        .await
        .expect("the held Event was not written after the binds");
    assert_eq!(events(&client, ns).await.len(), 1);

    // Binds that never end hold Events back for a while only.
    let _forever = recorder.binding();
    recorder.record(
        &pods[0],
        EventType::Normal,
        "Preempted",
        "partita: preempted",
    );
    tokio::time::timeout(Duration::from_secs(30), recorder.flush())
        .await
        .expect("Events held back for good by binds in flight");
    assert_eq!(events(&client, ns).await.len(), 2);
    recorder.shutdown(Duration::from_secs(5)).await;
    writer.await.unwrap();
}

/// `record_waiting` sets the pod's PodScheduled condition with the
/// Event, unless the pod changed since it was read (it may be bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_pod_gets_its_condition_unless_it_changed() {
    let ns = "events-condition";
    let Some((client, pods)) = pods_in(ns, 2).await else {
        return;
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    // The second pod changes after it was read.
    let changed = touch(&api, pods[1].metadata.name.as_deref().unwrap()).await;
    assert_ne!(changed, pods[1].metadata.resource_version);
    let metrics = Arc::new(Metrics::new());
    let (recorder, writer) = Events::start(
        client.clone(),
        "partita-scheduler",
        100.0,
        100,
        metrics.clone(),
    );
    let note =
        partita::k8s::waiting::message("no room: no node fits the job (position 1 in queue q)");
    recorder.record_waiting(&pods[0], &note);
    recorder.record_waiting(&pods[1], &note);
    recorder.shutdown(Duration::from_secs(20)).await;
    writer.await.unwrap();

    let fresh = api
        .get(pods[0].metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        partita::k8s::waiting::reason_of(&fresh),
        Some("no room: no node fits the job")
    );
    let c = fresh.status.unwrap().conditions.unwrap();
    let c = c.iter().find(|c| c.type_ == "PodScheduled").unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
    let stale = api
        .get(pods[1].metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(partita::k8s::waiting::reason_of(&stale), None);
    // Both got their Event.
    assert_eq!(events(&client, ns).await.len(), 2);
}

/// Adds a label to pod `name`; returns its new resourceVersion.
async fn touch(api: &Api<Pod>, name: &str) -> Option<String> {
    use kube::api::{Patch, PatchParams};
    let patch = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap()
        .metadata
        .resource_version
}
