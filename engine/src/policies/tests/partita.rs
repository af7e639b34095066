use std::sync::Arc;

use crate::cluster::State;
use crate::frag::{self, Shape};
use crate::policies::Config;

use super::helpers::{allocate_on, canonical, must_policy, node, place_one, running, task, world};

/// The policy configuration for a mix of one-GPU tasks: `counts` of
/// (milli, tasks), all typical, each with `cpu(milli)` millicores (none
/// when `cpu` is none).
fn mix_config(counts: &[(i64, usize)], cpu: Option<fn(i64) -> i64>) -> Config {
    let mut shapes = Vec::new();
    for &(milli, n) in counts {
        let s = Shape {
            milli,
            num: 1,
            cpu_milli: cpu.map_or(0, |cpu| cpu(milli)),
            ..Shape::default()
        };
        shapes.extend(std::iter::repeat_n(s, n));
    }
    Config {
        typical: Some(Arc::new(frag::typicals(&shapes, 1.0, Some(&canonical)))),
        shapes,
        canonical: Some(canonical),
        ..Config::default()
    }
}

/// Two one-GPU nodes, "a<first>" (rank 0) running a share of `first`
/// milli and "a<second>" one of `second`.
fn two_shares(first: i32, second: i32) -> State {
    let (a, b) = (format!("a{first}"), format!("a{second}"));
    let mut st = world(vec![
        node(&a).gpus(1, "V100-16GB"),
        node(&b).gpus(1, "V100-16GB"),
    ]);
    allocate_on(&mut st, &a, vec![running("x").share(0, first)]);
    allocate_on(&mut st, &b, vec![running("y").share(0, second)]);
    st
}

/// The node `policy` places a share of `milli` on.
fn placed_share(policy: &str, cfg: &Config, st: &State, milli: i32) -> String {
    let p = must_policy(policy, cfg.clone());
    match place_one(p, st, &task("t").share(milli)) {
        Ok(a) => a.node,
        Err(e) => panic!("{policy}: {e}"),
    }
}

/// The expected tasks are, of ten, one 470, one 650, one 320, three 230
/// shares and four whole GPUs. A 230 arrives; "a650" holds a 650 (350
/// left), "a470" a 470 (530 left), and ties would go to "a650" (rank 0).
///
/// FGD looks one task ahead: the 350 beside the 650 is lost to 60 % of
/// tasks, so filling it (120 left, lost to all) gains 350·.6 − 120 = 90,
/// scoring 52, against 530·.5 − 300·.7 = 55 (score 51) beside the 470.
/// Partita's horizon for this mix is 3 (the 470's room, 530, is lost to
/// half the tasks: ⌊0.9·ln(60/1060)/ln .5⌋): the 350 room is lost only if
/// three tasks in a row cannot use it (.6³), so filling it with a 230
/// turns 75.6 into 120 (score 48), and the 530 room 66 into 300·.7³ = 103
/// (score 49). The 230 goes beside the 470; the 650 waits for the 320.
#[test]
fn partita_leaves_the_room_beside_a_650_for_a_320() {
    let cfg = mix_config(&[(470, 1), (650, 1), (320, 1), (230, 3), (1000, 4)], None);
    let st = two_shares(650, 470);
    for (policy, want) in [("fgd", "a650"), ("partita", "a470")] {
        assert_eq!(
            placed_share(policy, &cfg, &st, 230),
            want,
            "{policy} placed the 230"
        );
    }
}

/// The mix of 100 expected tasks most of these tests use: 62 whole GPUs,
/// 13 810s, nine 470s, four 320s, three 650s, two 230s, two 460s, and five
/// rare shares (50..90) that fall outside the 95 % of typical tasks.
const ALIBABA_LIKE: [(i64, usize); 12] = [
    (1000, 62),
    (810, 13),
    (470, 9),
    (320, 4),
    (650, 3),
    (230, 2),
    (460, 2),
    (50, 1),
    (60, 1),
    (70, 1),
    (80, 1),
    (90, 1),
];

/// The 470's room (530) is lost to 78/95 of the `ALIBABA_LIKE` tasks, so
/// the horizon is 13 (⌊0.9·ln(60/1060)/ln .821⌋). A 230 arrives; "a650"
/// holds a 650 (350 left, rank 0), "a230" a 230 (770 left).
///
/// Over 13 arrivals the 350 room is lost with chance (89/95)¹³: 150
/// milli, so filling it (120 left, lost for good) gains 30 and scores 50,
/// against 49 beside the 230. But the most frequent share that fits 350 is
/// the 320, which leaves 30, no more than two 470s leave (60): the room
/// gets twice the horizon, 64 milli over 26 arrivals, and filling it
/// scores 48. The 230 goes beside the 230.
#[test]
fn partita_keeps_the_room_beside_a_650_over_twice_the_horizon() {
    let cfg = mix_config(&ALIBABA_LIKE, None);
    assert_eq!(
        placed_share("partita", &cfg, &two_shares(650, 230), 230),
        "a230"
    );
}

/// Of 100 expected tasks, 40 810s, 36 160s, 14 whole GPUs, five 470s, and
/// five rare shares that fall outside the 95 % of typical tasks. A 160
/// arrives; "a470" holds a 470 (530 left, rank 0), "a810" an 810 (190
/// left).
///
/// The horizon is 4 (the 530 room is lost to 54/95 of tasks), and the 190
/// room, which the 160 fills leaving 30, gets 8: the fragment expects the
/// sliver filled anyway, so filling it now (4 milli of fragment to 30)
/// scores 49, and the 470's room (530 to 370, 55 milli of fragment to 55)
/// 50. But the 810s leave more slivers than the 160s can fill, and what
/// the 160 takes beside the 470 is room a 470 could use: partita puts it
/// in the sliver.
#[test]
fn partita_fills_the_sliver_beside_an_810_first() {
    let cfg = mix_config(
        &[
            (810, 40),
            (160, 36),
            (1000, 14),
            (470, 5),
            (50, 1),
            (60, 1),
            (70, 1),
            (80, 1),
            (90, 1),
        ],
        None,
    );
    assert_eq!(
        placed_share("partita", &cfg, &two_shares(470, 810), 160),
        "a810"
    );
}

/// The `ALIBABA_LIKE` mix, with 8 cores for a whole GPU and 4 for every
/// share. A 320 (1 core) arrives; "tight" has a free GPU but only 5 cores
/// (rank 0), so no whole GPU fits there and most of its GPU counts as
/// stranded; "a650" holds a 650 (350 left, rank 1).
///
/// The fragment favours "tight" (54 against 50): a light 320 there frees
/// more stranded GPU than it closes elsewhere. But beside the 650 the 320
/// leaves 30, no more than two 470s leave (60): a fit as tight as the
/// pairing the horizon keeps, so partita takes it before asking the
/// fragment, and the 350 room does not wait for a 320 that may not come.
#[test]
fn partita_takes_a_near_perfect_fit_first() {
    let cfg = mix_config(
        &ALIBABA_LIKE,
        Some(|milli| if milli == 1000 { 8000 } else { 4000 }),
    );
    let mut st = world(vec![
        node("tight").cpu(5000).gpus(1, "V100-16GB"),
        node("a650").gpus(1, "V100-16GB"),
    ]);
    allocate_on(&mut st, "a650", vec![running("x").share(0, 650)]);
    let a = place_one(
        must_policy("partita", cfg),
        &st,
        &task("t").cpu(1000).share(320),
    );
    assert_eq!(a.map(|a| a.node), Ok("a650".to_string()));
}
