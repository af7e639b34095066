//! Dynamic MIG: turning MIG on and off, re-partitioning free regions,
//! cooldowns and backoffs, changes shared by replicas, waiting for the
//! change made for a job (Go's `mig_test.go`).

use std::collections::BTreeSet;

use super::helpers::Decided;
use super::helpers::{
    World, fleet, job, new_scheduler, new_scheduler_with, new_world, reason_of, started_jobs,
    starts_of, team, victims_of,
};
use crate::gpu::Layout;
use crate::sched::mig::CHANGE_WAIT;
use crate::sched::{Config, Decision, HOUR, MINUTE, Reconfig, SECOND, WaitReason};

fn layout(text: &str) -> Layout {
    Layout::parse(text).unwrap_or_else(|e| panic!("layout {text:?}: {e}"))
}

fn has_profile(l: &Layout, profile: &str) -> bool {
    l.iter().any(|p| p.profile == profile)
}

fn whole(node: &str, gpu: usize, for_job: &str) -> Reconfig {
    Reconfig {
        node: node.into(),
        gpu,
        mig: false,
        layout: Layout::new(),
        add: false,
        for_job: for_job.into(),
    }
}

#[test]
fn memory_profile_turns_mig_on_and_starts_on_the_new_instance() {
    // Two whole H100s. infer needs 8000 MiB (+10% headroom: a 1g.10gb);
    // under partita a memory profile takes a MIG instance, and there is
    // none: the scheduler turns MIG on on a GPU.
    let st = fleet().nodes(1).gpus(2, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[
        job("infer").gpu_memory(8000, 0.1),
        job("infer-2").gpu_memory(8000, 0.1).submitted(SECOND),
    ]);

    // Cycle 1: one change per job. The first GPU is cordoned in the plan,
    // so infer-2 does not land on infer's new instance.
    let d = w.cycle();
    assert!(
        d.starts.is_empty(),
        "cycle 1 started {:?} before any MIG instance exists",
        started_jobs(&d)
    );
    assert_eq!(d.reconfigs.len(), 2, "cycle 1: {:?}", d.reconfigs);
    let mut gpus = BTreeSet::new();
    for (rc, want) in d.reconfigs.iter().zip(["infer", "infer-2"]) {
        assert!(
            rc.for_job == want
                && rc.node == "n1"
                && rc.mig
                && rc.layout.len() == 1
                && has_profile(&rc.layout, "1g.10gb"),
            "reconfig {rc:?}, want MIG on n1 with one 1g.10gb for {want}"
        );
        gpus.insert(rc.gpu);
    }
    assert_eq!(gpus.len(), 2, "both reconfigs change the same GPU");
    for id in ["infer", "infer-2"] {
        assert_eq!(
            reason_of(&d, id),
            WaitReason::Reconfig.as_str(),
            "cycle 1: {id}"
        );
    }

    // Cycle 2: the change is still being applied.
    w.at(10 * SECOND);
    let d = w.cycle();
    assert!(
        d.starts.is_empty() && d.reconfigs.is_empty(),
        "cycle 2, GPUs still cordoned: {d:?}"
    );
    assert_eq!(reason_of(&d, "infer"), WaitReason::Reconfig.as_str());

    // Cycle 3: the world finished the change; both start on the new
    // instances.
    w.at(30 * SECOND).uncordon_all();
    let d = w.cycle();
    assert_eq!(started_jobs(&d), ["infer", "infer-2"]);
    for s in &d.starts {
        let g = &s.assignment.grants;
        assert!(
            g.len() == 1
                && g[0].slice.as_ref().is_some_and(|p| p.profile == "1g.10gb")
                && !s.creates,
            "start {s:?}: want the existing 1g.10gb instance"
        );
    }
}

#[test]
fn start_on_a_missing_instance_says_creates() {
    // MIG is on with no instances: the placement creates one.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").mig().build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("infer").mig_profile("3g.40gb")]);
    let d = w.cycle();
    let s = starts_of(&d, "infer");
    assert!(s.len() == 1 && s[0].creates, "starts {s:?}");
    assert!(
        d.reconfigs.iter().all(|rc| rc.for_job != "infer"),
        "a change for a job that fits: {:?}",
        d.reconfigs
    );
}

#[test]
fn reconfig_never_drops_a_busy_instance() {
    // One GPU split 4g+3g; serve holds the 3g. A 2g.20gb fits only if the
    // free 4g goes: the new layout keeps the 3g where it is.
    let st = fleet()
        .nodes(1)
        .gpus(1, "H100-80GB")
        .layout("4g.40gb@0,3g.40gb@4")
        .build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.running_slice(
        job("serve").production().mig_profile("3g.40gb"),
        "n1:0:3g.40gb@4",
    );
    w.submit(&[job("small").mig_profile("2g.20gb")]);
    let d = w.cycle(); // the world fails the test if the layout drops serve's instance
    assert_eq!(d.reconfigs.len(), 1, "{:?}", d.reconfigs);
    let rc = &d.reconfigs[0];
    assert!(
        rc.mig && rc.layout == layout("3g.40gb@4,2g.20gb@2"),
        "reconfig {rc:?}"
    );
    w.at(MINUTE).uncordon_all();
    let d = w.cycle();
    let s = starts_of(&d, "small");
    assert!(
        s.len() == 1
            && s[0].assignment.grants[0]
                .slice
                .as_ref()
                .is_some_and(|p| p.to_string() == "2g.20gb@2"),
        "after the change small starts {s:?}"
    );
}

#[test]
fn a_gpu_changes_at_most_once_per_cooldown() {
    let st = fleet().nodes(1).gpus(1, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    // t=0: first turns MIG on for a 2g.20gb; it starts and leaves, its
    // instance staying behind.
    w.submit(&[job("first").mig_profile("2g.20gb")]);
    assert_eq!(w.cycle().reconfigs.len(), 1, "t=0");
    w.at(MINUTE).uncordon_all();
    assert_eq!(
        starts_of(&w.cycle(), "first").len(),
        1,
        "t=1m: first did not start"
    );
    w.finish("first");
    // t=2m: whole needs the whole GPU as 7g, so the free 2g must go: not
    // before the cooldown ends at t=10m.
    w.at(2 * MINUTE);
    w.submit(&[job("whole")
        .best_effort()
        .mig_profile("7g.80gb")
        .submitted(2 * MINUTE)]);
    for now in [2 * MINUTE, 9 * MINUTE + 59 * SECOND] {
        w.at(now);
        let d = w.cycle();
        assert!(
            d.reconfigs.is_empty(),
            "t={now}: reconfigs {:?} within the cooldown",
            d.reconfigs
        );
        assert_eq!(
            reason_of(&d, "whole"),
            WaitReason::NoSlice.as_str(),
            "t={now}"
        );
    }
    w.at(10 * MINUTE);
    let d = w.cycle();
    let want = vec![Reconfig {
        node: "n1".into(),
        gpu: 0,
        mig: true,
        layout: layout("7g.80gb@0"),
        add: false,
        for_job: "whole".into(),
    }];
    assert_eq!(d.reconfigs, want, "t=10m");
}

#[test]
fn production_owed_its_slice_waits_a_minute_not_the_cooldown() {
    // One H100 turned to MIG at t=0 for two 2g.20gb services; at t=1m
    // they start and the warm pool adds instances in the free space. One
    // service ends, and a 3g.40gb service comes: the free region must be
    // re-partitioned. Within its team's guarantee it may be once a minute
    // has passed since the last change; beyond the guarantee, or with no
    // claim cooldown, only once the GPU's ten have.
    for (name, guarantee, claim, at) in [
        ("within its guarantee", 4, MINUTE, 2 * MINUTE),
        ("beyond its guarantee", 0, MINUTE, 11 * MINUTE),
        ("without a claim cooldown", 4, 0, 11 * MINUTE),
    ] {
        let st = fleet().nodes(1).gpus(1, "H100-80GB").build();
        let sch = new_scheduler_with("partita", &st, 1, |c: &mut Config| c.claim_cooldown = claim);
        let mut w = new_world(st, sch, &[team("ads").guarantee(guarantee).burst(8)]);
        w.submit(&[
            job("first").team("ads").production().mig_profile("2g.20gb"),
            job("second")
                .team("ads")
                .production()
                .mig_profile("2g.20gb"),
        ]);
        assert_eq!(w.cycle().reconfigs.len(), 1, "{name}: t=0");
        w.at(MINUTE).uncordon_all();
        let d = w.cycle();
        assert!(
            starts_of(&d, "first").len() == 1 && starts_of(&d, "second").len() == 1,
            "{name}: t=1m"
        );
        w.uncordon_all().finish("first");
        w.at(90 * SECOND);
        w.submit(&[job("chat")
            .team("ads")
            .production()
            .mig_profile("3g.40gb")
            .submitted(90 * SECOND)]);
        for now in [90 * SECOND, at - SECOND, at] {
            w.at(now);
            let d = w.cycle();
            let want = now == at;
            let got = d.reconfigs.len() == 1 && d.reconfigs[0].for_job == "chat";
            assert!(
                got == want && d.reconfigs.len() <= 1,
                "{name}: t={now}: reconfigs {:?} (chat waits {}), want a change for chat: {want}",
                d.reconfigs,
                reason_of(&d, "chat")
            );
        }
    }
}

#[test]
fn whole_gpu_demand_turns_idle_mig_gpus_off() {
    // n1: 4 MIG GPUs, all idle. n2: GPU 0 MIG and idle, GPUs 1-3 whole and
    // busy. A 1-GPU task turns MIG off where there are fewest MIG GPUs.
    let st = fleet().nodes(2).gpus(4, "H100-80GB").mig().build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.mig_off("n2", &[1, 2, 3]);
    w.running(job("serve").production().gpus(3), 0, 0, &["n2:1,2,3"]);
    w.submit(&[job("train").gpus(1)]);
    let d = w.cycle();
    assert_eq!(d.reconfigs, vec![whole("n2", 0, "train")]);
    assert_eq!(reason_of(&d, "train"), WaitReason::Reconfig.as_str());
    w.at(MINUTE).uncordon_all();
    let d = w.cycle();
    let s = starts_of(&d, "train");
    assert!(
        s.len() == 1 && s[0].assignment.node == "n2" && s[0].assignment.grants[0].gpu == 0,
        "train starts {s:?}, want on n2 GPU 0"
    );
}

#[test]
fn whole_gpu_demand_turns_off_only_as_many_as_it_lacks() {
    // n1 has one whole GPU free; a 3-GPU job needs two more.
    let st = fleet().nodes(1).gpus(4, "H100-80GB").mig().build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.mig_off("n1", &[0]);
    w.submit(&[job("train").gpus(3)]);
    let d = w.cycle();
    assert_eq!(d.reconfigs.len(), 2, "{:?}", d.reconfigs);
    for rc in &d.reconfigs {
        assert!(!rc.mig && rc.node == "n1" && rc.gpu != 0, "reconfig {rc:?}");
    }
    w.at(MINUTE).uncordon_all();
    let d = w.cycle();
    assert_eq!(
        starts_of(&d, "train").len(),
        1,
        "after the change train waits {}",
        reason_of(&d, "train")
    );
}

#[test]
fn whole_gpu_task_gets_its_gpus_on_one_node() {
    // n1: 4 idle MIG GPUs. n2: GPU 0 idle MIG, GPUs 1-3 whole and busy.
    let st = fleet().nodes(2).gpus(4, "H100-80GB").mig().build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.mig_off("n2", &[1, 2, 3]);
    w.running(job("serve").production().gpus(3), 0, 0, &["n2:1,2,3"]);
    w.submit(&[job("train").gpus(2)]);
    for minute in 0..=30 {
        w.at(minute * MINUTE);
        if !starts_of(&w.cycle(), "train").is_empty() {
            return;
        }
        w.uncordon_all();
    }
    panic!("train (2 GPUs) never started in 30 minutes; n1 had 4 idle MIG GPUs to turn off");
}

#[test]
fn reconfig_backs_off_after_two_unhelpful_changes() {
    // Three whole GPUs. scavenge (best-effort) needs a 7g.80gb; each time
    // a GPU is turned to MIG for it, a batch job that arrives meanwhile
    // takes it. After the second change scavenge backs off for the
    // cooldown, though the third GPU is idle and never changed.
    let st = fleet().nodes(1).gpus(3, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("scavenge").best_effort().mig_profile("7g.80gb")]);
    let gpu_of = |d: &Decision| -> Vec<usize> {
        d.reconfigs
            .iter()
            .filter(|rc| rc.for_job == "scavenge")
            .map(|rc| rc.gpu)
            .collect()
    };
    assert_eq!(gpu_of(&w.cycle()), [0], "t=0");
    w.at(MINUTE).uncordon_all();
    w.submit(&[job("serve-1").mig_profile("7g.80gb").submitted(MINUTE)]);
    let d = w.cycle();
    assert_eq!(started_jobs(&d), ["serve-1"], "t=1m");
    assert_eq!(gpu_of(&d), [1], "t=1m");
    w.at(2 * MINUTE).uncordon_all();
    w.submit(&[job("serve-2").mig_profile("7g.80gb").submitted(2 * MINUTE)]);
    let d = w.cycle();
    assert_eq!(started_jobs(&d), ["serve-2"], "t=2m");
    assert!(
        gpu_of(&d).is_empty(),
        "t=2m: changes for scavenge during its backoff"
    );
    assert_eq!(reason_of(&d, "scavenge"), WaitReason::NoSlice.as_str());
    // The backoff ends a cooldown after the second change (t=1m).
    w.at(10 * MINUTE + 59 * SECOND);
    assert!(gpu_of(&w.cycle()).is_empty(), "t=10m59s");
    w.at(11 * MINUTE);
    assert_eq!(gpu_of(&w.cycle()), [2], "t=11m");
}

#[test]
fn no_mig_changes_without_dynamic_mig() {
    // gang-drf runs whole GPUs: a MIG task with no instance waits, and no
    // GPU is changed.
    let st = fleet().nodes(1).gpus(2, "H100-80GB").mig().build();
    let sch = new_scheduler("gang-drf", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("infer").mig_profile("1g.10gb"), job("train").gpus(1)]);
    let d = w.cycle();
    assert!(d.reconfigs.is_empty() && d.starts.is_empty(), "{d:?}");
    assert_eq!(reason_of(&d, "infer"), WaitReason::NoSlice.as_str());
    assert_eq!(reason_of(&d, "train"), WaitReason::NoRoom.as_str());
}

#[test]
fn replicas_needing_instances_share_one_reconfig() {
    // One whole H100 and a service of three replicas that each need a
    // 1g.10gb: one change makes all three instances.
    let st = fleet().nodes(1).gpus(1, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("svc").replicas(3).gpu_memory(8000, 0.1)]);
    let d = w.cycle();
    assert_eq!(d.reconfigs.len(), 1, "cycle 1: {:?}", d.reconfigs);
    let n = d.reconfigs[0]
        .layout
        .iter()
        .filter(|p| p.profile == "1g.10gb")
        .count();
    assert_eq!(
        n, 3,
        "the change makes {n} 1g.10gb instances ({})",
        d.reconfigs[0].layout
    );
    w.at(30 * SECOND).uncordon_all();
    let d = w.cycle();
    let starts = starts_of(&d, "svc");
    assert_eq!(starts.len(), 3, "cycle 2");
    assert!(
        starts.iter().all(|s| !s.creates),
        "a replica creates its instance at start"
    );
}

/// n1's MIG GPU is being changed for someone else, so svc's 3g.40gb gets
/// n2's idle GPU turned to MIG (the decision returned); then n1's change
/// ends, and n2's is still being applied.
fn change_for_svc() -> (World, Decided) {
    let st = fleet().nodes(2).gpus(1, "H100-80GB").mig().build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[team("a").guarantee(2).burst(2)]);
    w.at(HOUR);
    w.mig_off("n2", &[0]);
    w.st.cordon("n1", 0, true).expect("cordon");
    w.submit(&[job("svc")
        .team("a")
        .production()
        .mig_profile("3g.40gb")
        .submitted(HOUR)]);
    let d = w.cycle();
    w.st.cordon("n1", 0, false).expect("uncordon");
    (w, d)
}

#[test]
fn a_job_waits_for_the_change_made_for_it_rather_than_create_an_instance_elsewhere() {
    let (mut w, d) = change_for_svc();
    assert!(
        d.reconfigs.len() == 1 && d.reconfigs[0].node == "n2" && d.reconfigs[0].mig,
        "reconfigs {:?}; svc waits {}",
        d.reconfigs,
        reason_of(&d, "svc")
    );
    w.at(HOUR + 10 * SECOND);
    let d = w.cycle();
    assert!(
        starts_of(&d, "svc").is_empty(),
        "svc started while the change made for it is under way"
    );
    assert_eq!(reason_of(&d, "svc"), WaitReason::Reconfig.as_str());
    w.at(HOUR + 30 * SECOND).uncordon_all();
    let d = w.cycle();
    let s = starts_of(&d, "svc");
    assert!(
        s.len() == 1 && s[0].assignment.node == "n2" && !s[0].creates,
        "svc starts {s:?}"
    );
}

#[test]
fn a_job_stops_waiting_for_a_change_that_does_not_end() {
    // As above, but n2's change never ends: after CHANGE_WAIT svc takes
    // n1's room.
    let (mut w, d) = change_for_svc();
    assert!(
        d.reconfigs.len() == 1 && d.reconfigs[0].node == "n2",
        "{:?}",
        d.reconfigs
    );
    w.at(HOUR + CHANGE_WAIT);
    let d = w.cycle();
    let s = starts_of(&d, "svc");
    assert!(
        s.len() == 1 && s[0].assignment.node == "n1",
        "svc starts {s:?}; waits {}",
        reason_of(&d, "svc")
    );
}

#[test]
fn idle_mig_gpus_turn_whole_during_the_victims_grace() {
    // n1's GPUs 0 and 1 are whole and held by b, which borrows; 2 and 3
    // are MIG and idle. a is owed the whole node. It evicts b's job, and
    // while the job is in its grace the two MIG GPUs are turned whole.
    let st = fleet().nodes(1).gpus(4, "H100-80GB").mig().build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(
        st,
        sch,
        &[team("a").guarantee(4).burst(4), team("b").burst(8)],
    );
    w.at(HOUR);
    w.mig_off("n1", &[0, 1]);
    w.running(job("b-job").team("b").gpus(2), 0, HOUR, &["n1:0,1"]);
    w.submit(&[job("a-job").team("a").gpus(4).submitted(HOUR)]);
    assert_eq!(victims_of(&w.cycle()), ["b-job"], "cycle 1");
    w.at(HOUR + 5 * SECOND);
    let d = w.cycle();
    let turned: Vec<usize> = d
        .reconfigs
        .iter()
        .filter(|rc| rc.node == "n1" && !rc.mig && rc.for_job == "a-job")
        .map(|rc| rc.gpu)
        .collect();
    assert_eq!(turned, [2, 3], "during the grace: {:?}", d.reconfigs);
    w.at(HOUR + 35 * SECOND).uncordon_all().release();
    let d = w.cycle();
    assert_eq!(
        started_jobs(&d),
        ["a-job"],
        "a-job waits {}",
        reason_of(&d, "a-job")
    );
}

#[test]
fn a_claim_backed_off_from_changes_still_turns_whole_the_gpus_its_victims_left() {
    // n1's two MIG GPUs each hold a 7g.80gb instance of b's borrowed work.
    // a's 2-GPU gang is owed them, but its MIG changes are backed off. It
    // evicts b's jobs; when they have left, their GPUs must still be
    // turned whole for it.
    let st = fleet().nodes(1).gpus(2, "H100-80GB").mig().build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(
        st,
        sch,
        &[team("a").guarantee(2).burst(2), team("b").burst(8)],
    );
    w.at(HOUR);
    w.running_slice(
        job("b-1").team("b").mig_profile("7g.80gb"),
        "n1:0:7g.80gb@0",
    );
    w.running_slice(
        job("b-2").team("b").mig_profile("7g.80gb"),
        "n1:1:7g.80gb@0",
    );
    w.submit(&[job("a-gang").team("a").gang(2).gpus(1).submitted(HOUR)]);
    w.sch.set_backoff("a-gang", HOUR + 10 * MINUTE);
    assert_eq!(victims_of(&w.cycle()), ["b-1", "b-2"], "cycle 1");
    w.at(HOUR + 30 * SECOND).release();
    let d = w.cycle();
    let turned: Vec<usize> = d
        .reconfigs
        .iter()
        .filter(|rc| !rc.mig && rc.for_job == "a-gang")
        .map(|rc| rc.gpu)
        .collect();
    assert_eq!(
        turned,
        [0, 1],
        "a-gang waits {}; started {:?}",
        reason_of(&d, "a-gang"),
        started_jobs(&d)
    );
    w.at(HOUR + MINUTE).uncordon_all();
    let d = w.cycle();
    assert_eq!(
        started_jobs(&d),
        ["a-gang"],
        "a-gang waits {}",
        reason_of(&d, "a-gang")
    );
}

#[test]
fn a_job_does_not_wait_for_a_change_asked_for_another_on_the_gpu_its_own_changed() {
    // n1: GPU 0 MIG and idle, GPU 1 whole, held by ads' borrowed
    // experiment. research's train gets GPU 0 turned whole. Before it is
    // considered again, search's service takes that GPU back to MIG.
    // train must not read that change as its own: it is owed, and
    // reclaims GPU 1 instead.
    let st = fleet().nodes(1).gpus(2, "H100-80GB").mig().build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(
        st,
        sch,
        &[
            team("research").guarantee(1).burst(2),
            team("search").guarantee(1).burst(2),
            team("ads").guarantee(0).burst(2),
        ],
    );
    w.mig_off("n1", &[1]);
    w.running(
        job("borrower").team("ads").best_effort().gpus(1),
        0,
        0,
        &["n1:1"],
    );
    w.submit(&[job("train").team("research").best_effort().gpus(1)]);
    let d = w.cycle();
    assert_eq!(
        d.reconfigs,
        vec![whole("n1", 0, "train")],
        "cycle 1: train waits {}",
        reason_of(&d, "train")
    );

    // The change ends; a light cycle for the service alone turns the idle
    // GPU back to MIG for it.
    w.at(HOUR).uncordon_all();
    w.submit(&[job("infer")
        .team("search")
        .production()
        .gpu_memory(8000, 0.1)
        .submitted(HOUR)]);
    let d = w.light(&["infer"]);
    assert!(
        d.reconfigs.len() == 1
            && d.reconfigs[0].gpu == 0
            && d.reconfigs[0].mig
            && d.reconfigs[0].for_job == "infer",
        "light cycle: {:?}",
        d.reconfigs
    );
    w.at(HOUR + 5 * SECOND);
    let d = w.cycle();
    assert_ne!(
        reason_of(&d, "train"),
        WaitReason::Reconfig.as_str(),
        "train waits for infer's change"
    );
    assert_eq!(
        victims_of(&d),
        ["borrower"],
        "train waits {}",
        reason_of(&d, "train")
    );
}
