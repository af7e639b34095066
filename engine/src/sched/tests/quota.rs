//! Quotas: guarantees, bursts, a gang holding its team's quota, the
//! production reserve (Go's `quota_test.go`).

use super::helpers::{
    JobBuilder, TeamBuilder, World, fleet, hold_gpus, job, new_scheduler, new_scheduler_with,
    new_world, reason_of, started_jobs, starts_of, team,
};
use crate::sched::{HOUR, MINUTE, Nanos, SECOND, Wait, WaitReason};

#[test]
fn quotas() {
    struct Case {
        name: &'static str,
        preset: &'static str,
        teams: Vec<TeamBuilder>,
        holding: Vec<(&'static str, usize)>,
        pending: JobBuilder,
        id: &'static str,
        starts: bool,
    }
    let cases = vec![
        Case {
            name: "naive refuses a job beyond the guarantee even below the burst",
            preset: "naive",
            teams: vec![team("a").guarantee(2).burst(4)],
            holding: vec![],
            pending: job("big").team("a").gpus(3),
            id: "big",
            starts: false,
        },
        Case {
            name: "naive counts what the team holds already",
            preset: "naive",
            teams: vec![team("a").guarantee(2).burst(4)],
            holding: vec![("a", 2)],
            pending: job("one-more").team("a").gpus(1),
            id: "one-more",
            starts: false,
        },
        Case {
            name: "naive starts a job that fills the guarantee exactly",
            preset: "naive",
            teams: vec![team("a").guarantee(2).burst(4)],
            holding: vec![("a", 1)],
            pending: job("fills").team("a").gpus(1),
            id: "fills",
            starts: true,
        },
        Case {
            name: "partita lends beyond the guarantee up to the burst",
            preset: "partita",
            teams: vec![team("a").guarantee(2).burst(4)],
            holding: vec![("a", 1)],
            pending: job("borrows").team("a").gpus(3),
            id: "borrows",
            starts: true,
        },
        Case {
            name: "partita refuses beyond the burst",
            preset: "partita",
            teams: vec![team("a").guarantee(2).burst(4)],
            holding: vec![("a", 2)],
            pending: job("too-big").team("a").gpus(3),
            id: "too-big",
            starts: false,
        },
        Case {
            name: "gang-drf refuses beyond the burst",
            preset: "gang-drf",
            teams: vec![team("a").guarantee(2).burst(4)],
            holding: vec![],
            pending: job("too-big").team("a").gang(5).gpus(1),
            id: "too-big",
            starts: false,
        },
        Case {
            name: "a burst below the guarantee still allows the guarantee",
            preset: "partita",
            teams: vec![team("a").guarantee(3).burst(1)],
            holding: vec![],
            pending: job("guaranteed").team("a").gpus(3),
            id: "guaranteed",
            starts: true,
        },
        Case {
            name: "a team without a Team entry has no quota under naive",
            preset: "naive",
            teams: vec![team("a").guarantee(1).burst(1)],
            holding: vec![],
            pending: job("unlisted").team("ghost").gpus(8),
            id: "unlisted",
            starts: true,
        },
        Case {
            name: "a team without a Team entry has no quota under partita",
            preset: "partita",
            teams: vec![team("a").guarantee(1).burst(1)],
            holding: vec![],
            pending: job("unlisted").team("ghost").gang(6).gpus(1),
            id: "unlisted",
            starts: true,
        },
    ];
    for tc in cases {
        let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
        let sch = new_scheduler(tc.preset, &st);
        let mut w = new_world(st, sch, &tc.teams);
        hold_gpus(&mut w, &tc.holding);
        w.submit(&[tc.pending]);
        let d = w.decide();
        if tc.starts {
            assert_eq!(
                started_jobs(&d),
                [tc.id],
                "{}: {} waits {}",
                tc.name,
                tc.id,
                reason_of(&d, tc.id)
            );
            continue;
        }
        assert!(
            d.starts.is_empty(),
            "{}: started {:?}",
            tc.name,
            started_jobs(&d)
        );
        assert_eq!(
            d.waiting.get(tc.id),
            Some(&Wait {
                position: 1,
                reason: WaitReason::Quota
            }),
            "{}",
            tc.name
        );
    }
}

#[test]
fn quota_counts_a_mig_slice_by_its_compute_share() {
    // 3g.40gb is 3/7 of a GPU (428 milli): two fit a guarantee of one GPU,
    // a third does not. (The naive placement only takes instances that
    // exist: there are four.)
    let st = fleet()
        .nodes(1)
        .gpus(2, "H100-80GB")
        .layout("3g.40gb@0,3g.40gb@4")
        .build();
    let sch = new_scheduler("naive", &st);
    let mut w = new_world(st, sch, &[team("a").guarantee(1).burst(1)]);
    w.submit(&[
        job("s1").team("a").mig_profile("3g.40gb"),
        job("s2").team("a").mig_profile("3g.40gb").submitted(1),
        job("s3").team("a").mig_profile("3g.40gb").submitted(2),
    ]);
    let d = w.decide();
    assert_eq!(started_jobs(&d), ["s1", "s2"]);
    assert_eq!(reason_of(&d, "s3"), WaitReason::Quota.as_str());
}

/// Team a may hold 4 GPUs and holds 2 (running); its gang of two 2-GPU
/// tasks, submitted at 0, waits on the quota. The cluster has room: only
/// the quota stands in the way.
fn quota_hold_world(preset: &str) -> World {
    let st = fleet().nodes(2).gpus(8, "H100-80GB").build();
    let sch = new_scheduler(preset, &st);
    let mut w = new_world(
        st,
        sch,
        &[
            team("a").guarantee(4).burst(4),
            team("b").guarantee(4).burst(4),
        ],
    );
    w.running(job("a-running").team("a").gpus(2), 0, 0, &["n1:0,1"]);
    w.submit(&[job("gang").team("a").gang(2).gpus(2)]);
    w
}

#[test]
fn a_gang_waiting_on_its_quota_holds_it() {
    let cases: Vec<(&str, &str, Nanos, JobBuilder, bool)> = vec![
        (
            "before reserve_after a small job of the team takes the quota left",
            "partita",
            9 * MINUTE,
            job("small").team("a"),
            true,
        ),
        (
            "after reserve_after a small job of the team is held back",
            "partita",
            10 * MINUTE,
            job("small").team("a"),
            false,
        ),
        (
            "a best-effort job of the team is held back",
            "partita",
            10 * MINUTE,
            job("small").team("a").best_effort(),
            false,
        ),
        (
            "a production job of the team is not held back",
            "partita",
            10 * MINUTE,
            job("small").team("a").production(),
            true,
        ),
        (
            "another team's job is not held back",
            "partita",
            10 * MINUTE,
            job("small").team("b"),
            true,
        ),
        (
            "without reservations (gang-drf) nothing holds the quota",
            "gang-drf",
            10 * MINUTE,
            job("small").team("a"),
            true,
        ),
    ];
    for (name, preset, at, new_job, starts) in cases {
        // The gang's cycle at `at` comes first (it takes the hold then, if
        // it is due); the small job arrives right after.
        let mut w = quota_hold_world(preset);
        w.at(at);
        w.cycle();
        w.submit(&[new_job.submitted(at)]);
        w.at(at + SECOND);
        let d = w.cycle();
        assert_eq!(reason_of(&d, "gang"), WaitReason::Quota.as_str(), "{name}");
        if starts {
            assert_eq!(
                started_jobs(&d),
                ["small"],
                "{name}: small waits {}",
                reason_of(&d, "small")
            );
        } else {
            assert_eq!(reason_of(&d, "small"), WaitReason::Quota.as_str(), "{name}");
        }
    }
}

#[test]
fn the_quota_hold_ends_when_the_gang_starts() {
    let mut w = quota_hold_world("partita");
    w.at(10 * MINUTE);
    w.cycle();
    w.finish("a-running");
    w.submit(&[job("small").team("a").submitted(11 * MINUTE)]);
    w.at(11 * MINUTE);
    let d = w.cycle();
    assert_eq!(started_jobs(&d), ["gang"]);
    assert_eq!(
        reason_of(&d, "small"),
        WaitReason::Quota.as_str(),
        "the gang fills the quota"
    );
    w.finish("gang");
    w.at(12 * MINUTE);
    let d = w.cycle();
    assert_eq!(
        starts_of(&d, "small").len(),
        1,
        "with the gang gone small waits {}",
        reason_of(&d, "small")
    );
}

#[test]
fn a_gang_beyond_its_teams_limit_does_not_hold_the_quota_for_ever() {
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[team("a").guarantee(4).burst(4)]);
    w.submit(&[
        job("too-big").team("a").gang(5).gpus(1),
        job("small").team("a").submitted(MINUTE),
    ]);
    for now in [10 * MINUTE, HOUR, 24 * HOUR] {
        w.at(now);
        let d = w.decide();
        assert_eq!(
            reason_of(&d, "small"),
            "(not waiting)",
            "t={now}: small (1 GPU; team a holds nothing, may hold 4)"
        );
    }
}

#[test]
fn production_reserve_holds_borrowed_work_only() {
    // Four GPUs, a reserve of two for production. Team a (guarantee 1)
    // runs one GPU; its second best-effort GPU is borrowed and would leave
    // 2 free: allowed; its third would leave 1: held. Team b, within its
    // guarantee, is not held, whatever the class.
    let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
    let sch = new_scheduler_with("partita", &st, 1, |c| c.production_reserve = 2000);
    let mut w = new_world(
        st,
        sch,
        &[
            team("a").guarantee(1).burst(4),
            team("b").guarantee(2).burst(4),
        ],
    );
    w.running(job("a-running").team("a").best_effort(), 0, 0, &["n1:0"]);
    w.submit(&[job("a-borrow-1").team("a").best_effort().submitted(SECOND)]);
    let d = w.cycle();
    assert_eq!(
        started_jobs(&d),
        ["a-borrow-1"],
        "it leaves the reserve of 2 free"
    );
    w.submit(&[job("a-borrow-2")
        .team("a")
        .best_effort()
        .submitted(2 * SECOND)]);
    w.at(MINUTE);
    let d = w.cycle();
    assert_eq!(
        reason_of(&d, "a-borrow-2"),
        WaitReason::ProdReserve.as_str()
    );
    w.submit(&[
        job("b-owed").team("b").best_effort().submitted(3 * SECOND),
        job("b-serve").team("b").production().submitted(4 * SECOND),
    ]);
    w.at(2 * MINUTE);
    let d = w.cycle();
    assert_eq!(
        started_jobs(&d),
        ["b-owed", "b-serve"],
        "claims within the guarantee ignore the reserve"
    );
}

#[test]
fn production_reserve_holds_borrowed_production_on_whole_gpus() {
    // Eight GPUs on two nodes, a reserve of 4. Team a (guarantee 1) runs
    // production on n1's four GPUs; a 4-GPU service would leave no GPU
    // free and is held, while a service on a MIG instance is not.
    let st = fleet().nodes(2).gpus(4, "H100-80GB").mig().build();
    let sch = new_scheduler_with("partita", &st, 1, |c| c.production_reserve = 4000);
    let mut w = new_world(
        st,
        sch,
        &[
            team("a").guarantee(1).burst(8),
            team("b").guarantee(7).burst(8),
        ],
    );
    w.at(HOUR);
    w.mig_off("n1", &[0, 1, 2, 3]).mig_off("n2", &[0, 1, 2]);
    w.running(
        job("a-big").team("a").production().gpus(4),
        0,
        0,
        &["n1:0,1,2,3"],
    );
    w.submit(&[
        job("a-big-2")
            .team("a")
            .production()
            .gpus(4)
            .submitted(HOUR),
        job("a-small")
            .team("a")
            .production()
            .mig_profile("1g.10gb")
            .submitted(HOUR),
    ]);
    let d = w.cycle();
    assert_eq!(
        reason_of(&d, "a-big-2"),
        WaitReason::ProdReserve.as_str(),
        "borrowed production on whole GPUs keeps the reserve"
    );
    assert!(
        started_jobs(&d).contains(&"a-small".to_string()),
        "a-small did not start (waits {}): borrowed production on MIG may use the reserve",
        reason_of(&d, "a-small")
    );
}

/// Naive places a memory profile on a whole GPU (stock Kubernetes counts a
/// pod's nvidia.com/gpu: 1), so its quota counts that GPU, not the
/// profile's share: a team of four GPUs runs one service of three small
/// replicas, not two.
#[test]
fn naive_counts_a_whole_gpu_per_small_replica_against_its_quota() {
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let sch = new_scheduler("naive", &st);
    let mut w = new_world(st, sch, &[team("a").guarantee(4).burst(4)]);
    w.submit(&[job("s1")
        .team("a")
        .production()
        .gpu_memory(10000, 0.1)
        .replicas(3)]);
    assert_eq!(starts_of(&w.cycle(), "s1").len(), 3);
    w.submit(&[job("s2")
        .team("a")
        .production()
        .gpu_memory(10000, 0.1)
        .replicas(3)
        .submitted(MINUTE)]);
    w.at(MINUTE);
    let d = w.cycle();
    assert!(
        started_jobs(&d).is_empty(),
        "started {:?}: s1 holds three of the team's four GPUs",
        started_jobs(&d)
    );
    assert_eq!(reason_of(&d, "s2"), WaitReason::Quota.as_str());
}

/// A gang that asks for more than its team's guarantee can only run on
/// borrowed capacity: holding the quota for it must not keep the team's
/// jobs within the guarantee waiting (`passes_hold`).
#[test]
fn a_borrowing_gang_does_not_hold_its_teams_guarantee() {
    let st = fleet().nodes(2).gpus(8, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(
        st,
        sch,
        &[
            team("a").guarantee(2).burst(8),
            team("b").guarantee(8).burst(8),
        ],
    );
    w.running(job("a-running").team("a").gpus(1), 0, 0, &["n1:0"]);
    w.running(
        job("b-running").team("b").gpus(8),
        0,
        0,
        &["n2:0,1,2,3,4,5,6,7"],
    );
    w.submit(&[job("gang").team("a").gang(2).gpus(4)]);
    w.at(10 * MINUTE);
    w.cycle();
    assert_eq!(w.sch.quota_hold.get("a").map(String::as_str), Some("gang"));
    w.submit(&[
        job("within").team("a").submitted(10 * MINUTE),
        job("beyond").team("a").submitted(10 * MINUTE + SECOND),
    ]);
    w.at(10 * MINUTE + 2 * SECOND);
    let d = w.cycle();
    assert_eq!(
        started_jobs(&d),
        ["within"],
        "within waits {}, beyond waits {}",
        reason_of(&d, "within"),
        reason_of(&d, "beyond")
    );
    assert_eq!(reason_of(&d, "beyond"), WaitReason::Quota.as_str());
}

/// A job of a team whose quota a gang holds starts when, by its estimate,
/// it ends before the team's running work frees the quota for the gang,
/// by theirs (`quota_backfills`).
#[test]
fn a_job_ending_before_the_quota_frees_passes_the_hold() {
    for (name, estimate, starts) in [
        ("ends before the quota frees", HOUR, true),
        (
            "ends as the quota frees",
            2 * HOUR - 10 * MINUTE - SECOND,
            true,
        ),
        ("ends after the quota frees", 2 * HOUR, false),
        ("declares no run time", 0, false),
    ] {
        let st = fleet().nodes(2).gpus(8, "H100-80GB").build();
        let sch = new_scheduler("partita", &st);
        let mut w = new_world(
            st,
            sch,
            &[
                team("a").guarantee(4).burst(4),
                team("b").guarantee(4).burst(4),
            ],
        );
        w.running(
            job("a-running").team("a").gpus(2).estimate(2 * HOUR),
            0,
            0,
            &["n1:0,1"],
        );
        w.submit(&[job("gang").team("a").gang(2).gpus(2)]);
        w.at(10 * MINUTE);
        w.cycle();
        assert_eq!(
            w.sch.quota_hold.get("a").map(String::as_str),
            Some("gang"),
            "{name}"
        );
        w.submit(&[job("small")
            .team("a")
            .estimate(estimate)
            .submitted(10 * MINUTE)]);
        w.at(10 * MINUTE + SECOND);
        let d = w.cycle();
        assert_eq!(
            starts_of(&d, "small").len() == 1,
            starts,
            "{name}: small waits {}",
            reason_of(&d, "small")
        );
        assert_eq!(reason_of(&d, "gang"), WaitReason::Quota.as_str(), "{name}");
    }
}
