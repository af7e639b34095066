//! The Go build's decisions, replayed: testdata/golden.txt holds random
//! clusters and task streams with what the Go build's Placer decided for
//! each step, under four policies made of stub stages (their twins are in
//! testdata/golden_gen_test.go.txt, which wrote the file and says how to
//! write it again). Every placement, gang, failure text, `fits` count and
//! `explain` text must come out the same, and so every random draw.
//!
//! Lines: `world W POLICY HEADROOM MIG_ONLY BRIEF SEED`, then `node NAME
//! CPU MEM MODEL GPUS MIG LAYOUT RANK` lines, then steps until `end`:
//!   - `release NODE TASK`;
//!   - `task ...` then `fits K explain TEXT` then the outcome;
//!   - `gang N`, N `task` lines, `somewhere BOOL`, then N `ok` lines or
//!     one failure line.
//!
//! An outcome is `ok NODE GRANT...` (`gpu:milli` or `gpu:profile@start`),
//! `err TEXT` or `nofit` (a brief failure). "-" stands for an empty word.

use crate::cluster::{Node, NodeSpec, State, build_node};
use crate::gpu::Layout;
use crate::placement::{
    Adjuster, Code, Filter, Hint, PlaceError, Placer, Policy, RandomPicker, Reason, Scorer,
    Selector, explain, slices_for,
};
use crate::random::Rand;
use crate::workload::{Demand, Kind, Task};

use super::{Assignment, Request};

const GOLDEN: &str = include_str!("../testdata/golden.txt");

struct GoldenSelector;

impl Selector for GoldenSelector {
    fn select(&mut self, _: &State, feasible: &[usize], rng: &mut Rand) -> usize {
        feasible[rng.below(feasible.len())]
    }
}

struct GoldenScorer;

impl Scorer for GoldenScorer {
    fn name(&self) -> &'static str {
        "golden"
    }

    fn score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>) {
        let score = -i64::from(n.gpu_free_milli()) * 1000 - n.cpu_free() / 1000;
        match r.kind() {
            Kind::Fraction => {
                let mut best: Option<(usize, i32)> = None;
                for (i, g) in n.gpus().iter().enumerate() {
                    if g.mig() || g.free() < r.milli() || !r.allows_model(g.model()) {
                        continue;
                    }
                    if best.is_none_or(|(_, room)| g.free() <= room) {
                        best = Some((i, g.free()));
                    }
                }
                if let Some((i, _)) = best {
                    return (score, Some(Hint::on_gpu(i)));
                }
            }
            Kind::MigProfile | Kind::MemoryProfile => {
                for (i, g) in n.gpus().iter().enumerate().rev() {
                    let Some(p) = r.profile_on(g) else {
                        continue;
                    };
                    let slices: Vec<_> = slices_for(g, p).collect();
                    if let Some(last) = slices.last() {
                        return (
                            score + slices.len() as i64,
                            Some(Hint::on_slice(i, last.clone())),
                        );
                    }
                }
            }
            _ => {}
        }
        (score, None)
    }
}

struct GoldenFilter;

impl Filter for GoldenFilter {
    fn name(&self) -> &'static str {
        "not-seven"
    }

    fn filter(&self, n: &Node, _: &Request) -> Result<(), Reason> {
        if n.name().ends_with('7') {
            return Err(Reason {
                filter: "not-seven",
                code: Code::Policy,
            });
        }
        Ok(())
    }
}

#[derive(Default)]
struct GoldenAdjuster {
    free_nodes: usize,
}

impl Adjuster for GoldenAdjuster {
    fn prepare(&mut self, st: &State, _: &Request) {
        self.free_nodes = st.nodes().filter(|n| n.fully_free_gpus() > 0).count();
    }

    fn adjust(&mut self, _: usize, n: &Node, r: &Request, score: i64, _: Option<&Hint>) -> i64 {
        if self.free_nodes <= 2 && n.fully_free_gpus() > 0 && r.kind() != Kind::NoGpu {
            return score - 1_000_000_000;
        }
        score
    }
}

fn golden_policy(name: &str) -> Policy {
    let scored = |volatile| Policy {
        scorer: Some(Box::new(GoldenScorer)),
        filters: vec![Box::new(GoldenFilter)],
        adjuster: Some(Box::new(GoldenAdjuster::default())),
        volatile,
        ..Policy::new(name)
    };
    match name {
        "random" => Policy {
            selector: Some(Box::new(GoldenSelector)),
            picker: Some(Box::new(RandomPicker)),
            ..Policy::new(name)
        },
        "scored" => scored(false),
        "scored-volatile" => scored(true),
        _ => Policy::new(name),
    }
}

fn word(s: &str) -> &str {
    if s == "-" { "" } else { s }
}

fn num<T: std::str::FromStr>(s: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    s.parse().unwrap_or_else(|e| panic!("number {s:?}: {e:?}"))
}

fn node_of(f: &[&str]) -> Node {
    let spec = NodeSpec {
        name: f[1].to_string(),
        cpu_milli: num(f[2]),
        memory_mib: num(f[3]),
        gpu_model: word(f[4]).to_string(),
        gpus: num(f[5]),
        mig: num(f[6]),
        layout: Layout::parse(word(f[7])).expect("a layout"),
        ..NodeSpec::default()
    };
    let mut n = build_node(&spec).expect("a node");
    n.set_rank(num(f[8]));
    n
}

fn task_of(line: &str) -> Task {
    let f: Vec<&str> = line.split(' ').collect();
    assert_eq!(f[0], "task", "{line}");
    let kind = match f[4] {
        "0" => Kind::NoGpu,
        "1" => Kind::WholeGpus,
        "2" => Kind::MigProfile,
        "3" => Kind::MemoryProfile,
        _ => Kind::Fraction,
    };
    let models = word(f[10]);
    Task {
        name: f[1].to_string(),
        cpu_milli: num(f[2]),
        memory_mib: num(f[3]),
        gpu: Demand {
            kind,
            count: num(f[5]),
            milli: num(f[6]),
            profile: word(f[7]).to_string(),
            peak_memory_mib: num(f[8]),
            compute: num(f[9]),
            models: if models.is_empty() {
                Vec::new()
            } else {
                models.split('|').map(str::to_string).collect()
            },
        },
    }
}

fn assignment_text(a: &Assignment) -> String {
    let mut s = format!("ok {}", a.node);
    for g in &a.grants {
        match &g.slice {
            Some(p) => s += &format!(" {}:{p}", g.gpu),
            None => s += &format!(" {}:{}", g.gpu, g.milli),
        }
    }
    s
}

fn error_text(e: &PlaceError) -> String {
    match e {
        PlaceError::NoFit => "nofit".to_string(),
        e => format!("err {e}"),
    }
}

fn even(n: &Node) -> bool {
    num::<usize>(&n.name()[1..]).is_multiple_of(2)
}

#[test]
fn the_placer_decides_as_the_go_build_does() {
    let mut lines = GOLDEN.lines().filter(|l| !l.starts_with('#')).peekable();
    let (mut worlds, mut steps) = (0, 0);
    while let Some(head) = lines.next() {
        let f: Vec<&str> = head.split(' ').collect();
        assert_eq!(f[0], "world", "{head}");
        worlds += 1;
        let mut nodes = Vec::new();
        while lines.peek().is_some_and(|l| l.starts_with("node ")) {
            let l = lines.next().expect("peeked");
            nodes.push(node_of(&l.split(' ').collect::<Vec<_>>()));
        }
        let mut st = State::new(nodes).expect("a State");
        let mut p = Placer::new(golden_policy(f[2]), Rand::new(num(f[6])));
        p.set_headroom(num(f[3]));
        p.set_mig_only(num(f[4]));
        p.set_brief_failures(num(f[5]));
        let mut k = 0;
        loop {
            let line = lines.next().expect("a step or end");
            let at = || format!("{head}, step {k}: {line}");
            if line == "end" {
                break;
            }
            steps += 1;
            if let Some(rest) = line.strip_prefix("release ") {
                let (node, task) = rest.split_once(' ').expect("node and task");
                st.release(node, task).expect("release");
                k += 1;
                continue;
            }
            if let Some(size) = line.strip_prefix("gang ") {
                let size: usize = num(size);
                let reqs: Vec<Request> = (0..size)
                    .map(|_| {
                        let t = task_of(lines.next().expect("a gang task"));
                        p.request(t).expect("a valid task")
                    })
                    .collect();
                let somewhere = p.fits_somewhere(&st, &reqs[0], even);
                assert_eq!(
                    format!("somewhere {somewhere}"),
                    lines.next().expect("somewhere"),
                    "{}",
                    at()
                );
                match p.place_all(&st, &reqs, even) {
                    Ok((assignments, trial)) => {
                        for a in &assignments {
                            assert_eq!(assignment_text(a), lines.next().expect("ok"), "{}", at());
                        }
                        st = trial;
                    }
                    Err(e) => {
                        assert_eq!(error_text(&e), lines.next().expect("error"), "{}", at())
                    }
                }
                k += 1;
                continue;
            }
            let r = p.request(task_of(line)).expect("a valid task");
            let fits = st.nodes().filter(|n| p.fits(n, &r)).count();
            let told = explain(st.node(k % st.len()), &r);
            assert_eq!(
                format!("fits {fits} explain {told}"),
                lines.next().expect("fits"),
                "{}",
                at()
            );
            match p.place_request(&st, &r) {
                Ok(a) => {
                    assert_eq!(assignment_text(&a), lines.next().expect("ok"), "{}", at());
                    st.allocate(&a).expect("allocate");
                }
                Err(e) => assert_eq!(error_text(&e), lines.next().expect("error"), "{}", at()),
            }
            k += 1;
        }
    }
    assert_eq!(worlds, 48);
    assert!(steps > 5000, "{steps} steps");
}
