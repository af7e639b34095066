//! The baseline scores of fgd-protocol.md §5, computed by hand on one-node
//! clusters. The comment of each case gives the arithmetic.

use crate::placement::Policy;

use super::helpers::{
    NodeBuilder, RunningBuilder, TaskBuilder, alibaba_norms, allocate_on, must_policy, node, norms,
    policy_named, running, score_on, task, world,
};

/// One node, what runs on it, one task and its score.
pub(super) struct ScoreCase {
    pub(super) name: &'static str,
    pub(super) node: NodeBuilder,
    pub(super) running: Vec<RunningBuilder>,
    pub(super) task: TaskBuilder,
    pub(super) want: i64,
}

pub(super) fn case(
    name: &'static str,
    node: NodeBuilder,
    task: TaskBuilder,
    want: i64,
) -> ScoreCase {
    ScoreCase {
        name,
        node,
        running: Vec::new(),
        task,
        want,
    }
}

impl ScoreCase {
    pub(super) fn with(mut self, running: Vec<RunningBuilder>) -> ScoreCase {
        self.running = running;
        self
    }
}

pub(super) fn run_score_cases(p: &mut Policy, cases: Vec<ScoreCase>) {
    for c in cases {
        let mut st = world(vec![c.node]);
        let name = st.node(0).name().to_string();
        allocate_on(&mut st, &name, c.running);
        let (got, _) = score_on(p, &st, &c.task);
        assert_eq!(got, c.want, "{}: score", c.name);
    }
}

#[test]
fn dot_product_score() {
    // score = ⌊100 × (1 − ½[(cpuL/128000)(cpu/128000) + (gL/8000)(gpu/8000)])⌋
    let mut p = must_policy("dot-product", alibaba_norms());
    run_score_cases(
        &mut p,
        vec![
            // ½(½·¼ + 1·½) = 0.3125
            case(
                "scores half a node asked of a node with half its CPU",
                node("n").cpu(64000).gpus(8, "V100-32GB"),
                task("t").cpu(32000).gpus(4),
                68,
            ),
            // ½(1·½ + 0) = 0.25
            case(
                "scores a CPU-only task by CPU alone",
                node("n").gpus(8, "V100-32GB"),
                task("t").cpu(64000),
                75,
            ),
            // ½(¼·⅛ + ¾·¹⁄₁₆) = 0.0390625
            case(
                "scores a share by what is left",
                node("n").gpus(8, "V100-32GB"),
                task("t").cpu(16000).share(500),
                96,
            )
            .with(vec![running("old").cpu(96000).whole(&[0, 1])]),
            // ½(1 + 1) = 1
            case(
                "scores 0 for a task that matches a whole empty node",
                node("n").gpus(8, "V100-32GB"),
                task("t").cpu(128000).gpus(8),
                0,
            ),
            // ½(0 + ¼·0.025) = 0.003125
            case(
                "scores a small share on a small node near 100",
                node("n").cpu(32000).gpus(2, "V100-16GB"),
                task("t").share(200),
                99,
            ),
        ],
    );
}

#[test]
fn dot_product_scales_by_the_norms_given() {
    // With the node's own 64000m and 4 GPUs as norms: ½(1·½ + 1·½) = 0.5.
    let mut p = must_policy("dot-product", norms(64000, 4000));
    run_score_cases(
        &mut p,
        vec![case(
            "scores by the smaller norms",
            node("n").cpu(64000).gpus(4, "V100-16GB"),
            task("t").cpu(32000).gpus(2),
            50,
        )],
    );
}

#[test]
fn best_fit_score() {
    // score = ⌊100 × (1 − ½(cpuL − cpu)/128000 − ½(gL − gpu)/8000)⌋
    let mut p = must_policy("best-fit", alibaba_norms());
    run_score_cases(
        &mut p,
        vec![
            // 1 − ½·¼ − ½·½ = 0.625
            case(
                "scores by what is left after placement",
                node("n").cpu(64000).gpus(8, "V100-32GB"),
                task("t").cpu(32000).gpus(4),
                62,
            ),
            // 1 − ½·⅛ − ½·1750/8000 = 0.828125
            case(
                "scores a share by the milli left after it",
                node("n").cpu(16000).gpus(2, "V100-16GB"),
                task("t").share(250),
                82,
            ),
            // 1 − ½·24000/128000 − ½·2500/8000 = 0.75
            case(
                "counts what already runs",
                node("n").gpus(8, "V100-32GB"),
                task("t").cpu(4000).share(500),
                75,
            )
            .with(vec![running("old").cpu(100000).whole(&[0, 1, 2, 3, 4])]),
            case(
                "scores 100 for a task that fills the node",
                node("n").gpus(8, "V100-32GB"),
                task("t").cpu(128000).gpus(8),
                100,
            ),
            case(
                "scores 0 for nothing asked of an empty largest node",
                node("n").gpus(8, "V100-32GB"),
                task("t"),
                0,
            ),
        ],
    );
}

#[test]
fn gpu_clustering_score() {
    // score = b + ⌊25 × (8000 − gL) / 8000⌋; 8000 even on a 2-GPU node.
    let two_gpus = || node("n").gpus(2, "V100-16GB");
    let four_gpus = || node("n").gpus(4, "V100-16GB");
    let mut p = policy_named("gpu-clustering");
    run_score_cases(
        &mut p,
        vec![
            // 25 + ⌊25·6000/8000⌋ = 25 + 18
            case(
                "gives 25 on a node without GPU tasks",
                two_gpus(),
                task("t").share(500),
                43,
            ),
            // 75 + ⌊25·6250/8000⌋ = 75 + 19
            case(
                "gives 75 on a node holding only shares",
                two_gpus(),
                task("t").share(500),
                94,
            )
            .with(vec![running("a").share(0, 250)]),
            // 50 + ⌊25·7250/8000⌋ = 50 + 22
            case(
                "gives 50 on a node holding shares among others",
                two_gpus(),
                task("t").share(500),
                72,
            )
            .with(vec![running("a").share(0, 250), running("b").whole(&[1])]),
            // 0 + ⌊25·7000/8000⌋ = 21
            case(
                "gives 0 on a node holding only other kinds",
                two_gpus(),
                task("t").share(500),
                21,
            )
            .with(vec![running("b").whole(&[1])]),
            case(
                "gives 75 to a whole GPU beside a whole GPU",
                two_gpus(),
                task("t").gpus(1),
                96,
            )
            .with(vec![running("b").whole(&[1])]),
            case(
                "ignores CPU-only tasks on the node",
                two_gpus(),
                task("t").share(500),
                43,
            )
            .with(vec![running("c").cpu(1000)]),
            // 0 + ⌊25·5000/8000⌋ = 15
            case(
                "tells whole-GPU tasks apart by GPU count",
                four_gpus(),
                task("t").gpus(2),
                15,
            )
            .with(vec![running("a").whole(&[0])]),
            // 75 + ⌊25·6000/8000⌋ = 75 + 18
            case(
                "gives 75 to two GPUs beside two GPUs",
                four_gpus(),
                task("t").gpus(2),
                93,
            )
            .with(vec![running("a").whole(&[0, 1])]),
            case(
                "uses 8000 for an 8-GPU node too",
                node("n").gpus(8, "V100-16GB"),
                task("t").share(500),
                25,
            ),
            case(
                "scores a CPU-only task 0",
                two_gpus(),
                task("t").cpu(1000),
                0,
            )
            .with(vec![running("a").share(0, 250)]),
        ],
    );
}

#[test]
fn gpu_clustering_sees_a_mig_task_as_the_kind_of_a_mig_instance() {
    // 75 + ⌊25·(8000 − 0)/8000⌋: a MIG GPU has no milli to give.
    let mut p = policy_named("gpu-clustering");
    run_score_cases(
        &mut p,
        vec![
            case(
                "gives 75 to a MIG task beside a MIG task",
                node("n").gpus(1, "H100-80GB").mig(),
                task("t").mig_profile("1g.10gb"),
                100,
            )
            .with(vec![running("a").instance(0, "1g.10gb@0")]),
        ],
    );
}

#[test]
fn gpu_packing_score() {
    let two_shared = || node("n").gpus(2, "V100-16GB");
    let mut p = policy_named("gpu-packing");
    run_score_cases(
        &mut p,
        vec![
            // Every GPU free: max(33 − G, G).
            case(
                "scores an empty 2-GPU node 33 − 2",
                node("n").gpus(2, "V100-16GB"),
                task("t").share(500),
                31,
            ),
            case(
                "scores an empty 8-GPU node 33 − 8",
                node("n").gpus(8, "V100-16GB"),
                task("t").gpus(1),
                25,
            ),
            case(
                "scores an empty 20-GPU node by its GPU count",
                node("n").gpus(20, "V100-16GB"),
                task("t").share(500),
                20,
            ),
            // A fully free GPU is taken: max(50 − free GPUs taken, 33).
            case(
                "scores one fully free GPU taken on a used node 50 − 1",
                node("n").gpus(4, "V100-16GB"),
                task("t").share(500),
                49,
            )
            .with(vec![running("a").share(0, 600)]),
            case(
                "scores three fully free GPUs taken 50 − 3",
                node("n").gpus(4, "V100-16GB"),
                task("t").gpus(3),
                47,
            )
            .with(vec![running("a").share(0, 600)]),
            case(
                "keeps at least 33 however many free GPUs are taken",
                node("n").gpus(20, "V100-16GB"),
                task("t").gpus(19),
                33,
            )
            .with(vec![running("a").share(0, 1)]),
            // Only shared GPUs taken: max(100 − ⌊Σ⌊left×100/1000⌋ / 10⌋, 50).
            // Left 400 and 700; the least left that fits is taken.
            case(
                "scores a shared GPU by what it has left",
                two_shared(),
                task("t").share(300),
                96,
            )
            .with(vec![running("a").share(0, 600), running("b").share(1, 300)]),
            case(
                "skips a shared GPU too small for the task",
                two_shared(),
                task("t").share(500),
                93,
            )
            .with(vec![running("a").share(0, 600), running("b").share(1, 300)]),
            // Left 999 and 1000: ⌊99.9⌋ = 99, ⌊99/10⌋ = 9.
            case(
                "takes a shared GPU before a free one and truncates twice",
                two_shared(),
                task("t").share(999),
                91,
            )
            .with(vec![running("a").share(0, 1)]),
            case(
                "scores a CPU-only task 0 even on an empty node",
                node("n").gpus(2, "V100-16GB"),
                task("t").cpu(1000),
                0,
            ),
        ],
    );
}
