use std::collections::BTreeMap;

use super::*;

#[test]
fn set_layout_replaces_free_instances() {
    /// The instances held afterwards, by placement.
    type Held<'a> = &'a [(&'a str, &'a str)];
    let cases: Vec<(&str, usize, &str, &str, Held)> = vec![
        (
            "fills an empty GPU",
            1,
            "4g.40gb@0,3g.40gb@4",
            "4g.40gb@0,3g.40gb@4",
            &[],
        ),
        ("empties a GPU with nothing held", 1, "", "", &[]),
        (
            "keeps the held instance and drops the free one",
            0,
            "3g.40gb@0,2g.20gb@4,1g.10gb@6",
            "3g.40gb@0,2g.20gb@4,1g.10gb@6",
            &[("3g.40gb@0", "inst")],
        ),
        (
            "keeps the held instance wherever the layout lists it",
            0,
            "1g.20gb@6,3g.40gb@0,1g.10gb@4",
            "1g.20gb@6,3g.40gb@0,1g.10gb@4",
            &[("3g.40gb@0", "inst")],
        ),
        (
            "keeps the held instance alone",
            0,
            "3g.40gb@0",
            "3g.40gb@0",
            &[("3g.40gb@0", "inst")],
        ),
    ];
    for (name, gpu, layout, want, held) in cases {
        let held: BTreeMap<&str, &str> = held.iter().copied().collect();
        let mut s = busy_world();
        let gen_before = s.node_by_name("h100").unwrap().generation();
        s.set_layout("h100", gpu, &must_layout(layout)).unwrap();
        let n = s.node_by_name("h100").unwrap();
        let g = &n.gpus()[gpu];
        assert_eq!(g.layout().to_string(), want, "{name}");
        for sl in g.slices() {
            assert_eq!(
                sl.task(),
                held.get(&*sl.placement().to_string()).copied(),
                "{name}: {}",
                sl.placement()
            );
        }
        assert_ne!(
            n.generation(),
            gen_before,
            "{name}: set_layout left the node's gen as it was"
        );
        must_check(&s);
        // Every new free instance can be taken, and only held ones are refused.
        let slices: Vec<Slice> = g.slices().to_vec();
        for sl in slices {
            let taker = format!("taker{}", sl.placement());
            let r = s.allocate(
                task(&taker)
                    .on("h100")
                    .instance(gpu as i32, &sl.placement().to_string())
                    .a(),
            );
            assert_eq!(
                r.is_ok(),
                sl.is_free(),
                "{name}: instance {} held by {:?}: {r:?}",
                sl.placement(),
                sl.task()
            );
        }
        must_check(&s);
    }
}

#[test]
fn set_layout_counts_the_room_left() {
    let mut s = busy_world();
    s.set_layout("h100", 1, &must_layout("2g.20gb@0,1g.10gb@2"))
        .unwrap();
    let g = &s.node_by_name("h100").unwrap().gpus()[1];
    assert_eq!(
        (g.free_memory_slices(), g.free_compute_slices()),
        (0b1111_1000, 4)
    );
    // The new geometry binds: the old room is gone, the new room is open.
    assert!(
        s.allocate(task("a").on("h100").instance(1, "2g.20gb@2").a())
            .is_err()
    );
    allocate(&mut s, &[task("b").on("h100").instance(1, "3g.40gb@4")]);
    must_check(&s);
}

#[test]
fn set_layout_refuses() {
    /// The node, GPU and layout asked for.
    type Ask<'a> = (&'a str, usize, &'a str);
    let cases: Vec<(&str, Ask, &[&str], bool)> = vec![
        (
            "refuses an unknown node",
            ("nope", 0, ""),
            &[r#"node "nope": not found"#],
            true,
        ),
        (
            "refuses a GPU past the last",
            ("h100", 2, ""),
            &["node h100: no GPU 2"],
            false,
        ),
        (
            "refuses a CPU-only node",
            ("cpu", 0, ""),
            &["node cpu: no GPU 0"],
            false,
        ),
        (
            "refuses a GPU with MIG off",
            ("v100", 1, "7g.80gb@0"),
            &["node v100: GPU 1: MIG is off"],
            false,
        ),
        (
            "refuses an instance at a start its profile may not use",
            ("h100", 1, "4g.40gb@0,3g.40gb@2"),
            &["node h100: GPU 1", "3g.40gb@2: start 2 not allowed"],
            false,
        ),
        (
            "refuses overlapping instances",
            ("h100", 1, "3g.40gb@0,4g.40gb@0"),
            &["node h100: GPU 1", "4g.40gb@0 overlaps 3g.40gb@0"],
            false,
        ),
        (
            "refuses a profile the model lacks",
            ("h100", 1, "1g.18gb@0"),
            &[r#"unknown MIG profile "1g.18gb""#],
            false,
        ),
        (
            "refuses two +me instances",
            ("h100", 1, "1g.10gb+me@0,1g.10gb+me@1"),
            &["at most one +me instance"],
            false,
        ),
        (
            "refuses a whole-GPU instance in place of a held one",
            ("h100", 0, "7g.80gb@0"),
            &["node h100: GPU 0: new layout drops 3g.40gb@0, which inst is using"],
            false,
        ),
        (
            "refuses a layout without a held instance",
            ("h100", 0, "2g.20gb@0,2g.20gb@2,1g.10gb@4"),
            &["node h100: GPU 0: new layout drops 3g.40gb@0, which inst is using"],
            false,
        ),
        (
            "refuses moving a held instance",
            ("h100", 0, "3g.40gb@4"),
            &["new layout drops 3g.40gb@0, which inst is using"],
            false,
        ),
        (
            "refuses changing a held instance's profile",
            ("h100", 0, "4g.40gb@0"),
            &["new layout drops 3g.40gb@0, which inst is using"],
            false,
        ),
        (
            "refuses an empty layout under a held instance",
            ("h100", 0, ""),
            &["new layout drops 3g.40gb@0"],
            false,
        ),
    ];
    for (name, (node, gpu, layout), want, not_found) in cases {
        let mut s = busy_world();
        let before = take_snapshot(&s);
        let err = want_err(s.set_layout(node, gpu, &must_layout(layout)), want);
        assert_eq!(err.is_not_found(), not_found, "{name}: {err:?}");
        before.same(&s, name);

        let mut c = s.clone();
        want_err(c.set_layout(node, gpu, &must_layout(layout)), want);
        before.same(&c, "a refused set_layout on a clone");
    }
}

#[test]
fn set_layout_does_not_keep_the_callers_list() {
    let mut s = busy_world();
    let mut l = must_layout("4g.40gb@0,3g.40gb@4");
    s.set_layout("h100", 1, &l).unwrap();
    l[0].start = 4;
    assert_eq!(
        s.node_by_name("h100").unwrap().gpus()[1]
            .layout()
            .to_string(),
        "4g.40gb@0,3g.40gb@4"
    );
    must_check(&s);
}

#[test]
fn set_mig_turns_mode_off_and_on() {
    let mut s = busy_world();
    s.set_mig("h100", 1, false).unwrap();
    let g = &s.node_by_name("h100").unwrap().gpus()[1];
    assert_eq!((g.mig(), g.free(), g.slices().len()), (false, 1000, 0));
    assert_eq!(
        s.node_by_name("h100").unwrap().fully_free_gpus(),
        1,
        "the GPU that left MIG"
    );
    // With MIG off it takes shares, not instances.
    assert!(
        s.allocate(task("i").on("h100").instance(1, "1g.10gb@0").a())
            .is_err()
    );
    allocate(&mut s, &[task("share").on("h100").share(1, 400)]);
    s.release("h100", "share").unwrap();

    s.set_mig("h100", 1, true).unwrap();
    let g = &s.node_by_name("h100").unwrap().gpus()[1];
    assert_eq!(
        (
            g.mig(),
            g.free(),
            g.free_compute_slices(),
            g.free_memory_slices()
        ),
        (true, 0, 7, 0xFF)
    );
    assert!(
        s.allocate(task("share").on("h100").share(1, 400).a())
            .is_err(),
        "a share was given on a GPU with MIG on"
    );
    allocate(&mut s, &[task("i").on("h100").instance(1, "7g.80gb@0")]);
    must_check(&s);
}

#[test]
fn set_mig_drops_free_instances() {
    let mut s = new_state(&[node("h")
        .gpus(1, "H100-80GB")
        .mig()
        .layout("3g.40gb@0,3g.40gb@4")]);
    s.set_mig("h", 0, true).unwrap();
    let g = &s.node(0).gpus()[0];
    assert_eq!(
        (
            g.slices().len(),
            g.free_memory_slices(),
            g.free_compute_slices()
        ),
        (0, 0xFF, 7)
    );
    must_check(&s);
}

#[test]
fn set_mig_off_is_allowed_on_a_model_without_mig() {
    let mut s = busy_world();
    s.set_mig("v100", 3, false).unwrap();
    assert!(!s.node_by_name("v100").unwrap().gpus()[3].mig());
    must_check(&s);
}

#[test]
fn set_mig_refuses() {
    type Setup = fn(&mut State);
    let share_on_gpu1: Setup = |s| {
        s.set_mig("h100", 1, false).unwrap();
        allocate(s, &[task("share").on("h100").share(1, 1)]);
    };
    /// The node, GPU and mode asked for.
    type Ask<'a> = (&'a str, usize, bool);
    /// Name, setup, ask, the error's words, whether it is "not found".
    type Case<'a> = (&'a str, Option<Setup>, Ask<'a>, &'a [&'a str], bool);
    let cases: Vec<Case> = vec![
        (
            "refuses an unknown node",
            None,
            ("nope", 0, true),
            &[r#"node "nope": not found"#],
            true,
        ),
        (
            "refuses a GPU past the last",
            None,
            ("h100", 2, true),
            &["node h100: no GPU 2"],
            false,
        ),
        (
            "refuses a CPU-only node",
            None,
            ("cpu", 0, true),
            &["node cpu: no GPU 0"],
            false,
        ),
        (
            "refuses MIG on a model without it",
            None,
            ("v100", 1, true),
            &["node v100: GPU 1: model V100-32GB does not support MIG"],
            false,
        ),
        (
            "refuses turning MIG off under a held instance",
            None,
            ("h100", 0, false),
            &["node h100: GPU 0: busy; MIG mode changes need an idle GPU"],
            false,
        ),
        (
            "refuses re-enabling MIG under a held instance",
            None,
            ("h100", 0, true),
            &["node h100: GPU 0: busy"],
            false,
        ),
        (
            "refuses turning MIG off on a shared GPU",
            None,
            ("v100", 0, false),
            &["node v100: GPU 0: busy"],
            false,
        ),
        (
            "refuses turning MIG on under a share",
            Some(share_on_gpu1),
            ("h100", 1, true),
            &["node h100: GPU 1: busy"],
            false,
        ),
    ];
    for (name, setup, (node, gpu, on), want, not_found) in cases {
        let mut s = busy_world();
        if let Some(setup) = setup {
            setup(&mut s);
        }
        let before = take_snapshot(&s);
        let err = want_err(s.set_mig(node, gpu, on), want);
        assert_eq!(err.is_not_found(), not_found, "{name}: {err:?}");
        before.same(&s, name);

        let mut c = s.clone();
        want_err(c.set_mig(node, gpu, on), want);
        before.same(&c, "a refused set_mig on a clone");
    }
}
