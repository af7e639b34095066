//! The fill experiment's tests, ported from the Go build's
//! (go/internal/sim/fill/*_test.go), with the same fixtures.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::random::Rand;
use crate::trace;

const SMALL_NODES: &str = include_str!("../../../../go/internal/sim/fill/testdata/nodes_small.csv");
const SMALL_PODS: &str = include_str!("../../../../go/internal/sim/fill/testdata/pods_small.csv");
/// testdata/nodes_small.csv: five nodes, 26 GPUs.
const SMALL_CLUSTER_MILLI: i64 = 26000;
/// testdata/pods_small.csv: 36 pods asking for 31,530 GPU milli.
const SMALL_PODS_MILLI: i64 = 31530;

fn small_nodes() -> Vec<trace::Node> {
    trace::parse_nodes(SMALL_NODES, "nodes_small.csv").unwrap()
}

fn small_pods() -> Vec<trace::Pod> {
    trace::parse_pods(SMALL_PODS, "pods_small.csv").unwrap()
}

fn small_input() -> Input {
    Input::new(small_nodes(), small_pods())
}

/// A trace row: `pod("p").share(500).spec("T4")`; 1 CPU, 1 GiB, no GPU.
struct PodBuilder(trace::Pod);

fn pod(name: &str) -> PodBuilder {
    PodBuilder(trace::Pod {
        name: name.to_string(),
        cpu_milli: 1000,
        memory_mib: 1024,
        num_gpu: 0,
        gpu_milli: 0,
        gpu_spec: Vec::new(),
        gpu_spec_raw: String::new(),
        qos: String::new(),
        phase: String::new(),
        creation_time: None,
        deletion_time: None,
        scheduled_time: None,
        line: 0,
    })
}

impl PodBuilder {
    fn share(mut self, milli: i64) -> Self {
        self.0.num_gpu = 1;
        self.0.gpu_milli = milli;
        self
    }
    fn gpus(mut self, count: usize) -> Self {
        self.0.num_gpu = count;
        self.0.gpu_milli = 1000;
        self
    }
    fn spec(mut self, raw: &str) -> Self {
        self.0.gpu_spec_raw = raw.to_string();
        self.0.gpu_spec.clear();
        for m in raw.split('|').filter(|m| !m.is_empty()) {
            if !self.0.gpu_spec.iter().any(|x| x == m) {
                self.0.gpu_spec.push(m.to_string());
            }
        }
        self
    }
}

fn pods(bs: Vec<PodBuilder>) -> Vec<trace::Pod> {
    bs.into_iter().map(|b| b.0).collect()
}

/// A node row: `node("n1", 2, "V100M16")`; 32 CPUs, 64 GiB.
fn node(name: &str, gpus: usize, model: &str) -> trace::Node {
    trace::Node {
        name: name.to_string(),
        cpu_milli: 32000,
        memory_mib: 65536,
        gpus,
        model: model.to_string(),
        line: 0,
    }
}

fn names(ps: &[Pod]) -> Vec<String> {
    ps.iter().map(|p| p.task.name.clone()).collect()
}

fn total_milli(ps: &[Pod]) -> i64 {
    ps.iter().map(|p| p.gpu_milli).sum()
}

fn run_one(input: &Input, policy: &str, seed: i64, tune: f64) -> RunResult {
    run(
        input,
        &Options {
            policy: policy.to_string(),
            seed,
            tune,
        },
    )
    .unwrap()
}

/// §3 steps 1 and 2 alone, written from the protocol: the rows' names
/// sorted, then shuffled by the stream of `seed`.
fn shuffled_names(rows: &[trace::Pod], seed: i64) -> (Vec<String>, Rand) {
    let mut rng = Rand::new(seed);
    let mut out: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    out.sort();
    rng.shuffle(&mut out);
    (out, rng)
}

/// An independent reading of §3 steps 1-3, written from the specification
/// and not from `arrivals`: the arrival order as names.
fn reference_arrivals(
    rows: &[trace::Pod],
    cluster_milli: i64,
    tune: f64,
    rng: &mut Rand,
) -> Vec<String> {
    let mut by_name = rows.to_vec();
    by_name.sort_by(|a, b| a.name.cmp(&b.name));
    let mut list = by_name.clone();
    rng.shuffle(&mut list);
    let demand = |p: &trace::Pod| p.num_gpu as i64 * p.gpu_milli;
    let mut order: Vec<String> = list.iter().map(|p| p.name.clone()).collect();
    let mut current: i64 = list.iter().map(demand).sum();
    let target = tune * cluster_milli as f64;
    if (current as f64) < target {
        for i in 0.. {
            let p = &by_name[rng.below(by_name.len())];
            if (current + p.gpu_milli) as f64 > target {
                break;
            }
            order.push(format!("{}-tuned-{i}", p.name));
            current += demand(p);
        }
    } else {
        while current as f64 > target {
            let k = rng.below(list.len());
            current -= demand(&list[k]);
            list.remove(k);
            order.remove(k);
        }
    }
    order
}

// The hand case: one node of two V100M16 GPUs (2000 milli, so 1 % of
// arrived workload is 20 milli) and nine pods whose names are chosen so
// that seed 82368 shuffles them into the order of their role below (the
// Go build's table, under the project's generator). With tune 0 nothing is
// added or removed, and best-fit packs the shares on GPU 0.
//
//	#  pod              arrived  arrived %  column  used  alloc %
//	1  pod-1-cpu              0        0       0       0     0
//	2  pod-7-share-5          5        0.25    0       5     0.25
//	3  pod-4-share-245      250       12.5    12     250    12.5   half-even: not 13
//	4  pod-0-whole         1250       62.5    62    1250    62.5   half-even: not 63
//	5  pod-6-share-40      1290       64.5    64    1290    64.5   half-even: not 65
//	6  pod-2-cpu           1290       64.5    64    1290    64.5
//	7  pod-3-t4-100        1390       69.5    70    1290    64.5   fails: no T4
//	8  pod-5-share-600     1990       99.5   100    1890    94.5
//	9  pod-8-t4-630        2620      131     131    1890    94.5   fails, after 100 %
const HAND_SEED: i64 = 82368;
const HAND_ORDER: [&str; 9] = [
    "pod-1-cpu",
    "pod-7-share-5",
    "pod-4-share-245",
    "pod-0-whole",
    "pod-6-share-40",
    "pod-2-cpu",
    "pod-3-t4-100",
    "pod-5-share-600",
    "pod-8-t4-630",
];

fn hand_input() -> Input {
    Input::new(
        vec![node("n1", 2, "V100M16")],
        pods(vec![
            pod("pod-0-whole").share(1000),
            pod("pod-1-cpu"),
            pod("pod-2-cpu"),
            pod("pod-3-t4-100").share(100).spec("T4"),
            pod("pod-4-share-245").share(245),
            pod("pod-5-share-600").share(600),
            pod("pod-6-share-40").share(40),
            pod("pod-7-share-5").share(5),
            pod("pod-8-t4-630").share(630).spec("T4"),
        ]),
    )
}

#[test]
fn the_hand_case_arrives_in_the_tabulated_order() {
    let input = hand_input();
    let got = names(&arrivals(&input.pods, 2000, 0.0, &mut Rand::new(HAND_SEED)));
    assert_eq!(got, HAND_ORDER);
    assert_eq!(shuffled_names(&input.pods, HAND_SEED).0, HAND_ORDER);
}

#[test]
fn a_run_measures_columns_as_the_protocol() {
    let r = run_one(&hand_input(), "best-fit", HAND_SEED, 0.0);
    let want: BTreeMap<usize, f64> = [
        // Two events at 0 %: the CPU-only pod's 0 and 0.25; their mean
        // 0.125 rounds half to even.
        (0, 0.12),
        (1, 0.12), // empty: column 0 alone of 0..2
        (11, 12.5),
        (12, 12.5),
        (13, 12.5),
        (61, 62.5),
        (62, 62.5),
        // Empty: the events of 62 and 64 are pooled, (62.5 + 64.5 +
        // 64.5) / 3, not the mean of the two column means (63.5).
        (63, 63.83),
        (64, 64.5),
        (65, 64.5),
        (69, 64.5),
        (70, 64.5),
        (71, 64.5),
        (99, 94.5),
        (100, 94.5),
        (101, 94.5),
        // Empty: 129 is empty, and the event at 131, past the last
        // column, still counts.
        (130, 94.5),
    ]
    .into_iter()
    .collect();
    for c in 0..COLUMNS {
        assert_eq!(
            r.alloc[c],
            want.get(&c).copied().unwrap_or(0.0),
            "alloc[{c}]"
        );
    }
    assert_eq!((r.pods, r.failed, r.total_gpus), (9, 2, 2));
    // Only the T4 share that failed before 100 % counts.
    assert_eq!(
        r.failed_at_100,
        BTreeMap::from([("share".to_string(), 100)])
    );
    assert_eq!(r.unallocated(), 5.5);
}

#[test]
fn a_run_drops_pods_that_fit_nowhere() {
    // Three nodes of two P100s (6000 milli): a 4-GPU pod fits on no node,
    // and a T4 pod matches no model. Both arrive by 5000 milli (83 %).
    let input = Input::new(
        vec![
            node("n1", 2, "P100"),
            node("n2", 2, "P100"),
            node("n3", 2, "P100"),
        ],
        pods(vec![pod("wide").gpus(4), pod("t4").share(1000).spec("T4")]),
    );
    for seed in [1, 2] {
        let r = run_one(&input, "fgd", seed, 0.0);
        assert_eq!((r.failed, r.pods), (2, 2), "seed {seed}");
        let want = BTreeMap::from([("4-gpu".to_string(), 4000), ("1-gpu".to_string(), 1000)]);
        assert_eq!(r.failed_at_100, want, "seed {seed}");
        assert!(
            r.alloc.iter().all(|&a| a == 0.0),
            "seed {seed}: allocation recorded"
        );
    }
}

#[test]
fn runs_are_deterministic_and_place_something_under_every_policy() {
    let input = small_input();
    for &policy in crate::policies::names() {
        let a = run_one(&input, policy, 42, 1.3);
        let b = run_one(&input, policy, 42, 1.3);
        assert_eq!(a, b, "{policy}: two runs of seed 42 differ");
        let most = a.alloc.iter().copied().fold(0.0, f64::max);
        assert!(
            a.pods > 36 && a.total_gpus == 26 && most > 0.0,
            "{policy}: pods {}, most {most}",
            a.pods
        );
    }
}

#[test]
fn seeds_differ() {
    let input = small_input();
    let a = run_one(&input, "best-fit", 42, 1.3);
    let b = run_one(&input, "best-fit", 43, 1.3);
    assert!(
        a.alloc != b.alloc || a.pods != b.pods,
        "the seed is not used"
    );
}

#[test]
fn bad_input_is_refused_with_its_reason() {
    let cpu_only = vec![node("c1", 0, ""), node("c2", 0, "")];
    let typical = Arc::clone(&small_input().typical);
    let with = |nodes: Vec<trace::Node>, pods: Vec<trace::Pod>| Input {
        nodes,
        pods,
        typical: Arc::clone(&typical),
        shapes: Vec::new(),
    };
    let cases = [
        (
            "no nodes",
            with(Vec::new(), small_pods()),
            "fgd",
            "empty node or pod list",
        ),
        (
            "no pods",
            with(small_nodes(), Vec::new()),
            "fgd",
            "empty node or pod list",
        ),
        ("no GPUs", with(cpu_only, small_pods()), "fgd", "no GPU"),
        (
            "unknown policy",
            small_input(),
            "no-such-policy",
            "unknown policy \"no-such-policy\"",
        ),
    ];
    for (name, input, policy, want) in cases {
        let opt = Options {
            policy: policy.to_string(),
            seed: 1,
            tune: 1.3,
        };
        let err = run(&input, &opt).expect_err(name).to_string();
        assert!(
            err.contains(want),
            "{name}: {err:?} does not contain {want:?}"
        );
    }
}

#[test]
fn ties_go_by_the_ranks_drawn_after_the_arrivals() {
    // Two equal nodes but for the model. "any" scores the same on both,
    // so it goes to the node of lower rank; if that is the T4 node and
    // "any" comes first, "t4" finds no T4 left and fails.
    let input = Input::new(
        vec![node("a-p100", 1, "P100"), node("b-t4", 1, "T4")],
        pods(vec![
            pod("any").share(1000),
            pod("t4").share(1000).spec("T4"),
        ]),
    );
    let mut outcomes = [0; 2];
    for seed in 1..=40 {
        let (order, mut rng) = shuffled_names(&input.pods, seed);
        let ranks = rng.perm(2);
        let want = usize::from(order[0] == "any" && ranks[1] < ranks[0]);
        let r = run_one(&input, "best-fit", seed, 0.0);
        assert_eq!(
            r.failed, want,
            "seed {seed}: order {order:?}, ranks {ranks:?}"
        );
        outcomes[want] += 1;
    }
    assert!(
        outcomes[0] > 0 && outcomes[1] > 0,
        "both tie-breaks: {outcomes:?}"
    );
}

#[test]
fn a_run_measures_fragmentation() {
    // One node of two GPUs and three identical 600-milli shares: the
    // typical pod is the share (p = 1).
    //
    //	#  GPUs left   arrived %  alloc %  frag (milli)      frag %  frag / idle %
    //	1  400, 1000      30        30     400: GPU 1 fits    20      400/1400 = 28.57
    //	2  400, 400       60        60     800: no GPU fits   40      800/800  = 100
    //	3  fails          90        60     800                40      100
    let input = Input::new(
        vec![node("n1", 2, "V100M16")],
        pods(vec![
            pod("s1").share(600),
            pod("s2").share(600),
            pod("s3").share(600),
        ]),
    );
    let r = run_one(&input, "best-fit", 3, 0.0);
    for (col, alloc, frag, ratio) in [
        (30, 30.0, 20.0, 28.57),
        (60, 60.0, 40.0, 100.0),
        (90, 60.0, 40.0, 100.0),
    ] {
        assert_eq!(
            (r.alloc[col], r.frag[col], r.frag_ratio[col]),
            (alloc, frag, ratio),
            "column {col}"
        );
    }
    assert_eq!(r.failed, 1);
    assert_eq!(r.failed_at_100.get("share"), Some(&600));
}

/// §4's alloc_ratio is Python's round(x, 2), which rounds the exact binary
/// value: 1 milli of 4000 is 0.025 % (0.02500000000000000139), which
/// Python rounds to 0.03.
#[test]
fn alloc_ratio_rounds_as_python() {
    let input = Input::new(vec![node("n1", 4, "T4")], pods(vec![pod("tiny").share(1)]));
    assert_eq!(run_one(&input, "best-fit", 1, 0.0).alloc[0], 0.03);
}

#[test]
fn arrivals_draw_as_the_protocol() {
    let rows = small_pods();
    let cases = [
        (SMALL_CLUSTER_MILLI, 1.3, "up"),
        (SMALL_CLUSTER_MILLI, 3.0, "up"),
        (SMALL_CLUSTER_MILLI, 1.0, "down"),
        (SMALL_CLUSTER_MILLI, 0.4, "down"),
        (SMALL_PODS_MILLI / 2, 2.0, "none"),
    ];
    for (cluster_milli, tune, tuning) in cases {
        for seed in [1, 42, 51, 2024] {
            let (mut got, mut want) = (Rand::new(seed), Rand::new(seed));
            let a = arrivals(&rows, cluster_milli, tune, &mut got);
            assert_eq!(
                names(&a),
                reference_arrivals(&rows, cluster_milli, tune, &mut want),
                "seed {seed} tune {tune}"
            );
            // The node ranks are drawn next: the stream must be left
            // exactly where the protocol leaves it.
            assert_eq!(
                got.perm(5),
                want.perm(5),
                "seed {seed} tune {tune}: stream consumed differently"
            );
            let n = a.len();
            let ok = match tuning {
                "up" => n > rows.len(),
                "down" => n < rows.len(),
                _ => n == rows.len(),
            };
            assert!(
                ok,
                "seed {seed}: {n} arrivals from {} rows; want tuning {tuning}",
                rows.len()
            );
        }
    }
}

#[test]
fn tuning_up_appends_renamed_copies_after_the_shuffled_originals() {
    let rows = small_pods();
    let a = arrivals(&rows, SMALL_CLUSTER_MILLI, 1.3, &mut Rand::new(7));
    let mut originals = names(&a[..rows.len()]);
    assert!(
        !originals.is_sorted(),
        "the originals arrive in name order: not shuffled"
    );
    originals.sort();
    let mut row_names: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    row_names.sort();
    assert_eq!(originals, row_names);
    let tuned = &a[rows.len()..];
    assert!(!tuned.is_empty());
    for (i, p) in tuned.iter().enumerate() {
        let (orig, idx) = p.task.name.split_once("-tuned-").expect("a tuned name");
        assert_eq!(idx, i.to_string());
        let src = rows.iter().find(|r| r.name == orig).expect("a row");
        assert_eq!(*p, pod_of(src, &p.task.name));
    }
    let target = (1.3 * SMALL_CLUSTER_MILLI as f64) as i64;
    let total = total_milli(&a);
    assert!(
        total <= target + 8000 && total >= target - 1000,
        "total {total}, target {target}"
    );
}

#[test]
fn the_stop_rule_uses_the_per_gpu_milli() {
    // One 4-GPU pod on a 10,000-milli cluster, target 10,000: the copies
    // are checked against 1000 (per GPU), not 4000.
    let a = arrivals(
        &pods(vec![pod("wide").gpus(4)]),
        10000,
        1.0,
        &mut Rand::new(1),
    );
    assert_eq!(names(&a), ["wide", "wide-tuned-0", "wide-tuned-1"]);
    assert_eq!(total_milli(&a), 12000);
}

#[test]
fn tuning_down_keeps_the_shuffled_order() {
    let rows = small_pods();
    for seed in [3, 42, 99] {
        let (shuffled, _) = shuffled_names(&rows, seed);
        let a = arrivals(&rows, SMALL_CLUSTER_MILLI, 1.0, &mut Rand::new(seed));
        assert!(total_milli(&a) <= SMALL_CLUSTER_MILLI);
        let rest = names(&a);
        let mut i = 0;
        for n in &shuffled {
            if i < rest.len() && rest[i] == *n {
                i += 1;
            }
        }
        assert_eq!(
            i,
            rest.len(),
            "seed {seed}: not a subsequence of the shuffle"
        );
        assert!(rest.iter().all(|n| !n.contains("-tuned-")));
    }
}

#[test]
fn pods_convert_as_the_protocol() {
    let p = pod_of(&pod("over").share(1500).0, "renamed");
    assert_eq!(p.task.name, "renamed");
    assert_eq!(p.gpu_milli, 1000, "gpu_milli above 1000 is a whole GPU");
    assert_eq!((p.shape.milli, p.shape.num), (1000, 1));
    let cpu = pod_of(&pod("cpu").spec("T4").0, "cpu");
    assert_eq!(
        (cpu.gpu_milli, cpu.shape.spec.as_str()),
        (0, ""),
        "a CPU-only pod's spec is ignored"
    );
    let share = pod_of(&pod("s").share(300).spec("T4|T4").0, "s");
    assert_eq!(
        share.shape.spec, "T4|T4",
        "the shape keeps the spec as written"
    );
    assert!(share.task.gpu.allows_model("T4") && !share.task.gpu.allows_model("P100"));
}

#[test]
fn median_and_published_as_go() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[13.36, 13.38]), 13.370000000000001);
    assert_eq!(median(&[]), 0.0);
    let mut text = String::from("workload,sc_policy,tune,seed,total_gpus");
    for c in 0..COLUMNS {
        text.push_str(&format!(",{c}"));
    }
    for (seed, at100) in [(42, 95.0), (43, 94.0)] {
        text.push_str(&format!("\nw,06-FGD,1.3,{seed},6212"));
        for c in 0..COLUMNS {
            text.push_str(&format!(",{}", if c == 100 { at100 } else { 0.0 }));
        }
    }
    let p = parse_published(&text, "x.csv").unwrap();
    assert_eq!(p.median_unallocated("w", "fgd"), Some(5.5));
    assert_eq!(p.median_unallocated("w", "partita"), None);
    let bad = parse_published(&text.replace(",43,", ",x,"), "x.csv").unwrap_err();
    assert_eq!(
        bad.to_string(),
        "x.csv:3: column seed: \"x\": invalid digit found in string"
    );
}

/// The Alibaba trace's default list, seed 42, against the published run of
/// the same seed (within tolerances: the shuffles are the project's
/// generator's, not the published simulator's). Skipped without the data.
#[test]
fn the_shared_default_list_is_near_the_published_seed_42() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/data/alibaba-gpu-v2023"
    );
    let expected = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/data/fgd-expected/analysis_allo_discrete.csv"
    );
    let (Ok(nodes), Ok(pods), Ok(published)) = (
        std::fs::read(format!("{dir}/openb_node_list_gpu_node.csv")),
        std::fs::read(format!("{dir}/openb_pod_list_default.csv")),
        std::fs::read_to_string(expected),
    ) else {
        eprintln!("skipped: no Alibaba trace at {dir}");
        return;
    };
    let input = Input::new(
        trace::parse_nodes(nodes, "nodes").unwrap(),
        trace::parse_pods(pods, "pods").unwrap(),
    );
    let published = parse_published(&published, expected).unwrap();
    for (policy, label) in [("fgd", "06-FGD"), ("best-fit", "05-BestFit")] {
        let r = run_one(&input, policy, 42, 1.3);
        let cols = &published.0["openb_pod_list_default"][label][&42];
        let publ = 100.0 - cols[100];
        assert!(
            (r.alloc[0] - 0.25).abs() <= 0.05 && (r.alloc[1] - 0.99).abs() <= 0.1,
            "{policy}: columns 0, 1 = {} {}",
            r.alloc[0],
            r.alloc[1]
        );
        assert!(
            (r.unallocated() - publ).abs() <= 1.0,
            "{policy}: {} against published {publ}",
            r.unallocated()
        );
    }
}
