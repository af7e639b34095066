use std::collections::BTreeSet;

use super::*;

/// One successful change to `busy_world`, named for failure messages, with
/// the node it changes.
struct Mutation {
    name: &'static str,
    node: &'static str,
    apply: fn(&mut State) -> Result<(), ClusterError>,
}

/// A successful change of every kind `busy_world` allows.
fn mutations() -> Vec<Mutation> {
    let m = |name, node, apply| Mutation { name, node, apply };
    vec![
        m("allocates a share", "v100", |s| {
            s.allocate(task("new").on("v100").cpu(100).memory(10).share(0, 100).a())
        }),
        m("allocates whole GPUs", "v100", |s| {
            s.allocate(task("new").on("v100").whole(4).whole(5).a())
        }),
        m("allocates CPU only", "cpu", |s| {
            s.allocate(task("new").on("cpu").cpu(1000).memory(1000).a())
        }),
        m("takes a free instance", "h100", |s| {
            s.allocate(task("new").on("h100").instance(0, "1g.10gb+me@4").a())
        }),
        m("creates an instance", "h100", |s| {
            s.allocate(task("new").on("h100").instance(1, "1g.10gb@3").a())
        }),
        m("releases a share", "v100", |s| {
            s.release("v100", "holder").map(drop)
        }),
        m("releases an instance", "h100", |s| {
            s.release("h100", "inst").map(drop)
        }),
        m("sets a layout", "h100", |s| {
            s.set_layout("h100", 1, &must_layout("7g.80gb@0"))
        }),
        m("sets the same layout again", "h100", |s| {
            s.set_layout("h100", 0, &must_layout("3g.40gb@0,1g.10gb+me@4"))
        }),
        m("turns MIG off", "h100", |s| s.set_mig("h100", 1, false)),
        m("turns MIG on again", "h100", |s| s.set_mig("h100", 1, true)),
        m("cordons a GPU", "v100", |s| s.cordon("v100", 3, true)),
    ]
}

#[test]
fn mutating_a_copy_leaves_the_original() {
    type Copy = fn(&State) -> State;
    let copies: [(&str, Copy); 2] = [("clone", State::clone), ("scratch", State::scratch)];
    for (how, copy) in copies {
        for m in mutations() {
            let what = format!("{how}/{}", m.name);
            let s = busy_world();
            let original = take_snapshot(&s);
            let mut c = copy(&s);
            assert_eq!(
                describe(&c),
                original.text,
                "{what}: a fresh copy differs from its original"
            );
            assert_eq!(
                c.version(),
                s.version(),
                "{what}: a fresh copy has another version"
            );
            (m.apply)(&mut c).unwrap();
            original.same(&s, &what);
            assert_ne!(
                describe(&c),
                original.text,
                "{what}: the mutation did not change the copy"
            );
            assert_ne!(
                c.version(),
                s.version(),
                "{what}: the changed copy kept its version"
            );
            must_check(&c);
            check_gens(&original, &c, m.node);
        }
    }
}

#[test]
fn mutating_the_original_leaves_a_clone() {
    for m in mutations() {
        let mut s = busy_world();
        let c = s.clone();
        let clone = take_snapshot(&c);
        (m.apply)(&mut s).unwrap();
        clone.same(&c, m.name);
        assert_ne!(
            describe(&s),
            clone.text,
            "{}: the mutation did not change the original",
            m.name
        );
        must_check(&s);
        check_gens(&clone, &s, m.node);
    }
}

#[test]
fn a_state_whose_copies_are_gone_changes_its_nodes_in_place() {
    // The Go build's Scratch exists so that the original keeps its nodes;
    // here reference counts decide: once the copies are dropped, a change
    // copies no node.
    for m in mutations() {
        let mut s = busy_world();
        let before = node_handles(&s);
        drop(s.scratch());
        drop(s.clone());
        (m.apply)(&mut s).unwrap();
        let i = s.lookup(m.node).unwrap();
        assert!(
            std::ptr::eq(Arc::as_ptr(&s.slot(i).node), before[i]),
            "{}: node {} was copied",
            m.name,
            m.node
        );
    }
}

/// Fails unless, compared with the snapshot, the changed node has a new,
/// higher gen and is a fresh copy, and every other node kept both.
#[track_caller]
fn check_gens(before: &Snapshot, after: &State, changed: &str) {
    for (i, n) in after.nodes().enumerate() {
        let (old, old_gen) = (before.nodes[i], before.gens[i]);
        if n.name() != changed {
            assert!(
                std::ptr::eq(n, old) && n.generation() == old_gen,
                "untouched node {}: gen {} -> {}",
                n.name(),
                old_gen,
                n.generation()
            );
            continue;
        }
        assert!(
            !std::ptr::eq(n, old),
            "changed node {} was changed in place, under the other State",
            n.name()
        );
        assert!(
            n.generation() > old_gen,
            "changed node {}: gen {} -> {}, want a new, higher one",
            n.name(),
            old_gen,
            n.generation()
        );
    }
}

#[test]
fn both_sides_of_a_clone_change_independently() {
    let mut s = busy_world();
    let mut c = s.clone();
    allocate(&mut s, &[task("left").on("v100").share(1, 600)]);
    allocate(&mut c, &[task("right").on("v100").share(1, 700)]);
    c.release("h100", "inst").unwrap();
    s.set_layout("h100", 1, &must_layout("3g.40gb@0")).unwrap();

    let (sv, cv) = (
        s.node_by_name("v100").unwrap(),
        c.node_by_name("v100").unwrap(),
    );
    assert_eq!((sv.gpus()[1].used(), cv.gpus()[1].used()), (600, 700));
    assert!(
        sv.task("right").is_none(),
        "the clone's task appeared in the original"
    );
    assert!(
        cv.task("left").is_none(),
        "the original's task appeared in the clone"
    );
    assert!(
        s.node_by_name("h100").unwrap().task("inst").is_some(),
        "releasing in the clone released in the original"
    );
    assert_eq!(
        c.node_by_name("h100").unwrap().gpus()[1]
            .layout()
            .to_string(),
        ""
    );
    assert_ne!(
        sv.generation(),
        cv.generation(),
        "two different versions of v100 share a gen"
    );
    assert_ne!(
        s.version(),
        c.version(),
        "two different States share a version"
    );
    assert!(
        std::ptr::eq(s.node(0), c.node(0)),
        "the untouched node was copied"
    );
    must_check(&s);
    must_check(&c);
}

#[test]
fn clone_of_a_clone_is_independent_of_both() {
    let mut s = busy_world();
    let mut c1 = s.clone();
    allocate(&mut c1, &[task("one").on("v100").share(2, 100)]);
    let mut c2 = c1.clone();
    let (snap_s, snap_1) = (take_snapshot(&s), take_snapshot(&c1));
    allocate(&mut c2, &[task("two").on("v100").share(2, 200)]);
    snap_s.same(&s, "changing the grandchild");
    snap_1.same(&c1, "changing the grandchild");

    let snap_2 = take_snapshot(&c2);
    allocate(&mut c1, &[task("three").on("v100").share(3, 300)]);
    snap_s.same(&s, "changing the child");
    snap_2.same(&c2, "changing the child");

    let snap_1 = take_snapshot(&c1);
    allocate(&mut s, &[task("four").on("v100").share(4, 400)]);
    snap_1.same(&c1, "changing the parent");
    snap_2.same(&c2, "changing the parent");
}

#[test]
fn every_change_of_a_family_of_states_gets_a_new_number() {
    // Siblings cloned from one State and changed the same way must still
    // get different gens and versions: a cache keyed by them must never
    // take one sibling's node for the other's.
    let base = busy_world();
    let mut seen: BTreeSet<u64> = gens(&base).into_iter().collect();
    assert!(seen.insert(base.version()));
    for m in mutations() {
        let mut a = base.clone();
        let mut b = base.clone();
        (m.apply)(&mut a).unwrap();
        (m.apply)(&mut b).unwrap();
        for s in [&a, &b] {
            let i = s.lookup(m.node).unwrap();
            assert!(
                seen.insert(s.node(i).generation()),
                "{}: gen {} given twice",
                m.name,
                s.node(i).generation()
            );
            assert!(
                seen.insert(s.version()),
                "{}: version {} given twice",
                m.name,
                s.version()
            );
        }
    }
    // States built apart have node sets of their own.
    let other = busy_world();
    assert!(!Arc::ptr_eq(base.node_set(), other.node_set()));
    assert!(Arc::ptr_eq(base.node_set(), base.clone().node_set()));
    assert!(Arc::ptr_eq(base.node_set(), base.scratch().node_set()));
}

#[test]
fn every_mutation_of_one_state_changes_gen() {
    let mut s = busy_world();
    let mut seen: BTreeSet<u64> = gens(&s).into_iter().collect();
    let order = [
        "allocates a share",
        "releases a share",
        "releases an instance",
        "sets a layout",
        "turns MIG off",
        "turns MIG on again",
        "creates an instance",
        "allocates CPU only",
        "cordons a GPU",
    ];
    for name in order {
        let m = mutations().into_iter().find(|m| m.name == name).unwrap();
        let before = node_handles(&s);
        let before_gens = gens(&s);
        (m.apply)(&mut s).unwrap();
        for (i, n) in s.nodes().enumerate() {
            if n.name() == m.node {
                assert!(
                    seen.insert(n.generation()),
                    "{name}: node {} got gen {}, which a state already had",
                    n.name(),
                    n.generation()
                );
                assert!(
                    std::ptr::eq(n, before[i]),
                    "{name}: an owned node was copied"
                );
            } else {
                assert_eq!(
                    n.generation(),
                    before_gens[i],
                    "{name}: untouched node {} changed gen",
                    n.name()
                );
            }
        }
    }
    must_check(&s);
}

#[test]
fn a_gpu_growing_in_a_clone_leaves_its_neighbours() {
    let mut s = busy_world();
    allocate(
        &mut s,
        &[
            task("one").on("v100").share(1, 200),
            task("two").on("v100").share(2, 300),
        ],
    );
    s.set_layout("h100", 1, &must_layout("1g.10gb@0,1g.10gb@1"))
        .unwrap();
    let mut c = s.clone();
    allocate(&mut c, &[task("grow").on("v100").share(1, 100)]);
    let original = take_snapshot(&c);
    for (i, p) in ["1g.10gb+me@4", "1g.10gb@5", "1g.10gb@6"]
        .into_iter()
        .enumerate()
    {
        allocate(
            &mut c,
            &[task(&format!("more{i}")).on("v100").share(0, 100)],
        );
        allocate(
            &mut c,
            &[task(&format!("inst{i}")).on("h100").instance(0, p)],
        );
    }
    must_check(&c);
    let v = c.node_by_name("v100").unwrap();
    let names = |g: &Gpu| {
        g.holders()
            .iter()
            .map(Hold::task)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(names(&v.gpus()[1]), "one grow");
    assert_eq!(names(&v.gpus()[2]), "two");
    assert_eq!(
        c.node_by_name("h100").unwrap().gpus()[1]
            .layout()
            .to_string(),
        "1g.10gb@0,1g.10gb@1"
    );
    assert_ne!(describe(&c), original.text);
    assert!(
        s.node_by_name("v100").unwrap().task("more0").is_none(),
        "the clone's task appeared in the original"
    );
}

#[test]
fn copies_of_a_state_of_many_chunks_change_apart() {
    // 150 nodes: three chunks of handles, the last one short.
    let specs: Vec<SpecBuilder> = (0..150)
        .map(|i| node(&format!("n{i:03}")).gpus(1, "T4"))
        .collect();
    let mut s = new_state(&specs);
    let c = s.clone();
    let snap = take_snapshot(&c);
    for i in [0, 63, 64, 127, 128, 149] {
        allocate(&mut s, &[task("t").on(&format!("n{i:03}")).whole(0)]);
    }
    snap.same(&c, "changing the original");
    for (i, handle) in node_handles(&s).into_iter().enumerate() {
        let changed = [0, 63, 64, 127, 128, 149].contains(&i);
        assert_eq!(s.node(i).name(), format!("n{i:03}"));
        assert_eq!(
            !std::ptr::eq(handle, snap.nodes[i]),
            changed,
            "node {i}: copied"
        );
        assert_eq!(s.generation(i), s.node(i).generation(), "node {i}");
        assert_eq!(
            s.node(i).gpus()[0].used(),
            if changed { 1000 } else { 0 },
            "node {i}"
        );
    }
    assert_eq!(s.nodes().count(), 150);
    must_check(&s);
    must_check(&c);
}
