//! Moving service replicas, relocating checkpointed work, and the bounds
//! of move plans (Go's `migrate_test.go`).

use super::helpers::{
    Decided, TeamBuilder, World, first_victims, fleet, job, new_scheduler_with, new_world,
    nodes_of, reason_of, started_jobs, starts_of, team, victims_of,
};
use crate::gpu::{Layout, Placement};
use crate::sched::moves::{MOVE_COOLDOWN, OWED_LONG};
use crate::sched::preempt::{FREE_ROUNDS, SEARCH_BACKOFF_FOR};
use crate::sched::{Config, Decision, HOUR, MINUTE, Nanos, Phase, SECOND, WaitReason};
use crate::workload::Class;

fn world(
    st: crate::cluster::State,
    teams: &[TeamBuilder],
    tweak: impl FnOnce(&mut Config),
) -> World {
    let sch = new_scheduler_with("partita", &st, 1, tweak);
    let mut w = new_world(st, sch, teams);
    w.at(HOUR);
    w
}

fn node_of(w: &World, id: &str) -> String {
    w.job(id).placed[0]
        .as_ref()
        .map_or_else(String::new, |a| a.node.clone())
}

fn started(d: &Decision, id: &str) -> bool {
    started_jobs(d).iter().any(|s| s == id)
}

/// On n1, a's production replica "serve" holds a 1g instance of the only
/// GPU; on n2, two more of a's replicas leave room beside them. a is within
/// its guarantee, so none of its replicas may be evicted for b, who is owed
/// a whole GPU and asks for one.
fn moving_world(tweak: impl FnOnce(&mut Config)) -> World {
    let st = fleet().nodes(2).gpus(1, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(2).burst(2),
            team("b").guarantee(1).burst(1),
        ],
        tweak,
    );
    w.running_slice(
        job("serve").team("a").production().mig_profile("1g.10gb"),
        "n1:0:1g.10gb@6",
    );
    w.running_slice(
        job("other1").team("a").production().mig_profile("1g.10gb"),
        "n2:0:1g.10gb@6",
    );
    w.running_slice(
        job("other2").team("a").production().mig_profile("1g.10gb"),
        "n2:0:1g.10gb@5",
    );
    w.submit(&[job("train").team("b").gpus(1).submitted(HOUR)]);
    w
}

#[test]
fn a_claim_gets_a_gpu_by_moving_a_service_replica() {
    let mut w = moving_world(|_| {});
    let d = w.cycle();
    assert!(
        d.preemptions.is_empty(),
        "victims {:?}: a is within its guarantee",
        victims_of(&d)
    );
    assert!(
        d.migrations.len() == 1
            && d.migrations[0].job == "serve"
            && d.migrations[0].to.node == "n2"
            && d.migrations[0].for_job == "train",
        "migrations {:?}; train waits {}",
        d.migrations,
        reason_of(&d, "train")
    );
    assert_eq!(reason_of(&d, "train"), WaitReason::Moving.as_str());
    assert!(w.job("serve").phase == Phase::Running && node_of(&w, "serve") == "n2");
    // Until the old replica is gone, n1 is train's: nothing else starts
    // there and no more moves are made.
    w.submit(&[job("notebook")
        .team("a")
        .best_effort()
        .mig_profile("1g.10gb")
        .submitted(HOUR)]);
    let d = w.cycle();
    assert!(
        d.migrations.is_empty() && reason_of(&d, "train") == WaitReason::Moving.as_str(),
        "while serve moves: {:?}, train waits {}",
        d.migrations,
        reason_of(&d, "train")
    );
    w.finish("notebook");
    w.moved();
    let d = w.cycle();
    assert!(
        d.reconfigs.len() == 1 && d.reconfigs[0].node == "n1" && !d.reconfigs[0].mig,
        "reconfigs {:?}; train waits {}",
        d.reconfigs,
        reason_of(&d, "train")
    );
    w.uncordon_all();
    let d = w.cycle();
    assert!(
        started(&d, "train"),
        "train did not start: {}",
        reason_of(&d, "train")
    );
    assert_eq!(node_of(&w, "train"), "n1");
}

#[test]
fn no_moves_without_migrate() {
    let mut w = moving_world(|c| c.migrate = false);
    let d = w.cycle();
    assert!(
        d.migrations.is_empty() && d.preemptions.is_empty() && d.starts.is_empty(),
        "{d:?}"
    );
}

/// Two nodes of two MIG GPUs. On n1 a production replica of a's holds a 1g
/// instance of each GPU; on n2 two more leave room beside them on GPU 0,
/// and GPU 1 is whole and idle. b has no guarantee: what it asks it
/// borrows.
fn borrow_world(tweak: impl FnOnce(&mut Config)) -> World {
    let st = fleet().nodes(2).gpus(2, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[team("a").guarantee(3).burst(3), team("b").burst(4)],
        tweak,
    );
    w.mig_off("n2", &[1]);
    w.running_slice(
        job("serve0").team("a").production().mig_profile("1g.10gb"),
        "n1:0:1g.10gb@6",
    );
    w.running_slice(
        job("serve1").team("a").production().mig_profile("1g.10gb"),
        "n1:1:1g.10gb@6",
    );
    w.running_slice(
        job("other1").team("a").production().mig_profile("1g.10gb"),
        "n2:0:1g.10gb@6",
    );
    w.running_slice(
        job("other2").team("a").production().mig_profile("1g.10gb"),
        "n2:0:1g.10gb@5",
    );
    w
}

#[test]
fn no_moves_for_borrowed_work_smaller_than_a_node() {
    let mut w = borrow_world(|_| {});
    w.running(job("b-first").team("b").gpus(1), 0, 0, &["n2:1"]);
    w.submit(&[job("train").team("b").gpus(1).submitted(HOUR)]);
    let d = w.cycle();
    assert!(
        d.migrations.is_empty(),
        "migrations {:?} for a one-GPU job beyond its team's guarantee",
        d.migrations
    );
}

#[test]
fn services_move_to_free_a_node_for_borrowed_work() {
    // b borrows a whole node (two GPUs): only moves free one, since the
    // replicas on n1 fit beside those on n2.
    let mut w = borrow_world(|_| {});
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    let mut moved: Vec<&str> = Vec::new();
    for m in &d.migrations {
        assert!(m.to.node == "n2" && m.for_job == "train", "migration {m:?}");
        moved.push(&m.job);
    }
    moved.sort();
    assert!(
        moved == ["serve0", "serve1"] && d.preemptions.is_empty(),
        "moved {moved:?}, victims {:?}; train waits {}",
        victims_of(&d),
        reason_of(&d, "train")
    );
    assert_eq!(reason_of(&d, "train"), WaitReason::Moving.as_str());
    // Without move_for_whole_nodes borrowed work waits for a node to
    // empty.
    let mut w = borrow_world(|c| c.move_for_whole_nodes = false);
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    assert!(w.cycle().migrations.is_empty());
}

#[test]
fn moves_and_evictions_together_free_a_node() {
    // On n1, c borrows one GPU and a's replica holds the other: b, owed two
    // GPUs on one node, may evict c's job but not a's service, and neither
    // alone frees n1. Together they do.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(3).burst(3),
            team("b").guarantee(2).burst(2),
            team("c").burst(2),
        ],
        |_| {},
    );
    w.mig_off("n1", &[0]).mig_off("n2", &[1]);
    w.running(job("borrow").team("c").gpus(1), 0, 0, &["n1:0"]);
    w.running_slice(
        job("serve").team("a").production().mig_profile("1g.10gb"),
        "n1:1:1g.10gb@6",
    );
    w.running_slice(
        job("other").team("a").production().mig_profile("1g.10gb"),
        "n2:0:1g.10gb@6",
    );
    w.running(job("a-batch").team("a").gpus(1), 0, 0, &["n2:1"]);
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d),
        ["borrow"],
        "train waits {}",
        reason_of(&d, "train")
    );
    assert!(
        d.migrations.len() == 1
            && d.migrations[0].job == "serve"
            && d.migrations[0].to.node == "n2",
        "{:?}",
        d.migrations
    );
    let why = reason_of(&d, "train");
    assert!(
        why == WaitReason::Preempting.as_str() || why == WaitReason::Moving.as_str(),
        "train waits {why}"
    );
    w.release().moved();
    let d = w.cycle();
    assert!(
        d.reconfigs.len() == 1
            && d.reconfigs[0].node == "n1"
            && d.reconfigs[0].gpu == 1
            && !d.reconfigs[0].mig,
        "reconfigs {:?}; train waits {}",
        d.reconfigs,
        reason_of(&d, "train")
    );
    w.uncordon_all();
    let d = w.cycle();
    assert!(
        started(&d, "train"),
        "train did not start on n1: {}",
        reason_of(&d, "train")
    );
}

#[test]
fn a_failed_move_search_for_borrowed_work_holds_off_the_next_for_a_minute() {
    // Every MIG GPU is full but for one free instance on each of n1's:
    // neither node's replicas find room elsewhere, and borrowed work turns
    // no idle GPU to MIG for them.
    let mut w = borrow_world(|_| {});
    for k in 0..5 {
        w.running_slice(
            job(&format!("fill{k}"))
                .team("a")
                .production()
                .mig_profile("1g.10gb"),
            &format!("n2:0:1g.10gb@{k}"),
        );
        for g in 0..2 {
            w.running_slice(
                job(&format!("n1fill{g}-{k}"))
                    .team("a")
                    .production()
                    .mig_profile("1g.10gb"),
                &format!("n1:{g}:1g.10gb@{k}"),
            );
        }
    }
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert!(d.migrations.is_empty() && d.reconfigs.is_empty(), "{d:?}");
    // n1 empties but for serve0 and serve1: n2's seven replicas now fit
    // there. Another borrower asks within the minute: no search yet.
    for k in 0..5 {
        w.finish(&format!("n1fill0-{k}"))
            .finish(&format!("n1fill1-{k}"));
    }
    w.at(HOUR + 30 * SECOND);
    w.submit(&[job("train2")
        .team("b")
        .gpus(2)
        .submitted(HOUR + 30 * SECOND)]);
    assert!(
        w.cycle().migrations.is_empty(),
        "migrations within a minute of a failed search"
    );
    w.at(HOUR + MINUTE);
    assert_eq!(
        w.cycle().migrations.len(),
        7,
        "a minute after, want n2's seven replicas moved"
    );
}

/// On n1, c's experiment (within c's guarantee, last checkpointed at
/// `checkpoint`) holds GPU 0 and a's replica serve GPU 1; on n2 and n3 a's
/// batch jobs, within a's guarantee, hold one GPU each, n2's other GPU is
/// idle and a's replica on n3 leaves room beside it. b is owed two GPUs on
/// one node: only n1 can be freed, by moving serve to n3 and starting the
/// experiment again on n2.
fn reloc_world(checkpoint: Nanos, tweak: impl FnOnce(&mut Config)) -> World {
    let st = fleet().nodes(3).gpus(2, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(3).burst(3),
            team("b").guarantee(2).burst(2),
            team("c").guarantee(1).burst(1),
        ],
        tweak,
    );
    w.mig_off("n1", &[0])
        .mig_off("n2", &[0, 1])
        .mig_off("n3", &[1]);
    w.running(
        job("exp").team("c").best_effort().gpus(1),
        0,
        checkpoint,
        &["n1:0"],
    );
    w.running_slice(
        job("serve").team("a").production().mig_profile("1g.10gb"),
        "n1:1:1g.10gb@6",
    );
    w.running(job("a-batch").team("a").gpus(1), 0, 0, &["n2:0"]);
    w.running_slice(
        job("other").team("a").production().mig_profile("1g.10gb"),
        "n3:0:1g.10gb@6",
    );
    w.running(job("a-batch2").team("a").gpus(1), 0, 0, &["n3:1"]);
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    w
}

#[test]
fn a_claim_relocates_checkpointed_work_it_may_not_evict() {
    let mut w = reloc_world(HOUR - 5 * MINUTE, |_| {});
    let d = w.cycle();
    assert_eq!(
        victims_of(&d),
        ["exp"],
        "to start again on n2; train waits {}",
        reason_of(&d, "train")
    );
    assert!(
        d.migrations.len() == 1
            && d.migrations[0].job == "serve"
            && d.migrations[0].to.node == "n3",
        "{:?}",
        d.migrations
    );
    // The experiment, queued again within its team's guarantee, starts on
    // n2's idle GPU; train takes n1 once the replica has moved.
    w.release().moved();
    let now = w.now;
    w.job_mut("exp").submitted = now;
    let d = w.cycle();
    assert!(
        started(&d, "exp") && node_of(&w, "exp") == "n2",
        "exp waits {}",
        reason_of(&d, "exp")
    );
    w.uncordon_all();
    let d = w.cycle();
    assert!(
        started(&d, "train") && node_of(&w, "train") == "n1",
        "train waits {}",
        reason_of(&d, "train")
    );
}

#[test]
fn no_relocation_of_work_that_would_lose_much() {
    // Last checkpointed 40 minutes ago: relocating it would lose them.
    let mut w = reloc_world(HOUR - 40 * MINUTE, |_| {});
    let d = w.cycle();
    assert!(d.preemptions.is_empty() && d.migrations.is_empty(), "{d:?}");
}

#[test]
fn a_claim_owed_for_a_minute_relocates_work_checkpointed_longer() {
    // Last checkpointed 20 minutes ago: more than RELOCATE_LOSS, within
    // RELOCATE_LOSS_OWED. train, owed from the first cycle, relocates exp
    // once it has been owed for OWED_LONG, not before.
    let mut w = reloc_world(HOUR - 20 * MINUTE, |_| {});
    let d = w.cycle();
    assert!(
        d.preemptions.is_empty() && d.migrations.is_empty(),
        "as train became owed: {d:?}"
    );
    w.at(HOUR + OWED_LONG);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d),
        ["exp"],
        "train waits {}",
        reason_of(&d, "train")
    );
}

#[test]
fn no_relocation_without_relocate() {
    let mut w = reloc_world(HOUR - 5 * MINUTE, |c| c.relocate = false);
    let d = w.cycle();
    assert!(d.preemptions.is_empty() && d.migrations.is_empty(), "{d:?}");
}

#[test]
fn a_service_just_moved_stays_put_for_move_cooldown() {
    // All three services had a replica moved half a cooldown ago: train
    // may not move any of them yet.
    let mut w = moving_world(|_| {});
    let last = HOUR - MOVE_COOLDOWN / 2;
    for id in ["serve", "other1", "other2"] {
        w.sch.set_moved_at(id, last);
    }
    assert!(
        w.cycle().migrations.is_empty(),
        "migrations half a cooldown after the services last moved"
    );
    w.at(last + MOVE_COOLDOWN);
    let d = w.cycle();
    assert!(
        !d.migrations.is_empty(),
        "after the cooldown: train waits {}",
        reason_of(&d, "train")
    );
    for m in &d.migrations {
        assert_eq!(
            w.sch.moved_at(&m.job),
            Some(last + MOVE_COOLDOWN),
            "{}'s last move",
            m.job
        );
    }
}

/// Ends the victims' grace, queues exp again and checks that the next
/// cycle starts it on n2 and train on n1.
fn exp_restarts_on_n2_train_starts_on_n1(w: &mut World) {
    w.release();
    let now = w.now;
    w.job_mut("exp").submitted = now;
    let d = w.cycle();
    assert!(
        started(&d, "exp") && node_of(w, "exp") == "n2",
        "exp waits {}",
        reason_of(&d, "exp")
    );
    assert!(
        started(&d, "train") && node_of(w, "train") == "n1",
        "train waits {}",
        reason_of(&d, "train")
    );
}

#[test]
fn a_claim_relocates_work_with_no_service_to_move() {
    // n1 holds c's experiment, n2 a's batch job, each with a GPU idle:
    // train may evict neither, and there is no replica to move. The
    // experiment can start again on n2's idle GPU.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(1).burst(1),
            team("b").guarantee(2).burst(2),
            team("c").guarantee(1).burst(1),
        ],
        |_| {},
    );
    w.running(
        job("exp").team("c").best_effort().gpus(1),
        0,
        HOUR - 5 * MINUTE,
        &["n1:0"],
    );
    w.running(job("a-batch").team("a").gpus(1), 0, 0, &["n2:0"]);
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert!(
        victims_of(&d) == ["exp"] && d.migrations.is_empty(),
        "{d:?}"
    );
    exp_restarts_on_n2_train_starts_on_n1(&mut w);
}

#[test]
fn a_relocated_job_gets_room_from_borrowed_work_elsewhere() {
    // n1 holds c's experiment and an idle GPU; n2 holds d's borrowed job
    // and a's batch job. train may relocate the experiment, which finds no
    // room elsewhere until d's job, which train may evict anyway, leaves
    // n2.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(1).burst(1),
            team("b").guarantee(2).burst(2),
            team("c").guarantee(1).burst(1),
            team("d").burst(4),
        ],
        |_| {},
    );
    w.running(
        job("exp").team("c").best_effort().gpus(1),
        0,
        HOUR - 5 * MINUTE,
        &["n1:0"],
    );
    w.running(
        job("d-job").team("d").best_effort().gpus(1),
        0,
        0,
        &["n2:0"],
    );
    w.running(job("a-batch").team("a").gpus(1), 0, 0, &["n2:1"]);
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d),
        ["d-job", "exp"],
        "train waits {}",
        reason_of(&d, "train")
    );
    exp_restarts_on_n2_train_starts_on_n1(&mut w);
}

#[test]
fn a_claim_relocates_another_teams_gang_of_its_class() {
    // a's 2-task gang, within a's guarantee and checkpointed 5 minutes ago,
    // holds one GPU of each node; b is owed two GPUs on one node, for a
    // job of the same class. Restarted from its checkpoint, the gang fits
    // on n2 alone.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(2).burst(2),
            team("b").guarantee(2).burst(2),
        ],
        |_| {},
    );
    w.running(
        job("pre").team("a").gang(2).gpus(1),
        0,
        HOUR - 5 * MINUTE,
        &["n1:0", "n2:0"],
    );
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d),
        ["pre"],
        "train waits {}",
        reason_of(&d, "train")
    );
    w.release();
    let now = w.now;
    w.job_mut("pre").submitted = now;
    let d = w.cycle();
    assert!(
        starts_of(&d, "pre").len() == 2 && nodes_of(&starts_of(&d, "pre")) == ["n2"],
        "pre did not start again on n2: {:?}; pre waits {}",
        starts_of(&d, "pre"),
        reason_of(&d, "pre")
    );
    assert!(
        started(&d, "train") && node_of(&w, "train") == "n1",
        "train waits {}",
        reason_of(&d, "train")
    );
}

#[test]
fn no_relocation_of_the_claimants_own_team_or_of_production() {
    for (name, owner, class) in [
        ("b's own gang", "b", Class::Batch),
        ("a's production", "a", Class::Production),
    ] {
        let st = fleet().nodes(2).gpus(2, "H100-80GB").build();
        let mut w = world(
            st,
            &[
                team("a").guarantee(2).burst(2),
                team("b").guarantee(4).burst(4),
            ],
            |_| {},
        );
        w.running(
            job("pre").team(owner).class(class).gang(2).gpus(1),
            0,
            HOUR - 5 * MINUTE,
            &["n1:0", "n2:0"],
        );
        w.submit(&[job("train").team("b").class(class).gpus(2).submitted(HOUR)]);
        let d = w.cycle();
        assert!(
            !victims_of(&d).contains(&"pre".to_string()),
            "{name}: victims {:?}",
            victims_of(&d)
        );
    }
}

#[test]
fn a_relocated_job_may_take_an_idle_mig_gpu_turned_whole() {
    // c's experiment holds n1's GPU 0; n2's GPU 0 is an idle MIG GPU and
    // its GPU 1 holds a's batch job. b is owed two GPUs on one node: n1,
    // once the experiment starts again on n2's MIG GPU turned whole.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(1).burst(1),
            team("b").guarantee(2).burst(2),
            team("c").guarantee(1).burst(1),
        ],
        |_| {},
    );
    w.mig_off("n1", &[0, 1]).mig_off("n2", &[1]);
    w.running(
        job("exp").team("c").best_effort().gpus(1),
        0,
        HOUR - 5 * MINUTE,
        &["n1:0"],
    );
    w.running(job("a-batch").team("a").gpus(1), 0, 0, &["n2:1"]);
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d),
        ["exp"],
        "train waits {}",
        reason_of(&d, "train")
    );
}

#[test]
fn replicas_to_move_get_an_idle_gpu_turned_to_mig() {
    // n1: a's replica serve on GPU 0 (MIG), GPU 1 idle and whole. n2: GPU
    // 0 idle and whole, GPU 1 held by a's batch job. b is owed two GPUs on
    // one node: only n1, once serve moves, and no MIG GPU has room for it.
    // n2's idle GPU is turned to MIG for it first.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(2).burst(2),
            team("b").guarantee(2).burst(2),
        ],
        |_| {},
    );
    w.mig_off("n1", &[1]).mig_off("n2", &[0, 1]);
    w.running_slice(
        job("serve").team("a").production().mig_profile("3g.40gb"),
        "n1:0:3g.40gb@4",
    );
    w.running(job("a-batch").team("a").gpus(1), 0, 0, &["n2:1"]);
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert!(
        d.migrations.is_empty() && d.preemptions.is_empty(),
        "before n2's GPU is MIG: {d:?}"
    );
    assert!(
        d.reconfigs.len() == 1
            && d.reconfigs[0].node == "n2"
            && d.reconfigs[0].gpu == 0
            && d.reconfigs[0].mig
            && d.reconfigs[0].for_job == "train",
        "reconfigs {:?}; train waits {}",
        d.reconfigs,
        reason_of(&d, "train")
    );
    assert_eq!(reason_of(&d, "train"), WaitReason::Reconfig.as_str());
    w.uncordon_all();
    let d = w.cycle();
    assert!(
        d.migrations.len() == 1
            && d.migrations[0].job == "serve"
            && d.migrations[0].to.node == "n2"
            && !d.migrations[0].creates,
        "migrations {:?}; train waits {}",
        d.migrations,
        reason_of(&d, "train")
    );
}

#[test]
fn a_claim_moves_more_than_eight_replicas() {
    // n1's two GPUs hold ten 1g.10gb replicas of a's services; n2's hold a
    // notebook each (not movable) and room for twelve 1g.10gb. b is owed
    // two whole GPUs on one node: only moving all ten frees n1.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(20).burst(20),
            team("b").guarantee(2).burst(2),
        ],
        |_| {},
    );
    for k in 0..10 {
        w.running_slice(
            job(&format!("s{k}"))
                .team("a")
                .production()
                .mig_profile("1g.10gb"),
            &format!("n1:{}:1g.10gb@{}", k / 5, k % 5),
        );
    }
    w.running_slice(
        job("nb0").team("a").best_effort().mig_profile("1g.10gb"),
        "n2:0:1g.10gb@6",
    );
    w.running_slice(
        job("nb1").team("a").best_effort().mig_profile("1g.10gb"),
        "n2:1:1g.10gb@6",
    );
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert!(
        d.preemptions.is_empty(),
        "victims {:?}: a is within its guarantee",
        victims_of(&d)
    );
    assert_eq!(
        d.migrations.len(),
        10,
        "train waits {}",
        reason_of(&d, "train")
    );
    for m in &d.migrations {
        assert!(m.to.node == "n2" && m.for_job == "train", "migration {m:?}");
    }
}

/// n1's GPU holds six of s's service replicas and a free 1g.10gb instance,
/// n2's r's notebook; r starts another notebook.
fn pinned_world(tweak: impl FnOnce(&mut Config)) -> World {
    let st = fleet()
        .nodes(1)
        .gpus(1, "H100-80GB")
        .layout("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6")
        .nodes(1)
        .gpus(1, "H100-80GB")
        .mig()
        .build();
    let mut w = world(
        st,
        &[
            team("r").guarantee(1).burst(1),
            team("s").guarantee(2).burst(2),
        ],
        tweak,
    );
    for k in 1..7 {
        w.running_slice(
            job(&format!("s{k}"))
                .team("s")
                .production()
                .mig_profile("1g.10gb"),
            &format!("n1:0:1g.10gb@{k}"),
        );
    }
    w.running_slice(
        job("nb0").team("r").best_effort().mig_profile("1g.10gb"),
        "n2:0:1g.10gb@6",
    );
    w.submit(&[job("nb1")
        .team("r")
        .best_effort()
        .mig_profile("1g.10gb")
        .submitted(HOUR)]);
    w
}

#[test]
fn a_notebook_joins_the_node_of_other_work_that_cannot_move() {
    let mut w = pinned_world(|_| {});
    let d = w.cycle();
    assert!(
        started(&d, "nb1") && node_of(&w, "nb1") == "n2",
        "nb1 waits {}",
        reason_of(&d, "nb1")
    );
    // Without group_pinned the placement policy packs it beside the
    // services.
    let mut w = pinned_world(|c| c.group_pinned = false);
    let d = w.cycle();
    assert!(
        started(&d, "nb1") && node_of(&w, "nb1") == "n1",
        "nb1 waits {}",
        reason_of(&d, "nb1")
    );
}

/// Puts two of team a's notebooks on GPU 0 of `node`, at @0 and @4: no
/// half of the GPU is left for a 3g.40gb, and the notebooks do not move.
fn notebook_holes(w: &mut World, node: &str) {
    w.running_slice(
        job("nb0").team("a").best_effort().mig_profile("1g.10gb"),
        &format!("{node}:0:1g.10gb@0"),
    );
    w.running_slice(
        job("nb4").team("a").best_effort().mig_profile("1g.10gb"),
        &format!("{node}:0:1g.10gb@4"),
    );
}

/// Checks that the claim's cycle evicted nothing (team a is within its
/// guarantee) and moved replicas r0 and r4, both to node `to`.
fn want_only_r0_r4_moved_to(d: &Decided, claim: &str, to: &str) {
    assert!(
        d.preemptions.is_empty(),
        "victims {:?}: a is within its guarantee",
        victims_of(d)
    );
    assert_eq!(
        d.migrations.len(),
        2,
        "{:?}; {claim} waits {}",
        d.migrations,
        reason_of(d, claim)
    );
    for m in &d.migrations {
        assert!(
            (m.job == "r0" || m.job == "r4") && m.to.node == to,
            "migration {m:?}"
        );
    }
}

#[test]
fn a_move_plan_tries_every_node_not_only_the_cheapest() {
    // n1-n3 each hold two 3g.40gb replicas of a's services, n4 two 1g.10gb
    // replicas, n5 two of a's notebooks: MIG room is left only in 1g.10gb
    // holes. b is owed a whole GPU. Freeing n1, n2 or n3 costs as many
    // moves as n4, and is tried first, but their replicas find no room;
    // n4's fit in n5's holes.
    let st = fleet().nodes(5).gpus(1, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(5).burst(5),
            team("b").guarantee(1).burst(1),
        ],
        |_| {},
    );
    for n in 1..=3 {
        for at in [0, 4] {
            w.running_slice(
                job(&format!("s{n}-{at}"))
                    .team("a")
                    .production()
                    .mig_profile("3g.40gb"),
                &format!("n{n}:0:3g.40gb@{at}"),
            );
        }
    }
    w.running_slice(
        job("r0").team("a").production().mig_profile("1g.10gb"),
        "n4:0:1g.10gb@0",
    );
    w.running_slice(
        job("r4").team("a").production().mig_profile("1g.10gb"),
        "n4:0:1g.10gb@4",
    );
    notebook_holes(&mut w, "n5");
    w.submit(&[job("train").team("b").gpus(1).submitted(HOUR)]);
    let d = w.cycle();
    want_only_r0_r4_moved_to(&d, "train", "n5");
}

#[test]
fn a_one_gpu_claim_tries_each_gpu_of_a_node() {
    // n1's GPU 0 holds a 3g.40gb replica of a's, its GPU 1 two 1g.10gb
    // replicas; n2 holds two of a's notebooks, so MIG room is left only in
    // 1g.10gb holes. b is owed one whole GPU. Freeing GPU 0 is the cheaper
    // plan (one move), but its replica finds no room; GPU 1's two fit in
    // n2's holes.
    let st = fleet()
        .nodes(1)
        .gpus(2, "H100-80GB")
        .mig()
        .nodes(1)
        .gpus(1, "H100-80GB")
        .mig()
        .build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(3).burst(3),
            team("b").guarantee(1).burst(1),
        ],
        |_| {},
    );
    w.running_slice(
        job("big").team("a").production().mig_profile("3g.40gb"),
        "n1:0:3g.40gb@0",
    );
    w.running_slice(
        job("r0").team("a").production().mig_profile("1g.10gb"),
        "n1:1:1g.10gb@0",
    );
    w.running_slice(
        job("r4").team("a").production().mig_profile("1g.10gb"),
        "n1:1:1g.10gb@4",
    );
    notebook_holes(&mut w, "n2");
    w.submit(&[job("exp").team("b").gpus(1).submitted(HOUR)]);
    let d = w.cycle();
    want_only_r0_r4_moved_to(&d, "exp", "n2");
}

#[test]
fn moves_for_one_claim_keep_off_the_node_of_another() {
    // n1: GPU 0 idle, a's 1g.10gb replica serve1 on GPU 1. n2: GPU 0 idle,
    // a's 7g.80gb replica serve2 on GPU 1. m: room for one more 1g.10gb. b
    // and d are each owed two GPUs on one node. b, first, gets n1 by moving
    // serve1 to m. While serve1's old copy is still on n1, d plans for n2:
    // serve2 finds no MIG room, and n1's idle GPU, turned to MIG, would
    // take it, but n1 is b's.
    let st = fleet()
        .nodes(2)
        .gpus(2, "H100-80GB")
        .mig()
        .nodes(1)
        .named("m")
        .gpus(1, "H100-80GB")
        .mig()
        .build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(3).burst(3),
            team("b").guarantee(2).burst(2),
            team("d").guarantee(2).burst(2),
        ],
        |_| {},
    );
    w.mig_off("n1", &[0]).mig_off("n2", &[0]);
    w.running_slice(
        job("serve1").team("a").production().mig_profile("1g.10gb"),
        "n1:1:1g.10gb@6",
    );
    w.running_slice(
        job("serve2").team("a").production().mig_profile("7g.80gb"),
        "n2:1:7g.80gb@0",
    );
    for k in 0..6 {
        w.running_slice(
            job(&format!("fill{k}"))
                .team("a")
                .production()
                .mig_profile("1g.10gb"),
            &format!("m:0:1g.10gb@{k}"),
        );
    }
    w.submit(&[
        job("train-b").team("b").gpus(2).submitted(HOUR - MINUTE),
        job("train-d").team("d").gpus(2).submitted(HOUR),
    ]);
    let d = w.cycle();
    assert!(
        d.migrations.len() == 1
            && d.migrations[0].job == "serve1"
            && d.migrations[0].to.node == "m"
            && d.migrations[0].for_job == "train-b",
        "migrations {:?}; train-b waits {}",
        d.migrations,
        reason_of(&d, "train-b")
    );
    w.at(HOUR + 2 * MOVE_COOLDOWN);
    let d = w.cycle();
    for m in &d.migrations {
        assert_ne!(
            m.to.node, "n1",
            "{} moved to n1 for {}: n1 is train-b's",
            m.job, m.for_job
        );
    }
    for r in &d.reconfigs {
        assert!(
            r.node != "n1" || r.for_job == "train-b",
            "n1's GPU {} changed for {}",
            r.gpu,
            r.for_job
        );
    }
    w.moved();
    w.cycle();
    w.uncordon_all();
    let d = w.cycle();
    assert!(
        started(&d, "train-b") && node_of(&w, "train-b") == "n1",
        "train-b waits {}",
        reason_of(&d, "train-b")
    );
}

#[test]
fn a_claim_evicts_first_when_the_replicas_fit_only_where_its_victims_leave() {
    // n1: c's borrowed gang on GPU 0, a's 3g.40gb replica serve on GPU 1
    // (MIG). n2: the gang's other task on GPU 0, a's batch job on GPU 1. b
    // is owed two GPUs on one node: only n1, by evicting the gang and
    // moving serve, which fits nowhere while the gang runs. The gang is
    // evicted first; its GPU on n2 is turned to MIG, serve moves there, and
    // b starts on n1.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(2).burst(2),
            team("b").guarantee(2).burst(2),
            team("c").burst(2),
        ],
        |_| {},
    );
    w.mig_off("n1", &[0]).mig_off("n2", &[0, 1]);
    w.running(
        job("gang").team("c").gang(2).gpus(1),
        0,
        0,
        &["n1:0", "n2:0"],
    );
    w.running_slice(
        job("serve").team("a").production().mig_profile("3g.40gb"),
        "n1:1:3g.40gb@4",
    );
    w.running(job("a-batch").team("a").gpus(1), 0, 0, &["n2:1"]);
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert!(
        victims_of(&d) == ["gang"] && d.migrations.is_empty(),
        "victims {:?}, migrations {:?}; train waits {}",
        victims_of(&d),
        d.migrations,
        reason_of(&d, "train")
    );
    assert_eq!(reason_of(&d, "train"), WaitReason::Preempting.as_str());
    w.release();
    let d = w.cycle();
    assert!(
        d.reconfigs.len() == 1
            && d.reconfigs[0].node == "n2"
            && d.reconfigs[0].gpu == 0
            && d.reconfigs[0].mig
            && d.reconfigs[0].for_job == "train",
        "reconfigs {:?}; train waits {}",
        d.reconfigs,
        reason_of(&d, "train")
    );
    assert!(
        !started(&d, "gang"),
        "the gang started again on n1 or n2, which train needs"
    );
    for _ in 0..6 {
        w.uncordon_all().moved();
        let now = w.now + 30 * SECOND;
        w.at(now);
        let d = w.cycle();
        if started(&d, "train") {
            assert_eq!(node_of(&w, "train"), "n1");
            assert_eq!(node_of(&w, "serve"), "n2");
            return;
        }
    }
    panic!("train did not start");
}

/// On n1, b's training job holds the only GPU, all of b's guarantee; on
/// n2, a's replica serve holds a 1g instance; with room, n3 holds another
/// of a's replicas. a's 70B service, within a's guarantee, asks for a
/// whole GPU: it may evict b's job (a lower class), but that leaves b owed
/// a GPU.
fn guard_world(room: bool) -> World {
    let st = fleet()
        .nodes(if room { 3 } else { 2 })
        .gpus(1, "H100-80GB")
        .mig()
        .build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(3).burst(3),
            team("b").guarantee(1).burst(1),
        ],
        |_| {},
    );
    w.mig_off("n1", &[0]);
    w.running(job("b-train").team("b").gpus(1), 0, 0, &["n1:0"]);
    w.running_slice(
        job("serve").team("a").production().mig_profile("1g.10gb"),
        "n2:0:1g.10gb@6",
    );
    if room {
        w.running_slice(
            job("other").team("a").production().mig_profile("1g.10gb"),
            "n3:0:1g.10gb@6",
        );
    }
    w.submit(&[job("big").team("a").production().gpus(1).submitted(HOUR)]);
    w
}

#[test]
fn production_moves_a_service_rather_than_take_another_teams_guarantee() {
    let mut w = guard_world(true);
    let d = w.cycle();
    assert!(
        victims_of(&d).is_empty(),
        "victims {:?}: b would be taken below its guarantee",
        victims_of(&d)
    );
    assert!(
        d.migrations.len() == 1
            && d.migrations[0].job == "serve"
            && d.migrations[0].to.node == "n3"
            && d.migrations[0].for_job == "big",
        "migrations {:?}; big waits {}",
        d.migrations,
        reason_of(&d, "big")
    );
}

#[test]
fn production_still_evicts_when_no_move_frees_a_gpu() {
    let mut w = guard_world(false);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d),
        ["b-train"],
        "serve has nowhere to go; big waits {}",
        reason_of(&d, "big")
    );
    assert!(d.migrations.is_empty(), "{:?}", d.migrations);
}

#[test]
fn a_claim_moves_up_to_max_moves_replicas() {
    // n1: three MIG GPUs packed with a's 1g.10gb replicas (21 of them) and
    // one free whole GPU; n2: four MIG GPUs, each with one of a's notebooks
    // and six free instances. b is owed four GPUs on one node: only n1 can
    // be freed, by 21 moves.
    let st = fleet().nodes(2).gpus(4, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(4).burst(4),
            team("b").guarantee(4).burst(4),
        ],
        |_| {},
    );
    w.mig_off("n1", &[3]);
    for k in 0..3 {
        for slot in 0..7 {
            w.running_slice(
                job(&format!("serve-{k}-{slot}"))
                    .team("a")
                    .production()
                    .mig_profile("1g.10gb"),
                &format!("n1:{k}:1g.10gb@{slot}"),
            );
        }
    }
    for k in 0..4 {
        w.running_slice(
            job(&format!("notebook-{k}"))
                .team("a")
                .best_effort()
                .mig_profile("1g.10gb"),
            &format!("n2:{k}:1g.10gb@6"),
        );
    }
    w.submit(&[job("train").team("b").gpus(4).submitted(HOUR)]);
    let d = w.cycle();
    assert_eq!(
        d.migrations.len(),
        21,
        "train waits {}",
        reason_of(&d, "train")
    );
    for m in &d.migrations {
        assert!(m.to.node == "n2" && m.for_job == "train", "migration {m:?}");
    }
}

#[test]
fn a_replica_to_move_gets_its_instance_from_free_space_reshaped() {
    // n1: a's replica on a 3g.40gb instance, the rest free. n2: a's
    // notebook on a 2g.20gb instance and the free space cut into four
    // 1g.10gb instances, where no 3g.40gb fits as it is. b is owed a whole
    // GPU: n1 is freed by moving the replica to n2 once n2's free instances
    // are replaced by a 3g.40gb (the notebook stays).
    let st = fleet().nodes(2).gpus(1, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(2).burst(2),
            team("b").guarantee(1).burst(1),
        ],
        |_| {},
    );
    let l = Layout::parse("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,2g.20gb@4").expect("layout");
    w.st.set_layout("n2", 0, &l).expect("set_layout");
    w.running_slice(
        job("serve").team("a").production().mig_profile("3g.40gb"),
        "n1:0:3g.40gb@0",
    );
    w.running_slice(
        job("notebook")
            .team("a")
            .best_effort()
            .mig_profile("2g.20gb"),
        "n2:0:2g.20gb@4",
    );
    w.submit(&[job("train").team("b").gpus(1).submitted(HOUR)]);
    let d = w.cycle();
    assert!(
        d.preemptions.is_empty() && d.migrations.is_empty(),
        "before n2 is re-partitioned: {d:?}"
    );
    assert!(
        d.reconfigs.len() == 1
            && d.reconfigs[0].node == "n2"
            && d.reconfigs[0].mig
            && d.reconfigs[0].for_job == "train",
        "reconfigs {:?}; train waits {}",
        d.reconfigs,
        reason_of(&d, "train")
    );
    for want in ["3g.40gb@0", "2g.20gb@4"] {
        let p = Placement::parse(want).expect("placement");
        assert!(
            d.reconfigs[0].layout.contains(&p),
            "n2's new layout {} lacks {want}",
            d.reconfigs[0].layout
        );
    }
    w.uncordon_all();
    let d = w.cycle();
    assert!(
        d.migrations.len() == 1
            && d.migrations[0].job == "serve"
            && d.migrations[0].to.node == "n2",
        "migrations {:?}; train waits {}",
        d.migrations,
        reason_of(&d, "train")
    );
}

#[test]
fn moves_first_only_as_they_can_be_made_now() {
    // big (a's production, within a's guarantee) asks for a node of two
    // GPUs. Evicting b's job frees n1 but leaves b owed; freeing n2 moves
    // serve, which has MIG room only once n3's idle GPU is turned to MIG.
    // A MIG change for the moves would make big wait before it evicts
    // anyway: it evicts at once.
    let st = fleet().nodes(3).gpus(2, "H100-80GB").mig().build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(3).burst(3),
            team("b").guarantee(2).burst(2),
            team("c").guarantee(1).burst(1),
        ],
        |_| {},
    );
    w.mig_off("n1", &[0, 1])
        .mig_off("n2", &[1])
        .mig_off("n3", &[0, 1]);
    w.running(job("b-train").team("b").gpus(2), 0, 0, &["n1:0,1"]);
    w.running_slice(
        job("serve").team("a").production().mig_profile("1g.10gb"),
        "n2:0:1g.10gb@6",
    );
    w.running(
        job("c-serve").team("c").production().gpus(1),
        0,
        0,
        &["n3:1"],
    );
    w.submit(&[job("big").team("a").production().gpus(2).submitted(HOUR)]);
    let d = w.cycle();
    assert!(
        d.reconfigs.is_empty() && d.migrations.is_empty(),
        "a MIG change made for moves first: {d:?}; big waits {}",
        reason_of(&d, "big")
    );
    assert_eq!(
        victims_of(&d),
        ["b-train"],
        "big waits {}",
        reason_of(&d, "big")
    );
}

/// n1's MIG GPU holds b's own replica (1g.10gb) and a's 3g.40gb replica;
/// n2's GPU is whole, held by c's 70B service; n3's MIG GPU holds two of
/// c's services with a 1g.10gb hole beside them. c is within its
/// guarantee. b is owed a whole GPU: only n1 can be freed, by moving b's
/// replica to n3's hole and a's replica, which fits nowhere, out of the
/// way. a borrows (no guarantee) unless `a_owns`.
fn stuck_world(a_owns: bool, tweak: impl FnOnce(&mut Config)) -> World {
    let st = fleet().nodes(3).gpus(1, "H100-80GB").mig().build();
    let a = if a_owns {
        team("a").burst(2).guarantee(1)
    } else {
        team("a").burst(2)
    };
    let mut w = world(
        st,
        &[
            a,
            team("b").guarantee(2).burst(2),
            team("c").guarantee(2).burst(2),
        ],
        tweak,
    );
    w.mig_off("n2", &[0]);
    w.running_slice(
        job("own").team("b").production().mig_profile("1g.10gb"),
        "n1:0:1g.10gb@6",
    );
    w.running_slice(
        job("stuck").team("a").production().mig_profile("3g.40gb"),
        "n1:0:3g.40gb@0",
    );
    w.running(job("keep").team("c").production().gpus(1), 0, 0, &["n2:0"]);
    w.running_slice(
        job("c-big").team("c").production().mig_profile("3g.40gb"),
        "n3:0:3g.40gb@0",
    );
    w.running_slice(
        job("c-mid").team("c").production().mig_profile("2g.20gb"),
        "n3:0:2g.20gb@4",
    );
    w.submit(&[job("train").team("b").gpus(1).submitted(HOUR)]);
    w
}

/// How long b waits before a's replica is evicted; none when it is not.
fn stuck_after(w: &mut World) -> Option<Nanos> {
    let mut waited = 0;
    while waited <= 3 * MINUTE {
        w.at(HOUR + waited);
        let d = w.cycle();
        let got = victims_of(&d);
        if !got.is_empty() {
            assert_eq!(got, ["stuck"], "want a's replica stuck");
            assert!(
                d.migrations.len() == 1
                    && d.migrations[0].job == "own"
                    && d.migrations[0].to.node == "n3"
                    && d.migrations[0].for_job == "train",
                "migrations {:?}",
                d.migrations
            );
            return Some(waited);
        }
        assert!(
            d.migrations.is_empty() && !started(&d, "train"),
            "at +{waited}: {d:?} with a's replica in the way"
        );
        waited += 15 * SECOND;
    }
    None
}

#[test]
fn an_owed_claim_evicts_a_borrowed_replica_that_has_nowhere_to_move() {
    let mut w = stuck_world(false, |c| c.evict_stuck_after = MINUTE);
    assert_eq!(stuck_after(&mut w), Some(MINUTE));
    assert_eq!(
        reason_of(&w.decide(), "train"),
        WaitReason::Preempting.as_str()
    );
    assert_eq!(
        stuck_after(&mut stuck_world(false, |c| c.evict_stuck_after = 0)),
        None,
        "without evict_stuck_after"
    );
    assert_eq!(
        stuck_after(&mut stuck_world(true, |c| c.evict_stuck_after = MINUTE)),
        None,
        "a's replica, within a's guarantee"
    );
}

#[test]
fn a_relocated_gang_gets_room_from_borrowed_work_elsewhere() {
    // a's 2-task gang, within a's guarantee and checkpointed 5 minutes ago,
    // holds one GPU of n1 and one of n2; c's jobs, within c's guarantee and
    // checkpointed an hour ago, hold n2's other GPU and one of n3; d
    // borrows the rest. b is owed two GPUs on one node: only n1 can be
    // freed, by evicting d's job there and relocating the gang, which
    // finds room only once d's job on n3 leaves too.
    fn gang_world(tweak: impl FnOnce(&mut Config)) -> World {
        let st = fleet().nodes(3).gpus(2, "H100-80GB").build();
        let mut w = world(
            st,
            &[
                team("a").guarantee(2).burst(2),
                team("b").guarantee(2).burst(2),
                team("c").guarantee(2).burst(2),
                team("d").burst(4),
            ],
            tweak,
        );
        w.running(
            job("pre").team("a").gang(2).gpus(1),
            0,
            HOUR - 5 * MINUTE,
            &["n1:0", "n2:0"],
        );
        w.running(job("d-1").team("d").best_effort().gpus(1), 0, 0, &["n1:1"]);
        w.running(job("c-1").team("c").gpus(1), 0, 0, &["n2:1"]);
        w.running(job("c-2").team("c").gpus(1), 0, 0, &["n3:0"]);
        w.running(job("d-2").team("d").best_effort().gpus(1), 0, 0, &["n3:1"]);
        w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
        w
    }
    // How long train waits before the plan is made.
    fn room_after(w: &mut World) -> Option<Nanos> {
        let (waited, d) = first_victims(w, 4 * MINUTE)?;
        assert_eq!(victims_of(&d), ["d-1", "d-2", "pre"]);
        Some(waited)
    }
    assert_eq!(
        room_after(&mut gang_world(|c| c.gang_room_after = 0)),
        None,
        "without gang_room_after"
    );
    let mut w = gang_world(|_| {});
    assert_eq!(room_after(&mut w), Some(2 * MINUTE), "gang_room_after");
    w.release();
    let now = w.now;
    w.job_mut("pre").submitted = now;
    let d = w.cycle();
    assert!(
        started(&d, "pre") && nodes_of(&starts_of(&d, "pre")) == ["n2", "n3"],
        "pre did not start again on n2 and n3: {:?}; pre waits {}",
        starts_of(&d, "pre"),
        reason_of(&d, "pre")
    );
    assert!(
        started(&d, "train") && node_of(&w, "train") == "n1",
        "train waits {}",
        reason_of(&d, "train")
    );
}

#[test]
fn relocation_rounds_that_do_not_start_the_claim_back_off() {
    // train relocates c's experiment off n1 round after round, and each
    // time another experiment of c's takes the GPU before train can. A
    // plan that evicts is a preemption round like a victim search's: past
    // FREE_ROUNDS, train's next waits.
    let st = fleet().nodes(2).gpus(2, "H100-80GB").build();
    let mut w = world(
        st,
        &[
            team("a").guarantee(1).burst(1),
            team("b").guarantee(2).burst(2),
            team("c").guarantee(1).burst(1),
        ],
        |_| {},
    );
    let exp = |i: i32| format!("exp-{i}");
    w.running(
        job(&exp(1)).team("c").best_effort().gpus(1),
        0,
        HOUR - 5 * MINUTE,
        &["n1:0"],
    );
    w.running(job("a-batch").team("a").gpus(1), 0, 0, &["n2:0"]);
    w.submit(&[job("train").team("b").gpus(2).submitted(HOUR)]);
    let (mut now, mut last) = (HOUR, HOUR);
    for round in 1..=FREE_ROUNDS + 1 {
        w.at(now);
        let d = w.cycle();
        assert!(
            victims_of(&d) == [exp(round)] && d.migrations.is_empty(),
            "round {round}: victims {:?}, migrations {:?}; train waits {}",
            victims_of(&d),
            d.migrations,
            reason_of(&d, "train")
        );
        w.release().finish(&exp(round));
        w.running(
            job(&exp(round + 1)).team("c").best_effort().gpus(1),
            now,
            now,
            &["n1:0"],
        );
        last = now;
        now += 10 * SECOND;
    }
    for at in [now, last + SEARCH_BACKOFF_FOR - SECOND] {
        w.at(at);
        let d = w.cycle();
        assert!(
            d.preemptions.is_empty(),
            "{} after the last round: train evicts {:?}",
            at - last,
            victims_of(&d)
        );
    }
    w.at(last + SEARCH_BACKOFF_FOR);
    let d = w.cycle();
    assert_eq!(
        victims_of(&d),
        [exp(FREE_ROUNDS + 2)],
        "train waits {}",
        reason_of(&d, "train")
    );
}
