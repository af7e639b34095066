//! The presets (Go's `config_test.go`).

use super::helpers::{fleet, new_scheduler};
use crate::sched::{MINUTE, Order, SECOND, preset};

#[test]
fn preset_sets_the_flags_of_each_scheduler() {
    #[derive(Debug, PartialEq)]
    struct Flags {
        gangs: bool,
        class_order: bool,
        borrow: bool,
        preempt: bool,
        mig: bool,
        reserve: bool,
        order: Order,
        reconfig_cooldown: i64,
        claim_cooldown: i64,
        reserve_after: i64,
        evict_stuck_after: i64,
        reclaim_straddling_after: i64,
        gang_room_after: i64,
    }
    let none = Flags {
        gangs: false,
        class_order: false,
        borrow: false,
        preempt: false,
        mig: false,
        reserve: false,
        order: Order::Fifo,
        reconfig_cooldown: 0,
        claim_cooldown: 0,
        reserve_after: 0,
        evict_stuck_after: 0,
        reclaim_straddling_after: 0,
        gang_room_after: 0,
    };
    let cases = [
        ("naive", Flags { ..none }),
        (
            "gang-drf",
            Flags {
                gangs: true,
                class_order: true,
                borrow: true,
                preempt: true,
                order: Order::Drf,
                ..none
            },
        ),
        (
            "partita",
            Flags {
                gangs: true,
                class_order: true,
                borrow: true,
                preempt: true,
                mig: true,
                reserve: true,
                order: Order::FairShare,
                reconfig_cooldown: 10 * MINUTE,
                claim_cooldown: MINUTE,
                reserve_after: 10 * MINUTE,
                evict_stuck_after: MINUTE,
                reclaim_straddling_after: 2 * MINUTE,
                gang_room_after: 2 * MINUTE,
            },
        ),
    ];
    for (name, want) in cases {
        let c = preset(name).unwrap_or_else(|e| panic!("preset({name}): {e}"));
        let got = Flags {
            gangs: c.gangs,
            class_order: c.class_order,
            borrow: c.borrow,
            preempt: c.preempt,
            mig: c.mig,
            reserve: c.reserve,
            order: c.order,
            reconfig_cooldown: c.reconfig_cooldown,
            claim_cooldown: c.claim_cooldown,
            reserve_after: c.reserve_after,
            evict_stuck_after: c.evict_stuck_after,
            reclaim_straddling_after: c.reclaim_straddling_after,
            gang_room_after: c.gang_room_after,
        };
        assert_eq!(got, want, "preset({name}) flags");
        assert_eq!(c.name, name);
        assert_eq!(
            (c.grace, c.headroom),
            (30 * SECOND, 0.10),
            "preset({name}): grace and headroom"
        );
    }
}

#[test]
fn preset_refuses_an_unknown_name() {
    for name in ["", "Partita", "volcano"] {
        let err = preset(name).expect_err(name).to_string();
        for want in ["unknown scheduler", "naive", "gang-drf", "partita"] {
            assert!(
                err.contains(want),
                "preset({name:?}) error {err:?} does not mention {want:?}"
            );
        }
    }
    assert_eq!(
        preset("volcano").expect_err("unknown").to_string(),
        "unknown scheduler \"volcano\" (known: naive, gang-drf, partita)"
    );
}

#[test]
fn scheduler_keeps_its_config() {
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    let s = new_scheduler("gang-drf", &st);
    assert_eq!(s.config().name, "gang-drf");
    assert_eq!(s.config().order, Order::Drf);
}

#[test]
fn build_places_with_k8s_default_or_partita() {
    let st = fleet().nodes(1).gpus(8, "H100-80GB").build();
    for (name, policy) in [
        ("naive", "k8s-default"),
        ("gang-drf", "k8s-default"),
        ("partita", "partita"),
    ] {
        let (c, p) = crate::sched::build(name, &st, &[]).expect("build");
        assert_eq!((c.name.as_str(), p.name.as_str()), (name, policy));
    }
    assert!(crate::sched::build("volcano", &st, &[]).is_err());
}
