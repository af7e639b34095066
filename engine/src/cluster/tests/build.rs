use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::gpu;

#[test]
fn build_node_builds_a_cpu_only_node() {
    let n = node("cpu-1")
        .cpu(16000)
        .memory(65536)
        .label(LABEL_BLOCK, "b1")
        .label(LABEL_SPINE, "s2")
        .label(LABEL_LEAF, "l3")
        .build();
    assert_eq!(
        (n.name(), n.cpu_milli(), n.memory_mib()),
        ("cpu-1", 16000, 65536)
    );
    assert!(n.gpus().is_empty() && n.model().is_none());
    assert_eq!(n.tier(), Tier::Reserved);
    let want = Topology {
        block: "b1".into(),
        spine: "s2".into(),
        leaf: "l3".into(),
    };
    assert_eq!(n.topology(), &want);
    assert_eq!((n.gpu_free_milli(), n.fully_free_gpus()), (0, 0));
}

#[test]
fn build_node_builds_gpus() {
    let cases = [
        (
            "a non-MIG model defaults to PCIe only",
            node("v").gpus(4, "V100-32GB"),
            "V100-32GB",
            false,
            vec![NO_LINK; 4],
        ),
        (
            "a MIG-capable model defaults to one NVSwitch domain",
            node("h").gpus(4, "H100-80GB"),
            "H100-80GB",
            false,
            vec![0; 4],
        ),
        (
            "pairs links GPUs two by two",
            node("v").gpus(5, "V100-32GB").nvlink(LINK_PAIRS),
            "V100-32GB",
            false,
            vec![0, 0, 1, 1, 2],
        ),
        (
            "none on a MIG-capable model is PCIe only",
            node("h").gpus(2, "H100-80GB").nvlink(LINK_NONE),
            "H100-80GB",
            false,
            vec![NO_LINK; 2],
        ),
        (
            "all on a non-MIG model is one domain",
            node("v").gpus(2, "V100-32GB").nvlink(LINK_ALL),
            "V100-32GB",
            false,
            vec![0, 0],
        ),
        (
            "a trace alias resolves to the catalog model",
            node("v").gpus(2, "V100M16"),
            "V100-16GB",
            false,
            vec![NO_LINK; 2],
        ),
        (
            "an unknown model is accepted by name",
            node("x").gpus(1, "Mystery-9000"),
            "Mystery-9000",
            false,
            vec![NO_LINK],
        ),
        (
            "MIG mode is set on every GPU",
            node("h").gpus(3, "H100-80GB").mig(),
            "H100-80GB",
            true,
            vec![0; 3],
        ),
    ];
    for (name, spec, want_model, want_mig, want_links) in cases {
        let n = spec.build();
        assert_eq!(
            n.model().map(|m| m.name.as_str()),
            Some(want_model),
            "{name}"
        );
        let links: Vec<i32> = n.gpus().iter().map(Gpu::link).collect();
        assert_eq!(links, want_links, "{name}");
        for (i, g) in n.gpus().iter().enumerate() {
            assert_eq!((g.index(), g.mig()), (i, want_mig), "{name}");
            assert!(
                g.model_ref() == n.model_ref().unwrap(),
                "{name}: the GPUs share the node's model"
            );
            assert!(
                g.slices().is_empty() && g.idle(),
                "{name}: gpu {i} starts with instances or busy"
            );
        }
    }
}

#[test]
fn build_node_gives_every_mig_gpu_the_layout() {
    const LAYOUT: &str = "3g.40gb@0,2g.20gb@4,1g.10gb@6";
    let mut s = new_state(&[node("h").gpus(3, "H100-80GB").mig().layout(LAYOUT)]);
    for g in s.node(0).gpus() {
        assert_eq!(g.layout().to_string(), LAYOUT);
        assert!(g.slices().iter().all(Slice::is_free));
        // What the instances take is counted: slices 0-6 and 3+2+1 compute.
        assert_eq!(
            (g.free_memory_slices(), g.free_compute_slices()),
            (0b1000_0000, 1)
        );
        assert_eq!(g.free(), 0, "a MIG GPU offers no milli as a share");
    }
    // Each GPU has its own instances: taking one leaves the others free.
    allocate(&mut s, &[task("t").on("h").instance(1, "2g.20gb@4")]);
    assert!(s.node(0).gpus()[0].slices()[1].is_free());
    must_check(&s);
}

#[test]
fn build_node_refuses_bad_specs() {
    let cases: Vec<(&str, SpecBuilder, &[&str])> = vec![
        (
            "refuses a negative GPU count",
            node("n").gpus(-1, "V100-32GB"),
            &["node n", "gpus -1 is negative"],
        ),
        (
            "refuses GPUs without a model",
            node("n").gpus(8, ""),
            &["node n", "8 GPUs but no GPU model"],
        ),
        (
            "refuses MIG on a model without MIG",
            node("n").gpus(8, "V100-32GB").mig(),
            &["node n", "model V100-32GB does not support MIG"],
        ),
        (
            "refuses MIG on a model not in the catalog",
            node("n").gpus(1, "Mystery-9000").mig(),
            &["model Mystery-9000 does not support MIG"],
        ),
        (
            "refuses a layout while MIG is off",
            node("n").gpus(2, "H100-80GB").layout("7g.80gb@0"),
            &["node n", "a MIG layout is given but MIG is off"],
        ),
        (
            "refuses a layout with a bad start",
            node("n").gpus(2, "H100-80GB").mig().layout("3g.40gb@2"),
            &["node n: layout", "3g.40gb@2", "start 2 not allowed"],
        ),
        (
            "refuses overlapping instances",
            node("n")
                .gpus(2, "H100-80GB")
                .mig()
                .layout("4g.40gb@0,2g.20gb@2"),
            &["node n: layout", "2g.20gb@2 overlaps 4g.40gb@0"],
        ),
        (
            "refuses a profile of another model",
            node("n").gpus(2, "H100-80GB").mig().layout("1g.18gb@0"),
            &[
                "node n: layout",
                r#"unknown MIG profile "1g.18gb" for H100-80GB"#,
            ],
        ),
        (
            "refuses a second +me instance",
            node("n")
                .gpus(2, "H100-80GB")
                .mig()
                .layout("1g.10gb+me@0,1g.10gb+me@1"),
            &["at most one +me instance"],
        ),
        (
            "refuses an unknown NVLink shape",
            node("n").gpus(2, "V100-32GB").nvlink("ring"),
            &["node n", r#"nvlink "ring": want none, all or pairs"#],
        ),
        (
            "refuses an unknown tier",
            node("n").tier("cheap"),
            &["node n", r#"unknown capacity tier "cheap""#],
        ),
        (
            "refuses an unknown tier on a GPU node",
            node("n").gpus(2, "V100-32GB").tier("Spot"),
            &[r#"unknown capacity tier "Spot""#],
        ),
    ];
    for (_, spec, want) in cases {
        want_err(build_node(spec.spec()), want);
    }
}

#[test]
fn build_node_reads_tiers() {
    for (text, tier) in [
        ("reserved", Tier::Reserved),
        ("on-demand", Tier::OnDemand),
        ("spot", Tier::Spot),
    ] {
        assert_eq!(node("n").tier(text).build().tier(), tier);
    }
}

#[test]
fn parse_tier_reads_the_names() {
    let cases = [
        ("", Some(Tier::Reserved), ""),
        ("reserved", Some(Tier::Reserved), ""),
        ("on-demand", Some(Tier::OnDemand), ""),
        ("spot", Some(Tier::Spot), ""),
        (
            "Spot",
            None,
            r#"unknown capacity tier "Spot" (known: reserved, on-demand, spot)"#,
        ),
        (
            "preemptible",
            None,
            r#"unknown capacity tier "preemptible""#,
        ),
        (" spot", None, r#"unknown capacity tier " spot""#),
    ];
    for (text, want, want_err) in cases {
        match parse_tier(text) {
            Ok(t) => assert_eq!(Some(t), want, "{text:?}"),
            Err(e) => {
                assert_eq!(want, None, "{text:?}: {e}");
                assert!(e.to_string().contains(want_err), "{text:?}: {e}");
            }
        }
    }
    for t in [Tier::Reserved, Tier::OnDemand, Tier::Spot] {
        assert_eq!(t.to_string().parse::<Tier>(), Ok(t));
    }
}

#[test]
fn topology_from_labels_reads_three_levels() {
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let t = |b: &str, s: &str, l: &str| Topology {
        block: b.into(),
        spine: s.into(),
        leaf: l.into(),
    };
    let cases = [
        (
            labels(&[(LABEL_BLOCK, "b"), (LABEL_SPINE, "s"), (LABEL_LEAF, "l")]),
            t("b", "s", "l"),
        ),
        (labels(&[(LABEL_LEAF, "l7")]), t("", "", "l7")),
        (
            labels(&[("zone", "eu"), ("partita.dev/network-rack", "r1")]),
            t("", "", ""),
        ),
        (labels(&[]), t("", "", "")),
    ];
    for (labels, want) in cases {
        assert_eq!(topology_from_labels(&labels), want, "{labels:?}");
    }
}

#[test]
fn new_indexes_nodes_by_name() {
    let s = new_state(&[
        node("a"),
        node("b").gpus(2, "V100-32GB"),
        node("c").gpus(1, "H100-80GB").mig(),
    ]);
    assert_eq!(s.len(), 3);
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        assert_eq!(s.lookup(name), Some(i));
        assert_eq!(s.node(i).name(), name);
        assert!(std::ptr::eq(s.node_by_name(name).unwrap(), s.node(i)));
    }
    assert_eq!(s.lookup("z"), None);
    assert!(s.node_by_name("z").is_none());
    let gens: BTreeSet<u64> = gens(&s).into_iter().collect();
    assert!(
        gens.len() == 3 && !gens.contains(&0),
        "want each node numbered, no two alike: {gens:?}"
    );
    assert!(!gens.contains(&s.version()));
    must_check(&s);
}

#[test]
fn new_accepts_no_nodes() {
    let s = State::new(Vec::new()).unwrap();
    assert!(s.is_empty());
    must_check(&s);
}

#[test]
fn new_refuses_bad_nodes() {
    type Nodes = fn() -> Vec<Node>;
    let cases: Vec<(&str, Nodes, &[&str])> = vec![
        (
            "refuses an empty name",
            || vec![node("a").build(), node("").build()],
            &["node 1: name is empty"],
        ),
        (
            "refuses a name used twice",
            || vec![node("a").build(), node("b").build(), node("a").build()],
            &["node a: name is used twice"],
        ),
        (
            "refuses negative CPU",
            || vec![node("a").cpu(-1).build()],
            &["node a: negative capacity"],
        ),
        (
            "refuses negative memory",
            || vec![node("a").memory(-1).build()],
            &["node a: negative capacity"],
        ),
        (
            "refuses a GPU whose index is not its position",
            || {
                let mut n = node("a").gpus(2, "V100-32GB").build();
                n.gpus[1].index = 5;
                vec![n]
            },
            &["node a: GPU at position 1 has index 5"],
        ),
        (
            "refuses MIG on a model without it",
            || {
                let mut n = node("a").gpus(1, "V100-32GB").build();
                n.gpus[0].mig = true;
                vec![n]
            },
            &["node a: GPU 0: model V100-32GB does not support MIG"],
        ),
        (
            "refuses an invalid MIG layout",
            || {
                let mut n = node("a").gpus(1, "H100-80GB").mig().build();
                for p in must_layout("4g.40gb@0,3g.40gb@0").0 {
                    n.gpus[0].slices.push(Slice {
                        placement: p,
                        task: None,
                    });
                }
                vec![n]
            },
            &["node a: GPU 0", "3g.40gb@0 overlaps 4g.40gb@0"],
        ),
    ];
    for (_, nodes, want) in cases {
        want_err(State::new(nodes()), want);
    }
}

#[test]
fn node_accessors() {
    let mut s = new_state(&[
        node("v").gpus(4, "V100-32GB"),
        node("h").gpus(2, "H100-80GB").mig().layout("7g.80gb@0"),
    ]);
    allocate(
        &mut s,
        &[
            task("small").on("v").cpu(1500).memory(2048).share(0, 250),
            task("big").on("v").cpu(500).memory(1024).whole(1).whole(2),
            task("inst").on("h").instance(0, "7g.80gb@0"),
        ],
    );
    let v = s.node_by_name("v").unwrap();
    assert_eq!(
        (v.cpu_used(), v.cpu_free(), v.mem_used(), v.mem_free()),
        (2000, 30000, 3072, 256 * 1024 - 3072)
    );
    assert_eq!((v.gpu_free_milli(), v.fully_free_gpus()), (1750, 1));
    assert_eq!(
        v.tasks()
            .iter()
            .map(|a| a.task.as_str())
            .collect::<Vec<_>>(),
        ["small", "big"]
    );
    let big = v.task("big").unwrap();
    assert_eq!(
        (big.node.as_str(), big.cpu_milli, big.grants.len()),
        ("v", 500, 2)
    );
    assert!(
        v.task("inst").is_none(),
        "task found a task of another node"
    );
    assert_eq!(big.gpu_milli(v), 2000);
    assert_eq!(v.task("small").unwrap().gpu_milli(v), 250);
    let h = s.node_by_name("h").unwrap();
    assert_eq!(
        h.task("inst").unwrap().gpu_milli(h),
        1000,
        "a 7g instance counts as the whole GPU"
    );
    // A MIG GPU is neither free milli nor a fully free GPU, busy or not.
    assert_eq!((h.gpu_free_milli(), h.fully_free_gpus()), (0, 0));
}

#[test]
fn assignment_gpu_milli_counts_instances_by_compute() {
    let mut s = new_state(&[node("h").gpus(3, "H100-80GB").mig()]);
    allocate(
        &mut s,
        &[task("t")
            .on("h")
            .instance(0, "3g.40gb@4")
            .instance(1, "1g.10gb@2")
            .instance(2, "2g.20gb@0")],
    );
    // 3/7 + 1/7 + 2/7 of a GPU, each rounded down.
    assert_eq!(
        s.node(0).task("t").unwrap().gpu_milli(s.node(0)),
        3000 / 7 + 1000 / 7 + 2000 / 7
    );
}

#[test]
fn set_rank_sets_the_tie_break() {
    let mut n = node("a").build();
    assert_eq!(n.rank(), 0);
    n.set_rank(7);
    let s = State::new(vec![n]).unwrap();
    assert_eq!(s.node(0).rank(), 7);
}

#[test]
fn build_builds_every_spec() {
    let s = State::build(&[
        node("a").spec().clone(),
        node("b").gpus(2, "T4").spec().clone(),
    ])
    .unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s.node(1).model().unwrap().name, "T4");
    want_err(
        State::build(&[node("a").spec().clone(), node("a").spec().clone()]),
        &["node a: name is used twice"],
    );
    want_err(
        State::build(&[node("a").gpus(1, "").spec().clone()]),
        &["node a: 1 GPUs but no GPU model"],
    );
}

#[test]
fn instances_borrow_the_catalogs_profile_names() {
    let mut s = new_state(&[node("h").gpus(2, "H100-80GB").mig().layout("3g.40gb@0")]);
    let owned = gpu::Placement {
        profile: std::borrow::Cow::Owned("1g.10gb".to_string()),
        start: 4,
    };
    s.allocate(&Assignment {
        task: "t".into(),
        node: "h".into(),
        grants: vec![Grant::instance(1, owned)],
        ..Assignment::default()
    })
    .unwrap();
    s.set_layout(
        "h",
        0,
        &[gpu::Placement {
            profile: "2g.20gb".to_string().into(),
            start: 0,
        }],
    )
    .unwrap();
    for g in s.node(0).gpus() {
        for sl in g.slices() {
            assert!(
                matches!(sl.placement().profile, std::borrow::Cow::Borrowed(_)),
                "{:?}",
                sl.placement()
            );
        }
    }
}
