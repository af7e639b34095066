//! Light and full cycles, validation, jobs rebuilt under their ID, what
//! the scheduler keeps (Go's `cycle_test.go`).

use super::helpers::{
    fleet, job, new_scheduler, new_world, nodes_of, reason_of, started_jobs, starts_of, team,
};
use crate::sched::{HOUR, INVALID_SPEC, Input, Job, MINUTE, Phase, SECOND, Wait, WaitReason};

#[test]
fn light_cycle_considers_only_the_jobs_named() {
    // Two free GPUs. old (2 GPUs) would go first in a full cycle; a light
    // cycle for fresh leaves it alone.
    let st = fleet().nodes(1).gpus(2, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("old").gpus(2), job("fresh").gpus(1).submitted(MINUTE)]);
    let d = w.light(&["fresh"]);
    assert_eq!(started_jobs(&d), ["fresh"]);
    assert!(
        !d.waiting.contains_key("old"),
        "old, not named, is in waiting"
    );
    // A full cycle now finds old waiting, with its position.
    let d = w.cycle();
    assert_eq!(
        d.waiting.get("old"),
        Some(&Wait {
            position: 1,
            reason: WaitReason::NoRoom
        })
    );
}

#[test]
fn a_full_cycle_gives_its_waiting_in_the_list_given() {
    // One GPU, three jobs of one: two wait. The list given holds a stale
    // entry, which must go; a light cycle leaves the list alone.
    let jobs = [
        job("a"),
        job("b").submitted(MINUTE),
        job("c").submitted(2 * MINUTE),
    ];
    let st = fleet().nodes(1).gpus(1, "H100-80GB").build();
    let want = {
        let sch = new_scheduler("partita", &st);
        let mut w = new_world(st.clone(), sch, &[]);
        w.submit(&jobs);
        w.decide().decision.waiting
    };
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&jobs);
    let given = vec![(
        9,
        Wait {
            position: 9,
            reason: WaitReason::Quota,
        },
    )];
    let refs: Vec<&Job> = w.jobs.iter().collect();
    let only = ["c".to_string()];
    let mut light = Input::new(w.now, &w.st, &w.teams, &refs);
    light.only = Some(&only);
    light.waiting = Some(given);
    w.sch.cycle(&mut light);
    let given = light
        .waiting
        .take()
        .expect("a light cycle leaves the list given");
    assert_eq!(
        given.len(),
        1,
        "a light cycle changed the list given: {given:?}"
    );
    let mut given = given;
    given.reserve(1000);
    let capacity = given.capacity();
    let mut full = Input::new(w.now, &w.st, &w.teams, &refs);
    full.waiting = Some(given);
    let d = w.sch.cycle(&mut full);
    assert!(full.waiting.is_none(), "the cycle takes the list given");
    assert_eq!(d.waiting, want);
    assert_eq!(d.waiting.len(), 2);
    let ids: Vec<&str> = d.waiting.iter().map(|(i, _)| refs[*i].id()).collect();
    assert_eq!(ids, ["b", "c"], "the waits name the input's jobs");
    assert!(
        d.waiting.capacity() >= capacity,
        "the decision's waiting is not the list given"
    );
}

#[test]
fn light_cycle_keeps_the_order_given_and_sets_no_positions() {
    // One free GPU; b is named first, so b gets it, though a is older.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("a"), job("b").submitted(MINUTE)]);
    let d = w.light(&["b", "a", "unknown"]);
    assert_eq!(started_jobs(&d), ["b"]);
    assert_eq!(
        d.waiting.get("a"),
        Some(&Wait {
            position: 0,
            reason: WaitReason::NoRoom
        })
    );
    assert_eq!(d.waiting.len(), 1, "waiting = {:?}, want only a", d.waiting);
}

#[test]
fn light_cycle_starts_a_job_named_twice_once() {
    let st = fleet().nodes(2).gpus(1, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("b")]);
    let refs: Vec<&Job> = w.jobs.iter().collect();
    let only = ["b".to_string(), "b".to_string()];
    let mut input = Input::new(0, &w.st, &[], &refs);
    input.only = Some(&only);
    let d = w.sch.cycle(&mut input);
    assert_eq!(starts_of(&d, "b").len(), 1, "b, one task: {:?}", d.starts);
    assert!(
        !d.waits_by_id(&refs).contains_key("b"),
        "b both starts and waits"
    );
}

#[test]
fn light_cycle_ignores_jobs_not_pending() {
    let st = fleet().nodes(1).gpus(2, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.running(job("runs"), 0, 0, &["n1:0"]);
    let d = w.light(&["runs"]);
    assert!(
        d.starts.is_empty() && d.waiting.is_empty(),
        "a light cycle for a running job: {d:?}"
    );
}

#[test]
fn invalid_jobs_wait_with_the_validation_message() {
    let cases = [
        (
            job("big").gpus(9),
            "big",
            format!(
                "{INVALID_SPEC}: job big: task big/0: asks for 9 GPUs but the largest node has 8 (H100-80GB)"
            ),
        ),
        (
            job("odd").mig_profile("1g.5gb"),
            "odd",
            format!(
                "{INVALID_SPEC}: job odd: task odd/0: mig profile \"1g.5gb\": no GPU in the cluster offers it"
            ),
        ),
        (
            job("huge").gpu_memory(200 * 1024, 0.5),
            "huge",
            format!(
                "{INVALID_SPEC}: job huge: task huge/0: gpu memory: peak 204800 MiB is more than the largest GPU has (81920 MiB)"
            ),
        ),
    ];
    for (b, id, want) in &cases {
        for preset in ["naive", "gang-drf", "partita"] {
            let st = fleet().nodes(2).gpus(8, "H100-80GB").build();
            let sch = new_scheduler(preset, &st);
            let mut w = new_world(st, sch, &[]);
            w.submit(&[b.clone(), job("fine").gpus(8).submitted(MINUTE)]);
            for cycle in 1..=2 {
                w.at(cycle * MINUTE);
                let d = w.cycle();
                let got = reason_of(&d, id);
                assert!(
                    got.starts_with(want.as_str()),
                    "{preset}: cycle {cycle}: {id} waits {got:?}, want {want:?}"
                );
                assert!(
                    d.reconfigs.is_empty()
                        && d.preemptions.is_empty()
                        && starts_of(&d, id).is_empty(),
                    "{preset}: cycle {cycle}: the invalid job caused {d:?}"
                );
            }
            assert_eq!(
                w.job("fine").phase,
                Phase::Running,
                "{preset}: the valid job behind it"
            );
        }
    }
}

#[test]
fn a_job_rebuilt_under_its_id_is_seen_afresh() {
    // A world may rebuild a job under the same ID with other tasks (a
    // Kubernetes PodGroup deleted and created again). x first asks for 4
    // GPUs where 2 are free; rebuilt to ask for 1, it starts on 1.
    let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.running(job("busy").gpus(2), 0, 0, &["n1:0,1"]);
    w.submit(&[job("x").gpus(4)]);
    assert!(
        starts_of(&w.cycle(), "x").is_empty(),
        "x (4 GPUs) started with 2 free"
    );
    *w.job_mut("x") = job("x").gpus(1).build();
    w.at(MINUTE);
    let d = w.cycle();
    let starts = starts_of(&d, "x");
    assert!(
        starts.len() == 1 && starts[0].assignment.grants.len() == 1,
        "rebuilt x: starts {starts:?}, want one task on 1 GPU"
    );
}

#[test]
fn an_invalid_job_rebuilt_valid_runs() {
    // x asks for 9 GPUs on a 4-GPU node: it can never run, and says so.
    // Rebuilt under the same ID asking for 2, it starts.
    let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("x").gpus(9)]);
    let got = reason_of(&w.cycle(), "x");
    assert!(got.starts_with(INVALID_SPEC), "x (9 GPUs) waits {got:?}");
    *w.job_mut("x") = job("x").gpus(2).build();
    w.at(MINUTE);
    assert_eq!(
        starts_of(&w.cycle(), "x").len(),
        1,
        "rebuilt x (2 GPUs) did not start"
    );
}

#[test]
fn validation_follows_the_nodes() {
    // On 4-GPU nodes a job of 8 GPUs can never run. When the world's
    // nodes change (a Kubernetes node joins), the same scheduler
    // validates new jobs against the new nodes.
    let small = fleet().nodes(1).gpus(4, "H100-80GB").build();
    let sch = new_scheduler("partita", &small);
    let mut w = new_world(small, sch, &[]);
    w.submit(&[job("x").gpus(8)]);
    let got = reason_of(&w.cycle(), "x");
    assert!(
        got.starts_with(INVALID_SPEC),
        "x (8 GPUs on 4-GPU nodes) waits {got:?}"
    );
    let big = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let sch = std::mem::replace(&mut w.sch, new_scheduler("naive", &big));
    let mut w2 = new_world(big, sch, &[]);
    w2.at(MINUTE);
    w2.submit(&[job("y").gpus(8)]);
    assert_eq!(
        starts_of(&w2.cycle(), "y").len(),
        1,
        "y (8 GPUs on an 8-GPU node) did not start"
    );
}

#[test]
fn caches_stay_bounded_when_jobs_are_rebuilt_each_cycle() {
    // The Kubernetes world builds every Job anew for each cycle; what the
    // scheduler keeps per job must not grow with the number of cycles.
    let st = fleet().nodes(2).gpus(8, "H100-80GB").build();
    let mut sch = new_scheduler("partita", &st);
    const JOBS: usize = 10;
    for cycle in 0..300 {
        let mut w = new_world(st.clone(), sch, &[]);
        w.at(cycle * SECOND);
        for i in 0..JOBS {
            let at = format!("n{}:{}", 1 + i % 2, i / 2);
            w.running(
                job(&format!("j{i}")).team("a").gpus(1),
                0,
                0,
                &[at.as_str()],
            );
        }
        w.decide();
        let (got, limit) = (w.sch.table.ids.len(), 3 * JOBS + 1024);
        assert!(
            got <= limit,
            "cycle {cycle}: {got} entries kept for {JOBS} jobs (limit {limit})"
        );
        sch = w.sch;
    }
}

#[test]
fn changes_asked_for_jobs_gone_are_forgotten() {
    // Each cycle a new service asks for a GPU turned to MIG and is
    // cancelled before the next: what the scheduler keeps of the changes
    // asked must not grow with the jobs that asked them.
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let mut sch = new_scheduler("partita", &st);
    for cycle in 0..600 {
        let mut w = new_world(st.clone(), sch, &[]);
        w.at(cycle * HOUR);
        let now = w.now;
        w.submit(&[job(&format!("svc-{cycle}"))
            .production()
            .gpu_memory(8000, 0.1)
            .submitted(now)]);
        let d = w.decide();
        assert_eq!(
            d.reconfigs.len(),
            1,
            "cycle {cycle}: reconfigs {:?}, want one for the service",
            d.reconfigs
        );
        sch = w.sch;
    }
    let kept = sch
        .table
        .entries
        .iter()
        .enumerate()
        .filter(|(s, e)| sch.table.in_use(*s) && !e.memory.awaiting.is_empty())
        .count();
    assert!(
        kept <= 256,
        "changes kept for {kept} jobs after 600 cycles, each job gone after one"
    );
}

#[test]
fn queue_positions_count_per_team_including_teams_not_in_the_input() {
    // One GPU: a1 takes it. Positions count each team's waiting jobs in
    // order, the started one not counted; team x is not in the input.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(
        st,
        sch,
        &[
            team("a").guarantee(1).burst(1),
            team("b").guarantee(1).burst(1),
        ],
    );
    w.submit(&[
        job("a1").team("a"),
        job("a2").team("a").submitted(SECOND),
        job("a3").team("a").submitted(2 * SECOND),
        job("b1").team("b").submitted(3 * SECOND),
        job("x1").team("x").submitted(4 * SECOND),
        job("x2").team("x").submitted(5 * SECOND),
    ]);
    let d = w.cycle();
    assert_eq!(started_jobs(&d), ["a1"]);
    for (id, pos) in [("a2", 1), ("a3", 2), ("b1", 1), ("x1", 1), ("x2", 2)] {
        assert_eq!(d.waiting[id].position, pos, "{id}: {:?}", d.waiting[id]);
    }
    let _ = nodes_of(&starts_of(&d, "a1"));
}
