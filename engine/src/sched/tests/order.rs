//! The order pending jobs are considered in: claims within their team's
//! guarantee first (partita), then class, then fairness between teams,
//! then submission time, then ID (Go's `order_test.go`).

use std::collections::BTreeMap;

use super::helpers::{
    JobBuilder, TeamBuilder, World, fleet, hold_gpus, job, new_scheduler, new_world, order_of,
    started_jobs, team,
};
use super::random_world::RandomScenario;
use crate::random::Rand;
use crate::sched::{MINUTE, Nanos, Order, Phase, Team, Wait, WaitReason};
use crate::workload::Class;

#[test]
fn class_order_puts_production_before_batch_before_best_effort() {
    for (preset, want) in [
        ("partita", ["serve", "train", "scavenge"]),
        ("gang-drf", ["serve", "train", "scavenge"]),
        // Without class order the oldest goes first.
        ("naive", ["scavenge", "train", "serve"]),
    ] {
        let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
        let sch = new_scheduler(preset, &st);
        let mut w = new_world(st, sch, &[]);
        w.submit(&[
            job("scavenge").best_effort().submitted(0),
            job("train").class(Class::Batch).submitted(MINUTE),
            job("serve").production().submitted(2 * MINUTE),
        ]);
        assert_eq!(order_of(&mut w), want, "{preset}");
    }
}

#[test]
fn a_claim_within_its_guarantee_goes_before_borrowing_production() {
    // b holds its guarantee, so its service borrows; a is owed a GPU. The
    // claim goes first under partita; gang-drf keeps class order.
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    for (preset, want) in [
        ("partita", ["a-claim", "b-serve"]),
        ("gang-drf", ["b-serve", "a-claim"]),
    ] {
        let sch = new_scheduler(preset, &st);
        let mut w = new_world(
            st.clone(),
            sch,
            &[
                team("a").guarantee(2).burst(8),
                team("b").guarantee(1).burst(8),
            ],
        );
        w.running(job("b-train").team("b").gpus(1), 0, 0, &["n1:0"]);
        w.submit(&[
            job("a-claim").team("a").best_effort().submitted(0),
            job("b-serve").team("b").production().submitted(0),
        ]);
        assert_eq!(order_of(&mut w), want, "{preset}");
    }
}

#[test]
fn fair_share_orders_teams() {
    struct Case {
        name: &'static str,
        teams: Vec<TeamBuilder>,
        holding: Vec<(&'static str, usize)>,
        pending: Vec<JobBuilder>,
        want: Vec<&'static str>,
    }
    let cases = vec![
        Case {
            name: "a team below its guarantee goes before a team above it that holds less",
            teams: vec![
                team("rich").guarantee(8).burst(8),
                team("poor").guarantee(1).burst(8),
            ],
            holding: vec![("rich", 4), ("poor", 1)],
            pending: vec![
                job("poor-job").team("poor").submitted(0),
                job("rich-job").team("rich").submitted(MINUTE),
            ],
            want: vec!["rich-job", "poor-job"],
        },
        Case {
            name: "the team further below its guarantee goes first",
            teams: vec![
                team("x").guarantee(4).burst(8),
                team("y").guarantee(4).burst(8),
            ],
            holding: vec![("x", 3), ("y", 1)],
            pending: vec![
                job("x-job").team("x").submitted(0),
                job("y-job").team("y").submitted(MINUTE),
            ],
            want: vec!["y-job", "x-job"],
        },
        Case {
            name: "above the guarantee the team with less GPU held per weight goes first",
            teams: vec![
                team("heavy").weight(4.0).burst(8),
                team("light").weight(1.0).burst(8),
            ],
            holding: vec![("heavy", 2), ("light", 1)], // 2/4 = 0.5 against 1/1 = 1
            pending: vec![
                job("light-job").team("light").submitted(0),
                job("heavy-job").team("heavy").submitted(MINUTE),
            ],
            want: vec!["heavy-job", "light-job"],
        },
        Case {
            name: "equal shares go by submission time",
            teams: vec![team("x").burst(8), team("y").burst(8)],
            holding: vec![("x", 1), ("y", 1)],
            pending: vec![
                job("x-late").team("x").submitted(2 * MINUTE),
                job("y-early").team("y").submitted(MINUTE),
                job("x-first").team("x").submitted(0),
            ],
            want: vec!["x-first", "y-early", "x-late"],
        },
        Case {
            name: "equal submission times go by ID",
            teams: vec![team("x").burst(8), team("y").burst(8)],
            holding: vec![],
            pending: vec![
                job("b-job").team("y").submitted(MINUTE),
                job("a-job").team("x").submitted(MINUTE),
            ],
            want: vec!["a-job", "b-job"],
        },
        Case {
            name: "beyond the guarantees, class goes before fairness",
            teams: vec![team("rich").guarantee(1).burst(8), team("poor").burst(8)],
            holding: vec![("rich", 4)],
            pending: vec![
                job("poor-batch").team("poor").submitted(0),
                job("rich-serve")
                    .team("rich")
                    .production()
                    .submitted(MINUTE),
            ],
            want: vec!["rich-serve", "poor-batch"],
        },
    ];
    for tc in cases {
        let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
        let sch = new_scheduler("partita", &st);
        let mut w = new_world(st, sch, &tc.teams);
        hold_gpus(&mut w, &tc.holding);
        w.submit(&tc.pending);
        assert_eq!(order_of(&mut w), tc.want, "{}", tc.name);
    }
}

#[test]
fn fair_share_gives_the_last_gpu_to_the_team_below_its_guarantee() {
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(
        st,
        sch,
        &[
            team("rich").guarantee(8).burst(8),
            team("poor").guarantee(1).burst(8),
        ],
    );
    hold_gpus(&mut w, &[("rich", 4), ("poor", 1), ("other", 2)]); // 1 GPU left
    w.submit(&[
        job("poor-job").team("poor").submitted(0),
        job("rich-job").team("rich").submitted(MINUTE),
    ]);
    let d = w.decide();
    assert_eq!(started_jobs(&d), ["rich-job"]);
    assert_eq!(
        d.waiting.get("poor-job"),
        Some(&Wait {
            position: 1,
            reason: WaitReason::NoRoom
        })
    );
}

#[test]
fn drf_orders_by_dominant_share_over_weight() {
    // One node: 8 GPUs, 64 CPUs. cpu-team holds 1 GPU and 32 CPUs
    // (dominant share 1/2, CPU); gpu-team holds 2 GPUs and 1 CPU (dominant
    // share 1/4, GPU). Counting GPU alone, cpu-team would go first.
    for (name, gpu_weight, want) in [
        (
            "the smaller dominant share goes first",
            1.0,
            ["gpu-job", "cpu-job"],
        ),
        // 1/4 / 0.25 = 1 > 1/2
        (
            "a small weight raises the share it is divided into",
            0.25,
            ["cpu-job", "gpu-job"],
        ),
    ] {
        let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
        let sch = new_scheduler("gang-drf", &st);
        let mut w = new_world(
            st,
            sch,
            &[
                team("cpu-team").burst(8),
                team("gpu-team").burst(8).weight(gpu_weight),
            ],
        );
        w.running(
            job("cpu-running").team("cpu-team").gpus(1).cpu(32000),
            0,
            0,
            &["n1:0"],
        );
        w.running(
            job("gpu-running").team("gpu-team").gpus(2),
            0,
            0,
            &["n1:1,2"],
        );
        w.submit(&[
            job("cpu-job").team("cpu-team").submitted(0),
            job("gpu-job").team("gpu-team").submitted(MINUTE),
        ]);
        assert_eq!(order_of(&mut w), want, "{name}");
    }
}

#[test]
fn fair_share_counts_gpu_held_not_dominant_share() {
    // The DRF case above under fair share: GPU held over weight alone.
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(
        st,
        sch,
        &[team("cpu-team").burst(8), team("gpu-team").burst(8)],
    );
    w.running(
        job("cpu-running").team("cpu-team").gpus(1).cpu(32000),
        0,
        0,
        &["n1:0"],
    );
    w.running(
        job("gpu-running").team("gpu-team").gpus(2),
        0,
        0,
        &["n1:1,2"],
    );
    w.submit(&[
        job("cpu-job").team("cpu-team").submitted(MINUTE),
        job("gpu-job").team("gpu-team").submitted(0),
    ]);
    assert_eq!(order_of(&mut w), ["cpu-job", "gpu-job"]);
}

#[test]
fn naive_orders_first_in_first_out() {
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let sch = new_scheduler("naive", &st);
    let mut w = new_world(
        st,
        sch,
        &[
            team("rich").guarantee(8).burst(8),
            team("poor").guarantee(1).burst(8),
        ],
    );
    hold_gpus(&mut w, &[("poor", 1)]);
    w.submit(&[
        job("poor-old").team("poor").best_effort().submitted(0),
        job("rich-serve")
            .team("rich")
            .production()
            .submitted(2 * MINUTE),
        job("b-tie").team("poor").submitted(MINUTE),
        job("a-tie").team("rich").submitted(MINUTE),
    ]);
    // Submission, then ID; classes and teams ignored.
    assert_eq!(
        order_of(&mut w),
        ["poor-old", "a-tie", "b-tie", "rich-serve"]
    );
}

#[test]
fn order_leaves_running_and_terminating_jobs_out() {
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.running(job("runs"), 0, 0, &["n1:0"]);
    w.running(job("leaves"), 0, 0, &["n1:1"]);
    w.job_mut("leaves").phase = Phase::Terminating;
    w.submit(&[job("waits")]);
    assert_eq!(order_of(&mut w), ["waits"]);
}

/// The ordering rule written out plainly, as the oracle for
/// `Scheduler::order`: each pending job gets a key (within its team's
/// guarantee under `guarantee_first`, counting the claims that evicted for
/// nodes and wait for them; holding such nodes; class, team share,
/// submission, ID) and the keys are compared field by field.
fn naive_order(w: &World) -> Vec<String> {
    let cfg = w.sch.config().clone();
    let teams: BTreeMap<&str, &Team> = w.teams.iter().map(|t| (t.name.as_str(), t)).collect();
    let (mut used, mut cpu, mut mem) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for j in &w.jobs {
        for a in j.placed.iter().flatten() {
            let n = w.st.node_by_name(&a.node).expect("node");
            *used.entry(j.spec.team.clone()).or_insert(0.0) += f64::from(a.gpu_milli(n));
            *cpu.entry(j.spec.team.clone()).or_insert(0.0) += a.cpu_milli as f64;
            *mem.entry(j.spec.team.clone()).or_insert(0.0) += a.memory_mib as f64;
        }
    }
    let (mut tot_gpu, mut tot_cpu, mut tot_mem) = (0.0, 0.0, 0.0);
    for n in w.st.nodes() {
        tot_gpu += 1000.0 * n.gpus().len() as f64;
        tot_cpu += n.cpu_milli() as f64;
        tot_mem += n.memory_mib() as f64;
    }
    let get = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
    let share = |team: &str| -> f64 {
        let t = teams.get(team);
        match cfg.order {
            Order::FairShare => {
                let Some(t) = t else { return 0.0 };
                let u = get(&used, team);
                if t.guarantee > 0 && u < t.guarantee as f64 {
                    return u / t.guarantee as f64 - 1.0;
                }
                let weight = if t.weight <= 0.0 { 1.0 } else { t.weight };
                u / 1000.0 / weight
            }
            Order::Drf => {
                let mut dom = get(&used, team) / tot_gpu;
                dom = dom.max(get(&cpu, team) / tot_cpu);
                dom = dom.max(get(&mem, team) / tot_mem);
                if let Some(t) = t
                    && t.weight > 0.0
                {
                    dom /= t.weight;
                }
                dom
            }
            Order::Fifo => 0.0,
        }
    };
    let want_of = |j: &crate::sched::Job| -> f64 {
        j.spec
            .tasks
            .iter()
            .enumerate()
            .filter(|(i, _)| j.placed[*i].is_none())
            .map(|(_, t)| t.gpu.nominal_milli() as f64)
            .sum()
    };
    // What the pending jobs promised nodes (by their evictions) will take.
    let mut in_flight: BTreeMap<String, f64> = BTreeMap::new();
    for j in &w.jobs {
        if w.sch.promised_nodes.contains_key(j.id()) && j.phase == Phase::Pending {
            *in_flight.entry(j.spec.team.clone()).or_insert(0.0) += want_of(j);
        }
    }
    struct Keyed {
        id: String,
        owed: i32,
        holds: i32,
        class: i32,
        share: f64,
        submitted: Nanos,
    }
    let mut ks: Vec<Keyed> = Vec::new();
    for j in &w.jobs {
        if j.phase != Phase::Pending {
            continue;
        }
        let mut k = Keyed {
            id: j.id().to_string(),
            owed: 1,
            holds: 1,
            class: 0,
            share: share(&j.spec.team),
            submitted: j.submitted,
        };
        if cfg.class_order {
            k.class = -(j.spec.class.index() as i32);
        }
        if cfg.guarantee_first
            && let Some(t) = teams.get(j.spec.team.as_str())
        {
            let want = want_of(j);
            let promised = w.sch.promised_nodes.contains_key(j.id());
            let mut others = get(&in_flight, &j.spec.team);
            if promised {
                others -= want;
            }
            if get(&used, &j.spec.team) + want + others <= t.guarantee as f64 {
                k.owed = 0;
                if promised {
                    k.holds = 0;
                }
            }
        }
        ks.push(k);
    }
    let less = |a: &Keyed, b: &Keyed| -> bool {
        if a.owed != b.owed {
            return a.owed < b.owed;
        }
        if a.holds != b.holds {
            return a.holds < b.holds;
        }
        if a.class != b.class {
            return a.class < b.class;
        }
        if a.share != b.share {
            return a.share < b.share;
        }
        if a.submitted != b.submitted {
            return a.submitted < b.submitted;
        }
        a.id < b.id
    };
    // Insertion sort: slow, plainly correct.
    for i in 1..ks.len() {
        let mut k = i;
        while k > 0 && less(&ks[k], &ks[k - 1]) {
            ks.swap(k, k - 1);
            k -= 1;
        }
    }
    ks.into_iter().map(|k| k.id).collect()
}

#[test]
fn order_agrees_with_the_naive_order() {
    for seed in 1..=150i64 {
        let mut rng = Rand::new(seed);
        let mut sc = RandomScenario::new(&mut rng);
        let preset = ["naive", "gang-drf", "partita"][(seed % 3) as usize];
        let mut w = sc.world(preset, seed);
        for cycle in 0..6 {
            let want = naive_order(&w);
            let got = order_of(&mut w);
            assert_eq!(got, want, "seed {seed} ({preset}), cycle {cycle}");
            w.cycle();
            sc.step(&mut rng, &mut [&mut w]);
        }
    }
}

#[test]
fn positions_count_only_the_jobs_left_waiting_in_each_team() {
    // One free GPU. a-1 takes it; a-2 and a-3 are next in team a, b-1
    // first in team b.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").build();
    let sch = new_scheduler("naive", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[
        job("a-1").team("a").submitted(0),
        job("a-2").team("a").submitted(MINUTE),
        job("b-1").team("b").submitted(2 * MINUTE),
        job("a-3").team("a").submitted(3 * MINUTE),
    ]);
    let d = w.decide();
    let got: BTreeMap<String, Wait> = d
        .waiting
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let no_room = |position| Wait {
        position,
        reason: WaitReason::NoRoom,
    };
    let want = BTreeMap::from([
        ("a-2".to_string(), no_room(1)),
        ("a-3".to_string(), no_room(2)),
        ("b-1".to_string(), no_room(1)),
    ]);
    assert_eq!(got, want);
}
