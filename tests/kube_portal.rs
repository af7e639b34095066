//! Jobs submitted through the API (as the portal does) run on a real
//! kube-apiserver as pods (`--cluster kubernetes`, src/worker/kube.rs):
//! the worker makes the pods and the team's Queue, a bind starts the job,
//! the pods' phases end it, and its GPU-hours land in the ledger.
//!
//! The first two tests play the kubelet (pod phases) and the scheduler
//! (the bind), so that the worker's side is tested on its own; the last
//! runs Partita's scheduler too, and checks what the portal shows of the
//! cluster and of why a job waits.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use partita::k8s::resources::Queue;
use serde_json::{Value, json};
use support::api::call;

/// The PriorityClasses of deploy/kubernetes/partita.yaml: the API server
/// refuses a pod that names a class it does not have.
async fn priority_classes(client: &kube::Client) {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let api: Api<PriorityClass> = Api::all(client.clone());
    for (name, value) in [
        ("partita-production", 1_000_000),
        ("partita-batch", 0),
        ("partita-best-effort", -100),
    ] {
        let pc: PriorityClass =
            serde_json::from_value(json!({"metadata": {"name": name}, "value": value})).unwrap();
        match api.create(&PostParams::default(), &pc).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("creating PriorityClass {name}: {e}"),
        }
    }
}

/// Waits (60 s at most) until `done` says so.
async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no {what} in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Ready node of eight H100s as the device plugin and GPU Feature
/// Discovery describe it.
async fn gpu_node(client: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.count": "8",
        }},
    }))
    .unwrap();
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating node {name}: {e}"),
    }
    // The API server taints a new node not-ready until a node controller,
    // which does not run here, sees it Ready.
    let mut got = nodes.get(name).await.unwrap();
    if let Some(taints) = got.spec.as_mut().and_then(|s| s.taints.as_mut()) {
        taints.retain(|t| t.key != "node.kubernetes.io/not-ready");
        nodes
            .replace(name, &PostParams::default(), &got)
            .await
            .unwrap();
    }
    let status = json!({"status": {
        "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"},
        "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// Binds a pod as the scheduler does: the node and the GPUs in one write.
async fn bind(pods: &Api<Pod>, name: &str, node: &str, gpus: &str) {
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "annotations": {"partita.dev/gpus": gpus}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    pods.create_subresource::<Value, Value>("binding", name, &PostParams::default(), &binding)
        .await
        .unwrap();
}

async fn job_state(w: &support::api::World, token: &str, id: &str) -> Value {
    let a = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{id}"),
        Some(token),
        None,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.body
}

/// How many GPUs in a published cluster view hold job `id`.
fn gpus_held_by(cluster: &Value, id: &str) -> usize {
    let Some(nodes) = cluster["nodes"].as_array() else {
        return 0;
    };
    nodes
        .iter()
        .flat_map(|n| n["gpus"].as_array().cloned().unwrap_or_default())
        .filter(|g| {
            g["holders"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h["job"] == id))
        })
        .count()
}

/// Job `id`'s entry in a published queue answer.
fn queue_entry(queue: &Value, id: &str) -> Option<Value> {
    queue["teams"]
        .as_array()?
        .iter()
        .flat_map(|t| t["jobs"].as_array().cloned().unwrap_or_default())
        .find(|j| j["job"] == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_submitted_through_the_api_runs_as_pods_and_is_billed() {
    let Some(h) = support::kube::harness() else {
        return;
    };
    let client = support::kube::client(h).await;
    support::kube::install_crds(&client).await;
    priority_classes(&client).await;
    gpu_node(&client, "portal-gpu-1").await;
    let w = support::api::world().await;
    let worker = support::kube::kube_worker(&h.kubeconfig, &w, "kube-worker", "partita").await;

    let lead = w.token("lead").unwrap().to_string();
    let a = call(
        &w.app,
        "POST",
        "/api/v1/jobs",
        Some(&lead),
        Some(json!({"gpu": {"count": 2}, "duration": "1h"})),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.body["id"].as_str().unwrap().to_string();

    // The worker makes the team's Queue from its quota and the job's pod
    // in the team's namespace.
    let queues: Api<Queue> = Api::all(client.clone());
    eventually("Queue search", || async {
        queues.get_opt("search").await.unwrap().is_some()
    })
    .await;
    let q = queues.get("search").await.unwrap();
    assert_eq!(q.spec.team, "search");
    assert_eq!(q.spec.guaranteed_gpus, 16);
    assert_eq!(q.spec.burst_gpus, Some(32));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "search");
    let selector = ListParams::default().labels(&format!(
        "partita.dev/job-id={}",
        partita::k8s::workloads::label_value(&id)
    ));
    eventually("the job's pod", || async {
        pods.list(&selector).await.unwrap().items.len() == 1
    })
    .await;
    let pod = pods.list(&selector).await.unwrap().items.remove(0);
    let name = pod.name_any();
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.scheduler_name.as_deref(), Some("partita"));
    assert_eq!(spec.priority_class_name.as_deref(), Some("partita-batch"));
    let limits = spec.containers[0]
        .resources
        .as_ref()
        .unwrap()
        .limits
        .as_ref()
        .unwrap();
    assert_eq!(limits["nvidia.com/gpu"].0, "2");
    assert_eq!(pod.labels()["partita.dev/queue"], "search");
    assert_eq!(job_state(&w, &lead, &id).await["state"], "queued");

    // The scheduler's bind: the node and the GPUs in one write.
    bind(&pods, &name, "portal-gpu-1", "3,4").await;
    eventually("the job running", || async {
        job_state(&w, &lead, &id).await["state"] == "running"
    })
    .await;
    // The kubelet's part: it runs a while, then exits 0.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let done = json!({"status": {"phase": "Succeeded"}});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&done))
        .await
        .unwrap();
    eventually("the job succeeded", || async {
        job_state(&w, &lead, &id).await["state"] == "succeeded"
    })
    .await;

    // Two GPUs held from the bind to the end: two ledger rows, billed to
    // the team, on the node's model, and the chargeback counts them.
    let fin = w.token("finance").unwrap();
    let a = call(&w.app, "GET", "/api/v1/ledger", Some(fin), None).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let rows: Vec<&Value> = a.body["entries"]
        .as_array()
        .expect("ledger entries")
        .iter()
        .filter(|r| r["job"] == id.as_str())
        .collect();
    assert_eq!(rows.len(), 2, "{}", a.body);
    let mut gpus: Vec<i64> = rows.iter().map(|r| r["gpu"].as_i64().unwrap()).collect();
    gpus.sort();
    assert_eq!(gpus, [3, 4]);
    for r in &rows {
        assert_eq!(r["team"], "search");
        assert_eq!(r["node"], "portal-gpu-1");
        assert!(r["model"].as_str().unwrap().contains("H100"), "{r}");
        assert!(r["micro_gpu_hours"].as_i64().unwrap() > 0, "{r}");
    }
    let billed: i64 = rows
        .iter()
        .map(|r| r["micro_gpu_hours"].as_i64().unwrap())
        .sum();
    let a = call(
        &w.app,
        "GET",
        "/api/v1/reports/chargeback?group_by=team",
        Some(fin),
        None,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let search = a.body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["team"] == "search")
        .unwrap_or_else(|| panic!("no row of team search: {}", a.body));
    assert_eq!(
        search["micro_gpu_hours"].as_i64(),
        Some(billed),
        "{}",
        a.body
    );
    worker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_made_with_kubectl_shows_up_under_its_queues_team_and_is_billed() {
    let Some(h) = support::kube::harness() else {
        return;
    };
    let client = support::kube::client(h).await;
    support::kube::install_crds(&client).await;
    gpu_node(&client, "kubectl-gpu-1").await;
    let queues: Api<Queue> = Api::all(client.clone());
    let q: Queue = serde_json::from_value(json!({
        "apiVersion": "partita.dev/v1alpha1", "kind": "Queue",
        "metadata": {"name": "ads-training"},
        "spec": {"team": "ads", "guaranteedGPUs": 4},
    }))
    .unwrap();
    match queues.create(&PostParams::default(), &q).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating the Queue: {e}"),
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "ads-lab"}})).unwrap(),
        )
        .await;
    let w = support::api::world().await;
    let worker = support::kube::kube_worker(&h.kubeconfig, &w, "kubectl-worker", "partita").await;

    // Someone's own pod, for Partita's scheduler, in the Queue of ads.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ads-lab");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "notebook", "labels": {"partita.dev/queue": "ads-training"}},
        "spec": {"schedulerName": "partita", "containers": [{
            "name": "main", "image": "jupyter",
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "2"}},
        }]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    let admin = w.token("admin").unwrap().to_string();
    let find = || async {
        let a = call(&w.app, "GET", "/api/v1/jobs?team=ads", Some(&admin), None).await;
        assert_eq!(a.status, 200, "{}", a.body);
        let list = a.body["jobs"].as_array().cloned().unwrap_or_default();
        list.into_iter()
            .find(|j| j["id"].as_str().is_some_and(|id| id.starts_with("k8s-")))
    };
    eventually("the pod as a job of ads", || async {
        find().await.is_some()
    })
    .await;
    let job = find().await.unwrap();
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(job["team"], "ads", "{job}");
    assert_eq!(job["state"], "queued", "{job}");

    bind(&pods, "notebook", "kubectl-gpu-1", "5").await;
    eventually("the job running", || async {
        job_state(&w, &admin, &id).await["state"] == "running"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let done = json!({"status": {"phase": "Succeeded"}});
    pods.patch_status("notebook", &PatchParams::default(), &Patch::Merge(&done))
        .await
        .unwrap();
    eventually("the job succeeded", || async {
        job_state(&w, &admin, &id).await["state"] == "succeeded"
    })
    .await;
    let a = call(&w.app, "GET", "/api/v1/ledger?team=ads", Some(&admin), None).await;
    let rows: Vec<&Value> = a.body["entries"]
        .as_array()
        .expect("ledger entries")
        .iter()
        .filter(|r| r["job"] == id.as_str())
        .collect();
    assert_eq!(rows.len(), 1, "{}", a.body);
    assert_eq!(rows[0]["gpu"], 5);
    assert_eq!(rows[0]["user"], "kubernetes:ads");
    assert!(rows[0]["micro_gpu_hours"].as_i64().unwrap() > 0);
    worker.stop().await;
}

/// The whole path, as users have it: a team lead submits a training gang
/// in the portal; the worker makes its pods; Partita's scheduler (this
/// build's, in this process) binds them; the test plays the kubelet; the
/// job succeeds and finance sees its GPU-hours in the portal's chargeback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_submitted_in_the_portal_is_scheduled_runs_and_is_charged() {
    use support::portal::Visitor;
    let Some(h) = support::kube::harness() else {
        return;
    };
    // A scheduler name of its own: the other tests of this binary play
    // the scheduler themselves on the same API server.
    const NAME: &str = "partita-e2e";
    let client = support::kube::client(h).await;
    support::kube::install_crds(&client).await;
    priority_classes(&client).await;
    gpu_node(&client, "e2e-gpu-1").await;
    gpu_node(&client, "e2e-gpu-2").await;
    let w = support::api::world().await;
    let worker = support::kube::kube_worker(&h.kubeconfig, &w, "e2e-worker", NAME).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let scheduler = tokio::spawn(partita::k8s::run::run(
        partita::k8s::run::RunOptions {
            scheduler: partita::k8s::scheduler::Options {
                scheduler_name: NAME.into(),
                interval: Duration::from_millis(500),
                ..Default::default()
            },
            kubeconfig: Some(h.kubeconfig.clone()),
            qps: 500.0,
            burst: 1000,
            leader_elect: false,
            lease_namespace: String::new(),
            lease_name: String::new(),
            identity: String::new(),
            metrics_addr: String::new(),
            webhook_addr: String::new(),
            tls_cert_file: Default::default(),
            tls_key_file: Default::default(),
        },
        async {
            let _ = stopped.await;
        },
    ));

    let mut lead = Visitor::new(w.app.clone());
    lead.sign_in(w.token("lead").unwrap()).await;
    lead.get("/submit").await;
    let posted = lead
        .post(
            "/submit",
            &[
                ("kind", "training"),
                ("team", "search"),
                ("project", "default"),
                ("class", "batch"),
                ("name", "llama finetune"),
                ("gpu_mode", "count"),
                ("gpu_count", "4"),
                ("tasks", "2"),
                ("gang", "2"),
                ("duration", "1h"),
                ("idempotency_key", "e2e-1"),
            ],
        )
        .await;
    assert!(
        posted.status.is_redirection() || posted.status == 200,
        "{}",
        posted.body
    );
    let leo = w.token("lead").unwrap().to_string();
    let a = call(&w.app, "GET", "/api/v1/jobs?team=search", Some(&leo), None).await;
    let id = a.body["jobs"][0]["id"]
        .as_str()
        .expect("the job")
        .to_string();

    // Two pods of four GPUs, bound together by the scheduler.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "search");
    let selector = ListParams::default().labels(&format!(
        "partita.dev/job-id={}",
        partita::k8s::workloads::label_value(&id)
    ));
    eventually("both pods bound", || async {
        let list = pods.list(&selector).await.unwrap().items;
        list.len() == 2
            && list
                .iter()
                .all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
    })
    .await;
    let bound = pods.list(&selector).await.unwrap().items;
    for p in &bound {
        let gpus = &p.annotations()["partita.dev/gpus"];
        assert_eq!(gpus.split(',').count(), 4, "{gpus}");
    }
    eventually("the job running", || async {
        job_state(&w, &leo, &id).await["state"] == "running"
    })
    .await;

    // The portal's cluster view is the Kubernetes cluster: both nodes,
    // and the job on the eight GPUs it was bound to (on any node: the
    // other tests of this binary add nodes to the same API server).
    eventually("the job on the published cluster", || async {
        let c = call(&w.app, "GET", "/api/v1/cluster", Some(&leo), None).await;
        c.status == 200 && gpus_held_by(&c.body, &id) == 8
    })
    .await;
    let c = call(&w.app, "GET", "/api/v1/cluster", Some(&leo), None).await;
    let ours: Vec<&Value> = c.body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["name"].as_str().unwrap().starts_with("e2e-gpu-"))
        .collect();
    assert_eq!(ours.len(), 2, "{}", c.body);
    for n in &ours {
        assert_eq!(n["gpus"].as_array().unwrap().len(), 8, "{n}");
        assert!(
            n["gpus"][0]["model"].as_str().unwrap().contains("H100"),
            "{n}"
        );
    }

    // A gang of 32 GPUs cannot start beside it: the scheduler says why on
    // its pods (PodScheduled False), and the portal's queue shows those
    // words. (The other tests of this binary add two 8-GPU nodes to the
    // same API server, so 32 GPUs is the whole cluster: a smaller gang
    // could fit on their nodes once their jobs end.)
    let a = call(
        &w.app,
        "POST",
        "/api/v1/jobs",
        Some(&leo),
        Some(json!({"gpu": {"count": 8}, "tasks": 4, "gang": 4, "duration": "1h"})),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let big = a.body["id"].as_str().unwrap().to_string();
    let big_selector = ListParams::default().labels(&format!(
        "partita.dev/job-id={}",
        partita::k8s::workloads::label_value(&big)
    ));
    eventually("the scheduler's reason on the gang's pods", || async {
        let list = pods.list(&big_selector).await.unwrap().items;
        list.len() == 4
            && list
                .iter()
                .all(|p| partita::k8s::waiting::reason_of(p).is_some())
    })
    .await;
    let waiting = pods.list(&big_selector).await.unwrap().items;
    let said = partita::k8s::waiting::reason_of(&waiting[0])
        .unwrap()
        .to_string();
    let condition = waiting[0]
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap()
        .clone();
    assert_eq!(condition.status, "False");
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    eventually("the reason in the portal's queue", || async {
        let q = call(&w.app, "GET", "/api/v1/queue", Some(&leo), None).await;
        queue_entry(&q.body, &big).is_some_and(|e| e["reason"] == said.as_str())
    })
    .await;
    let q = call(&w.app, "GET", "/api/v1/queue", Some(&leo), None).await;
    assert_eq!(
        queue_entry(&q.body, &big).unwrap()["position"],
        1,
        "{}",
        q.body
    );
    let a = call(
        &w.app,
        "POST",
        &format!("/api/v1/jobs/{big}/cancel"),
        Some(&leo),
        None,
    )
    .await;
    assert!(a.status.is_success(), "{}", a.body);
    eventually("the waiting gang cancelled", || async {
        job_state(&w, &leo, &big).await["state"] == "cancelled"
    })
    .await;

    tokio::time::sleep(Duration::from_secs(2)).await;
    for p in &bound {
        let done = json!({"status": {"phase": "Succeeded"}});
        pods.patch_status(&p.name_any(), &PatchParams::default(), &Patch::Merge(&done))
            .await
            .unwrap();
    }
    eventually("the job succeeded", || async {
        job_state(&w, &leo, &id).await["state"] == "succeeded"
    })
    .await;

    // Eight GPUs' hours, in the API's chargeback and on finance's page.
    let fin = w.token("finance").unwrap();
    let a = call(
        &w.app,
        "GET",
        "/api/v1/reports/chargeback?group_by=team",
        Some(fin),
        None,
    )
    .await;
    let row = a.body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["team"] == "search")
        .unwrap_or_else(|| panic!("no row of team search: {}", a.body))
        .clone();
    assert_eq!(row["holds"], 8, "{row}");
    assert!(row["micro_gpu_hours"].as_i64().unwrap() > 0, "{row}");
    let mut finance = Visitor::new(w.app.clone());
    finance.sign_in(fin).await;
    let page = finance.get("/chargeback?group_by=team").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("<td>search</td>"), "{}", page.body);
    let hours = row["gpu_hours"].as_str().unwrap();
    assert!(
        page.body.contains(hours),
        "{hours} not on the page: {}",
        page.body
    );

    let _ = stop.send(());
    scheduler.await.unwrap().unwrap();
    worker.stop().await;
}
