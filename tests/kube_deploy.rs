//! The shipped manifests with the scheduler under test (`partita kube`, a
//! child process: this build's, or the one env PARTITA_KUBE_SCHEDULER
//! names): port of the Go build's
//! go/test/integration/kube/{deploy,webhook}_test.go, the same cases and
//! assertions. Each test has a kube-apiserver of its own.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use partita::k8s::names;
use serde_json::json;
use support::kube_env::{
    Env, MIG_NAMESPACE, TestPod, WAIT, WAIT_STATUS, annotation, api_code, client_from, eventually,
    http_get, manifests,
};
use support::kube_nodes::{LABEL_GPU_COUNT, gpu_node, mig_node};
use support::kube_scheduler::{Scheduler, free_addr, test_flags};

/// The ServiceAccount the manifests give the scheduler, and its groups.
const SA_USER: &str = "system:serviceaccount:partita-system:partita";
const SA_GROUPS: [&str; 3] = [
    "system:serviceaccounts",
    "system:serviceaccounts:partita-system",
    "system:authenticated",
];

/// deployment_manifests (Go: TestDeploymentManifests): applies
/// deploy/kubernetes/partita.yaml to an API server that enforces RBAC,
/// then runs the scheduler as its ServiceAccount (a kubeconfig that
/// impersonates it), with leader election and the health and metrics
/// server: the least-privilege role must be enough to bind, evict, change
/// a MIG layout and write status, and the admission policy must stop it
/// from changing anything else on a node. (The Go test also names the
/// replica, "replica-1"; the command line has no flag for the identity,
/// so here the lease must just have a holder.)
#[tokio::test]
async fn deployment_manifests() {
    let Some(e) = Env::new(&["--authorization-mode=Node,RBAC"]).await else {
        return;
    };
    e.create_namespace(MIG_NAMESPACE).await;
    for obj in manifests("partita.yaml") {
        e.create(&obj).await.unwrap_or_else(|err| panic!("{err}"));
    }

    e.create_node(&gpu_node("gpu-0", 1, &[])).await;
    e.create_node(&mig_node(
        "mig-0",
        0,
        &[("1g.10gb", 7)],
        &[
            (LABEL_GPU_COUNT, "1"),
            (names::LABEL_MIG_CONFIG, "all-1g.10gb"),
            (names::LABEL_MIG_CONFIG_STATE, names::MIG_STATE_SUCCESS),
        ],
    ))
    .await;
    e.create_queue("team-a", 3, 4, json!({}))
        .await
        .expect("queue team-a");
    let k = e.kubelet();
    let _mm = e.mig_manager();

    let sa = e.impersonating_kubeconfig(SA_USER, &SA_GROUPS);
    let metrics = free_addr();
    let flags = test_flags()
        .set("leader-elect", "true")
        .set("lease-namespace", "partita-system")
        .set("lease-name", "partita-scheduler")
        .set("metrics-addr", &metrics);
    let mut s = Scheduler::start(&sa, &flags);

    let leases: Api<Lease> = Api::namespaced(e.client.clone(), "partita-system");
    eventually(WAIT, "lease held", async || {
        let Ok(l) = leases.get("partita-scheduler").await else {
            return Ok(false);
        };
        Ok(l.spec
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| !h.is_empty()))
    })
    .await;
    e.create_pod(TestPod {
        name: "batch",
        gpus: 1,
        queue: "team-a",
        ..Default::default()
    })
    .await;
    e.wait_bound(&["batch"]).await;
    e.create_pod(TestPod {
        name: "llm",
        mig: "3g.40gb",
        queue: "team-a",
        ..Default::default()
    })
    .await;
    e.wait_bound(&["llm"]).await;
    // Preemption: a production pod takes the batch pod's GPU.
    e.create_pod(TestPod {
        name: "serve",
        gpus: 1,
        queue: "team-a",
        priority_class: "partita-production",
        ..Default::default()
    })
    .await;
    e.wait_bound(&["serve"]).await;
    assert!(
        k.was_evicted("batch"),
        "the batch pod was not evicted through the Eviction API"
    );
    let queues = e.queues();
    eventually(WAIT_STATUS, "queue status written", async || {
        let q = queues.get("team-a").await?;
        Ok(q.data["status"]["usedGPUs"]
            .as_str()
            .is_some_and(|u| !u.is_empty()))
    })
    .await;

    // The admission policy: the ServiceAccount may set the MIG labels and
    // nothing else on a node.
    let sa_client = client_from(&sa).await;
    let nodes: Api<Node> = Api::all(sa_client.clone());
    for (what, patch) in [
        (
            "patching another node label",
            json!({"metadata": {"labels": {"team": "mine"}}}),
        ),
        ("cordoning a node", json!({"spec": {"unschedulable": true}})),
    ] {
        let got = nodes
            .patch("gpu-0", &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        match got {
            Err(err) if matches!(api_code(&err), Some(422 | 403)) => {}
            other => {
                panic!("{what}: got {other:?}, want it denied by the ValidatingAdmissionPolicy")
            }
        }
    }
    let secrets: Api<Secret> = Api::namespaced(sa_client, "default");
    match secrets.list(&ListParams::default()).await {
        Err(err) if api_code(&err) == Some(403) => {}
        other => panic!("listing secrets: got {other:?}, want Forbidden"),
    }

    s.assert_running();
    for (path, want) in [("/healthz", "ok"), ("/readyz", "ok")] {
        let (code, body) = http_get(&metrics, path).unwrap();
        assert!(
            code == 200 && body.contains(want),
            "GET {path}: {code}, want 200 with {want:?}:\n{body:.2000}"
        );
    }
    let want = r#"partita_kube_binds_total{result="ok"} 3"#;
    let mut body = String::new();
    eventually(WAIT_STATUS, "three binds counted", async || {
        let (code, text) = http_get(&metrics, "/metrics")?;
        body = text;
        Ok(code == 200 && body.contains(want))
    })
    .await;
    for failed in [r#"result="forbidden""#, r#"result="error""#] {
        let lines: Vec<&str> = body
            .lines()
            .filter(|l| l.contains("partita_kube"))
            .collect();
        assert!(
            !body.contains(failed),
            "metrics report failed calls ({failed}):\n{}",
            lines.join("\n")
        );
    }
}

/// A CA and a serving certificate for 127.0.0.1, made with the openssl
/// command: the CA's PEM, and the certificate's and key's files.
fn serving_cert(dir: &Path) -> (Vec<u8>, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"],
        &ec[..],
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "1",
            "-subj",
            "/CN=partita-test-ca",
        ],
    ]
    .concat());
    run(&[
        &["req"],
        &ec[..],
        &[
            "-keyout",
            "tls.key",
            "-out",
            "tls.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    ]
    .concat());
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "tls.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "tls.crt",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
    ]);
    let ca = std::fs::read(dir.join("ca.crt")).unwrap();
    (ca, dir.join("tls.crt"), dir.join("tls.key"))
}

/// webhook_sets_the_device_request (Go: TestWebhookSetsTheDeviceRequest):
/// with the admission webhook installed (the MutatingWebhookConfiguration
/// of deploy/kubernetes/webhook.yaml, pointed by URL at the scheduler's
/// webhook server, over TLS with a certificate made here), a pod that
/// states only its GPU memory is created with nvidia.com/mig-<profile>: 1
/// in its spec, as the device plugin needs, and is bound to an instance of
/// that profile.
#[tokio::test]
async fn webhook_sets_the_device_request() {
    let Some(e) = Env::new(&[]).await else { return };
    e.create_node(&mig_node(
        "mig-0",
        0,
        &[("1g.10gb", 3), ("1g.20gb", 2)],
        &[(LABEL_GPU_COUNT, "1")],
    ))
    .await;
    let _k = e.kubelet();

    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = serving_cert(dir.path());
    let webhook = free_addr();
    let flags = test_flags()
        .set("webhook-addr", &webhook)
        .set("tls-cert-file", cert.to_str().unwrap())
        .set("tls-key-file", key.to_str().unwrap());
    let mut s = e.start_scheduler(&flags);

    // The shipped configuration, with its rules and match conditions,
    // reached by URL instead of through the Service.
    let mut configs: Vec<_> = manifests("webhook.yaml")
        .into_iter()
        .filter(|m| m["kind"] == "MutatingWebhookConfiguration")
        .collect();
    assert_eq!(
        configs.len(),
        1,
        "webhook.yaml: MutatingWebhookConfigurations"
    );
    let mut cfg = configs.remove(0);
    let hooks = cfg["webhooks"].as_array_mut().expect("webhooks");
    assert_eq!(hooks.len(), 1, "webhook.yaml: webhooks");
    hooks[0]["clientConfig"] = json!({
        "url": format!("https://{webhook}/mutate-pods"),
        "caBundle": base64::engine::general_purpose::STANDARD.encode(&ca),
    });
    cfg["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("annotations");
    e.create(&cfg).await.unwrap_or_else(|err| panic!("{err}"));
    // The API server picks the configuration up within a moment, and the
    // scheduler serves the webhook once it is up.
    let probe: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "namespace": "default",
                     "annotations": {names::ANNOTATION_GPU_MEMORY: "5Gi"}},
        "spec": {"schedulerName": "partita", "containers": [{"name": "c", "image": "x"}]},
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    eventually(WAIT, "webhook active", async || {
        let got = e.pods.create(&dry_run, &probe).await?;
        Ok(limits(&got).contains_key("nvidia.com/mig-1g.10gb"))
    })
    .await;

    // 15 GiB + 10% needs the 20 GiB of a 1g.20gb.
    e.create_pod(TestPod {
        name: "embed",
        ann: &[
            (names::ANNOTATION_GPU_MEMORY, "15Gi"),
            (names::ANNOTATION_GPU_COMPUTE, "0.1"),
        ],
        ..Default::default()
    })
    .await;
    let p = e.pod("embed").await;
    let l = limits(&p);
    assert_eq!(
        l.get("nvidia.com/mig-1g.20gb").map(String::as_str),
        Some("1"),
        "limits {l:?}, want nvidia.com/mig-1g.20gb: 1"
    );
    assert_eq!(
        annotation(&p, names::ANNOTATION_MIG_PROFILE),
        "1g.20gb",
        "annotation {}",
        names::ANNOTATION_MIG_PROFILE
    );
    let p = e.wait_bound(&["embed"]).await.remove("embed").unwrap();
    let slice = annotation(&p, names::ANNOTATION_MIG_SLICE);
    assert!(
        slice.starts_with("0:1g.20gb@"),
        "bound with {}={slice:?}, want a 1g.20gb instance",
        names::ANNOTATION_MIG_SLICE
    );
    // Pods of other schedulers are not sent to the webhook at all.
    let other = e
        .create_pod(TestPod {
            name: "other",
            scheduler: "default-scheduler",
            ann: &[(names::ANNOTATION_GPU_MEMORY, "15Gi")],
            ..Default::default()
        })
        .await;
    assert!(
        limits(&other).is_empty(),
        "another scheduler's pod was changed: {:?}",
        limits(&other)
    );
    s.assert_running();
}

/// The first container's limits, as text.
fn limits(p: &Pod) -> std::collections::BTreeMap<String, String> {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.limits.as_ref())
        .map(|l| l.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        .unwrap_or_default()
}

/// The bodies of the ```yaml blocks of a Markdown text.
fn yaml_blocks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```yaml\n") {
        rest = &rest[start + "```yaml\n".len()..];
        let Some(end) = rest.find("```") else { break };
        out.push(&rest[..end]);
        rest = &rest[end + 3..];
    }
    out
}

/// docs_examples (Go: TestDocsExamples): keeps docs/kubernetes.md honest.
/// Its Queue, PodGroup and Job examples are created on a real API server
/// with Partita's CRDs (kinds the server does not know, such as
/// Kubeflow's, are skipped), the labels and annotations in its pod
/// templates are the ones Partita reads, and its mig-parted example is a
/// valid config under the name Partita would give it.
#[tokio::test]
async fn docs_examples() {
    let Some(e) = Env::new(&[]).await else { return };
    let text = std::fs::read_to_string(support::kube_env::repo_file("docs/kubernetes.md"))
        .expect("docs/kubernetes.md");
    e.create_namespace("ml").await;
    let known = [
        names::LABEL_POD_GROUP,
        names::LABEL_QUEUE,
        names::LABEL_COSCHEDULING_POD_GROUP,
        names::ANNOTATION_MIN_MEMBER,
        names::ANNOTATION_GPU_MEMORY,
        names::ANNOTATION_GPU_COMPUTE,
        names::ANNOTATION_ESTIMATED_RUNTIME,
        names::ANNOTATION_LAST_CHECKPOINT,
    ];
    let mut problems = Vec::new();
    let mut created: std::collections::BTreeMap<String, usize> = Default::default();
    for (i, block) in yaml_blocks(&text).into_iter().enumerate() {
        let docs: Vec<serde_json::Value> = match serde_saphyr::from_multiple(block) {
            Ok(d) => d,
            Err(err) => {
                eprintln!("block {i}: not YAML ({err}), skipped");
                continue;
            }
        };
        for obj in docs.into_iter().filter(|d| d.is_object()) {
            if obj.get("mig-configs").is_some() {
                check_mig_example(block, &mut problems);
                continue;
            }
            for meta in [&obj["metadata"], &obj["spec"]["template"]["metadata"]] {
                for kind in ["labels", "annotations"] {
                    for key in meta[kind].as_object().into_iter().flat_map(|m| m.keys()) {
                        if key.starts_with("partita.dev/") && !known.contains(&key.as_str()) {
                            problems.push(format!(
                                "block {i}: {key} is not a label or annotation Partita reads"
                            ));
                        }
                    }
                }
            }
            let Some(kind) = obj["kind"].as_str().filter(|k| !k.is_empty()) else {
                continue; // a fragment
            };
            match e.create(&obj).await {
                Err(support::kube_env::CreateError::NotServed(what)) => {
                    eprintln!("block {i}: {what}, skipped");
                    continue;
                }
                Err(err) => {
                    problems.push(format!("block {i}: create {kind}: {err}"));
                    continue;
                }
                Ok(()) => {}
            }
            *created.entry(kind.to_string()).or_default() += 1;
            if kind == "Job" {
                let s = &obj["spec"]["template"]["spec"]["schedulerName"];
                if s != names::DEFAULT_SCHEDULER_NAME {
                    problems.push(format!("the Job example's schedulerName is {s}"));
                }
            }
        }
    }
    for kind in ["Queue", "PodGroup", "Job"] {
        if !created.contains_key(kind) {
            problems.push(format!("no {kind} example was created"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The example config parses, every partita- entry carries the name
/// Partita gives its content, and its layouts fit an H100-80GB.
fn check_mig_example(text: &str, problems: &mut Vec<String>) {
    let configs = support::kube_env::parse_mig_parted(text)
        .unwrap_or_else(|err| panic!("mig-parted example: {err}"));
    let h100 = partita_engine::gpu::lookup("H100-80GB");
    for (name, specs) in configs.iter().filter(|(n, _)| n.starts_with("partita-")) {
        let (gpus, named) = match partita::k8s::migconfig::expand_specs(specs, 8) {
            Ok(g) => g,
            Err(err) => panic!("mig-parted example {name} on 8 GPUs: {err}"),
        };
        assert!(
            named.iter().all(|n| *n),
            "mig-parted example {name} on 8 GPUs: named {named:?}"
        );
        let got = partita::k8s::migconfig::config_name(&gpus);
        if &got != name {
            problems.push(format!(
                "mig-parted example is named {name}; Partita names that content {got}"
            ));
        }
        for (i, g) in gpus.iter().enumerate().filter(|(_, g)| g.mig) {
            if let Err(err) = partita::k8s::migconfig::pack_layouts(&h100, &g.counts, 1) {
                problems.push(format!("mig-parted example {name} GPU {i}: {err}"));
            }
        }
    }
}

/// deploy/kubernetes/server.yaml's least-privilege role is enough for the
/// worker of `partita serve --cluster kubernetes`: run as that
/// ServiceAccount (and the scheduler as its own), a job submitted through
/// the API gets its namespace, Queue and pods, is bound, runs, succeeds
/// and is billed.
#[tokio::test]
async fn server_manifests_let_the_worker_run_a_job_on_the_cluster() {
    let Some(e) = Env::new(&["--authorization-mode=Node,RBAC"]).await else {
        return;
    };
    e.create_namespace(MIG_NAMESPACE).await;
    for file in ["partita.yaml", "server.yaml"] {
        for obj in manifests(file) {
            e.create(&obj)
                .await
                .unwrap_or_else(|err| panic!("{file}: {err}"));
        }
    }
    e.create_node(&gpu_node("srv-gpu-0", 8, &[])).await;
    let scheduler_sa = e.impersonating_kubeconfig(SA_USER, &SA_GROUPS);
    let _s = Scheduler::start(&scheduler_sa, &test_flags());

    let w = support::api::world().await;
    let server_sa = e.impersonating_kubeconfig(
        "system:serviceaccount:partita-system:partita-server",
        &SA_GROUPS,
    );
    let worker = support::kube::kube_worker(&server_sa, &w, "server-sa", "partita").await;

    let lead = w.token("lead").unwrap().to_string();
    let a = support::api::call(
        &w.app,
        "POST",
        "/api/v1/jobs",
        Some(&lead),
        Some(json!({"gpu": {"count": 2}, "duration": "1h"})),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.body["id"].as_str().unwrap().to_string();
    let state = async || {
        let a = support::api::call(
            &w.app,
            "GET",
            &format!("/api/v1/jobs/{id}"),
            Some(&lead),
            None,
        )
        .await;
        Ok::<_, String>(a.body)
    };
    let pods: Api<Pod> = Api::namespaced(e.client.clone(), "search");
    eventually(WAIT, "the job's pod, bound", async || {
        let list = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(list.items.len() == 1
            && list.items[0]
                .spec
                .as_ref()
                .is_some_and(|s| s.node_name.is_some()))
    })
    .await;
    eventually(WAIT, "the job running", async || {
        Ok(state().await?["state"] == "running")
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let name = pods.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    let done = json!({"status": {"phase": "Succeeded"}});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&done))
        .await
        .unwrap();
    eventually(WAIT, "the job succeeded", async || {
        Ok(state().await?["state"] == "succeeded")
    })
    .await;
    let a = support::api::call(&w.app, "GET", "/api/v1/ledger", w.token("finance"), None).await;
    let rows = a.body["entries"].as_array().expect("ledger entries");
    assert_eq!(
        rows.iter().filter(|r| r["job"] == id.as_str()).count(),
        2,
        "{}",
        a.body
    );
    worker.stop().await;
}
