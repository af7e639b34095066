use std::sync::Arc;

use crate::frag::Distribution;
use crate::placement::Policy;
use crate::policies::Config;
use crate::policies::fgd::gradient;

use super::helpers::{
    NodeBuilder, RunningBuilder, TaskBuilder, allocate_on, grants_text, must_policy, node,
    place_one, running, score_on, shape, task, typical, world,
};

/// FGD for a typical workload.
fn fgd_policy(typ: Distribution) -> Policy {
    must_policy(
        "fgd",
        Config {
            typical: Some(Arc::new(typ)),
            ..Config::default()
        },
    )
}

#[test]
fn gradient_of_the_tables() {
    // ⌊100σ((F − F′)/1000)⌋: the hand values the FGD tables below rely on.
    let cases = [
        (350.0, 700.0, 41),
        (350.0, 400.0, 48),
        (700.0, 400.0, 57),
        (700.0, 1400.0, 33),
        (610.0, 600.0, 50),
        (400.0, 900.0, 37),
        (0.0, 1000.0, 26),
        (0.0, 0.0, 50),
    ];
    for (before, after, want) in cases {
        assert_eq!(
            gradient(before, after),
            want,
            "⌊100σ(({before} − {after})/1000)⌋"
        );
    }
}

struct FgdCase {
    name: &'static str,
    typical: Distribution,
    node: NodeBuilder,
    running: Vec<RunningBuilder>,
    task: TaskBuilder,
    want: i64,
    want_hint: Option<usize>,
}

#[test]
fn fgd_score() {
    let cases = vec![
        FgdCase {
            // Typical: ½ a 600 share, ½ one whole GPU. Left 1000, 700: F = ½·0 + ½·700 = 350.
            // GPU 0 → 700, 700: F′ = ½·0 + ½·1400 = 700 → 41.
            // GPU 1 → 1000, 400: F′ = ½·400 + ½·400 = 400 → 48.
            name: "takes the GPU whose fragment grows least",
            typical: typical(vec![shape().share(600), shape().gpus(1)]),
            node: node("n").gpus(2, "V100-16GB"),
            running: vec![running("a").share(1, 300)],
            task: task("t").share(300),
            want: 48,
            want_hint: Some(1),
        },
        FgdCase {
            // Typical: one whole GPU. Left 700, 1000: F = 700.
            // GPU 0 → 400, 1000: F′ = 400 → 57.  GPU 1 → 700, 700: F′ = 1400 → 33.
            name: "keeps a whole GPU free when it can",
            typical: typical(vec![shape().gpus(1)]),
            node: node("n").gpus(2, "V100-16GB"),
            running: vec![running("a").share(0, 300)],
            task: task("t").share(300),
            want: 57,
            want_hint: Some(0),
        },
        FgdCase {
            // Typical: a 600 share. Left 1000, 590, 20: F = 610.
            // GPU 0 → F′ = 610 → 50; GPU 1 and 2 → F′ = 600 → ⌊50.25⌋ = 50.
            name: "takes the first GPU reaching the integer best",
            typical: typical(vec![shape().share(600)]),
            node: node("n").gpus(3, "V100-16GB"),
            running: vec![running("a").share(1, 410), running("b").share(2, 980)],
            task: task("t").share(10),
            want: 50,
            want_hint: Some(0),
        },
        FgdCase {
            // Typical: ½ a 600 share, ½ two whole GPUs. Left 400, 1000, 1000: F = 200 + 200.
            // The first free GPU goes: 400, 0, 1000: F′ = ½·400 + ½·1400 = 900 → 37.
            name: "takes the lowest free GPUs for whole GPUs",
            typical: typical(vec![shape().share(600), shape().gpus(2)]),
            node: node("n").gpus(3, "V100-16GB"),
            running: vec![running("a").share(0, 600)],
            task: task("t").gpus(1),
            want: 37,
            want_hint: None,
        },
        FgdCase {
            // Typical: a 500 share with 8000m CPU. 10000m left: F = 0; 6000m left: F′ = 1000 → 26.
            name: "counts the CPU a CPU-only task takes",
            typical: typical(vec![shape().cpu(8000).share(500)]),
            node: node("n").cpu(10000).gpus(1, "V100-16GB"),
            running: vec![],
            task: task("t").cpu(4000),
            want: 26,
            want_hint: None,
        },
        FgdCase {
            name: "scores a MIG task 0",
            typical: typical(vec![shape().share(500)]),
            node: node("n").gpus(1, "H100-80GB").mig(),
            running: vec![],
            task: task("t").mig_profile("1g.10gb"),
            want: 0,
            want_hint: None,
        },
    ];
    for c in cases {
        let mut st = world(vec![c.node]);
        allocate_on(&mut st, "n", c.running);
        let (got, hint) = score_on(&mut fgd_policy(c.typical), &st, &c.task);
        let hint = hint.map(|h| h.gpu);
        assert_eq!(
            (got, hint),
            (c.want, c.want_hint),
            "{}: score, hint",
            c.name
        );
    }
}

#[test]
fn fgd_places_a_share_on_the_gpu_it_scored() {
    // As in "takes the first GPU reaching the integer best": best-fit
    // would take GPU 2 (20 left); FGD takes GPU 0.
    let mut st = world(vec![node("n").gpus(3, "V100-16GB")]);
    allocate_on(
        &mut st,
        "n",
        vec![running("a").share(1, 410), running("b").share(2, 980)],
    );
    let p = fgd_policy(typical(vec![shape().share(600)]));
    let a = place_one(p, &st, &task("t").share(10)).expect("the share is placed");
    assert_eq!(grants_text(&a.grants), "0:10");
}

#[test]
fn fgd_takes_the_node_whose_fragment_grows_least() {
    // Typical: one whole GPU. On "shared" (left 700, 1000) the share
    // scores 57; on "empty" (1000, 1000) F = 0 → F′ = 700 → ⌊100σ(−0.7)⌋ = 33.
    let mut st = world(vec![
        node("empty").gpus(2, "V100-16GB"),
        node("shared").gpus(2, "V100-16GB"),
    ]);
    allocate_on(&mut st, "shared", vec![running("a").share(0, 300)]);
    let p = fgd_policy(typical(vec![shape().gpus(1)]));
    let a = place_one(p, &st, &task("t").share(300)).expect("the share is placed");
    assert_eq!(
        (a.node.as_str(), grants_text(&a.grants).as_str()),
        ("shared", "0:300")
    );
}
