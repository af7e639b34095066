use std::collections::BTreeMap;

use crate::cluster::Assignment;
use crate::placement::{Code, PlaceError, Placer};
use crate::random::Rand;
use crate::workload::Kind;

use super::helpers::{
    NodeBuilder, RunningBuilder, allocate_on, grants_text, node, place_one, policy_named, running,
    task, world,
};
use super::scores::{case, run_score_cases};

/// The count of `code` in a placement's failure, or none when it did not
/// fail with a `Failure`.
fn failed_for(got: &Result<Assignment, PlaceError>, code: Code) -> Option<usize> {
    match got {
        Err(PlaceError::Failure(f)) => Some(f.reasons.get(&code).copied().unwrap_or(0)),
        _ => None,
    }
}

#[test]
fn k8s_default_gives_a_share_a_whole_gpu() {
    let cases = [
        ("turns a share into one whole GPU", task("t").share(250)),
        (
            "turns a memory profile into one whole GPU",
            task("t").gpu_memory(1024, 0.1),
        ),
    ];
    for (name, t) in cases {
        let mut st = world(vec![node("n").gpus(2, "V100-16GB")]);
        allocate_on(&mut st, "n", vec![running("old").share(0, 250)]);
        let a = place_one(policy_named("k8s-default"), &st, &t)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            grants_text(&a.grants),
            "1:1000",
            "{name}: the free GPU, whole"
        );
    }
}

#[test]
fn k8s_default_keeps_the_models_of_a_rewritten_share() {
    let p = Placer::new(policy_named("k8s-default"), Rand::new(1));
    let r = p
        .request(
            task("t")
                .cpu(500)
                .memory(64)
                .share(250)
                .on(&["V100M16"])
                .build(),
        )
        .expect("a valid task");
    assert_eq!(
        (r.kind(), r.count(), r.models(), r.cpu_milli(), r.mem_mib()),
        (Kind::WholeGpus, 1, &["V100-16GB".to_string()][..], 500, 64),
        "rewritten request {r}: want 1 whole V100-16GB with the task's CPU and memory"
    );
    let whole = p.request(task("t").gpus(2).build()).expect("a valid task");
    assert_eq!(whole.count(), 2, "whole GPUs rewritten");
}

#[test]
fn k8s_default_refuses_a_node_whose_gpus_are_all_shared() {
    let mut st = world(vec![node("n").gpus(2, "V100-16GB")]);
    allocate_on(
        &mut st,
        "n",
        vec![running("a").share(0, 100), running("b").share(1, 100)],
    );
    let got = place_one(policy_named("k8s-default"), &st, &task("t").share(100));
    assert_eq!(failed_for(&got, Code::Gpu), Some(1), "{got:?}");
}

#[test]
fn k8s_default_uses_only_existing_mig_instances() {
    struct Case {
        name: &'static str,
        node: NodeBuilder,
        running: Vec<RunningBuilder>,
        /// The grants; "" = refused with `code`.
        want: &'static str,
    }
    let cases = vec![
        Case {
            name: "takes a free instance of the profile",
            node: node("n")
                .gpus(2, "H100-80GB")
                .mig()
                .layout("3g.40gb@0,1g.10gb@6"),
            running: vec![running("a").instance(0, "1g.10gb@6")],
            want: "1:1g.10gb@6",
        },
        Case {
            name: "refuses a GPU where the instance would have to be created",
            node: node("n").gpus(1, "H100-80GB").mig(),
            running: vec![],
            want: "",
        },
        Case {
            name: "refuses instances of another profile",
            node: node("n").gpus(1, "H100-80GB").mig().layout("3g.40gb@0"),
            running: vec![],
            want: "",
        },
        Case {
            name: "refuses instances in use",
            node: node("n").gpus(1, "H100-80GB").mig().layout("1g.10gb@6"),
            running: vec![running("a").instance(0, "1g.10gb@6")],
            want: "",
        },
    ];
    for c in cases {
        let mut st = world(vec![c.node]);
        allocate_on(&mut st, "n", c.running);
        let got = place_one(
            policy_named("k8s-default"),
            &st,
            &task("t").mig_profile("1g.10gb"),
        );
        if c.want.is_empty() {
            assert_eq!(failed_for(&got, Code::Mig), Some(1), "{}: {got:?}", c.name);
        } else {
            let a = got.unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(grants_text(&a.grants), c.want, "{}", c.name);
        }
    }
}

#[test]
fn k8s_default_scores_least_allocated() {
    // score = (⌊(C−c)·100/C⌋ + ⌊(M−m)·100/M⌋) / 2 with c, m in use after placement.
    let mut p = policy_named("k8s-default");
    run_score_cases(
        &mut p,
        vec![
            // (⌊5000·100/10000⌋ + ⌊6144·100/8192⌋) / 2 = (50 + 75) / 2
            case(
                "counts what runs and what the task asks",
                node("n").cpu(10000).memory(8192),
                task("t").cpu(3000).memory(2048),
                62,
            )
            .with(vec![running("a").cpu(2000)]),
            // (⌊66.67⌋ + ⌊87.79⌋) / 2 = (66 + 87) / 2
            case(
                "truncates each term and the mean",
                node("n").cpu(10000).memory(8192),
                task("t").cpu(3333).memory(1000),
                76,
            ),
            case(
                "scores 100 for nothing asked of an empty node",
                node("n").cpu(10000).memory(8192),
                task("t"),
                100,
            ),
            case(
                "scores 0 for a task that fills the node",
                node("n").cpu(10000).memory(8192),
                task("t").cpu(10000).memory(8192),
                0,
            ),
            // (⌊5000·100/10000⌋ + 0) / 2
            case(
                "scores a resource the node lacks 0",
                node("n").cpu(10000).memory(0),
                task("t").cpu(5000),
                25,
            ),
            case(
                "ignores the GPUs",
                node("n").cpu(10000).memory(8192).gpus(2, "V100-16GB"),
                task("t").cpu(5000).memory(4096),
                50,
            )
            .with(vec![running("a").whole(&[0, 1])]),
        ],
    );
}

#[test]
fn k8s_default_spreads_work() {
    let mut st = world(vec![
        node("busy").cpu(10000).memory(8192),
        node("idle").cpu(10000).memory(8192),
    ]);
    allocate_on(&mut st, "busy", vec![running("a").cpu(1000)]);
    let a = place_one(policy_named("k8s-default"), &st, &task("t").cpu(1000));
    assert_eq!(a.map(|a| a.node), Ok("idle".to_string()));
}

#[test]
fn random_draws_uniformly_among_feasible_nodes() {
    let st = world(vec![node("a"), node("full").cpu(500), node("b"), node("c")]);
    let mut p = Placer::new(policy_named("random"), Rand::new(5));
    const DRAWS: usize = 3000;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..DRAWS {
        let a = p.place(&st, task("t").cpu(1000).build()).expect("placed");
        *counts.entry(a.node).or_default() += 1;
    }
    assert!(
        !counts.contains_key("full"),
        "placed on the full node: {counts:?}"
    );
    for n in ["a", "b", "c"] {
        // About 1000 each, standard deviation about 26.
        let got = counts.get(n).copied().unwrap_or(0);
        assert!(
            (880..=1120).contains(&got),
            "placed on {n} {got} times of {DRAWS}; want about a third ({counts:?})"
        );
    }
}

#[test]
fn random_draws_the_gpu_of_a_share() {
    let st = world(vec![node("n").gpus(4, "V100-16GB")]);
    let mut p = Placer::new(policy_named("random"), Rand::new(5));
    let mut seen = [false; 4];
    for _ in 0..200 {
        let a = p.place(&st, task("t").share(100).build()).expect("placed");
        seen[a.grants[0].gpu as usize] = true;
    }
    assert_eq!(
        seen, [true; 4],
        "200 shares on 4 free GPUs: want every GPU drawn"
    );
}

#[test]
fn k8s_default_skips_instances_on_cordoned_gpus() {
    let mut st = world(vec![
        node("n").gpus(2, "H100-80GB").mig().layout("1g.10gb@6"),
    ]);
    st.cordon("n", 0, true).expect("GPU 0 cordons");
    let a = place_one(
        policy_named("k8s-default"),
        &st,
        &task("t").mig_profile("1g.10gb"),
    );
    assert_eq!(
        a.map(|a| grants_text(&a.grants)),
        Ok("1:1g.10gb@6".to_string()),
        "GPU 0 is cordoned"
    );
}
