//! The scheduler under test (`partita kube`, a child process: this
//! build's, or the one env PARTITA_KUBE_SCHEDULER names) against a real
//! kube-apiserver, one per test: port of the Go build's
//! go/test/integration/kube/{bind,quota,restart,bad,mig}_test.go, the same
//! cases and assertions. The tests play the kubelet and the GPU
//! Operator's MIG manager (tests/support/kube_env.rs).

mod support;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use partita::k8s::migconfig;
use partita::k8s::names;
use serde_json::json;
use support::kube_env::{
    Env, MIG_CONFIG_KEY, MIG_CONFIGMAP, MIG_NAMESPACE, TestPod, WAIT, WAIT_STATUS, annotation,
    api_code, eventually, http_get, metric, node_name, parse_mig_parted,
};
use support::kube_nodes::{LABEL_GPU_COUNT, gpu_node, mig_node};
use support::kube_scheduler::{free_addr, test_flags};

/// binds_with_devices (Go: TestBindsWithDevices): pods asking for whole
/// GPUs, a MIG instance and a memory need are bound through pods/binding
/// with the devices recorded in annotations, never two pods on one device.
#[tokio::test]
async fn binds_with_devices() {
    let Some(e) = Env::new(&[]).await else { return };
    e.create_node(&gpu_node("gpu-0", 8, &[])).await;
    e.create_node(&mig_node(
        "mig-0",
        0,
        &[("1g.10gb", 7)],
        &[(LABEL_GPU_COUNT, "1")],
    ))
    .await;
    let _k = e.kubelet();
    let _s = e.start_scheduler(&test_flags());

    e.create_pod(TestPod {
        name: "train-a",
        gpus: 2,
        ..Default::default()
    })
    .await;
    e.create_pod(TestPod {
        name: "train-b",
        gpus: 4,
        ..Default::default()
    })
    .await;
    e.create_pod(TestPod {
        name: "infer",
        mig: "1g.10gb",
        ..Default::default()
    })
    .await;
    // No webhook in this test: the memory need is honoured by the
    // scheduler's bookkeeping, and the pod is told the device plugin will
    // not give it a device.
    e.create_pod(TestPod {
        name: "embed",
        ann: &[(names::ANNOTATION_GPU_MEMORY, "5Gi")],
        ..Default::default()
    })
    .await;
    let bound = e
        .wait_bound(&["train-a", "train-b", "infer", "embed"])
        .await;

    let mut used = HashSet::new();
    for (name, want) in [("train-a", 2), ("train-b", 4)] {
        let p = &bound[name];
        assert_eq!(node_name(p), "gpu-0", "{name}");
        let gpus = annotation(p, names::ANNOTATION_GPUS);
        let list: Vec<&str> = gpus.split(',').collect();
        assert_eq!(
            list.len(),
            want,
            "{name}: {}={gpus:?}",
            names::ANNOTATION_GPUS
        );
        for g in list {
            assert!(used.insert(g.to_string()), "GPU {g} given twice");
        }
        assert_eq!(
            annotation(p, names::ANNOTATION_JOB),
            format!("pod:default/{name}"),
            "{name}: job annotation"
        );
    }
    let mut slices = HashSet::new();
    for name in ["infer", "embed"] {
        let p = &bound[name];
        let s = annotation(p, names::ANNOTATION_MIG_SLICE);
        assert!(
            node_name(p) == "mig-0" && s.starts_with("0:1g.10gb@"),
            "{name} on {} with {}={s:?}, want a 1g.10gb instance on mig-0",
            node_name(p),
            names::ANNOTATION_MIG_SLICE
        );
        assert!(slices.insert(s.to_string()), "instance {s} given twice");
    }
    e.wait_event(
        "train-a",
        "Scheduled",
        "assigned default/train-a to gpu-0 (GPUs",
    )
    .await;
    e.wait_event("embed", "NoDeviceRequest", "admission webhook")
        .await;
}

/// gang_all_or_nothing (Go: TestGangAllOrNothing): a gang starts whole or
/// not at all, and waits for all its members to exist.
#[tokio::test]
async fn gang_all_or_nothing() {
    let Some(e) = Env::new(&[]).await else { return };
    e.create_node(&gpu_node("gpu-0", 4, &[])).await;
    e.create_node(&gpu_node("gpu-1", 4, &[])).await;
    let _k = e.kubelet();
    // Another scheduler's pod holds one GPU of gpu-0: Partita counts it.
    e.create_pod(TestPod {
        name: "blocker",
        gpus: 1,
        scheduler: "default-scheduler",
        ..Default::default()
    })
    .await;
    e.bind_to("blocker", "gpu-0").await.expect("bind blocker");
    let _s = e.start_scheduler(&test_flags());

    e.create_pod_group("big", 2, "")
        .await
        .expect("create PodGroup big");
    e.create_pod(TestPod {
        name: "big-0",
        group: "big",
        gpus: 4,
        ..Default::default()
    })
    .await;
    e.create_pod(TestPod {
        name: "big-1",
        group: "big",
        gpus: 4,
        ..Default::default()
    })
    .await;
    // Three of four pods of a gang declared by annotation.
    let ann = [(names::ANNOTATION_MIN_MEMBER, "4")];
    for n in ["small-0", "small-1", "small-2"] {
        e.create_pod(TestPod {
            name: n,
            group: "small",
            gpus: 1,
            ann: &ann,
            ..Default::default()
        })
        .await;
    }
    e.wait_event("big-0", "FailedScheduling", "gang").await;
    e.wait_event("small-0", "FailedScheduling", "gang: 3 of 4 pods exist")
        .await;
    e.stay_pending(
        Duration::from_secs(1),
        &["big-0", "big-1", "small-0", "small-1", "small-2"],
    )
    .await;

    // The last member arrives: the small gang fits on gpu-1 (or the free
    // GPUs of gpu-0) and starts whole.
    e.create_pod(TestPod {
        name: "small-3",
        group: "small",
        gpus: 1,
        ann: &ann,
        ..Default::default()
    })
    .await;
    e.wait_bound(&["small-0", "small-1", "small-2", "small-3"])
        .await;
    e.stay_pending(Duration::from_millis(500), &["big-0", "big-1"])
        .await;

    // Room for the big gang: both members start.
    for n in ["blocker", "small-0", "small-1", "small-2", "small-3"] {
        e.delete_pod(n).await;
    }
    let bound = e.wait_bound(&["big-0", "big-1"]).await;
    assert_ne!(
        node_name(&bound["big-0"]),
        node_name(&bound["big-1"]),
        "both 4-GPU members on one node, which has 4 GPUs"
    );
    let groups = e.pod_groups();
    eventually(WAIT_STATUS, "PodGroup status Running", async || {
        let pg = groups.get("big").await?;
        Ok(pg.data["status"]["phase"] == "Running")
    })
    .await;
}

/// quota_and_borrowing (Go: TestQuotaAndBorrowing): a team borrows idle
/// GPUs up to its burst, waits beyond it, and gives borrowed GPUs back,
/// through evictions, when the owner of the guarantee asks.
#[tokio::test]
async fn quota_and_borrowing() {
    let Some(e) = Env::new(&[]).await else { return };
    e.create_node(&gpu_node("gpu-0", 4, &[])).await;
    let k = e.kubelet();
    e.create_queue("research", 2, 4, json!({}))
        .await
        .expect("queue research");
    e.create_queue("prod", 2, 2, json!({}))
        .await
        .expect("queue prod");
    let _s = e.start_scheduler(&test_flags());

    let names = ["r0", "r1", "r2", "r3", "r4"];
    for n in names {
        e.create_pod(TestPod {
            name: n,
            queue: "research",
            gpus: 1,
            ..Default::default()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(10)).await; // distinct creation order
    }
    // Burst 4: four run (two of them borrowed), the fifth waits on quota.
    e.wait_bound(&names[..4]).await;
    e.wait_event("r4", "FailedScheduling", "quota").await;
    e.stay_pending(Duration::from_millis(500), &["r4"]).await;
    let queues = e.queues();
    eventually(WAIT_STATUS, "queue status", async || {
        let q = queues.get("research").await?;
        Ok(q.data["status"]["usedGPUs"] == "4.000")
    })
    .await;

    // The owner of the other guarantee asks: two borrowed GPUs come back,
    // one eviction each. (One at a time: while the first claim's victim
    // exits its node is promised to it, and the engine then holds off a
    // second victim search for a while.)
    e.create_pod(TestPod {
        name: "p0",
        queue: "prod",
        gpus: 1,
        ..Default::default()
    })
    .await;
    e.wait_bound(&["p0"]).await;
    e.create_pod(TestPod {
        name: "p1",
        queue: "prod",
        gpus: 1,
        ..Default::default()
    })
    .await;
    e.wait_bound(&["p1"]).await;
    let evicted = names[..4].iter().filter(|n| k.was_evicted(n)).count();
    assert_eq!(evicted, 2, "research pods evicted through the Eviction API");
}

/// preemption_through_eviction (Go: TestPreemptionThroughEviction):
/// production work evicts lower-priority work of its own team through the
/// Eviction API, with the grace period.
#[tokio::test]
async fn preemption_through_eviction() {
    let Some(e) = Env::new(&[]).await else { return };
    e.create_node(&gpu_node("gpu-0", 2, &[])).await;
    let k = e.kubelet();
    let classes: Api<PriorityClass> = Api::all(e.client.clone());
    for (name, value) in [("batch", 0), ("production", 1_000_000)] {
        let pc = PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            value: Some(value),
            ..Default::default()
        };
        classes
            .create(&PostParams::default(), &pc)
            .await
            .expect("create PriorityClass");
    }
    let _s = e.start_scheduler(&test_flags());
    e.create_pod(TestPod {
        name: "b0",
        gpus: 1,
        priority_class: "batch",
        ..Default::default()
    })
    .await;
    e.create_pod(TestPod {
        name: "b1",
        gpus: 1,
        priority_class: "batch",
        ..Default::default()
    })
    .await;
    e.wait_bound(&["b0", "b1"]).await;

    e.create_pod(TestPod {
        name: "serve",
        gpus: 1,
        priority_class: "production",
        ..Default::default()
    })
    .await;
    e.wait_bound(&["serve"]).await;
    let mut victims = 0;
    for n in ["b0", "b1"] {
        if k.was_evicted(n) {
            victims += 1;
            e.wait_event(n, "Preempted", "preempted for pod:default/serve")
                .await;
        }
    }
    assert_eq!(victims, 1, "batch pods evicted");
}

/// A ValidatingAdmissionPolicy that refuses binds of the named pods and of
/// the probe pods (`probe-*`): the Go test's BeforeBind hook, from outside.
fn refuse_binds(pods: &[&str]) -> [serde_json::Value; 2] {
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "crash-binds"},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["pods/binding"],
                }]},
                "validations": [{
                    "expression": format!(
                        "!(request.name in {}) && !request.name.startsWith('probe-')",
                        serde_json::to_string(pods).unwrap()
                    ),
                    "message": "crashed",
                }],
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "crash-binds"},
            "spec": {"policyName": "crash-binds", "validationActions": ["Deny"]},
        }),
    ]
}

/// Waits until binds of probe pods are refused (`refused`) or go through:
/// the API server takes a moment to pick a policy change up. Probes are
/// bound to a node that does not exist, so no scheduler counts them.
async fn wait_policy(e: &Env, refused: bool, probes: &mut usize) {
    let start = std::time::Instant::now();
    loop {
        let name = format!("probe-{probes}");
        *probes += 1;
        e.create_pod(TestPod {
            name: &name,
            scheduler: "nobody",
            ..Default::default()
        })
        .await;
        match e.bind_to(&name, "nowhere").await {
            Ok(()) if !refused => return,
            Err(err) if matches!(api_code(&err), Some(403 | 422)) && refused => return,
            Ok(()) => {}
            Err(err) if matches!(api_code(&err), Some(403 | 422)) => {}
            Err(err) => panic!("bind {name}: {err}"),
        }
        assert!(
            start.elapsed() < WAIT,
            "binds refused: {refused}: not within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// restart_halfway (Go: TestRestartHalfway): the scheduler dies after
/// binding half of a gang. Its successor binds the rest (the gang is not
/// lost) and never tries to bind a pod already bound, and no device is
/// given twice. The Go test fails every bind after the second with a hook;
/// here the API server refuses binds of w2 and w3 (an admission policy)
/// until the first scheduler is killed (SIGKILL) with w0 and w1 bound, and
/// the successor's tries are counted in its metrics.
#[tokio::test]
async fn restart_halfway() {
    let Some(e) = Env::new(&[]).await else { return };
    e.create_node(&gpu_node("gpu-0", 8, &[])).await;
    let _k = e.kubelet();
    let names = ["w0", "w1", "w2", "w3"];
    e.create_pod_group("ring", 4, "")
        .await
        .expect("create PodGroup ring");
    for n in names {
        e.create_pod(TestPod {
            name: n,
            group: "ring",
            gpus: 2,
            ..Default::default()
        })
        .await;
    }

    // The first scheduler gets two binds through, every other bind fails,
    // and it dies half-way through the gang.
    let policy = refuse_binds(&["w2", "w3"]);
    for obj in &policy {
        e.create(obj).await.unwrap_or_else(|err| panic!("{err}"));
    }
    let mut probes = 0;
    wait_policy(&e, true, &mut probes).await;
    let mut s1 = e.start_scheduler(&test_flags());
    e.wait_bound(&["w0", "w1"]).await;
    s1.assert_running();
    s1.kill();
    for n in ["w2", "w3"] {
        assert_eq!(
            node_name(&e.pod(n).await),
            "",
            "{n} bound despite the policy"
        );
    }

    let client = e.client.clone();
    let vapb: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
        )),
    );
    vapb.delete("crash-binds", &DeleteParams::default())
        .await
        .expect("delete the policy binding");
    wait_policy(&e, false, &mut probes).await;

    let metrics = free_addr();
    let mut s2 = e.start_scheduler(&test_flags().set("metrics-addr", &metrics));
    let bound = e.wait_bound(&names).await;
    // What it tried: binds by result, every try counted once it returns.
    let mut text = String::new();
    eventually(
        WAIT_STATUS,
        "the second scheduler's binds counted",
        async || {
            text = http_get(&metrics, "/metrics")?.1;
            Ok(metric(&text, r#"partita_kube_binds_total{result="ok"}"#) == Some(2.0))
        },
    )
    .await;
    s2.assert_running();
    let tries: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("partita_kube_binds_total{"))
        .collect();
    assert_eq!(
        tries,
        [r#"partita_kube_binds_total{result="ok"} 2"#],
        "the second scheduler's binds: want only the two pending members"
    );
    let mut gpus: BTreeMap<String, &str> = BTreeMap::new();
    for n in names {
        for g in annotation(&bound[n], names::ANNOTATION_GPUS).split(',') {
            if let Some(other) = gpus.insert(g.to_string(), n) {
                panic!("GPU {g} given to {other} and {n}");
            }
        }
    }
    assert_eq!(gpus.len(), 8, "GPUs {gpus:?}, want all 8 given once");
}

/// bad_objects (Go: TestBadObjects): the CRD schema refuses bad Queues and
/// PodGroups; a pod that can never run is told why in an Event.
#[tokio::test]
async fn bad_objects() {
    let Some(e) = Env::new(&[]).await else { return };
    let cases = [
        ("negative guarantee", -1, 0, json!({}), "guaranteedGPUs"),
        (
            "burst below the guarantee",
            4,
            2,
            json!({}),
            "burstGPUs must be 0 (no borrowing) or at least guaranteedGPUs",
        ),
        ("zero weight", 1, 0, json!({"weight": 0}), "weight"),
        ("empty team", 1, 0, json!({"team": ""}), "team"),
        (
            "an unknown field is dropped, a wrong type is not",
            1,
            0,
            json!({"guaranteedGPUs": "lots"}),
            "guaranteedGPUs",
        ),
    ];
    for (name, guaranteed, burst, extra, want) in cases {
        let queue = format!("q-{}", &name.replace(' ', "-")[..10]);
        match e.create_queue(&queue, guaranteed, burst, extra).await {
            Err(err) if api_code(&err) == Some(422) && err.to_string().contains(want) => {}
            other => panic!("{name}: got {other:?}, want an Invalid error naming {want}"),
        }
    }
    e.create_queue("fine", 0, 0, json!({}))
        .await
        .expect("a queue with no guarantee");
    match e.create_pod_group("empty", 0, "").await {
        Err(err) if api_code(&err) == Some(422) => {}
        other => panic!("PodGroup with minMember 0: got {other:?}, want Invalid"),
    }

    e.create_node(&mig_node(
        "mig-0",
        0,
        &[("1g.10gb", 7)],
        &[(LABEL_GPU_COUNT, "1")],
    ))
    .await;
    let _s = e.start_scheduler(&test_flags());
    e.create_pod(TestPod {
        name: "odd",
        mig: "5g.99gb",
        ..Default::default()
    })
    .await;
    let ev = e
        .wait_event(
            "odd",
            "FailedScheduling",
            r#"mig profile "5g.99gb": no GPU in the cluster offers it"#,
        )
        .await;
    eprintln!("event: {}", ev.message.unwrap_or_default());
    e.create_pod(TestPod {
        name: "nowhere",
        queue: "missing",
        gpus: 1,
        ..Default::default()
    })
    .await;
    e.wait_event(
        "nowhere",
        "FailedScheduling",
        r#"queue "missing" does not exist"#,
    )
    .await;
}

/// The MIG nodes of the MIG tests: one H100 split the GPU Operator's
/// all-1g.10gb way, its layout applied.
fn split_node(name: &str) -> k8s_openapi::api::core::v1::Node {
    mig_node(
        name,
        0,
        &[("1g.10gb", 7)],
        &[
            (LABEL_GPU_COUNT, "1"),
            (names::LABEL_MIG_CONFIG, "all-1g.10gb"),
            (names::LABEL_MIG_CONFIG_STATE, names::MIG_STATE_SUCCESS),
        ],
    )
}

/// mig_reconfiguration_through_the_label (Go:
/// TestMIGReconfigurationThroughTheLabel): a pod asks for a profile no GPU
/// has; Partita writes a layout into the mig-parted ConfigMap, points the
/// node's label at it, waits for the MIG manager and the device plugin,
/// and binds the pod to the new instance.
#[tokio::test]
async fn mig_reconfiguration_through_the_label() {
    let Some(e) = Env::new(&[]).await else { return };
    e.create_namespace(MIG_NAMESPACE).await;
    e.create_node(&split_node("mig-0")).await;
    let _k = e.kubelet();
    let mm = e.mig_manager();
    let _s = e.start_scheduler(&test_flags());

    e.create_pod(TestPod {
        name: "llm",
        mig: "3g.40gb",
        ..Default::default()
    })
    .await;
    let p = e.wait_bound(&["llm"]).await.remove("llm").unwrap();
    let s = annotation(&p, names::ANNOTATION_MIG_SLICE);
    assert!(
        s.starts_with("0:3g.40gb@"),
        "bound with {}={s:?}, want a 3g.40gb instance",
        names::ANNOTATION_MIG_SLICE
    );
    let changes = mm.changes();
    assert!(
        changes.len() == 1 && changes[0].starts_with("mig-0=partita-"),
        "MIG changes {changes:?}, want one Partita config on mig-0"
    );
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(e.client.clone(), MIG_NAMESPACE);
    let cm = cms
        .get(MIG_CONFIGMAP)
        .await
        .expect("the mig-parted ConfigMap");
    let text = cm
        .data
        .unwrap_or_default()
        .remove(MIG_CONFIG_KEY)
        .unwrap_or_default();
    let configs = parse_mig_parted(&text).unwrap();
    let name = changes[0].trim_start_matches("mig-0=");
    let gpus = migconfig::expand_specs(&configs[name], 1).map(|(g, _)| g);
    let Ok(gpus) = gpus else {
        panic!("config {name}: {gpus:?}");
    };
    assert!(
        gpus[0].mig && gpus[0].counts.get("3g.40gb") == Some(&1),
        "config {name} = {gpus:?}, want MIG with a 3g.40gb"
    );
    let h100 = partita_engine::gpu::lookup("H100-80GB");
    let layouts = migconfig::pack_layouts(&h100, &gpus[0].counts, 1).expect("the layout packs");
    h100.validate(&layouts[0].0).expect("a valid H100 layout");
    assert!(
        configs.contains_key("all-disabled"),
        "the ConfigMap lacks all-disabled"
    );
    eprintln!("mig-parted config:\n{text}");
}

/// mig_changes_only_idle_nodes (Go: TestMIGChangesOnlyIdleNodes): the MIG
/// manager stops a node's GPU pods while it applies a layout, so Partita
/// re-partitions a node where nothing runs rather than the busy node a
/// pod would fit better on.
#[tokio::test]
async fn mig_changes_only_idle_nodes() {
    let Some(e) = Env::new(&[]).await else { return };
    e.create_namespace(MIG_NAMESPACE).await;
    e.create_node(&split_node("busy")).await;
    e.create_node(&split_node("idle")).await;
    let _k = e.kubelet();
    let mm = e.mig_manager();
    e.create_pod(TestPod {
        name: "running",
        mig: "1g.10gb",
        scheduler: "default-scheduler",
        ..Default::default()
    })
    .await;
    e.bind_to("running", "busy").await.expect("bind running");
    let _s = e.start_scheduler(&test_flags());

    e.create_pod(TestPod {
        name: "llm",
        mig: "3g.40gb",
        ..Default::default()
    })
    .await;
    let p = e.wait_bound(&["llm"]).await.remove("llm").unwrap();
    assert_eq!(node_name(&p), "idle", "llm's node");
    let changes = mm.changes();
    assert!(
        !changes.iter().any(|c| c.starts_with("busy=")),
        "the busy node was re-partitioned: {changes:?}"
    );
    assert!(
        e.pod("running").await.metadata.deletion_timestamp.is_none(),
        "the running pod was disturbed"
    );
}
