//! Gangs all or nothing, leaf switches, replicas, and naive's one by one
//! (Go's `gang_test.go`).

use super::helpers::{fleet, job, new_scheduler, new_world, nodes_of, reason_of, starts_of};
use crate::sched::{Phase, Wait, WaitReason};

#[test]
fn gang_starts_all_tasks_or_none() {
    for (preset, free, starts) in [
        ("partita", 3, false),
        ("gang-drf", 3, false),
        ("partita", 4, true),
        ("gang-drf", 4, true),
    ] {
        let st = fleet().nodes(1).gpus(free, "H100-80GB").build();
        let sch = new_scheduler(preset, &st);
        let mut w = new_world(st, sch, &[]);
        w.submit(&[job("g").gang(4).gpus(1)]);
        let d = w.cycle();
        if !starts {
            assert!(
                d.starts.is_empty(),
                "{preset} on {free}: started {:?}",
                d.starts
            );
            assert_eq!(
                d.waiting.get("g"),
                Some(&Wait {
                    position: 1,
                    reason: WaitReason::Gang
                }),
                "{preset} on {free}"
            );
            continue;
        }
        let mut tasks: Vec<usize> = starts_of(&d, "g").iter().map(|s| s.task).collect();
        tasks.sort();
        assert_eq!(tasks, [0, 1, 2, 3], "{preset} on {free}");
        assert!(
            !d.waiting.contains_key("g"),
            "{preset}: g both started and waits"
        );
        assert_eq!(w.job("g").phase, Phase::Running);
    }
}

#[test]
fn the_gang_goes_under_the_one_leaf_it_fits_under() {
    // Leaf a: 2 nodes x 4 GPUs. Leaf b: 3 nodes x 2 GPUs, more nodes for
    // the default spreading to use. Four tasks of 2 GPUs fit only under a.
    let st = fleet()
        .nodes(2)
        .named("a")
        .gpus(4, "H100-80GB")
        .leaf("a")
        .nodes(3)
        .named("b")
        .gpus(2, "H100-80GB")
        .leaf("b")
        .build();
    for preset in ["partita", "gang-drf"] {
        let sch = new_scheduler(preset, &st);
        let mut w = new_world(st.clone(), sch, &[]);
        w.submit(&[job("g").gang(4).gpus(2)]);
        let d = w.decide();
        assert_eq!(nodes_of(&starts_of(&d, "g")), ["a1", "a2"], "{preset}");
    }
}

#[test]
fn the_leaf_with_the_most_free_gpu_is_tried_first() {
    // Both leaves could take two 4-GPU tasks; b has more free.
    let st = fleet()
        .nodes(1)
        .named("a")
        .gpus(8, "H100-80GB")
        .leaf("a")
        .nodes(2)
        .named("b")
        .gpus(8, "H100-80GB")
        .leaf("b")
        .build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("g").gang(2).gpus(4)]);
    let d = w.decide();
    let nodes = nodes_of(&starts_of(&d, "g"));
    assert!(
        nodes.iter().all(|n| n == "b1" || n == "b2"),
        "gang placed on {nodes:?}, want under leaf b only"
    );
    assert_eq!(starts_of(&d, "g").len(), 2);
}

#[test]
fn a_gang_that_fits_under_no_single_leaf_spans_leaves() {
    let st = fleet()
        .nodes(1)
        .named("a")
        .gpus(4, "H100-80GB")
        .leaf("a")
        .nodes(1)
        .named("b")
        .gpus(4, "H100-80GB")
        .leaf("b")
        .build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("g").gang(3).gpus(2)]);
    let d = w.decide();
    assert_eq!(nodes_of(&starts_of(&d, "g")), ["a", "b"]);
}

#[test]
fn replicas_start_independently() {
    // Three replicas of 2 GPUs on one 4-GPU node: two start now, the third
    // when room frees.
    let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("r").replicas(3).gpus(2)]);
    w.running(job("other").gpus(1), 0, 0, &["n1:0"]);
    let d = w.cycle();
    assert_eq!(
        starts_of(&d, "r").len(),
        1,
        "replicas started on 3 free GPUs"
    );
    assert!(
        d.waiting.contains_key("r"),
        "r, with two replicas left, is not waiting"
    );
    assert_eq!(w.job("r").phase, Phase::Pending);

    w.finish("other");
    let d = w.cycle();
    let starts = starts_of(&d, "r");
    assert_eq!(starts.len(), 1, "second cycle");
    assert!(
        w.job("r").placed[starts[0].task].is_some(),
        "start names a task the world did not record"
    );
    assert_eq!(w.job("r").phase, Phase::Pending);
    assert_eq!(reason_of(&d, "r"), WaitReason::NoRoom.as_str());
}

#[test]
fn replicas_left_waiting_are_not_called_a_gang() {
    let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("r").replicas(3).gpus(2)]);
    w.running(job("other").gpus(1), 0, 0, &["n1:0"]);
    let d = w.decide();
    assert_eq!(reason_of(&d, "r"), WaitReason::NoRoom.as_str());
}

#[test]
fn replicas_all_start_in_one_decision_when_they_fit() {
    let st = fleet().nodes(2).gpus(4, "H100-80GB").build();
    let sch = new_scheduler("partita", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("r").replicas(3).gpus(2)]);
    let d = w.cycle();
    assert_eq!(starts_of(&d, "r").len(), 3);
    assert_eq!(w.job("r").phase, Phase::Running);
}

#[test]
fn naive_places_tasks_one_by_one_and_holds_them() {
    // A gang of 4 on 3 free GPUs: without gang scheduling three tasks
    // start and hold their GPUs while the fourth waits.
    let st = fleet().nodes(1).gpus(4, "H100-80GB").build();
    let sch = new_scheduler("naive", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("g").gang(4).gpus(1)]);
    w.running(job("other").gpus(1), 0, 0, &["n1:3"]);

    let d = w.cycle();
    assert_eq!(starts_of(&d, "g").len(), 3);
    assert_eq!(
        d.waiting.get("g"),
        Some(&Wait {
            position: 1,
            reason: WaitReason::Gang
        })
    );

    let d = w.cycle();
    assert!(
        d.starts.is_empty(),
        "with no room a second cycle started {:?}",
        d.starts
    );
    assert_eq!(reason_of(&d, "g"), WaitReason::Gang.as_str());
    assert_eq!(
        w.st.node(0).fully_free_gpus(),
        0,
        "g's tasks hold their GPUs"
    );

    w.finish("other");
    let d = w.cycle();
    assert_eq!(starts_of(&d, "g").len(), 1);
    assert_eq!(w.job("g").phase, Phase::Running);
}

#[test]
fn naive_with_no_room_at_all_waits_for_room() {
    let st = fleet().nodes(1).gpus(2, "H100-80GB").build();
    let sch = new_scheduler("naive", &st);
    let mut w = new_world(st, sch, &[]);
    w.submit(&[job("g").gang(2).gpus(1)]);
    w.running(job("other").gpus(2), 0, 0, &["n1:0,1"]);
    let d = w.cycle();
    assert_eq!(reason_of(&d, "g"), WaitReason::NoRoom.as_str());
}
