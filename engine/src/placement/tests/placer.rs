//! placer_test.go, and the node-set half of the cache key the Go build
//! does not have.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::*;
use crate::placement::placer::MAX_CLASSES;
use crate::placement::{
    Adjuster, Code, Failure, Filter, Hint, PlaceError, Placer, Policy, RandomPicker, Reason,
    Rewriter, Scorer, Selector,
};
use crate::random::Rand;

// Stub stages: each does one visible thing, so a test sees whether the
// placer used it. What they record is shared through an Arc, since the
// placer owns the stage.

/// Scores each node from a table (0 when absent) and counts how often
/// each node was scored.
#[derive(Clone, Default)]
struct ScoreByName {
    scores: BTreeMap<String, i64>,
    calls: Arc<Mutex<BTreeMap<String, usize>>>,
}

fn scores(table: &[(&str, i64)]) -> ScoreByName {
    ScoreByName {
        scores: table.iter().map(|&(n, s)| (n.to_string(), s)).collect(),
        calls: Arc::default(),
    }
}

impl ScoreByName {
    fn calls(&self) -> BTreeMap<String, usize> {
        self.calls.lock().expect("lock").clone()
    }
    fn total(&self) -> usize {
        self.calls().values().sum()
    }
}

impl Scorer for ScoreByName {
    fn name(&self) -> &'static str {
        "by-name"
    }
    fn score(&mut self, n: &Node, _: &Request) -> (i64, Option<Hint>) {
        *self
            .calls
            .lock()
            .expect("lock")
            .entry(n.name().to_string())
            .or_default() += 1;
        (self.scores.get(n.name()).copied().unwrap_or(0), None)
    }
}

fn calls(table: &[(&str, usize)]) -> BTreeMap<String, usize> {
    table.iter().map(|&(n, k)| (n.to_string(), k)).collect()
}

/// A policy filter that refuses one node by name.
struct RefuseNode(&'static str);

impl Filter for RefuseNode {
    fn name(&self) -> &'static str {
        "refuse-node"
    }
    fn filter(&self, n: &Node, _: &Request) -> Result<(), Reason> {
        if n.name() == self.0 {
            return Err(Reason {
                filter: "refuse-node",
                code: Code::Policy,
            });
        }
        Ok(())
    }
}

/// Selects the last feasible node and records what it was given.
#[derive(Clone, Default)]
struct LastFeasible {
    feasible: Arc<Mutex<Option<Vec<usize>>>>,
}

impl Selector for LastFeasible {
    fn select(&mut self, _: &State, feasible: &[usize], _: &mut Rand) -> usize {
        *self.feasible.lock().expect("lock") = Some(feasible.to_vec());
        feasible[feasible.len() - 1]
    }
}

/// Turns a share into as many whole GPUs as it has tenths.
struct ShareToWholeGpus;

impl Rewriter for ShareToWholeGpus {
    fn rewrite(&self, r: Request) -> Request {
        if r.kind() != Kind::Fraction {
            return r;
        }
        let mut t = r.task().clone();
        t.gpu = Demand::whole_gpus(r.milli() / 100);
        Request::new(t, 0.0).expect("whole GPUs are a valid demand")
    }
}

/// Adds `bonus` to one node's score; counts its calls.
#[derive(Clone, Default)]
struct BonusFor {
    node: &'static str,
    bonus: i64,
    prepared: Arc<Mutex<usize>>,
    /// The score each node arrived with.
    seen: Arc<Mutex<BTreeMap<String, i64>>>,
}

impl Adjuster for BonusFor {
    fn prepare(&mut self, _: &State, _: &Request) {
        *self.prepared.lock().expect("lock") += 1;
    }
    fn adjust(&mut self, i: usize, n: &Node, _: &Request, score: i64, _: Option<&Hint>) -> i64 {
        assert_eq!(
            n.name(),
            ["a", "b", "c"][i],
            "the position given is the node's"
        );
        self.seen
            .lock()
            .expect("lock")
            .insert(n.name().to_string(), score);
        if n.name() == self.node {
            score + self.bonus
        } else {
            score
        }
    }
}

/// A picker that never finds a device.
struct NoPick;

impl crate::placement::Picker for NoPick {
    fn pick(
        &mut self,
        _: &Node,
        _: &Request,
        _: Option<&Hint>,
        _: &mut Rand,
    ) -> Option<Vec<Grant>> {
        None
    }
}

fn policy_with_scorer(s: &ScoreByName) -> Policy {
    Policy {
        scorer: Some(Box::new(s.clone())),
        ..Policy::new("test")
    }
}

#[track_caller]
fn place(p: Policy, st: &State, b: &TaskBuilder) -> Assignment {
    Placer::new(p, Rand::new(1))
        .place(st, b.build())
        .unwrap_or_else(|e| panic!("place({}): {e}", b.build().name))
}

#[test]
fn placer_takes_the_best_score() {
    /// (name, nodes, score per node, the node wanted)
    type Case = (
        &'static str,
        Vec<NodeBuilder>,
        &'static [(&'static str, i64)],
        &'static str,
    );
    let cases: [Case; 6] = [
        (
            "takes the highest score",
            vec![node("a"), node("b"), node("c")],
            &[("a", 10), ("b", 30), ("c", 20)],
            "b",
        ),
        (
            "takes a negative best score",
            vec![node("a"), node("b")],
            &[("a", -10), ("b", -5)],
            "b",
        ),
        (
            "breaks a tie by the lowest rank",
            vec![node("a").rank(2), node("b").rank(0), node("c").rank(1)],
            &[("a", 5), ("b", 5), ("c", 5)],
            "b",
        ),
        (
            "breaks a tie among the best only",
            vec![node("a").rank(0), node("b").rank(2), node("c").rank(1)],
            &[("a", 4), ("b", 5), ("c", 5)],
            "c",
        ),
        (
            "breaks a tie of equal ranks by position",
            vec![node("a"), node("b"), node("c")],
            &[("a", 1), ("b", 1), ("c", 1)],
            "a",
        ),
        (
            "never takes a node the filter refused",
            vec![node("a").cpu(500), node("b")],
            &[("a", 100), ("b", 1)],
            "b",
        ),
    ];
    for (name, nodes, table, want) in cases {
        let st = world(&nodes);
        let a = place(
            policy_with_scorer(&scores(table)),
            &st,
            &task("t").cpu(1000),
        );
        assert_eq!(a.node, want, "{name}");
    }
}

#[test]
fn placer_without_a_scorer_takes_the_lowest_rank() {
    let st = world(&[node("a").rank(3), node("b").rank(1), node("c").rank(2)]);
    assert_eq!(place(Policy::new("test"), &st, &task("t")).node, "b");
}

#[test]
fn placer_fills_the_assignment() {
    let mut st = world(&[node("v100").gpus(2, "V100-16GB")]);
    allocate_on(&mut st, "v100", &[running("old").share(0, 600)]);
    let a = place(
        Policy::new("test"),
        &st,
        &task("t").cpu(1500).memory(2048).share(300),
    );
    let want = Assignment {
        task: "t".to_string(),
        node: "v100".to_string(),
        cpu_milli: 1500,
        memory_mib: 2048,
        grants: vec![Grant::share(0, 300)],
    };
    assert_eq!(a, want);
}

#[test]
fn placer_leaves_the_state_alone() {
    let st = world(&[node("v100").gpus(2, "V100-16GB")]);
    let (before, generation, version) =
        (st.node(0).describe(), st.node(0).generation(), st.version());
    place(Policy::new("test"), &st, &task("t").cpu(1500).gpus(2));
    assert_eq!(st.node(0).describe(), before);
    assert_eq!(
        (st.node(0).generation(), st.version()),
        (generation, version)
    );
}

#[test]
fn placer_explains_a_failure_with_counts_per_reason() {
    let st = world(&[
        node("small-1").cpu(1000).gpus(1, "V100-16GB"),
        node("cpu-only"),
        node("small-2").cpu(1000).gpus(1, "V100-16GB"),
        node("v100-32").gpus(1, "V100-32GB"),
        node("refused").gpus(1, "V100-16GB"),
    ]);
    let policy = Policy {
        filters: vec![Box::new(RefuseNode("refused"))],
        ..Policy::new("test")
    };
    let err = Placer::new(policy, Rand::new(1))
        .place(&st, task("t").cpu(4000).share(500).on(&["V100M16"]).build())
        .expect_err("nothing fits");
    let PlaceError::Failure(f) = &err else {
        panic!("error {err:?}; want a Failure");
    };
    let want = BTreeMap::from([
        (Code::Cpu, 2),
        (Code::NoGpu, 1),
        (Code::Model, 1),
        (Code::Policy, 1),
    ]);
    assert_eq!((f.task.as_str(), f.nodes, &f.reasons), ("t", 5, &want));
    // Most frequent reason first, then by name.
    assert_eq!(
        err.to_string(),
        "task t: 0/5 nodes fit (2 cpu, 1 gpu-model, 1 no-gpu, 1 policy)"
    );
}

#[test]
fn failure_text_orders_ties_by_code_name() {
    // Declared order and name order differ for no code; the text sorts by
    // name all the same.
    let mut codes = [
        Code::Policy,
        Code::NoGpu,
        Code::Mig,
        Code::MigOff,
        Code::Memory,
        Code::Model,
        Code::TooSmall,
        Code::Gpu,
        Code::Cpu,
    ];
    codes.sort();
    let names: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let f = Failure {
        task: "t".to_string(),
        nodes: 7,
        reasons: BTreeMap::from([
            (Code::Policy, 1),
            (Code::Mig, 3),
            (Code::TooSmall, 1),
            (Code::Model, 1),
            (Code::Cpu, 1),
        ]),
    };
    assert_eq!(
        f.to_string(),
        "task t: 0/7 nodes fit (3 mig-slice, 1 cpu, 1 gpu-memory, 1 gpu-model, 1 policy)"
    );
}

#[test]
fn brief_failures_say_only_that_nothing_fits() {
    let st = world(&[
        node("small").cpu(1000).gpus(1, "V100-16GB"),
        node("cpu-only"),
    ]);
    let mut p = Placer::new(Policy::new("test"), Rand::new(1));
    p.set_brief_failures(true);
    let big = task("t").cpu(4000).share(500).build();
    let err = p.place(&st, big.clone()).expect_err("too big");
    assert_eq!(err, PlaceError::NoFit);
    assert_eq!(err.to_string(), "no node fits the task");
    // place_all too, whichever task fails, and a fit is still a fit.
    let r = p.request(big).expect("valid");
    let small = p
        .request(task("s").cpu(500).share(500).build())
        .expect("valid");
    for reqs in [vec![&r], vec![&small, &r]] {
        let got = p.place_all(&st, &reqs, |_| true);
        assert_eq!(got.err(), Some(PlaceError::NoFit), "{} tasks", reqs.len());
    }
    let small2 = p
        .request(task("s2").cpu(500).share(500).build())
        .expect("valid");
    let (as_, trial) = p
        .place_all(&st, &[small, small2], |_| true)
        .expect("two small tasks fit");
    assert_eq!(as_.len(), 2);
    assert_eq!(trial.node(0).gpus()[0].used(), 1000, "the trial holds both");
    assert_eq!(
        st.node(0).gpus()[0].used(),
        0,
        "place_all changed its input"
    );
}

#[test]
fn place_all_of_nothing_is_the_state_unchanged() {
    let st = world(&[node("a")]);
    let none: [Request; 0] = [];
    let (as_, trial) = Placer::new(Policy::new("test"), Rand::new(1))
        .place_all(&st, &none, |_| true)
        .expect("nothing fits anywhere");
    assert!(as_.is_empty());
    assert_eq!(trial.version(), st.version());
}

/// A cluster whose nodes each refuse some tasks for another reason (CPU,
/// no GPU, a filter), and a placer for it.
fn fits_world() -> (State, Placer) {
    let st = world(&[
        node("small").cpu(1000).gpus(1, "V100-16GB"),
        node("cpu-only"),
        node("big").gpus(2, "V100-32GB"),
        node("refused").gpus(1, "V100-16GB"),
    ]);
    let policy = Policy {
        filters: vec![Box::new(RefuseNode("refused"))],
        ..Policy::new("test")
    };
    (st, Placer::new(policy, Rand::new(1)))
}

fn fits_tasks() -> Vec<Task> {
    vec![
        task("a").cpu(500).share(500).build(),
        task("b").cpu(4000).gpus(2).build(),
        task("c").cpu(100).build(),
        task("d").gpus(3).build(),
    ]
}

#[test]
fn fits_agrees_with_placing_on_that_node_alone() {
    let (st, mut p) = fits_world();
    for t in fits_tasks() {
        let r = p.request(t.clone()).expect("valid");
        for n in st.nodes() {
            let placed = p.place_in(&st, &r, |x| x.name() == n.name());
            assert_eq!(
                p.fits(n, &r),
                placed.is_ok(),
                "task {} on {}: {placed:?}",
                t.name,
                n.name()
            );
        }
    }
}

#[test]
fn fits_somewhere_agrees_with_placing() {
    let (st, mut p) = fits_world();
    type Allowed = Box<dyn Fn(&Node) -> bool>;
    let sets: Vec<(&str, Allowed)> = vec![
        ("every node", Box::new(|_| true)),
        ("not big", Box::new(|n| n.name() != "big")),
        ("refused", Box::new(|n| n.name() == "refused")),
    ];
    let mut fitting = 0;
    for t in fits_tasks() {
        let r = p.request(t.clone()).expect("valid");
        for (name, allowed) in &sets {
            let placed = p.place_in(&st, &r, allowed);
            let somewhere = p.fits_somewhere(&st, &r, allowed);
            assert_eq!(
                somewhere,
                placed.is_ok(),
                "task {} on {name}: {placed:?}",
                t.name
            );
            fitting += usize::from(placed.is_ok());
        }
    }
    assert!(
        fitting > 0 && fitting < 12,
        "{fitting} of 12 cases fit: the test needs both kinds"
    );
}

#[test]
fn a_node_not_allowed_counts_as_refused_by_policy() {
    let (st, mut p) = fits_world();
    let r = p.request(task("c").cpu(100).build()).expect("valid");
    let err = p
        .place_in(&st, &r, |n| n.name() == "nowhere")
        .expect_err("no node allowed");
    assert_eq!(err.to_string(), "task c: 0/4 nodes fit (4 policy)");
}

#[test]
fn placer_fails_on_an_empty_cluster() {
    let st = world(&[]);
    let got = Placer::new(Policy::new("test"), Rand::new(1)).place(&st, task("t").build());
    want_err(got, &["task t: 0/0 nodes fit ()"]);
}

#[test]
fn placer_refuses_an_invalid_task() {
    let st = world(&[node("a")]);
    let got =
        Placer::new(Policy::new("test"), Rand::new(1)).place(&st, task("t").share(1000).build());
    let err = want_err(got, &["task t", "fraction"]);
    assert!(matches!(err, PlaceError::Invalid(_)), "{err:?}");
}

#[test]
fn placer_reports_a_picker_that_finds_nothing() {
    let st = world(&[node("v100").gpus(1, "V100-16GB")]);
    let policy = Policy {
        picker: Some(Box::new(NoPick)),
        ..Policy::new("broken")
    };
    let got = Placer::new(policy, Rand::new(1)).place(&st, task("t").share(100).build());
    want_err(
        got,
        &[
            "task t",
            "policy broken",
            "node v100 passed the filters but no device could be picked",
        ],
    );
}

#[test]
fn placer_rewrites_the_request_first() {
    // The rewritten request (3 whole GPUs) fits only the 4-GPU node, which
    // scores lower.
    let st = world(&[
        node("two").gpus(2, "V100-16GB"),
        node("four").gpus(4, "V100-16GB"),
    ]);
    let policy = Policy {
        rewriter: Some(Box::new(ShareToWholeGpus)),
        ..policy_with_scorer(&scores(&[("two", 10)]))
    };
    let mut p = Placer::new(policy, Rand::new(1));
    assert!(p.rewrites());
    let r = p.request(task("t").share(300).build()).expect("valid");
    assert_eq!((r.kind(), r.count()), (Kind::WholeGpus, 3), "{r}");
    let a = p.place(&st, task("t").share(300).build()).expect("placed");
    assert_eq!(a.node, "four");
    assert_eq!(grants_text(&a.grants), ["0:1000", "1:1000", "2:1000"]);
}

#[test]
fn placer_lets_a_selector_choose_among_feasible_nodes() {
    let st = world(&[
        node("a").rank(0),
        node("full").cpu(100),
        node("c").rank(1),
        node("d").rank(2),
    ]);
    let sel = LastFeasible::default();
    let policy = Policy {
        selector: Some(Box::new(sel.clone())),
        ..policy_with_scorer(&scores(&[("a", 100)]))
    };
    let a = place(policy, &st, &task("t").cpu(1000));
    assert_eq!(a.node, "d", "the selector's pick, not the best score");
    assert_eq!(*sel.feasible.lock().expect("lock"), Some(vec![0, 2, 3]));
}

#[test]
fn placer_does_not_call_the_selector_when_nothing_fits() {
    let st = world(&[node("full").cpu(100)]);
    let sel = LastFeasible::default();
    let policy = Policy {
        selector: Some(Box::new(sel.clone())),
        ..Policy::new("test")
    };
    let err = Placer::new(policy, Rand::new(1))
        .place(&st, task("t").cpu(1000).build())
        .expect_err("nothing fits");
    assert!(matches!(err, PlaceError::Failure(_)), "{err:?}");
    assert_eq!(*sel.feasible.lock().expect("lock"), None);
}

#[test]
fn placer_applies_the_adjuster_to_every_placement() {
    let st = world(&[node("a"), node("b"), node("c")]);
    let sc = scores(&[("a", 30), ("b", 20), ("c", 10)]);
    let adj = BonusFor {
        node: "c",
        bonus: 25,
        ..BonusFor::default()
    };
    let policy = Policy {
        adjuster: Some(Box::new(adj.clone())),
        ..policy_with_scorer(&sc)
    };
    let mut p = Placer::new(policy, Rand::new(1));
    for i in 0..2 {
        let a = p.place(&st, task("t").cpu(1000).build()).expect("placed");
        assert_eq!(a.node, "c", "placement {i}: 10 + 25 beats 30");
        assert_eq!(*adj.prepared.lock().expect("lock"), i + 1);
    }
    // The second placement read every score from the cache, and the
    // adjuster still saw them.
    assert_eq!(sc.total(), 3);
    let seen = adj.seen.lock().expect("lock").clone();
    let want: BTreeMap<String, i64> = [("a", 30), ("b", 20), ("c", 10)]
        .iter()
        .map(|&(n, s)| (n.to_string(), s))
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn placer_reuses_verdicts_of_unchanged_nodes() {
    let mut st = world(&[
        node("a").gpus(2, "V100-16GB"),
        node("b").gpus(2, "V100-16GB"),
        node("c").gpus(2, "V100-16GB"),
    ]);
    let sc = scores(&[("a", 1)]);
    let mut p = Placer::new(policy_with_scorer(&sc), Rand::new(1));
    let steps = [
        (
            "scores every node the first time",
            task("t1").share(500),
            true,
            calls(&[("a", 1), ("b", 1), ("c", 1)]),
        ),
        (
            "scores only the changed node for the same kind of task",
            task("t2").share(500),
            false,
            calls(&[("a", 2), ("b", 1), ("c", 1)]),
        ),
        (
            "scores nothing again when nothing changed",
            task("t3").share(500),
            false,
            calls(&[("a", 2), ("b", 1), ("c", 1)]),
        ),
        (
            "scores every node for another kind of task",
            task("t4").share(501),
            false,
            calls(&[("a", 3), ("b", 2), ("c", 2)]),
        ),
    ];
    for (name, b, allocate, want) in steps {
        let a = p
            .place(&st, b.build())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(sc.calls(), want, "{name}");
        if allocate {
            st.allocate(&a).expect("allocate");
        }
    }
}

#[test]
fn placer_of_a_volatile_policy_scores_every_time() {
    let st = world(&[node("a"), node("b")]);
    let sc = scores(&[]);
    let policy = Policy {
        volatile: true,
        ..policy_with_scorer(&sc)
    };
    let mut p = Placer::new(policy, Rand::new(1));
    for _ in 0..3 {
        p.place(&st, task("t").cpu(100).build()).expect("placed");
    }
    assert_eq!(sc.total(), 6, "3 placements on 2 nodes");
}

/// Prefers the node with the least GPU left: a score that changes with
/// every allocation.
struct LeastFreeMilli;

impl Scorer for LeastFreeMilli {
    fn name(&self) -> &'static str {
        "least-free"
    }
    fn score(&mut self, n: &Node, _: &Request) -> (i64, Option<Hint>) {
        (-i64::from(n.gpu_free_milli()), None)
    }
}

#[test]
fn placer_stays_right_past_the_cache_bound() {
    // More kinds of request than the cache holds; a cached placer and a
    // volatile one must still agree on every placement.
    let new_world = || {
        world(&[
            node("a").gpus(4, "V100-16GB"),
            node("b").gpus(4, "V100-16GB"),
            node("c").gpus(4, "V100-16GB"),
        ])
    };
    let (mut st_cached, mut st_volatile) = (new_world(), new_world());
    let policy = |volatile| Policy {
        scorer: Some(Box::new(LeastFreeMilli)),
        volatile,
        ..Policy::new("test")
    };
    let mut cached = Placer::new(policy(false), Rand::new(1));
    let mut volatile = Placer::new(policy(true), Rand::new(1));
    let mut rng = Rand::new(3);
    let mut placed = 0;
    for i in 0..3 * MAX_CLASSES {
        let b = task(&format!("t{i}"))
            .cpu(rng.below(MAX_CLASSES + 100) as i64)
            .share(1 + rng.below(20) as i32);
        let a1 = cached.place(&st_cached, b.build());
        let a2 = volatile.place(&st_volatile, b.build());
        assert_eq!(a1, a2, "placement {i}");
        let Ok(a) = a1 else {
            continue;
        };
        st_cached.allocate(&a).expect("allocate");
        st_volatile.allocate(&a).expect("allocate");
        placed += 1;
    }
    // CPU runs out after about 300; failures go through the cache too.
    assert!(placed > 100, "only {placed} placements succeeded");
}

#[test]
fn placer_caches_verdicts_per_headroom() {
    let st = world(&[node("v100").gpus(1, "V100-16GB")]);
    let mut p = Placer::new(Policy::new("test"), Rand::new(1));
    p.set_headroom(0.0);
    // 16384 MiB is the whole V100-16GB without headroom, more than it with.
    p.place(&st, task("t1").gpu_memory(16384, 0.0).build())
        .expect("fits without headroom");
    p.set_headroom(0.1);
    let err = p
        .place(&st, task("t2").gpu_memory(16384, 0.0).build())
        .expect_err("too big with headroom");
    let PlaceError::Failure(f) = err else {
        panic!("{err:?}; want a Failure");
    };
    assert_eq!(f.reasons.get(&Code::TooSmall), Some(&1));
}

#[test]
fn placer_caches_verdicts_per_mig_setting() {
    // A memory profile fits an A100 with MIG off as a share, unless the
    // placer asks for MIG instances only.
    let st = world(&[node("a100").gpus(1, "A100-80GB")]);
    let mut p = Placer::new(Policy::new("test"), Rand::new(1));
    p.place(&st, task("t1").gpu_memory(8192, 0.0).build())
        .expect("a share fits");
    p.set_mig_only(true);
    let err = p
        .place(&st, task("t2").gpu_memory(8192, 0.0).build())
        .expect_err("no MIG instance on a GPU with MIG off");
    assert_eq!(err.to_string(), "task t2: 0/1 nodes fit (1 mig-off)");
}

#[test]
fn new_placer_defaults_the_picker() {
    let p = Placer::new(Policy::new("test"), Rand::new(1));
    assert_eq!(p.policy().name, "test");
    assert!(p.policy().picker.is_some());
    // The default picker draws nothing; a RandomPicker given is kept, and
    // draws once per share.
    let st = world(&[node("v100").gpus(4, "V100-16GB")]);
    let draws_after_a_share = |policy| {
        let mut p = Placer::new(policy, Rand::new(1));
        p.place(&st, task("t").share(100).build()).expect("placed");
        p.rng_mut().next_u64() != Rand::new(1).next_u64()
    };
    assert!(!draws_after_a_share(Policy::new("test")));
    let with_random = Policy {
        picker: Some(Box::new(RandomPicker)),
        ..Policy::new("test")
    };
    assert!(draws_after_a_share(with_random));
}

#[test]
fn the_cache_keys_on_the_node_set_as_well_as_the_generation() {
    // Two States built apart number their nodes' changes alike: node a is
    // generation 1 in both, though only one has room. A verdict cached on
    // the first must not answer for the second.
    let roomy = world(&[node("a"), node("b").cpu(100)]);
    let cramped = world(&[node("a").cpu(100), node("b")]);
    assert_eq!(roomy.generation(0), cramped.generation(0));
    let mut p = Placer::new(Policy::new("test"), Rand::new(1));
    for (st, want) in [(&roomy, "a"), (&cramped, "b"), (&roomy, "a")] {
        let a = p.place(st, task("t").cpu(1000).build()).expect("placed");
        assert_eq!(a.node, want);
    }
}

#[test]
fn a_placer_can_move_to_another_thread() {
    fn send<T: Send>(_: &T) {}
    let p = Placer::new(Policy::new("test"), Rand::new(1));
    send(&p);
    let r = request(&task("t"));
    send(&r);
}
