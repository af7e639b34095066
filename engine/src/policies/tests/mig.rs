//! Where partita puts a MIG instance (mig.rs). The Go build has no test of
//! its own for it; these cases follow mig.go's order of criteria.

use crate::gpu::Placement;
use crate::placement::Hint;
use crate::policies::mig::{MIG_BAND, MIG_EXISTING, MIG_FLEX_UNIT, Maximal};

use super::helpers::{
    allocate_on, grants_text, must_policy, node, place_one, running, score_on, task, world,
};
use super::registry::full_config;

fn slice_hint(gpu: usize, placement: &str) -> Option<Hint> {
    Some(Hint::on_slice(
        gpu,
        Placement::parse(placement).expect("a test placement parses"),
    ))
}

#[test]
fn takes_a_free_instance_that_exists_before_creating_one() {
    // 1g.10gb could also be created at 4 or 5 beside the 3g.40gb.
    let st = world(vec![
        node("n")
            .gpus(1, "H100-80GB")
            .mig()
            .layout("3g.40gb@0,1g.10gb@6"),
    ]);
    let mut p = must_policy("partita", full_config());
    let (score, hint) = score_on(&mut p, &st, &task("t").mig_profile("1g.10gb"));
    assert!(score >= MIG_BAND + MIG_EXISTING, "score {score}");
    assert_eq!(hint, slice_hint(0, "1g.10gb@6"));
}

#[test]
fn splits_a_gpu_in_use_before_an_idle_one() {
    let mut st = world(vec![
        node("n").gpus(2, "H100-80GB").mig().layout("3g.40gb@0"),
    ]);
    allocate_on(&mut st, "n", vec![running("a").instance(1, "3g.40gb@0")]);
    let mut p = must_policy("partita", full_config());
    let (score, hint) = score_on(&mut p, &st, &task("t").mig_profile("1g.10gb"));
    assert_eq!(hint.map(|h| h.gpu), Some(1), "score {score}");
    // Tightest fit: the 3g.40gb holds 4 memory slices and the new 1g.10gb
    // one, so 5 of 8 are taken: 10 each, in the lowest band.
    assert_eq!(score % MIG_FLEX_UNIT, 50);
}

#[test]
fn goes_to_a_node_in_use_before_an_idle_one() {
    // "idle" has the better rank; "busy" runs a CPU-only task.
    let mut st = world(vec![
        node("idle").gpus(1, "H100-80GB").mig(),
        node("busy").gpus(1, "H100-80GB").mig(),
    ]);
    allocate_on(&mut st, "busy", vec![running("c").cpu(1000)]);
    let a = place_one(
        must_policy("partita", full_config()),
        &st,
        &task("t").mig_profile("1g.10gb"),
    )
    .expect("the instance is placed");
    assert_eq!(a.node, "busy", "{}", grants_text(&a.grants));
}

#[test]
fn keeps_the_gpu_flexible() {
    // On an empty H100, a 3g.40gb can start at 0 or 4. Either way the rest
    // of the GPU can still be carved up, but in fewer ways at 0: the 4g
    // profile needs slices 0-3, and only the start at 4 leaves it room.
    let st = world(vec![node("n").gpus(1, "H100-80GB").mig()]);
    let mut p = must_policy("partita", full_config());
    let (_, hint) = score_on(&mut p, &st, &task("t").mig_profile("3g.40gb"));
    let model = st.node(0).gpus()[0].model();
    let flex = |start: i32| {
        let pl = Placement::new("3g.40gb", start);
        model
            .maximal_layouts()
            .iter()
            .filter(|l| l.contains(&pl))
            .count()
    };
    let best = if flex(4) > flex(0) { 4 } else { 0 };
    assert_ne!(flex(0), flex(4), "the test needs the starts to differ");
    assert_eq!(hint, slice_hint(0, &format!("3g.40gb@{best}")));
}

/// Every catalog model's maximal layouts fit the flexibility's bit masks,
/// and the masks count what a search of the layouts counts.
#[test]
fn maximal_layouts_as_masks_count_as_the_layouts() {
    for m in crate::gpu::catalog().iter().filter(|m| m.mig) {
        let max = Maximal::of(m);
        let layouts = m.maximal_layouts();
        let count = |l: &[Placement]| {
            layouts
                .iter()
                .filter(|full| l.iter().all(|p| full.contains(p)))
                .count() as i64
        };
        assert_eq!(max.containing(&[]), count(&[]), "{}", m.name);
        for p in &max.placements {
            let one = std::slice::from_ref(p);
            assert_eq!(max.containing(one), count(one), "{} {p:?}", m.name);
            for q in &max.placements {
                let two = [p.clone(), q.clone()];
                assert_eq!(max.containing(&two), count(&two), "{} {p:?} {q:?}", m.name);
            }
        }
        let foreign = [Placement::new("9g.999gb", 0)];
        assert_eq!(max.containing(&foreign), 0, "{}", m.name);
    }
}
