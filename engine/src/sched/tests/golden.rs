//! The scheduler against the Go build: the three presets over random
//! worlds, cycle after cycle, decision for decision. `testdata/golden.txt`
//! holds, per preset and seed, an FNV-1a 64 hash of the decision lines the
//! Go build writes and how many there are; `testdata/golden_gen_test.go.txt`
//! is its generator (the worlds are drawn from the project's generator, so
//! both builds draw the same ones). On a mismatch, set
//! SCHED_GOLDEN_LINES=DIR to write the Rust lines there, and diff them
//! against the Go build's (GOLDEN_LINES=DIR there).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use super::helpers::{
    JobBuilder, TeamBuilder, World, fleet, job, new_scheduler_with, new_world, team,
};
use crate::cluster::{Assignment, State};
use crate::random::Rand;
use crate::sched::{Decision, Input, Job, MINUTE, Nanos, Phase, SECOND, Wait};
use crate::workload::classes;

struct Scenario {
    st: State,
    teams: Vec<TeamBuilder>,
    jobs: Vec<JobBuilder>,
    later: Vec<JobBuilder>,
}

fn scenario(rng: &mut Rand) -> Scenario {
    let mut f = fleet();
    let groups = 2 + rng.below(3);
    for _ in 0..groups {
        f = f
            .nodes(1 + rng.below(3))
            .gpus([4, 8][rng.below(2)], "H100-80GB");
        if rng.below(3) > 0 {
            f = f.mig();
        }
        if rng.below(2) == 0 {
            f = f.leaf(&format!("leaf-{}", rng.below(2)));
        }
    }
    let st = f.build();
    let mut teams = Vec::new();
    for name in ["a", "b", "c"] {
        let g = 4 + rng.below(12) as i64;
        let burst = g + rng.below(12) as i64;
        let weight = (1 + rng.below(3)) as f64;
        teams.push(team(name).guarantee(g).burst(burst).weight(weight));
    }
    let profiles = ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"];
    let (mut jobs, mut later) = (Vec::new(), Vec::new());
    let n = 20 + rng.below(30);
    for i in 0..n {
        let t = ["a", "b", "c", "d"][rng.below(4)];
        let class = classes()[rng.below(3)];
        let at = rng.below(20) as Nanos * MINUTE;
        let mut b = job(&format!("j{i}")).team(t).class(class).submitted(at);
        b = match rng.below(8) {
            0 | 1 => b.gpus(1 + rng.below(4) as i32),
            2 => {
                let size = 2 + rng.below(3);
                b.gang(size).gpus(1 + rng.below(4) as i32)
            }
            3 => b.mig_profile(profiles[rng.below(profiles.len())]),
            4 => {
                let peak = 4000 + rng.below(30000) as i64;
                b.gpu_memory(peak, rng.below(5) as f64 / 10.0)
            }
            5 => b.gpus([4, 8][rng.below(2)]),
            _ => {
                let count = 2 + rng.below(4);
                b.production()
                    .replicas(count)
                    .mig_profile(profiles[rng.below(3)])
            }
        };
        if rng.below(2) == 0 {
            b = b.estimate((1 + rng.below(120)) as Nanos * MINUTE);
        }
        if rng.below(5) == 0 {
            b = b.replicas(2 + rng.below(3));
        }
        if i % 2 == 0 {
            jobs.push(b);
        } else {
            later.push(b);
        }
    }
    Scenario {
        st,
        teams,
        jobs,
        later,
    }
}

/// What a job was at the last input, to list the changes of an
/// incremental one.
struct Snap {
    phase: Phase,
    placed: Vec<Option<Arc<Assignment>>>,
    started: Nanos,
    estimate: Nanos,
    submitted: Nanos,
}

impl Snap {
    fn of(j: &Job) -> Snap {
        Snap {
            phase: j.phase,
            placed: j.placed.clone(),
            started: j.started,
            estimate: j.estimate,
            submitted: j.submitted,
        }
    }

    fn same(&self, j: &Job) -> bool {
        self.phase == j.phase
            && self.started == j.started
            && self.estimate == j.estimate
            && self.submitted == j.submitted
            && self.placed.len() == j.placed.len()
            && self
                .placed
                .iter()
                .zip(&j.placed)
                .all(|(a, b)| match (a, b) {
                    (None, None) => true,
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    _ => false,
                })
    }
}

fn run(preset: &str, seed: i64) -> String {
    let mut rng = Rand::new(seed);
    let mut sc = scenario(&mut rng);
    let reserve = rng.below(3) as i64 * 1000;
    let st = sc.st.clone();
    let sch = new_scheduler_with(preset, &st, seed, |c| {
        if c.name == "partita" {
            c.production_reserve = reserve;
        }
    });
    let mut w = new_world(st, sch, &sc.teams);
    w.submit(&sc.jobs);
    let incremental = seed % 2 == 0;
    let mut prev_order: Vec<String> = Vec::new();
    let mut prev: BTreeMap<String, Snap> = BTreeMap::new();
    let mut lines = String::new();
    for cycle in 0..40 {
        let pending: Vec<String> = w
            .jobs
            .iter()
            .filter(|j| j.phase == Phase::Pending)
            .map(|j| j.id().to_string())
            .collect();
        let d;
        let waits: Vec<(String, Wait)>;
        {
            let refs: Vec<&Job> = w.jobs.iter().collect();
            let mut changed: Vec<&Job> = Vec::new();
            let mut gone: Vec<&Job> = Vec::new();
            if incremental {
                for j in &w.jobs {
                    if !prev.get(j.id()).is_some_and(|s| s.same(j)) {
                        changed.push(j);
                    }
                }
                for id in &prev_order {
                    if !w.jobs.iter().any(|j| j.id() == id) {
                        gone.push(
                            w.finished
                                .iter()
                                .find(|j| j.id() == id)
                                .expect("a finished job"),
                        );
                    }
                }
            }
            let only: Option<Vec<String>> = if !pending.is_empty() && rng.below(4) == 0 {
                let a = pending[rng.below(pending.len())].clone();
                let b = pending[rng.below(pending.len())].clone();
                Some(vec![a, b])
            } else {
                None
            };
            let mut input = Input::new(w.now, &w.st, &w.teams, &refs);
            input.incremental = incremental;
            input.changed = &changed;
            input.gone = &gone;
            input.only = only.as_deref();
            d = w.sch.cycle(&mut input);
            waits = d
                .waits_by_id(&refs)
                .into_iter()
                .map(|(id, wt)| (id.to_string(), wt))
                .collect();
            if incremental && let Err(e) = w.sch.check_kept(&input) {
                panic!("{preset} seed {seed} cycle {cycle}: {e}");
            }
            // The input as the scheduler saw it: the next one lists what
            // changed since.
            prev_order = refs.iter().map(|j| j.id().to_string()).collect();
            prev = refs
                .iter()
                .map(|j| (j.id().to_string(), Snap::of(j)))
                .collect();
        }
        describe_decision(&mut lines, cycle, w.now, &d, &waits);
        w.apply_as_mixed(&d);
        step(&mut rng, &mut sc, &mut w);
    }
    lines
}

fn step(rng: &mut Rand, sc: &mut Scenario, w: &mut World) {
    let now = w.now + (1 + rng.below(4)) as Nanos * 30 * SECOND;
    w.at(now);
    while !sc.later.is_empty() && rng.below(3) == 0 {
        let b = sc.later.remove(0).submitted(now);
        w.jobs.push(b.build());
    }
    if rng.below(3) > 0 {
        w.uncordon_all();
    }
    if rng.below(2) == 0 {
        w.release();
    }
    if rng.below(2) == 0 {
        w.moved();
    }
    let running: Vec<String> = w
        .jobs
        .iter()
        .filter(|j| j.phase == Phase::Running)
        .map(|j| j.id().to_string())
        .collect();
    if !running.is_empty() && rng.below(3) == 0 {
        let id = running[rng.below(running.len())].clone();
        w.finish(&id);
    }
    // Jobs that ran their estimate end.
    let done: Vec<String> = w
        .jobs
        .iter()
        .filter(|j| j.phase == Phase::Running && j.estimate > 0 && now - j.started >= j.estimate)
        .map(|j| j.id().to_string())
        .collect();
    for id in done {
        w.finish(&id);
    }
    for j in &mut w.jobs {
        if j.phase == Phase::Running && rng.below(2) == 0 {
            j.checkpoint = now;
        }
    }
}

fn grants_text(a: &Assignment) -> String {
    let parts: Vec<String> = a
        .grants
        .iter()
        .map(|g| match &g.slice {
            Some(s) => format!("{}:{s}", g.gpu),
            None => format!("{}:{}", g.gpu, g.milli),
        })
        .collect();
    parts.join(",")
}

/// Writes a decision's lines; `waits` are its waits by job ID, sorted.
fn describe_decision(
    b: &mut String,
    cycle: usize,
    now: Nanos,
    d: &Decision,
    waits: &[(String, Wait)],
) {
    let _ = writeln!(b, "cycle {cycle} at {now}");
    for s in &d.starts {
        let a = &s.assignment;
        let _ = writeln!(
            b,
            "start {} {} {} {} creates={}",
            s.job,
            s.task,
            a.node,
            grants_text(a),
            s.creates
        );
    }
    for m in &d.migrations {
        let _ = writeln!(
            b,
            "move {} {} {} {} creates={} for={}",
            m.job,
            m.task,
            m.to.node,
            grants_text(&m.to),
            m.creates,
            m.for_job
        );
    }
    for rc in &d.reconfigs {
        let _ = writeln!(
            b,
            "reconfig {} {} mig={} layout={} add={} for={}",
            rc.node, rc.gpu, rc.mig, rc.layout, rc.add, rc.for_job
        );
    }
    for p in &d.preemptions {
        let _ = writeln!(
            b,
            "preempt {} for={} grace={} reason={}",
            p.job, p.for_job, p.grace, p.reason
        );
    }
    for (id, wt) in waits {
        let _ = writeln!(b, "wait {id} {} {}", wt.position, wt.reason);
    }
    for r in &d.retries {
        let _ = writeln!(b, "retry {} {}", r.job, r.at);
    }
}

fn fnv64(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in s.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[test]
fn decisions_equal_the_go_builds() {
    let golden = include_str!("../testdata/golden.txt");
    let dir = std::env::var("SCHED_GOLDEN_LINES").ok();
    let mut bad = Vec::new();
    for line in golden.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let [preset, seed, hash, count] = f[..] else {
            panic!("golden.txt: bad line {line:?}");
        };
        let seed: i64 = seed.parse().expect("seed");
        let lines = run(preset, seed);
        let got = format!("{:016x} {}", fnv64(&lines), lines.matches('\n').count());
        if got != format!("{hash} {count}") {
            bad.push(format!("{preset} {seed}: got {got}, want {hash} {count}"));
        }
        if let Some(dir) = &dir {
            let _ = std::fs::write(format!("{dir}/{preset}-{seed}.txt"), &lines);
        }
    }
    assert!(
        bad.is_empty(),
        "decisions differ from the Go build's:\n{}",
        bad.join("\n")
    );
}
