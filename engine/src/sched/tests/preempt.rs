//! Priority preemption, reclaim, the victim search and its bounds (Go's
//! `preempt_test.go`).

use std::collections::BTreeMap;

use super::helpers::{
    JobBuilder, TeamBuilder, World, first_victims, fleet, job, new_scheduler, new_scheduler_with,
    new_world, nodes_of, reason_of, started_jobs, team, victims_of,
};
use crate::placement::Request;
use crate::sched::preempt::{FREE_ROUNDS, MAX_SEARCHES, SEARCH_BACKOFF_FOR};
use crate::sched::{
    Config, HOUR, Input, Job, MINUTE, Nanos, Phase, Preemption, Retry, SECOND, Wait, WaitReason,
};

fn preempting() -> String {
    WaitReason::Preempting.as_str().to_string()
}

fn world(preset: &str, st: crate::cluster::State, teams: &[TeamBuilder]) -> World {
    let sch = new_scheduler(preset, &st);
    let mut w = new_world(st, sch, teams);
    w.at(HOUR);
    w
}

#[test]
fn production_preempts_best_effort_of_its_team() {
    for preset in ["partita", "gang-drf"] {
        let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
        let mut w = world(preset, st, &[]);
        w.running(
            job("scavenge").team("a").best_effort().gpus(8),
            0,
            0,
            &["n1:0,1,2,3,4,5,6,7"],
        );
        w.submit(&[job("serve").team("a").production().gpus(4).submitted(HOUR)]);
        let d = w.decide();
        let want = vec![Preemption {
            job: "scavenge".into(),
            for_job: "serve".into(),
            reason: "preempted for serve (production, team a)".into(),
            grace: 30 * SECOND,
        }];
        assert_eq!(d.preemptions, want, "{preset}");
        assert!(
            d.starts.is_empty(),
            "{preset}: started while the victim still holds the GPUs"
        );
        assert_eq!(reason_of(&d, "serve"), preempting(), "{preset}");
    }
}

#[test]
fn no_preemption_without_a_higher_class() {
    let cases = [
        (
            "batch does not evict batch of its team",
            "partita",
            job("old").team("a").gpus(8),
            job("new").team("a").gpus(4),
        ),
        (
            "production does not evict production",
            "partita",
            job("old").team("a").production().gpus(8),
            job("new").team("a").production().gpus(4),
        ),
        (
            "best-effort evicts no one",
            "partita",
            job("old").team("a").best_effort().gpus(8),
            job("new").team("a").best_effort().gpus(4),
        ),
        (
            "naive never preempts",
            "naive",
            job("old").team("a").best_effort().gpus(8),
            job("new").team("a").production().gpus(4),
        ),
    ];
    for (name, preset, victim, pending) in cases {
        let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
        let mut w = world(preset, st, &[]);
        w.running(victim, 0, 0, &["n1:0,1,2,3,4,5,6,7"]);
        w.submit(&[pending]);
        let d = w.decide();
        assert!(d.preemptions.is_empty(), "{name}: {:?}", d.preemptions);
        assert_eq!(reason_of(&d, "new"), WaitReason::NoRoom.as_str(), "{name}");
    }
}

#[test]
fn victim_choice_order() {
    let now = HOUR;
    type Run = fn(&mut World);
    /// A case's name, nodes, GPUs per node, teams, running work and victim.
    type Case = (
        &'static str,
        usize,
        i32,
        Vec<TeamBuilder>,
        Run,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            // b holds its guarantee with best-effort work; c borrows with
            // batch work. The preemptor's team is within its guarantee, so
            // both are eligible.
            "borrowed capacity goes before a lower class",
            2,
            1,
            vec![
                team("a").guarantee(1).burst(1),
                team("b").guarantee(1).burst(8),
                team("c").burst(8),
            ],
            |w| {
                w.running(
                    job("b-best-effort").team("b").best_effort(),
                    0,
                    0,
                    &["n1:0"],
                );
                w.running(job("c-borrowed-batch").team("c"), 0, 0, &["n2:0"]);
            },
            "c-borrowed-batch",
        ),
        (
            "the lowest class goes before the most recent checkpoint",
            2,
            1,
            vec![],
            |w| {
                w.running(job("batch-fresh").team("a"), 0, HOUR - MINUTE, &["n1:0"]);
                w.running(
                    job("best-effort-stale").team("a").best_effort(),
                    0,
                    HOUR - 50 * MINUTE,
                    &["n2:0"],
                );
            },
            "best-effort-stale",
        ),
        (
            "the most recent checkpoint goes before the fewest GPUs",
            2,
            2,
            vec![],
            |w| {
                w.running(
                    job("one-gpu-stale").team("a").best_effort(),
                    0,
                    HOUR - 30 * MINUTE,
                    &["n1:0"],
                );
                w.running(job("keeper").team("a").production(), 0, 0, &["n1:1"]);
                w.running(
                    job("two-gpus-fresh").team("a").best_effort().gpus(2),
                    0,
                    HOUR - MINUTE,
                    &["n2:0,1"],
                );
            },
            "two-gpus-fresh",
        ),
        (
            "the fewest GPUs go before the ID",
            2,
            2,
            vec![],
            |w| {
                w.running(
                    job("a-two-gpus").team("a").best_effort().gpus(2),
                    0,
                    0,
                    &["n1:0,1"],
                );
                w.running(job("b-one-gpu").team("a").best_effort(), 0, 0, &["n2:0"]);
                w.running(job("keeper").team("a").production(), 0, 0, &["n2:1"]);
            },
            "b-one-gpu",
        ),
        (
            "equal candidates go by ID",
            2,
            1,
            vec![],
            |w| {
                w.running(job("b-job").team("a").best_effort(), 0, 0, &["n1:0"]);
                w.running(job("a-job").team("a").best_effort(), 0, 0, &["n2:0"]);
            },
            "a-job",
        ),
    ];
    for (name, nodes, gpus, teams, run, want) in cases {
        let st = fleet().nodes(nodes).gpus(gpus, "H100-80GB").build();
        let mut w = world("partita", st, &teams);
        w.at(now);
        run(&mut w);
        w.submit(&[job("serve").team("a").production().submitted(now)]);
        let d = w.decide();
        assert_eq!(victims_of(&d), [want], "{name}");
    }
}

#[test]
fn victim_search_gives_back_victims_not_needed() {
    // One node of 3 GPUs: fresh (1 GPU, checkpointed a minute ago) comes
    // first in victim order, stale (2 GPUs) second. A gang of two 1-GPU
    // tasks fits only once stale goes, and then fits without evicting
    // fresh too.
    let st = fleet().nodes(1).gpus(3, "H100-80GB").build();
    let mut w = world("partita", st, &[]);
    w.running(
        job("fresh").team("a").best_effort(),
        0,
        HOUR - MINUTE,
        &["n1:0"],
    );
    w.running(
        job("stale").team("a").best_effort().gpus(2),
        0,
        HOUR - 30 * MINUTE,
        &["n1:1,2"],
    );
    w.submit(&[job("serve")
        .team("a")
        .production()
        .gang(2)
        .gpus(1)
        .submitted(HOUR)]);
    assert_eq!(victims_of(&w.decide()), ["stale"]);
}

#[test]
fn victim_search_picks_the_node_needing_fewest_victims() {
    // n1 holds two one-GPU jobs that come first in victim order; n2 one
    // two-GPU job. A two-GPU task needs both of n1's or n2's one.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").build();
    let mut w = world("partita", st, &[]);
    w.running(job("small-1").team("a").best_effort(), 0, HOUR, &["n1:0"]);
    w.running(job("small-2").team("a").best_effort(), 0, HOUR, &["n1:1"]);
    w.running(
        job("big").team("a").best_effort().gpus(2),
        0,
        0,
        &["n2:0,1"],
    );
    w.submit(&[job("serve").team("a").production().gpus(2).submitted(HOUR)]);
    assert_eq!(victims_of(&w.decide()), ["big"]);
}

#[test]
fn reclaim() {
    // One node of 4 GPUs, full; team a asks for 2.
    struct Case {
        name: &'static str,
        teams: Vec<TeamBuilder>,
        run: fn(&mut World),
        pending: JobBuilder,
        id: &'static str,
        victims: Vec<&'static str>,
        reason: &'static str,
        only: Option<&'static str>,
    }
    let cases = vec![
        Case {
            name: "a team within its guarantee evicts a borrowing team's job of the same class",
            teams: vec![team("a").guarantee(4).burst(4), team("b").burst(8)],
            run: |w| {
                w.running(job("b-job").team("b").gpus(4), 0, 0, &["n1:0,1,2,3"]);
            },
            pending: job("a-job").team("a").gpus(2),
            id: "a-job",
            victims: vec!["b-job"],
            reason: "team a reclaims its guarantee for a-job",
            only: None,
        },
        Case {
            name: "a team within its guarantee evicts a borrower's production work",
            teams: vec![team("a").guarantee(4).burst(4), team("b").burst(8)],
            run: |w| {
                w.running(
                    job("b-serve").team("b").production().gpus(4),
                    0,
                    0,
                    &["n1:0,1,2,3"],
                );
            },
            pending: job("a-job").team("a").gpus(2),
            id: "a-job",
            victims: vec!["b-serve"],
            reason: "team a reclaims its guarantee",
            only: None,
        },
        Case {
            // b-job is 1 GPU over b's guarantee and 3 under: without it
            // going, what b borrows could never be taken back.
            name: "reclaim takes a job that straddles its team's guarantee when nothing else makes room",
            teams: vec![
                team("a").guarantee(4).burst(4),
                team("b").guarantee(3).burst(8),
            ],
            run: |w| {
                w.running(job("b-job").team("b").gpus(4), 0, 0, &["n1:0,1,2,3"]);
            },
            pending: job("a-job").team("a").gpus(2),
            id: "a-job",
            victims: vec!["b-job"],
            reason: "team a reclaims its guarantee for a-job",
            only: None,
        },
        Case {
            name: "reclaim takes a job that keeps its team at its guarantee before one that straddles it",
            teams: vec![
                team("a").guarantee(4).burst(4),
                team("b").guarantee(3).burst(8),
            ],
            run: |w| {
                w.running(
                    job("b-big").team("b").best_effort().gpus(3),
                    0,
                    0,
                    &["n1:0,1,2"],
                );
                w.running(job("b-1").team("b").gpus(1), 0, 0, &["n1:3"]);
            },
            pending: job("a-job").team("a").gpus(1),
            id: "a-job",
            victims: vec!["b-1"],
            reason: "team a reclaims its guarantee for a-job",
            only: None,
        },
        Case {
            name: "reclaim never takes production below its team's guarantee",
            teams: vec![
                team("a").guarantee(4).burst(4),
                team("b").guarantee(3).burst(8),
            ],
            run: |w| {
                w.running(
                    job("b-serve").team("b").production().gpus(4),
                    0,
                    0,
                    &["n1:0,1,2,3"],
                );
            },
            pending: job("a-job").team("a").gpus(2),
            id: "a-job",
            victims: vec![],
            reason: "",
            only: None,
        },
        Case {
            // protect_production spares production on MIG instances only.
            name: "best-effort work reclaims from production on whole GPUs",
            teams: vec![team("a").guarantee(4).burst(4), team("b").burst(8)],
            run: |w| {
                w.running(
                    job("b-serve").team("b").production().gpus(4),
                    0,
                    0,
                    &["n1:0,1,2,3"],
                );
            },
            pending: job("a-job").team("a").best_effort().gpus(2),
            id: "a-job",
            victims: vec!["b-serve"],
            reason: "team a reclaims its guarantee for a-job",
            only: Some("partita"),
        },
        Case {
            name: "without protect_production, best-effort work reclaims from production",
            teams: vec![team("a").guarantee(4).burst(4), team("b").burst(8)],
            run: |w| {
                w.running(
                    job("b-serve").team("b").production().gpus(4),
                    0,
                    0,
                    &["n1:0,1,2,3"],
                );
            },
            pending: job("a-job").team("a").best_effort().gpus(2),
            id: "a-job",
            victims: vec!["b-serve"],
            reason: "team a reclaims its guarantee for a-job",
            only: Some("gang-drf"),
        },
        Case {
            name: "a borrowing team loses only jobs it holds beyond its guarantee",
            teams: vec![
                team("a").guarantee(4).burst(4),
                team("b").guarantee(2).burst(8),
            ],
            run: |w| {
                w.running(job("b-1").team("b").gpus(2), 0, 0, &["n1:0,1"]);
                w.running(job("b-2").team("b").gpus(2), 0, 0, &["n1:2,3"]);
            },
            pending: job("a-job").team("a").gpus(2),
            id: "a-job",
            victims: vec!["b-1"],
            reason: "",
            only: None,
        },
        Case {
            name: "a team beyond its guarantee does not reclaim",
            teams: vec![team("a").guarantee(1).burst(4), team("b").burst(8)],
            run: |w| {
                w.running(job("b-job").team("b").gpus(4), 0, 0, &["n1:0,1,2,3"]);
            },
            pending: job("a-job").team("a").gpus(2),
            id: "a-job",
            victims: vec![],
            reason: "",
            only: None,
        },
        Case {
            name: "production beyond its team's guarantee does not evict another team's guaranteed batch work",
            teams: vec![team("a").burst(8), team("b").guarantee(4).burst(8)],
            run: |w| {
                w.running(job("b-job").team("b").gpus(4), 0, 0, &["n1:0,1,2,3"]);
            },
            pending: job("a-serve").team("a").production().gpus(2),
            id: "a-serve",
            victims: vec![],
            reason: "",
            only: None,
        },
        Case {
            name: "production within its team's guarantee evicts another team's guaranteed batch work",
            teams: vec![
                team("a").guarantee(2).burst(8),
                team("b").guarantee(4).burst(8),
            ],
            run: |w| {
                w.running(job("b-job").team("b").gpus(4), 0, 0, &["n1:0,1,2,3"]);
            },
            pending: job("a-serve").team("a").production().gpus(2),
            id: "a-serve",
            victims: vec!["b-job"],
            reason: "preempted for a-serve (production, team a)",
            only: None,
        },
        Case {
            name: "production of a team without a Team entry does not evict another team",
            teams: vec![team("b").guarantee(4).burst(8)],
            run: |w| {
                w.running(
                    job("b-job").team("b").best_effort().gpus(4),
                    0,
                    0,
                    &["n1:0,1,2,3"],
                );
            },
            pending: job("a-serve").team("a").production().gpus(2),
            id: "a-serve",
            victims: vec![],
            reason: "",
            only: None,
        },
    ];
    for tc in &cases {
        for preset in ["partita", "gang-drf"] {
            if tc.only.is_some_and(|p| p != preset) {
                continue;
            }
            let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
            let mut w = world(preset, st, &tc.teams);
            (tc.run)(&mut w);
            w.submit(&[tc.pending.clone().submitted(HOUR)]);
            let d = w.decide();
            assert_eq!(victims_of(&d), tc.victims, "{preset}/{}", tc.name);
            if tc.victims.is_empty() {
                assert_eq!(
                    reason_of(&d, tc.id),
                    WaitReason::NoRoom.as_str(),
                    "{preset}/{}",
                    tc.name
                );
                continue;
            }
            assert_eq!(reason_of(&d, tc.id), preempting(), "{preset}/{}", tc.name);
            assert!(
                d.preemptions[0].reason.contains(tc.reason),
                "{preset}/{}: reason {:?}, want {:?}",
                tc.name,
                d.preemptions[0].reason,
                tc.reason
            );
        }
    }
}

#[test]
fn promised_nodes_are_held_until_the_preemptor_starts() {
    // n1 has 8 GPUs; scavenge holds 6. serve (production, 8 GPUs) preempts
    // it. The 2 free GPUs and then scavenge's 6 stay serve's: train
    // (batch, 2 GPUs) and late (best-effort, arrives during the grace)
    // must not take them.
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let mut w = world("partita", st, &[]);
    w.running(
        job("scavenge").team("a").best_effort().gpus(6),
        0,
        0,
        &["n1:0,1,2,3,4,5"],
    );
    w.submit(&[
        job("serve").team("a").production().gpus(8).submitted(HOUR),
        job("train").team("a").gpus(2).submitted(HOUR),
    ]);

    // Cycle 1: the preemption; train may not take the 2 free GPUs.
    let d = w.cycle();
    assert_eq!(victims_of(&d), ["scavenge"], "cycle 1");
    assert!(
        d.starts.is_empty(),
        "cycle 1: started {:?} on the node promised to serve",
        started_jobs(&d)
    );
    assert_eq!(
        reason_of(&d, "train"),
        WaitReason::NoRoom.as_str(),
        "cycle 1"
    );

    // During the grace period: a light cycle for a newcomer, then a full
    // one.
    w.at(HOUR + 10 * SECOND);
    w.submit(&[job("late")
        .team("a")
        .best_effort()
        .submitted(HOUR + 10 * SECOND)]);
    let d = w.light(&["late"]);
    assert!(
        d.starts.is_empty() && d.preemptions.is_empty(),
        "light cycle during the grace: {d:?}"
    );
    let d = w.cycle();
    assert!(
        d.starts.is_empty() && d.preemptions.is_empty(),
        "full cycle during the grace: {d:?}"
    );
    assert_eq!(reason_of(&d, "serve"), preempting());

    // The grace ends: the world releases scavenge. A light cycle for late
    // comes first; the nodes stay held.
    w.at(HOUR + 30 * SECOND).release();
    let d = w.light(&["late"]);
    assert!(
        d.starts.is_empty(),
        "light cycle after the release started {:?}",
        started_jobs(&d)
    );

    // The next full cycle starts serve on n1.
    let d = w.cycle();
    assert_eq!(started_jobs(&d), ["serve"]);
    let starts: Vec<_> = d.starts.iter().collect();
    assert_eq!(nodes_of(&starts), ["n1"]);
    assert_eq!(w.job("serve").phase, Phase::Running);
}

#[test]
fn no_second_preemption_while_victims_terminate() {
    // Two best-effort jobs fill two nodes. serve takes fresh's node; while
    // fresh terminates serve waits rather than evict stale too.
    let st = fleet().nodes(2).gpus(4, "H100-80GB").build();
    let mut w = world("partita", st, &[]);
    w.running(
        job("fresh").team("a").best_effort().gpus(4),
        0,
        HOUR - MINUTE,
        &["n1:0,1,2,3"],
    );
    w.running(
        job("stale").team("a").best_effort().gpus(4),
        0,
        HOUR - 30 * MINUTE,
        &["n2:0,1,2,3"],
    );
    w.submit(&[job("serve").team("a").production().gpus(4).submitted(HOUR)]);
    assert_eq!(victims_of(&w.cycle()), ["fresh"], "cycle 1");
    for i in 1..=3 {
        w.at(HOUR + i * 10 * SECOND);
        let d = w.cycle();
        assert!(
            d.preemptions.is_empty(),
            "cycle {} during the grace: {:?}",
            i + 1,
            victims_of(&d)
        );
        assert_eq!(
            d.waiting.get("serve"),
            Some(&Wait {
                position: 1,
                reason: WaitReason::Preempting
            })
        );
    }
    w.release();
    let d = w.cycle();
    assert_eq!(started_jobs(&d), ["serve"]);
    assert_eq!(w.job("stale").phase, Phase::Running);
}

#[test]
fn preemption_respects_max_searches() {
    // Six production jobs of different shapes, each needing a victim of
    // its own: only MAX_SEARCHES of them search in one cycle.
    let st = fleet().nodes(6).gpus(8, "H100-80GB").build();
    let mut w = world("partita", st, &[]);
    for i in 1..=6 {
        let at = format!("n{i}:0,1,2,3,4,5,6,7");
        w.running(
            job(&format!("victim-{i}")).team("a").best_effort().gpus(8),
            0,
            0,
            &[at.as_str()],
        );
        w.submit(&[job(&format!("serve-{i}"))
            .team("a")
            .production()
            .gpus(i)
            .submitted(i as Nanos)]);
    }
    assert_eq!(w.decide().preemptions.len(), MAX_SEARCHES);
}

#[test]
fn promised_nodes_are_freed_when_the_preemptor_leaves() {
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let mut w = world("partita", st, &[]);
    w.running(
        job("scavenge").team("a").best_effort().gpus(6),
        0,
        0,
        &["n1:0,1,2,3,4,5"],
    );
    w.submit(&[job("serve").team("a").production().gpus(8).submitted(HOUR)]);
    assert_eq!(victims_of(&w.cycle()), ["scavenge"]);
    // The grace ends; a light cycle for a newcomer settles the promise;
    // then serve is cancelled before it is considered again.
    w.at(HOUR + 30 * SECOND).release();
    w.submit(&[job("late")
        .team("a")
        .best_effort()
        .submitted(HOUR + 30 * SECOND)]);
    w.light(&["late"]);
    w.finish("serve");
    w.at(HOUR + MINUTE);
    let d = w.cycle();
    assert_eq!(
        started_jobs(&d),
        ["late", "scavenge"],
        "late waits {}",
        reason_of(&d, "late")
    );
}

#[test]
fn preemption_rounds_that_do_not_start_the_job_back_off() {
    // serve evicts the squatter on the only node, and each time someone
    // else takes the room before serve can. FREE_ROUNDS rounds go
    // unchecked; the round after them holds serve's next search off for
    // SEARCH_BACKOFF_FOR.
    let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
    let mut w = world("partita", st, &[]);
    let squatter = |i: i32| format!("squatter-{i}");
    w.running(
        job(&squatter(1)).team("a").best_effort().gpus(4),
        0,
        HOUR,
        &["n1:0,1,2,3"],
    );
    w.submit(&[job("serve").team("a").production().gpus(4).submitted(HOUR)]);
    let (mut now, mut last) = (HOUR, HOUR);
    for round in 1..=FREE_ROUNDS + 1 {
        w.at(now);
        let d = w.cycle();
        assert_eq!(
            victims_of(&d),
            [squatter(round)],
            "round {round}: serve waits {:?}",
            d.waiting.get("serve")
        );
        // The victim leaves; another squatter takes the node first.
        w.release().finish(&squatter(round));
        w.running(
            job(&squatter(round + 1)).team("a").best_effort().gpus(4),
            now,
            now,
            &["n1:0,1,2,3"],
        );
        last = now;
        now += 10 * SECOND;
    }
    let next = squatter(FREE_ROUNDS + 2);
    for at in [now, last + SEARCH_BACKOFF_FOR - SECOND] {
        w.at(at);
        let d = w.cycle();
        assert!(
            d.preemptions.is_empty(),
            "{} after the last round: serve evicts {:?}",
            at - last,
            victims_of(&d)
        );
    }
    w.at(last + SEARCH_BACKOFF_FOR);
    let d = w.cycle();
    assert_eq!(victims_of(&d), [next], "after the back-off");
}

#[test]
fn a_failed_search_holds_off_jobs_of_its_key() {
    // first, batch, may evict its team's best-effort job, but that one GPU
    // is not enough: the search fails. When a GPU frees up 20 s later a
    // search would succeed; second, of the same shape, class and team,
    // must not make it before SEARCH_BACKOFF_FOR.
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let mut w = world("partita", st, &[]);
    w.running(job("be").team("a").best_effort().gpus(1), 0, 0, &["n1:0"]);
    w.running(job("wall1").team("a").gpus(1), 0, 0, &["n1:1"]);
    w.running(job("wall2").team("a").gpus(6), 0, 0, &["n1:2,3,4,5,6,7"]);
    w.submit(&[job("first").team("a").gpus(2).submitted(HOUR)]);
    assert!(
        w.cycle().preemptions.is_empty(),
        "one best-effort GPU cannot make room for two"
    );
    w.finish("wall1");
    w.submit(&[job("second")
        .team("a")
        .gpus(2)
        .submitted(HOUR + 20 * SECOND)]);
    w.at(HOUR + 20 * SECOND);
    assert!(
        w.cycle().preemptions.is_empty(),
        "20 s after the failed search"
    );
    w.at(HOUR + SEARCH_BACKOFF_FOR);
    assert_eq!(victims_of(&w.cycle()), ["be"]);
}

#[test]
fn reclaim_counts_mig_gpus_the_victims_leave_idle() {
    // a is owed 4 whole GPUs; b borrows 3 whole GPUs and a MIG instance on
    // the fourth. Once both are gone the fourth GPU is idle and can be
    // turned whole: the search must count it.
    let st = fleet().nodes(1).gpus(4, "H100-80GB").mig().build();
    let mut w = world(
        "partita",
        st,
        &[team("a").guarantee(4).burst(4), team("b").burst(8)],
    );
    w.mig_off("n1", &[0, 1, 2]);
    w.running(job("b-job").team("b").gpus(3), 0, 0, &["n1:0,1,2"]);
    w.running_slice(
        job("b-serve").team("b").production().mig_profile("1g.10gb"),
        "n1:3:1g.10gb@6",
    );
    w.submit(&[job("a-job").team("a").gpus(4).submitted(HOUR)]);
    let d = w.decide();
    assert_eq!(
        victims_of(&d),
        ["b-job", "b-serve"],
        "a-job waits {}",
        reason_of(&d, "a-job")
    );
}

#[test]
fn no_victims_for_a_mig_change_the_cooldown_forbids() {
    // serve needs a MIG slice; the only room is the GPU scavenge holds,
    // whole, changed a minute ago. Evicting scavenge would not let serve
    // start before the cooldown ends: no victims until then.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").mig().build();
    let mut w = world("partita", st, &[]);
    w.mig_off("n1", &[0]);
    w.running(
        job("scavenge").team("a").best_effort().gpus(1),
        0,
        0,
        &["n1:0"],
    );
    w.submit(&[job("serve")
        .team("a")
        .production()
        .mig_profile("3g.40gb")
        .submitted(HOUR)]);
    let cooldown = w.sch.config().reconfig_cooldown;
    w.sch.set_last_change("n1", 0, HOUR - MINUTE);
    assert!(
        w.decide().preemptions.is_empty(),
        "victims while the GPU cannot change"
    );
    w.at(HOUR - MINUTE + cooldown);
    let d = w.decide();
    assert_eq!(
        victims_of(&d),
        ["scavenge"],
        "after the cooldown: serve waits {}",
        reason_of(&d, "serve")
    );
}

#[test]
fn whole_room_after_bounds_the_search() {
    // Two nodes of 8 GPUs; on each, b borrows 7 and a's own production
    // holds the eighth. a's gang of two 8-GPU tasks cannot fit whatever is
    // evicted; one 7-GPU task can.
    let st = fleet().nodes(2).gpus(8, "H100-80GB").build();
    let mut w = world(
        "partita",
        st,
        &[team("a").guarantee(18).burst(18), team("b").burst(16)],
    );
    for n in ["n1", "n2"] {
        let (seven, eighth) = (format!("{n}:0,1,2,3,4,5,6"), format!("{n}:7"));
        w.running(
            job(&format!("b-{n}")).team("b").gpus(7),
            0,
            0,
            &[seven.as_str()],
        );
        w.running(
            job(&format!("a-serve-{n}")).team("a").production().gpus(1),
            0,
            0,
            &[eighth.as_str()],
        );
    }
    w.submit(&[
        job("gang").team("a").gang(2).gpus(8).submitted(HOUR),
        job("seven").team("a").gpus(7).submitted(HOUR),
    ]);
    {
        let refs: Vec<&Job> = w.jobs.iter().collect();
        let input = Input::new(w.now, &w.st, &w.teams, &refs);
        let sch = &mut w.sch;
        let mut c = sch.snapshot(&input);
        let gang = refs
            .iter()
            .copied()
            .find(|j| j.id() == "gang")
            .expect("gang");
        let mut cands = Vec::new();
        for &j in &refs {
            if sch.eligible(&mut c, gang, j) {
                cands.push(j);
            }
        }
        assert_eq!(cands.len(), 2, "candidates, want b's two jobs");
        for (id, want) in [("gang", false), ("seven", true)] {
            let j = refs.iter().copied().find(|j| j.id() == id).expect("job");
            let reqs = sch.requests(j).expect("requests");
            let reqs: Vec<&Request> = reqs.iter().collect();
            assert_eq!(sch.whole_room_after(&mut c, &reqs, &cands), want, "{id}");
        }
    }
    assert_eq!(
        victims_of(&w.decide()),
        ["b-n1"],
        "for seven (and none for the gang)"
    );
}

#[test]
fn a_gang_of_whole_nodes_reclaims_node_by_node() {
    // Team b borrows five 8-GPU nodes with 1-GPU jobs whose checkpoints
    // interleave the nodes, so the first MAX_VICTIMS in victim order leave
    // every node a GPU short. Team a asks for its guarantee as a gang of
    // two 8-GPU tasks: the search must clear two nodes, 16 victims.
    let st = fleet().nodes(5).gpus(8, "H100-80GB").build();
    let mut w = world(
        "partita",
        st,
        &[team("a").guarantee(16).burst(16), team("b").burst(40)],
    );
    for i in 0..8 {
        for k in 1..=5 {
            let checkpoint = HOUR - (i * 5 + k) * MINUTE;
            let at = format!("n{k}:{i}");
            w.running(
                job(&format!("b-{k}-{i}")).team("b"),
                0,
                checkpoint,
                &[at.as_str()],
            );
        }
    }
    w.submit(&[job("tune").team("a").gang(2).gpus(8).submitted(HOUR)]);
    let d = w.decide();
    let victims = victims_of(&d);
    assert_eq!(
        victims.len(),
        16,
        "{victims:?}; tune waits {}",
        reason_of(&d, "tune")
    );
    let mut nodes: BTreeMap<String, usize> = BTreeMap::new();
    for v in &victims {
        *nodes
            .entry(v.split('-').nth(1).expect("node").to_string())
            .or_insert(0) += 1;
    }
    assert_eq!(
        nodes.len(),
        2,
        "victims on nodes {nodes:?}, want two whole nodes"
    );
}

/// A service on a 1g.10gb instance, evicting one best-effort job either
/// way, prefers the notebook whose instance it can take at once to the
/// whole-GPU experiment that loses less work but leaves a GPU to turn to
/// MIG first.
#[test]
fn a_service_prefers_a_victim_whose_instance_it_can_use() {
    let st = fleet().nodes(2).gpus(1, "H100-80GB").mig().build();
    let mut w = world(
        "partita",
        st,
        &[team("p").guarantee(1).burst(2), team("r").burst(2)],
    );
    w.mig_off("n1", &[0]);
    w.running(
        job("exp").team("r").best_effort().gpus(1),
        HOUR - 30 * MINUTE,
        HOUR - MINUTE,
        &["n1:0"],
    );
    for i in 0..7 {
        let id = format!("nb{i}");
        w.running_slice(
            job(&id).team("r").best_effort().mig_profile("1g.10gb"),
            &format!("n2:0:1g.10gb@{i}"),
        );
        // A notebook keeps no checkpoint: it would lose its hour.
        let nb = w.job_mut(&id);
        nb.started = 0;
        nb.checkpoint = 0;
    }
    w.submit(&[job("serve")
        .team("p")
        .production()
        .mig_profile("1g.10gb")
        .submitted(HOUR)]);
    let d = w.cycle();
    let got = victims_of(&d);
    assert!(
        got.len() == 1 && got[0].starts_with("nb"),
        "victims {got:?}, want one notebook"
    );
}

#[test]
fn a_teams_own_claim_does_not_take_the_room_its_gang_evicted_for() {
    // Team r is owed 4 GPUs and runs three experiments on n1. Its
    // pretraining job (batch, 8 GPUs) is beyond that guarantee and evicts
    // them. A new experiment of r, within the guarantee, arrives during
    // the grace: it must not take the room promised to r's own pretraining
    // job, which would only evict it again.
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let mut w = world("partita", st, &[team("r").guarantee(4).burst(16)]);
    for i in 0..3 {
        let at = format!("n1:{i}");
        w.running(
            job(&format!("exp-{i}")).team("r").best_effort(),
            0,
            HOUR - MINUTE,
            &[at.as_str()],
        );
    }
    w.submit(&[job("pretrain").team("r").gpus(8).submitted(HOUR)]);
    assert_eq!(victims_of(&w.cycle()), ["exp-0", "exp-1", "exp-2"]);

    w.at(HOUR + 10 * SECOND);
    w.submit(&[job("late")
        .team("r")
        .best_effort()
        .submitted(HOUR + 10 * SECOND)]);
    let d = w.light(&["late"]);
    assert!(
        d.starts.is_empty(),
        "light cycle during the grace started {:?}",
        started_jobs(&d)
    );
    let d = w.cycle();
    assert!(
        d.starts.is_empty(),
        "full cycle during the grace started {:?}",
        started_jobs(&d)
    );

    w.at(HOUR + 30 * SECOND).release();
    let d = w.cycle();
    assert_eq!(
        started_jobs(&d),
        ["pretrain"],
        "late waits {}",
        reason_of(&d, "late")
    );
}

#[test]
fn a_borrowers_victims_together_leave_their_team_its_guarantee() {
    // Team r is owed 2 GPUs and runs three experiments on n1: it borrows
    // one. Team a, with no guarantee, asks for batch work. Each experiment
    // alone may go (r keeps 2), but not two of them.
    for (gpus, victims) in [(2, 1), (3, 0)] {
        let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
        let mut w = world(
            "partita",
            st,
            &[team("r").guarantee(2).burst(4), team("a").burst(4)],
        );
        for i in 0..3 {
            let at = format!("n1:{i}");
            w.running(
                job(&format!("exp-{i}")).team("r").best_effort(),
                0,
                HOUR - MINUTE,
                &[at.as_str()],
            );
        }
        w.submit(&[job("train").team("a").gpus(gpus).submitted(HOUR)]);
        assert_eq!(victims_of(&w.decide()).len(), victims, "{gpus} GPUs");
    }
}

#[test]
fn promised_nodes_stay_held_while_the_jobs_mig_change_runs() {
    // n1: GPUs 0-3 whole, running four experiments; GPUs 4-7 in MIG mode,
    // idle. tune (batch, 8 GPUs) evicts the experiments, then needs MIG
    // turned off on 4-7. While that change runs, the experiments, back in
    // the queue, must not take GPUs 0-3 again.
    let st = fleet().nodes(1).gpus(8, "H100-80GB").mig().build();
    let mut w = world("partita", st, &[]);
    w.mig_off("n1", &[0, 1, 2, 3]);
    for i in 0..4 {
        let at = format!("n1:{i}");
        w.running(
            job(&format!("exp-{i}")).team("a").best_effort(),
            0,
            HOUR - MINUTE,
            &[at.as_str()],
        );
    }
    w.submit(&[job("tune").team("a").gpus(8).submitted(HOUR)]);
    assert_eq!(victims_of(&w.cycle()).len(), 4, "the four experiments");

    w.at(HOUR + 30 * SECOND).release();
    let d = w.cycle();
    assert!(
        !d.reconfigs.is_empty(),
        "after the release: no MIG change for tune (waits {})",
        reason_of(&d, "tune")
    );
    for when in [40 * SECOND, 50 * SECOND] {
        w.at(HOUR + when);
        let d = w.cycle();
        assert!(
            d.starts.is_empty() && d.preemptions.is_empty(),
            "at +{when}, during tune's change: {d:?}"
        );
    }
    w.at(HOUR + MINUTE).uncordon_all();
    let d = w.cycle();
    assert_eq!(
        started_jobs(&d),
        ["tune"],
        "after the change: tune waits {}",
        reason_of(&d, "tune")
    );
}

fn seven_services(w: &mut World) {
    for k in 0..7 {
        w.running_slice(
            job(&format!("b-serve-{k}"))
                .team("b")
                .production()
                .mig_profile("1g.10gb"),
            &format!("n1:0:1g.10gb@{k}"),
        );
    }
}

#[test]
fn best_effort_does_not_evict_production_on_mig() {
    // b borrows the only GPU with seven 1g.10gb services; a, owed a GPU,
    // asks for a best-effort 1g.10gb. With protect_production it waits.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").mig().build();
    for protect in [true, false] {
        let sch = new_scheduler_with("partita", &st, 1, |c: &mut Config| {
            c.protect_production = protect
        });
        let mut w = new_world(
            st.clone(),
            sch,
            &[team("a").guarantee(1).burst(1), team("b").burst(8)],
        );
        w.at(HOUR);
        seven_services(&mut w);
        w.submit(&[job("a-nb")
            .team("a")
            .best_effort()
            .mig_profile("1g.10gb")
            .submitted(HOUR)]);
        let got = victims_of(&w.decide());
        assert_eq!(
            got.len(),
            usize::from(!protect),
            "protect_production {protect}: victims {got:?}"
        );
    }
}

#[test]
fn best_effort_claim_evicts_borrowed_production_on_mig_once_it_has_waited() {
    // As above, the protection holds for the claim's first
    // protect_production_for within a's guarantee; then the claim
    // reclaims. With the limit off (0), the protection holds for good.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").mig().build();
    for limit in [30 * SECOND, 0] {
        let sch = new_scheduler_with("partita", &st, 1, |c: &mut Config| {
            c.protect_production_for = limit
        });
        let mut w = new_world(
            st.clone(),
            sch,
            &[team("a").guarantee(1).burst(1), team("b").burst(8)],
        );
        w.at(HOUR);
        seven_services(&mut w);
        w.submit(&[job("a-nb")
            .team("a")
            .best_effort()
            .mig_profile("1g.10gb")
            .submitted(HOUR)]);
        for at in [0, 15 * SECOND] {
            w.at(HOUR + at);
            assert!(victims_of(&w.cycle()).is_empty(), "limit {limit}, at +{at}");
        }
        w.at(HOUR + 30 * SECOND);
        let got = victims_of(&w.cycle());
        assert_eq!(
            got.len(),
            usize::from(limit > 0),
            "limit {limit}, at +30s: {got:?}"
        );
    }
}

#[test]
fn a_best_effort_claim_asks_for_a_cycle_when_the_protection_lapses() {
    // With the preset's 15 s: the claim's first search, at +0, finds only
    // protected production. The decision asks for a cycle of the claim at
    // +15 s, when it may evict; a job beyond its team's guarantee asks for
    // none.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").mig().build();
    let mut w = world(
        "partita",
        st,
        &[
            team("a").guarantee(1).burst(1),
            team("b").burst(8),
            team("c").burst(8),
        ],
    );
    seven_services(&mut w);
    w.submit(&[
        job("a-nb")
            .team("a")
            .best_effort()
            .mig_profile("1g.10gb")
            .submitted(HOUR),
        job("c-nb")
            .team("c")
            .best_effort()
            .mig_profile("1g.10gb")
            .submitted(HOUR),
    ]);
    let d = w.cycle();
    let want = vec![Retry {
        job: "a-nb".into(),
        at: HOUR + 15 * SECOND,
    }];
    assert_eq!(d.retries, want);
    assert!(victims_of(&d).is_empty());
    w.at(HOUR + 15 * SECOND);
    let d = w.cycle();
    assert!(
        victims_of(&d).len() == 1 && d.retries.is_empty(),
        "at +15s: {d:?}"
    );
}

#[test]
fn a_claim_held_off_by_another_of_its_kind_asks_for_a_cycle_too() {
    // Two such claims of a: the first searches and finds only protected
    // production; the second, of the same shape, class and team, makes no
    // search of its own. Both ask for a cycle at +15 s.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").mig().build();
    let mut w = world(
        "partita",
        st,
        &[team("a").guarantee(2).burst(2), team("b").burst(8)],
    );
    seven_services(&mut w);
    w.submit(&[
        job("a-nb1")
            .team("a")
            .best_effort()
            .mig_profile("1g.10gb")
            .submitted(HOUR),
        job("a-nb2")
            .team("a")
            .best_effort()
            .mig_profile("1g.10gb")
            .submitted(HOUR + SECOND),
    ]);
    let d = w.cycle();
    let at = HOUR + 15 * SECOND;
    let want = vec![
        Retry {
            job: "a-nb1".into(),
            at,
        },
        Retry {
            job: "a-nb2".into(),
            at,
        },
    ];
    assert_eq!(d.retries, want);
    assert!(victims_of(&d).is_empty());
}

#[test]
fn a_claim_in_flight_counts_against_its_teams_guarantee() {
    // c borrows both GPUs. b is owed one: its first job evicts a borrowed
    // job for it. While that one leaves, b's second job is not owed
    // another, so it evicts nothing.
    let st = fleet().nodes(2).gpus(1, "H100-80GB").build();
    let mut w = world(
        "partita",
        st,
        &[team("b").guarantee(1).burst(2), team("c").burst(2)],
    );
    w.running(job("borrow1").team("c").gpus(1), 0, 0, &["n1:0"]);
    w.running(job("borrow2").team("c").gpus(1), 0, 0, &["n2:0"]);
    w.submit(&[
        job("first").team("b").gpus(1).submitted(HOUR - MINUTE),
        job("second").team("b").gpus(1).submitted(HOUR),
    ]);
    let mut victims = Vec::new();
    for _ in 0..3 {
        victims.extend(victims_of(&w.cycle()));
        let now = w.now + 15 * SECOND;
        w.at(now);
    }
    assert!(
        victims == ["borrow1"] || victims == ["borrow2"],
        "victims {victims:?}, want one"
    );
}

#[test]
fn a_borrower_that_becomes_owed_searches_at_once() {
    // a's gang of two, beyond a's guarantee while a's first job runs,
    // finds no victims and backs off. When first ends, a is owed the gang:
    // it evicts c's job in the next cycle.
    let st = fleet().nodes(1).gpus(2, "H100-80GB").build();
    let mut w = world(
        "partita",
        st,
        &[team("a").guarantee(2).burst(3), team("c").burst(2)],
    );
    w.running(job("first").team("a").gpus(1), 0, 0, &["n1:0"]);
    w.running(
        job("borrow").team("c").best_effort().gpus(1),
        0,
        0,
        &["n1:1"],
    );
    w.submit(&[job("gang").team("a").gang(2).gpus(1).submitted(HOUR)]);
    assert!(
        w.cycle().preemptions.is_empty(),
        "victims for a borrowing gang"
    );
    w.at(HOUR + 10 * SECOND).finish("first");
    w.at(HOUR + 20 * SECOND);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d),
        ["borrow"],
        "gang waits {}",
        reason_of(&d, "gang")
    );
}

/// Sixteen 3g.40gb replicas of team s's chat services on n1's eight GPUs.
fn chat_on_n1(w: &mut World) {
    for g in 0..8 {
        for at in ["0", "4"] {
            w.running_slice(
                job(&format!("chat-{g}{at}"))
                    .team("s")
                    .production()
                    .mig_profile("3g.40gb"),
                &format!("n1:{g}:3g.40gb@{at}"),
            );
        }
    }
}

#[test]
fn a_claim_takes_the_room_it_evicted_for_before_its_victims_return() {
    // n1's GPUs are split 3g.40gb + 3g.40gb and run sixteen replicas of
    // team s's chat services; s is owed 4 GPUs. n2 (L40S, no MIG) runs
    // team c's work on GPUs 0-3 and has 4 free. Team r is owed 8 and asks
    // for one 8-GPU task: only n1 can hold it. The task, holding n1, goes
    // first: it turns n1's GPUs whole before the services can start again
    // on the instances they left.
    let st = fleet()
        .nodes(1)
        .gpus(8, "H100-80GB")
        .layout("3g.40gb@0,3g.40gb@4")
        .nodes(1)
        .gpus(8, "L40S")
        .build();
    let mut w = world(
        "partita",
        st,
        &[
            team("r").guarantee(8).burst(16),
            team("s").guarantee(4).burst(16),
            team("c").guarantee(4).burst(16),
        ],
    );
    chat_on_n1(&mut w);
    w.running(job("c-train").team("c").gpus(4), 0, 0, &["n2:0,1,2,3"]);
    w.submit(&[job("tune").team("r").gpus(8).submitted(HOUR)]);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d).len(),
        16,
        "tune waits {}",
        reason_of(&d, "tune")
    );

    w.at(HOUR + 30 * SECOND).release();
    let d = w.cycle();
    for s in &d.starts {
        assert_ne!(
            s.assignment.node, "n1",
            "after the release, {} started on n1",
            s.job
        );
    }
    let whole = d
        .reconfigs
        .iter()
        .filter(|rc| rc.node == "n1" && !rc.mig && rc.for_job == "tune")
        .count();
    assert_eq!(
        whole,
        8,
        "n1's GPUs turned whole for tune: {:?}; tune waits {}",
        d.reconfigs,
        reason_of(&d, "tune")
    );
}

#[test]
fn a_claim_clears_a_node_whose_gpus_are_all_mig() {
    // Each GPU of n1 runs two 3g.40gb replicas: 3/7 of a GPU each, 428
    // milli rounded down, with 1/7 free. The victims' milli and the free
    // milli must add up to 8 whole GPUs, or the search never tries the
    // node.
    let st = fleet()
        .nodes(1)
        .gpus(8, "H100-80GB")
        .layout("3g.40gb@0,3g.40gb@4")
        .build();
    let mut w = world(
        "partita",
        st,
        &[team("r").guarantee(8).burst(8), team("s").burst(8)],
    );
    chat_on_n1(&mut w);
    w.submit(&[job("tune").team("r").gpus(8).submitted(HOUR)]);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d).len(),
        16,
        "tune waits {}",
        reason_of(&d, "tune")
    );
}

/// A team with no Team entry has no guarantee, so it never borrows and
/// nothing reclaims from it; only production within its own team's
/// guarantee evicts its lower-class work.
#[test]
fn work_of_a_team_not_configured_is_evicted_only_for_production() {
    for (name, pending, id, evicts) in [
        (
            "best-effort within its guarantee waits",
            job("notebook").team("a").best_effort().gpus(1),
            "notebook",
            false,
        ),
        (
            "batch within its guarantee waits",
            job("train").team("a").gpus(1),
            "train",
            false,
        ),
        (
            "production within its guarantee evicts",
            job("serve").team("a").production().gpus(1),
            "serve",
            true,
        ),
    ] {
        let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
        let sch = new_scheduler("partita", &st);
        let mut w = new_world(st, sch, &[team("a").guarantee(4).burst(8)]);
        w.running(
            job("ghost-work").team("ghost").best_effort().gpus(8),
            0,
            0,
            &["n1:0,1,2,3,4,5,6,7"],
        );
        w.submit(&[pending]);
        let d = w.decide();
        let got = victims_of(&d);
        if evicts {
            assert_eq!(
                got,
                ["ghost-work"],
                "{name}: {id} waits {}",
                reason_of(&d, id)
            );
        } else {
            assert!(got.is_empty(), "{name}: evicted {got:?}");
        }
    }
}

/// A service needs a 1g.20gb where the only evictable work holds a
/// 2g.20gb. Once that work is gone its free instance is of the wrong
/// profile, but `mig_for` replaces free instances: the search counts the
/// room (`drop_free`) unless the GPU changed within the claim's cooldown.
#[test]
fn a_victims_instance_of_another_profile_counts_as_room() {
    for (name, changed, evicts) in [
        ("a GPU never changed", 0, true),
        ("a GPU changed two minutes ago", 2 * MINUTE, true),
        ("a GPU changed 30 s ago", 30 * SECOND, false),
    ] {
        let st = fleet()
            .nodes(1)
            .gpus(1, "H100-80GB")
            .layout("2g.20gb@0,2g.20gb@2,3g.40gb@4")
            .build();
        let mut w = world(
            "partita",
            st,
            &[
                team("search").guarantee(4).burst(8),
                team("ads").guarantee(1).burst(8),
                team("research").burst(8),
            ],
        );
        w.running_slice(
            job("notebook")
                .team("research")
                .best_effort()
                .mig_profile("2g.20gb"),
            "n1:0:2g.20gb@0",
        );
        w.running_slice(
            job("rerank")
                .team("search")
                .production()
                .mig_profile("2g.20gb"),
            "n1:0:2g.20gb@2",
        );
        w.running_slice(
            job("chat")
                .team("search")
                .production()
                .mig_profile("3g.40gb"),
            "n1:0:3g.40gb@4",
        );
        if changed > 0 {
            w.sch.set_last_change("n1", 0, HOUR - changed);
        }
        w.submit(&[job("transcribe")
            .team("ads")
            .production()
            .mig_profile("1g.20gb")
            .submitted(HOUR)]);
        let d = w.decide();
        let got = victims_of(&d);
        if evicts {
            assert_eq!(
                got,
                ["notebook"],
                "{name}: transcribe waits {}",
                reason_of(&d, "transcribe")
            );
        } else {
            assert!(got.is_empty(), "{name}: evicted {got:?}");
        }
    }
}

/// How long a's claim waits before b's service, 1 GPU over b's guarantee
/// and 3 under, is evicted for it; none when it is not.
fn straddle_after(claim: JobBuilder, tweak: impl FnOnce(&mut Config)) -> Option<Nanos> {
    let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
    let sch = new_scheduler_with("partita", &st, 1, tweak);
    let mut w = new_world(
        st,
        sch,
        &[
            team("a").guarantee(4).burst(4),
            team("b").guarantee(3).burst(8),
        ],
    );
    w.at(HOUR);
    w.running(
        job("b-serve").team("b").production().gpus(4),
        0,
        0,
        &["n1:0,1,2,3"],
    );
    w.submit(&[claim.submitted(HOUR)]);
    let (waited, d) = first_victims(&mut w, 4 * MINUTE)?;
    assert_eq!(victims_of(&d), ["b-serve"]);
    assert!(
        d.preemptions[0]
            .reason
            .contains("team a reclaims its guarantee"),
        "{:?}",
        d.preemptions[0]
    );
    Some(waited)
}

#[test]
fn an_owed_claim_reclaims_from_production_that_straddles_its_teams_guarantee() {
    assert_eq!(
        straddle_after(job("a-job").team("a").gpus(2), |_| {}),
        Some(2 * MINUTE),
        "batch claim"
    );
    assert_eq!(
        straddle_after(job("a-job").team("a").best_effort().gpus(2), |_| {}),
        Some(2 * MINUTE),
        "best-effort claim"
    );
    assert_eq!(
        straddle_after(job("a-serve").team("a").production().gpus(2), |_| {}),
        None,
        "a production claim evicted another team's production within its guarantee"
    );
    assert_eq!(
        straddle_after(job("a-job").team("a").gpus(2), |c| c
            .reclaim_straddling_after =
            0),
        None,
        "without reclaim_straddling_after"
    );
}

/// A whole-GPU claim on a node of MIG GPUs evicts, of the victims within
/// their team's guarantee, only those on the GPU it turns whole; borrowed
/// ones go all the same.
#[test]
fn a_whole_gpu_claim_evicts_only_the_notebooks_of_the_gpu_it_turns() {
    for (nb_team, want) in [("a", vec!["nb-mid"]), ("b", vec!["nb-mid", "nb-new"])] {
        let st = fleet().nodes(1).gpus(4, "H100-80GB").mig().build();
        let sch = new_scheduler("partita", &st);
        let mut w = new_world(
            st,
            sch,
            &[team("a").guarantee(4).burst(4), team("b").burst(4)],
        );
        w.mig_off("n1", &[2, 3]);
        w.running(job("a-busy").team("a").gpus(2), 0, 0, &["n1:2,3"]);
        w.at(10 * MINUTE).running_slice(
            job("nb-old")
                .team(nb_team)
                .best_effort()
                .mig_profile("1g.10gb"),
            "n1:0:1g.10gb@6",
        );
        w.at(20 * MINUTE).running_slice(
            job("nb-mid")
                .team(nb_team)
                .best_effort()
                .mig_profile("1g.10gb"),
            "n1:1:1g.10gb@6",
        );
        w.at(30 * MINUTE).running_slice(
            job("nb-new")
                .team(nb_team)
                .best_effort()
                .mig_profile("1g.10gb"),
            "n1:0:1g.10gb@5",
        );
        w.submit(&[job("claim").team("a").gpus(1).submitted(HOUR)]);
        w.at(HOUR);
        let d = w.decide();
        assert_eq!(
            victims_of(&d),
            want,
            "notebooks of {nb_team}: claim waits {}",
            reason_of(&d, "claim")
        );
    }
}

#[test]
fn may_preempt_remembers_by_team_class_and_standing() {
    // Every team, class and standing asked in one cycle, twice, must get
    // the answer a cycle asked only that gives.
    let st = fleet().nodes(2).gpus(8, "H100-80GB").build();
    let mut w = world(
        "partita",
        st,
        &[
            team("a").guarantee(4),
            team("b").guarantee(4).burst(12),
            team("c").guarantee(8),
        ],
    );
    w.running(
        job("a-scavenge").team("a").best_effort().gpus(2),
        0,
        0,
        &["n1:0,1"],
    );
    w.running(
        job("b-borrow").team("b").gpus(8),
        0,
        0,
        &["n2:0,1,2,3,4,5,6,7"],
    );
    w.running(
        job("c-serve").team("c").production().gpus(2),
        0,
        0,
        &["n1:2,3"],
    );
    let mut probes: Vec<Job> = Vec::new();
    for tm in ["a", "b", "c", "x"] {
        for b in [job("").best_effort(), job(""), job("").production()] {
            for size in [1, 12] {
                let mut j = b.clone().team(tm).gpus(size).submitted(HOUR).build();
                j.spec.id = format!("{tm}-{}-{size}", j.spec.class);
                probes.push(j);
            }
        }
    }
    let mut refs: Vec<&Job> = w.jobs.iter().collect();
    refs.extend(probes.iter());
    let input = Input::new(w.now, &w.st, &w.teams, &refs);
    let mut fresh = BTreeMap::new();
    for p in &probes {
        let mut c = w.sch.snapshot(&input);
        let p = refs
            .iter()
            .copied()
            .find(|j| std::ptr::eq(*j, p))
            .expect("probe");
        fresh.insert(p.id().to_string(), w.sch.may_preempt(&mut c, p));
    }
    let mut c = w.sch.snapshot(&input);
    let mut seen = BTreeMap::new();
    for round in 0..2 {
        for k in 0..probes.len() {
            let p = &probes[(k * 7 + round) % probes.len()];
            let p = refs
                .iter()
                .copied()
                .find(|j| std::ptr::eq(*j, p))
                .expect("probe");
            assert_eq!(
                w.sch.may_preempt(&mut c, p),
                fresh[p.id()],
                "round {round}: may_preempt({})",
                p.id()
            );
            *seen.entry(fresh[p.id()]).or_insert(0) += 1;
        }
    }
    assert!(seen.len() == 2, "answers {seen:?}: the test needs both");
}
