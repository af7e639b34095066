use crate::frag::{self, Distribution, Shape};
use crate::policies::partita::{horizon_for, pairing_share, room_horizons, sliver_of};

fn mix_of(counts: &[(Shape, usize)]) -> Distribution {
    let mut shapes = Vec::new();
    for (s, n) in counts {
        shapes.extend(std::iter::repeat_n(s.clone(), *n));
    }
    frag::typicals(&shapes, 1.0, None)
}

fn one_gpu(milli: i64) -> Shape {
    Shape {
        milli,
        num: 1,
        ..Shape::default()
    }
}

/// The horizon is 0.9 of the one where a second 470 would rather open a
/// GPU (530 room) than pair (60 left): ln(60/1060)/ln q, q the tasks that
/// cannot use the 530 room.
#[test]
fn horizon_for_stops_before_pairing_tips() {
    let (s470, s810, s320, whole) = (one_gpu(470), one_gpu(810), one_gpu(320), one_gpu(1000));
    let pair = Shape {
        milli: 1000,
        num: 2,
        ..Shape::default()
    };
    let cpu_only = Shape {
        cpu_milli: 4000,
        ..Shape::default()
    };
    let cases = [
        // q = .6: tip 5.62, 0.9 of it 5.06
        (
            "share-heavy",
            vec![
                (s470.clone(), 4),
                (s810.clone(), 3),
                (whole.clone(), 2),
                (cpu_only.clone(), 1),
            ],
            5,
        ),
        // q = .8 (whole GPUs, 2-GPU tasks and CPU-only ones count): tip 12.87
        (
            "whole-GPU heavy",
            vec![
                (s470.clone(), 2),
                (whole.clone(), 5),
                (pair, 2),
                (cpu_only, 1),
            ],
            11,
        ),
        // The most frequent share in (333, 500] decides, not the 320: q = .4,
        // tip 3.13.
        (
            "320 more frequent",
            vec![
                (s320.clone(), 5),
                (s470, 1),
                (s810.clone(), 1),
                (whole.clone(), 3),
            ],
            2,
        ),
        (
            "no share that pairs",
            vec![(s320, 5), (s810, 1), (whole, 3)],
            5,
        ),
    ];
    for (name, mix, want) in cases {
        assert_eq!(horizon_for(&mix_of(&mix)), want, "{name}: horizon_for");
    }
}

/// 810s leave 190 rooms faster than the 160s fill them (40 against 36 of
/// the 95 typical tasks; the five rare shares fall outside), so a room of
/// at most 190 gets no horizon, though the 160 would fill it tightly (30
/// left) and the fourth round's rule alone gives it twice the horizon; the
/// 200 room keeps that (40 left).
#[test]
fn room_horizons_count_slivers_lost_at_once() {
    let counts = [
        (810, 40),
        (160, 36),
        (1000, 14),
        (470, 5),
        (50, 1),
        (60, 1),
        (70, 1),
        (80, 1),
        (90, 1),
    ];
    let mut shapes = Vec::new();
    for (milli, n) in counts {
        shapes.extend(std::iter::repeat_n(one_gpu(milli), n));
    }
    let d = frag::typicals(&shapes, frag::DEFAULT_THRESHOLD, None);
    let h = horizon_for(&d);
    let rooms = room_horizons(&d, h);
    for l in [0, 30, 160, 190] {
        assert_eq!(rooms[l], 0, "room {l}: want no horizon (a sliver)");
    }
    assert_eq!(rooms[200], 2 * h, "room 200: want twice h");
    assert_eq!(rooms[469], h, "room 469");
    assert_eq!(sliver_of(&d), 190);
}

/// Without a share that pairs, every room keeps the horizon (an empty
/// table), and without a frequent big share there is no sliver.
#[test]
fn room_horizons_and_sliver_without_the_shares_they_need() {
    let d = mix_of(&[(one_gpu(320), 5), (one_gpu(1000), 3)]);
    assert!(room_horizons(&d, horizon_for(&d)).is_empty());
    assert_eq!(sliver_of(&d), 0);
    // 810s, but the shares that fit their 190 (160s) are as frequent:
    // such rooms do not outnumber their fillers.
    let d = mix_of(&[(one_gpu(810), 4), (one_gpu(160), 4), (one_gpu(470), 1)]);
    assert_eq!(sliver_of(&d), 0);
}

/// Of two shares as frequent, the larger pairs: the Go build's map walk
/// breaks the tie so, whatever its order.
#[test]
fn pairing_share_ties_go_to_the_larger() {
    let d = mix_of(&[(one_gpu(400), 2), (one_gpu(470), 2), (one_gpu(1000), 1)]);
    assert_eq!(pairing_share(&d), 470);
    let d = mix_of(&[(one_gpu(450), 3), (one_gpu(350), 3), (one_gpu(1000), 1)]);
    assert_eq!(pairing_share(&d), 450);
}
