//! A gang's reservation and backfill (Go's `reserve_test.go`).

use std::collections::BTreeSet;

use super::helpers::{
    JobBuilder, TeamBuilder, World, fleet, job, new_scheduler, new_world, nodes_of, reason_of,
    started_jobs, starts_of, team,
};
use crate::sched::{HOUR, MINUTE, SECOND, WaitReason};

/// Three nodes of 4 GPUs. r1 holds all of n1 until 3h, r2 2 GPUs of n2
/// until 2h, r3 2 GPUs of n3 until 1h. gang needs two tasks of 3 GPUs, so
/// it fits nowhere; it was submitted at 0.
fn reservation_world(teams: &[TeamBuilder]) -> World {
    let st = fleet().nodes(3).gpus(4, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, teams);
    w.running(
        job("r1").team("b").gpus(4).estimate(3 * HOUR),
        0,
        0,
        &["n1:0,1,2,3"],
    );
    w.running(
        job("r2").team("b").gpus(2).estimate(2 * HOUR),
        0,
        0,
        &["n2:0,1"],
    );
    w.running(
        job("r3").team("b").gpus(2).estimate(HOUR),
        0,
        0,
        &["n3:0,1"],
    );
    w.submit(&[job("gang").team("b").gang(2).gpus(3)]);
    w
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_gang_reserves_nodes_after_waiting_reserve_after() {
    let mut w = reservation_world(&[]);
    // Before reserve_after (10m) nothing is held: a small job starts on
    // the free GPUs of n2 or n3.
    w.submit(&[job("early").gpus(1).submitted(MINUTE)]);
    w.at(9 * MINUTE + 59 * SECOND);
    let d = w.cycle();
    assert_eq!(started_jobs(&d), ["early"]);
    assert!(
        w.sch.reservation.is_none(),
        "a reservation before reserve_after"
    );
    w.finish("early");

    w.at(10 * MINUTE);
    let d = w.cycle();
    let r = w.sch.reservation.as_ref().unwrap_or_else(|| {
        panic!(
            "t=10m: no reservation; gang waits {}",
            reason_of(&d, "gang")
        )
    });
    // Nodes by when their work ends: n3 (1h) and n2 (2h) cover 6 GPUs.
    assert_eq!(
        (r.job.as_str(), &r.nodes, r.ready_at),
        ("gang", &set(&["n2", "n3"]), 2 * HOUR)
    );
    assert_eq!(reason_of(&d, "gang"), WaitReason::Gang.as_str());
}

#[test]
fn reservation_refuses_later_work_unless_it_ends_first() {
    let cases: Vec<(&str, Vec<TeamBuilder>, JobBuilder, bool)> = vec![
        (
            "a batch job without an estimate is refused",
            vec![],
            job("new").team("b"),
            false,
        ),
        (
            "a batch job that ends before the gang can start backfills",
            vec![],
            job("new").team("b").estimate(HOUR),
            true,
        ),
        (
            "a batch job that would end after the gang could start is refused",
            vec![],
            job("new").team("b").estimate(2 * HOUR),
            false,
        ),
        (
            "a best-effort job is refused",
            vec![],
            job("new").team("b").best_effort(),
            false,
        ),
        (
            "a production job is not blocked",
            vec![],
            job("new").team("b").production(),
            true,
        ),
        (
            "a job within its team's guarantee is not blocked by a borrower's gang",
            vec![team("a").guarantee(4).burst(4), team("b").burst(32)],
            job("new").team("a"),
            true,
        ),
        (
            // A reservation drains for hours: the team's own claims keep
            // what it is owed meanwhile.
            "a job within its team's guarantee is not blocked by its own team's gang beyond it",
            vec![team("b").guarantee(10).burst(32)],
            job("new").team("b").best_effort(),
            true,
        ),
        (
            "production beyond its team's guarantee is blocked by a gang within its guarantee",
            vec![team("a").burst(4), team("b").guarantee(32).burst(32)],
            job("new").team("a").production(),
            false,
        ),
    ];
    for (name, teams, new_job, starts) in cases {
        let mut w = reservation_world(&teams);
        w.at(10 * MINUTE);
        w.cycle();
        assert!(w.sch.reservation.is_some(), "{name}: no reservation at 10m");
        w.submit(&[new_job.submitted(11 * MINUTE)]);
        w.at(11 * MINUTE);
        let d = w.cycle();
        if !starts {
            assert!(
                d.starts.is_empty(),
                "{name}: started {:?} on reserved nodes",
                started_jobs(&d)
            );
            assert_eq!(
                reason_of(&d, "new"),
                WaitReason::Reserved.as_str(),
                "{name}"
            );
            continue;
        }
        let s = starts_of(&d, "new");
        assert!(
            s.len() == 1 && (s[0].assignment.node == "n2" || s[0].assignment.node == "n3"),
            "{name}: new starts {s:?}, want one start on n2 or n3; it waits {}",
            reason_of(&d, "new")
        );
    }
}

#[test]
fn nothing_backfills_when_the_reserved_nodes_run_work_without_estimate() {
    let st = fleet().nodes(2).gpus(4, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.running(job("r1").gpus(2), 0, 0, &["n1:0,1"]);
    w.running(job("r2").gpus(2), 0, 0, &["n2:0,1"]);
    w.submit(&[job("gang").gang(2).gpus(3)]);
    w.at(10 * MINUTE);
    w.cycle();
    assert_eq!(
        w.sch.reservation.as_ref().map(|r| r.ready_at),
        Some(0),
        "want a reservation with ready_at 0 (unknown)"
    );
    w.submit(&[job("short").estimate(MINUTE).submitted(11 * MINUTE)]);
    w.at(11 * MINUTE);
    let d = w.cycle();
    assert_eq!(reason_of(&d, "short"), WaitReason::Reserved.as_str());
}

#[test]
fn the_gang_starts_when_its_nodes_drain_and_frees_the_reservation() {
    let mut w = reservation_world(&[]);
    w.at(10 * MINUTE);
    w.cycle();
    w.at(HOUR).finish("r3");
    let d = w.cycle();
    assert!(
        d.starts.is_empty(),
        "t=1h: started {:?} with n2 still busy",
        started_jobs(&d)
    );
    w.at(2 * HOUR).finish("r2");
    let d = w.cycle();
    assert_eq!(nodes_of(&starts_of(&d, "gang")), ["n2", "n3"]);
    assert!(
        w.sch.reservation.is_none(),
        "reservation kept after the gang started"
    );
    // Nothing is held any more: a small job takes a GPU left free.
    w.submit(&[job("after").gpus(1).submitted(2 * HOUR)]);
    let d = w.cycle();
    assert_eq!(
        starts_of(&d, "after").len(),
        1,
        "after waits {}",
        reason_of(&d, "after")
    );
}

#[test]
fn reservation_is_dropped_when_the_gang_leaves() {
    let mut w = reservation_world(&[]);
    w.at(10 * MINUTE);
    w.cycle();
    w.finish("gang");
    w.submit(&[job("small").submitted(11 * MINUTE)]);
    w.at(11 * MINUTE);
    let d = w.cycle();
    assert_eq!(
        starts_of(&d, "small").len(),
        1,
        "small waits {}",
        reason_of(&d, "small")
    );
    assert!(w.sch.reservation.is_none());
}

#[test]
fn backfill_is_judged_per_job_not_per_shape() {
    let mut w = reservation_world(&[]);
    w.at(10 * MINUTE);
    w.cycle();
    w.submit(&[
        job("long")
            .team("b")
            .estimate(3 * HOUR)
            .submitted(11 * MINUTE),
        job("short").team("b").estimate(HOUR).submitted(12 * MINUTE),
    ]);
    w.at(12 * MINUTE);
    let d = w.cycle();
    assert_eq!(reason_of(&d, "long"), WaitReason::Reserved.as_str());
    assert_eq!(
        started_jobs(&d),
        ["short"],
        "short waits {}",
        reason_of(&d, "short")
    );
}
