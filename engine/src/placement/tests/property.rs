//! Properties of the placer over random clusters and task streams (the Go
//! build's engine package has none; its policies package checks the same
//! kind of thing per policy):
//!   - every placement allocates, and the State keeps its invariants;
//!   - the verdict cache changes no placement (a cached placer and a
//!     volatile one, with the same draws, agree);
//!   - `fits_somewhere` says whether `place_in` succeeds, and `fits`
//!     whether placing on one node alone does;
//!   - a failure counts every node once.

use proptest::prelude::*;

use super::*;
use crate::placement::{
    Adjuster, Hint, PlaceError, Placer, Policy, RandomPicker, Scorer, Selector,
};
use crate::random::Rand;

/// A node of one of a few shapes, with a CPU size.
fn node_strategy() -> impl Strategy<Value = (usize, i32, i64)> {
    (0usize..5, 1i32..5, 1i64..17)
}

fn build_nodes(shapes: &[(usize, i32, i64)]) -> Vec<NodeBuilder> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, &(shape, gpus, cpus))| {
            let n = node(&format!("n{i}"))
                .cpu(cpus * 1000)
                .rank((i as i64 * 7) % 3);
            match shape {
                0 => n,
                1 => n.gpus(gpus, "V100-16GB"),
                2 => n.gpus(gpus, "A100-80GB"),
                3 => n.gpus(gpus, "H100-80GB").mig(),
                _ => n
                    .gpus(gpus, "H100-80GB")
                    .mig()
                    .layout("3g.40gb@0,1g.10gb@6"),
            }
        })
        .collect()
}

/// A task of one of the demand kinds.
fn task_strategy() -> impl Strategy<Value = (usize, i64, i32, usize)> {
    (0usize..6, 0i64..4000, 1i32..1000, 0usize..4)
}

fn build_task(i: usize, (kind, cpu, size, pick): (usize, i64, i32, usize)) -> TaskBuilder {
    let t = task(&format!("t{i}")).cpu(cpu);
    match kind {
        0 => t,
        1 | 2 => t.share(size),
        3 => t.gpus(1 + size % 3),
        4 => t.mig_profile(["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"][pick]),
        _ => t.gpu_memory(i64::from(size) * 40, f64::from(size % 8) / 10.0),
    }
}

/// Prefers nodes with little GPU left and hints the tightest GPU for a
/// share: it exercises hints and changes with every allocation.
struct Tightest;

impl Scorer for Tightest {
    fn name(&self) -> &'static str {
        "tightest"
    }
    fn score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>) {
        let score = -i64::from(n.gpu_free_milli());
        if r.kind() != Kind::Fraction {
            return (score, None);
        }
        let tightest = n
            .gpus()
            .iter()
            .filter(|g| g.free() >= r.milli() && r.allows_model(g.model()))
            .min_by_key(|g| g.free());
        (score, tightest.map(|g| Hint::on_gpu(g.index())))
    }
}

/// Penalises nodes with few fully free GPUs, from a count taken in
/// `prepare`: an adjuster with per-placement state.
#[derive(Default)]
struct KeepFree {
    free_nodes: i64,
}

impl Adjuster for KeepFree {
    fn prepare(&mut self, st: &State, _: &Request) {
        self.free_nodes = st.nodes().filter(|n| n.fully_free_gpus() > 0).count() as i64;
    }
    fn adjust(&mut self, _: usize, n: &Node, _: &Request, score: i64, _: Option<&Hint>) -> i64 {
        if self.free_nodes < 2 && n.fully_free_gpus() > 0 {
            score - 1_000_000
        } else {
            score
        }
    }
}

struct Uniform;

impl Selector for Uniform {
    fn select(&mut self, _: &State, feasible: &[usize], rng: &mut Rand) -> usize {
        feasible[rng.below(feasible.len())]
    }
}

fn scored(volatile: bool) -> Policy {
    Policy {
        scorer: Some(Box::new(Tightest)),
        adjuster: Some(Box::new(KeepFree::default())),
        volatile,
        ..Policy::new("tightest")
    }
}

fn random(volatile: bool) -> Policy {
    Policy {
        selector: Some(Box::new(Uniform)),
        picker: Some(Box::new(RandomPicker)),
        volatile,
        ..Policy::new("random")
    }
}

/// Places the tasks one by one with a cached and a volatile placer of the
/// same policy, each on its own copy of the cluster, checking the
/// properties after each.
fn check_stream(
    nodes: &[NodeBuilder],
    tasks: &[TaskBuilder],
    policy: fn(bool) -> Policy,
    seed: i64,
) -> Result<(), TestCaseError> {
    let mut st = world(nodes);
    let mut st_volatile = world(nodes);
    let mut cached = Placer::new(policy(false), Rand::new(seed));
    let mut volatile = Placer::new(policy(true), Rand::new(seed));
    for b in tasks {
        let r = cached.request(b.build()).expect("a valid task");
        let somewhere = cached.fits_somewhere(&st, &r, |_| true);
        for n in st.nodes() {
            let alone = cached.fits_somewhere(&st, &r, |x| x.name() == n.name());
            prop_assert_eq!(cached.fits(n, &r), alone, "{} on {}", r, n.name());
        }
        let got = cached.place_request(&st, &r);
        let want = volatile.place(&st_volatile, b.build());
        prop_assert_eq!(&got, &want, "{}", r);
        prop_assert_eq!(got.is_ok(), somewhere, "{}: {:?}", r, got);
        match got {
            Ok(a) => {
                st.allocate(&a)
                    .map_err(|e| TestCaseError::fail(format!("{r}: {e}")))?;
                st_volatile.allocate(&a).expect("the same allocation");
                prop_assert!(st.check().is_ok(), "{:?}", st.check());
            }
            Err(PlaceError::Failure(f)) => {
                prop_assert_eq!(f.reasons.values().sum::<usize>(), st.len());
            }
            Err(e) => prop_assert!(false, "{}: {}", r, e),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn placements_allocate_and_the_cache_changes_none(
        shapes in prop::collection::vec(node_strategy(), 0..7),
        stream in prop::collection::vec(task_strategy(), 1..40),
        seed in 0i64..1000,
    ) {
        let nodes = build_nodes(&shapes);
        let tasks: Vec<TaskBuilder> = stream.into_iter().enumerate().map(|(i, t)| build_task(i, t)).collect();
        check_stream(&nodes, &tasks, scored, seed)?;
        check_stream(&nodes, &tasks, random, seed)?;
    }

    #[test]
    fn place_all_is_all_or_nothing(
        shapes in prop::collection::vec(node_strategy(), 1..5),
        stream in prop::collection::vec(task_strategy(), 1..8),
    ) {
        let st = world(&build_nodes(&shapes));
        let mut p = Placer::new(scored(false), Rand::new(1));
        let reqs: Vec<Request> = stream
            .into_iter()
            .enumerate()
            .map(|(i, t)| p.request(build_task(i, t).build()).expect("a valid task"))
            .collect();
        let before = st.version();
        match p.place_all(&st, &reqs, |_| true) {
            Ok((assignments, trial)) => {
                prop_assert_eq!(assignments.len(), reqs.len());
                prop_assert!(trial.check().is_ok());
                // Replayed one by one on the input, they allocate.
                let mut replay = st.clone();
                for a in &assignments {
                    prop_assert!(replay.allocate(a).is_ok());
                }
            }
            Err(e) => prop_assert!(matches!(e, PlaceError::Failure(_)), "{}", e),
        }
        prop_assert_eq!(st.version(), before);
    }
}
