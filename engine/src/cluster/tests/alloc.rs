use super::*;

#[test]
fn allocate_refuses() {
    let cases: Vec<(&str, TaskBuilder, &[&str])> = vec![
        (
            "refuses an unknown node",
            task("t").on("nope"),
            &[r#"allocate t: node "nope": not found"#],
        ),
        (
            "refuses an empty task name",
            task("").on("v100"),
            &["on v100", "task name is empty"],
        ),
        (
            "refuses a task that already runs on the node",
            task("holder").on("v100").cpu(1),
            &["allocate holder on v100: task already runs here"],
        ),
        (
            "refuses a negative cpu request",
            task("t").on("v100").cpu(-1),
            &["negative cpu or memory request"],
        ),
        (
            "refuses a negative memory request",
            task("t").on("v100").memory(-1),
            &["negative cpu or memory request"],
        ),
        (
            "refuses more cpu than is free",
            task("t").on("v100").cpu(31001),
            &[
                "allocate t on v100",
                "cpu: asks 31001m, 31000m free of 32000m",
            ],
        ),
        (
            "refuses more memory than is free",
            task("t").on("cpu").memory(8193),
            &["memory: asks 8193 MiB, 8192 MiB free of 8192 MiB"],
        ),
        (
            "refuses a GPU past the last",
            task("t").on("v100").share(8, 100),
            &["gpu 8: node has 8 GPUs"],
        ),
        (
            "refuses a negative GPU index",
            task("t").on("v100").share(-1, 100),
            &["gpu -1: node has 8 GPUs"],
        ),
        (
            "refuses any GPU on a CPU-only node",
            task("t").on("cpu").whole(0),
            &["gpu 0: node has 0 GPUs"],
        ),
        (
            "refuses one GPU granted twice",
            task("t").on("v100").share(1, 100).share(1, 100),
            &["gpu 1: granted twice to one task"],
        ),
        (
            "refuses one MIG GPU granted twice",
            task("t")
                .on("h100")
                .instance(1, "1g.10gb@0")
                .instance(1, "1g.10gb@1"),
            &["gpu 1: granted twice"],
        ),
        (
            "refuses a share larger than what is free",
            task("t").on("v100").share(0, 501),
            &["gpu 0: asks 501 milli, 500 free"],
        ),
        (
            "refuses a whole GPU that is partly taken",
            task("t").on("v100").whole(0),
            &["gpu 0: asks 1000 milli, 500 free"],
        ),
        (
            "refuses a zero share",
            task("t").on("v100").share(1, 0),
            &["gpu 1: share 0 milli is not between 1 and 1000"],
        ),
        (
            "refuses a negative share",
            task("t").on("v100").share(1, -100),
            &["share -100 milli is not between 1 and 1000"],
        ),
        (
            "refuses a share over one GPU",
            task("t").on("v100").share(1, 1001),
            &["share 1001 milli is not between 1 and 1000"],
        ),
        (
            "refuses a share of a MIG GPU",
            task("t").on("h100").share(1, 500),
            &["gpu 1: MIG is on: ask for an instance, not 500 milli"],
        ),
        (
            "refuses an instance on a GPU with MIG off",
            task("t").on("v100").instance(1, "1g.10gb@0"),
            &["gpu 1: MIG is off: no instance 1g.10gb@0"],
        ),
        (
            "refuses an instance another task holds",
            task("t").on("h100").instance(0, "3g.40gb@0"),
            &["gpu 0: instance 3g.40gb@0 is held by inst"],
        ),
        (
            "refuses an instance at a start its profile may not use",
            task("t").on("h100").instance(1, "3g.40gb@2"),
            &["instance 3g.40gb@2: start not allowed (allowed: [0 4])"],
        ),
        (
            "refuses an instance overlapping a held one",
            task("t").on("h100").instance(0, "1g.10gb@2"),
            &["instance 1g.10gb@2 does not fit beside 3g.40gb@0,1g.10gb+me@4"],
        ),
        (
            "refuses an instance overlapping a free one",
            task("t").on("h100").instance(0, "3g.40gb@4"),
            &["instance 3g.40gb@4 does not fit beside"],
        ),
        (
            "refuses a profile the model lacks",
            task("t").on("h100").instance(1, "1g.18gb@0"),
            &[r#"gpu 1: unknown MIG profile "1g.18gb" for H100-80GB"#],
        ),
        (
            "refuses a second +me instance",
            task("t").on("h100").instance(0, "1g.10gb+me@5"),
            &["1g.10gb+me@5", "at most one +me instance per GPU"],
        ),
        (
            "refuses the whole assignment when its last grant is bad",
            task("t")
                .on("v100")
                .cpu(500)
                .memory(100)
                .share(1, 100)
                .whole(2)
                .share(3, 2000),
            &["gpu 3: share 2000 milli"],
        ),
        (
            "refuses the whole assignment when one instance is bad",
            task("t")
                .on("h100")
                .cpu(500)
                .instance(1, "4g.40gb@0")
                .instance(0, "7g.80gb@0"),
            &["gpu 0: instance 7g.80gb@0 does not fit"],
        ),
    ];
    for (name, ask, want) in cases {
        let mut s = busy_world();
        let before = take_snapshot(&s);
        let err = want_err(s.allocate(ask.a()), want);
        assert_eq!(
            err.is_not_found(),
            name == "refuses an unknown node",
            "{name}: {err:?}"
        );
        before.same(&s, name);

        // On a clone the refusal must not even copy a node.
        let s = busy_world();
        let original = take_snapshot(&s);
        let mut c = s.clone();
        want_err(c.allocate(ask.a()), want);
        original.same(&c, "a refused allocate on a clone");
        original.same(&s, "a refused allocate on a clone, seen from the original");
    }
}

#[test]
fn allocate_shares_a_gpu() {
    let mut s = new_state(&[node("v").gpus(2, "V100-32GB")]);
    allocate(
        &mut s,
        &[
            task("a").on("v").share(0, 300),
            task("b").on("v").share(0, 700),
        ],
    );
    let g = &s.node(0).gpus()[0];
    assert_eq!((g.used(), g.free(), g.idle()), (1000, 0, false));
    let holders: Vec<(&str, i32)> = g.holders().iter().map(|h| (h.task(), h.milli())).collect();
    assert_eq!(holders, [("a", 300), ("b", 700)]);
    assert!(
        s.allocate(task("c").on("v").share(0, 1).a()).is_err(),
        "a full GPU took one more milli"
    );
    assert_eq!(s.node(0).fully_free_gpus(), 1);
    must_check(&s);
}

#[test]
fn allocate_gives_whole_gpus() {
    let mut s = new_state(&[node("v").gpus(8, "V100-32GB")]);
    allocate(&mut s, &[task("train").on("v").whole(2).whole(3).whole(7)]);
    let n = s.node(0);
    for g in n.gpus() {
        let want = if [2, 3, 7].contains(&g.index()) {
            1000
        } else {
            0
        };
        assert_eq!(g.used(), want, "gpu {}", g.index());
    }
    assert_eq!((n.fully_free_gpus(), n.gpu_free_milli()), (5, 5000));
    must_check(&s);
}

#[test]
fn allocate_takes_a_free_instance() {
    let mut s = busy_world();
    let before = s.node(2).gpus()[0].clone();
    allocate(
        &mut s,
        &[task("media").on("h100").instance(0, "1g.10gb+me@4")],
    );
    let g = &s.node(2).gpus()[0];
    assert_eq!(
        g.layout().to_string(),
        "3g.40gb@0,1g.10gb+me@4",
        "taking a free instance must not change the layout"
    );
    assert_eq!(g.slices()[1].task(), Some("media"));
    assert_eq!(
        (g.free_memory_slices(), g.free_compute_slices()),
        (before.free_memory_slices(), before.free_compute_slices()),
        "free slices changed on taking an existing instance"
    );
    must_check(&s);
}

#[test]
fn allocate_creates_a_missing_instance() {
    let mut s = busy_world();
    allocate(
        &mut s,
        &[task("serve")
            .on("h100")
            .cpu(2000)
            .memory(4096)
            .instance(1, "3g.40gb@4")],
    );
    let g = &s.node(2).gpus()[1];
    assert_eq!(g.layout().to_string(), "3g.40gb@4");
    assert_eq!(g.slices()[0].task(), Some("serve"));
    assert_eq!(
        (g.free_memory_slices(), g.free_compute_slices()),
        (0b0000_1111, 4)
    );
    // The room it left is usable, and counted.
    allocate(&mut s, &[task("more").on("h100").instance(1, "4g.40gb@0")]);
    let g = &s.node(2).gpus()[1];
    assert_eq!((g.free_memory_slices(), g.free_compute_slices()), (0, 0));
    must_check(&s);
}

#[test]
fn allocate_accounts_cpu_and_memory() {
    let mut s = new_state(&[node("c").cpu(4000).memory(8192)]);
    allocate(
        &mut s,
        &[
            task("a").on("c").cpu(1500).memory(4096),
            task("b").on("c").cpu(2500).memory(4096),
        ],
    );
    let n = s.node(0);
    assert_eq!(
        (n.cpu_used(), n.cpu_free(), n.mem_used(), n.mem_free()),
        (4000, 0, 8192, 0)
    );
    assert!(
        s.allocate(task("c").on("c").cpu(1).a()).is_err(),
        "a full node gave one more millicore"
    );
    // A task asking for nothing fits anywhere, even on a full node.
    allocate(&mut s, &[task("zero").on("c")]);
    s.release("c", "a").unwrap();
    assert_eq!((s.node(0).cpu_free(), s.node(0).mem_free()), (1500, 4096));
    must_check(&s);
}

#[test]
fn allocate_keeps_its_own_copy_of_the_grants() {
    let mut s = new_state(&[node("v").gpus(2, "V100-32GB")]);
    allocate(&mut s, &[task("t").on("v").share(0, 200)]);
    let mut ask = task("u").on("v").share(1, 300).a().clone();
    s.allocate(&ask).unwrap();
    ask.grants[0] = Grant::share(0, 999);
    must_check(&s);
    assert_eq!(s.node(0).task("u").unwrap().grants, [Grant::share(1, 300)]);
}

#[test]
fn release_frees_what_the_task_held() {
    let mut s = busy_world();
    allocate(
        &mut s,
        &[task("other")
            .on("v100")
            .cpu(2000)
            .memory(2048)
            .share(0, 250)
            .whole(1)],
    );
    let a = s.release("v100", "holder").unwrap();
    assert_eq!(
        a,
        task("holder")
            .on("v100")
            .cpu(1000)
            .memory(1024)
            .share(0, 500)
            .a()
            .clone()
    );
    let n = s.node_by_name("v100").unwrap();
    assert_eq!((n.cpu_used(), n.mem_used()), (2000, 2048));
    let g = &n.gpus()[0];
    assert_eq!(g.used(), 250);
    assert_eq!(
        g.holders().iter().map(Hold::task).collect::<Vec<_>>(),
        ["other"]
    );
    assert!(n.task("holder").is_none(), "released task still listed");
    // The name is free again on this node.
    allocate(&mut s, &[task("holder").on("v100").share(0, 750)]);
    must_check(&s);
}

#[test]
fn release_leaves_mig_instances_in_place() {
    let mut s = busy_world();
    allocate(&mut s, &[task("new").on("h100").instance(1, "2g.20gb@2")]);
    for name in ["inst", "new"] {
        s.release("h100", name).unwrap();
    }
    let n = s.node_by_name("h100").unwrap();
    assert_eq!(n.gpus()[0].layout().to_string(), "3g.40gb@0,1g.10gb+me@4");
    assert_eq!(
        n.gpus()[1].layout().to_string(),
        "2g.20gb@2",
        "the created instance is kept"
    );
    assert!(
        n.gpus().iter().all(Gpu::idle),
        "busy after releasing every task"
    );
    // A released instance can be taken again.
    allocate(&mut s, &[task("again").on("h100").instance(0, "3g.40gb@0")]);
    must_check(&s);
}

#[test]
fn release_refuses() {
    let cases = [
        (
            "refuses an unknown node",
            "nope",
            "holder",
            r#"release holder: node "nope": not found"#,
        ),
        (
            "refuses an unknown task",
            "v100",
            "ghost",
            r#"release: task "ghost" on node v100: not found"#,
        ),
        (
            "refuses a task of another node",
            "h100",
            "holder",
            r#"release: task "holder" on node h100: not found"#,
        ),
        (
            "refuses an empty task name",
            "v100",
            "",
            r#"release: task "" on node v100: not found"#,
        ),
    ];
    for (name, node, task, want) in cases {
        let mut s = busy_world();
        let before = take_snapshot(&s);
        let err = want_err(s.release(node, task), &[want]);
        assert!(err.is_not_found(), "{name}: {err:?}");
        before.same(&s, name);
    }
}

#[test]
fn release_twice_refuses_the_second() {
    let mut s = busy_world();
    s.release("v100", "holder").unwrap();
    let before = take_snapshot(&s);
    assert!(s.release("v100", "holder").unwrap_err().is_not_found());
    before.same(&s, "a second release");
}

#[test]
fn cordon_stops_new_work_and_keeps_running_work() {
    let mut s = busy_world();
    s.cordon("v100", 0, true).unwrap();
    s.cordon("h100", 1, true).unwrap();
    let v = s.node_by_name("v100").unwrap();
    assert!(v.gpus()[0].cordoned());
    assert_eq!(
        (v.gpus()[0].free(), v.gpus()[0].used()),
        (0, 500),
        "a cordoned GPU gives nothing and keeps its work"
    );
    let h = &s.node_by_name("h100").unwrap().gpus()[1];
    assert_eq!((h.free_memory_slices(), h.free_compute_slices()), (0, 0));
    want_err(
        s.allocate(task("t").on("v100").share(0, 1).a()),
        &["gpu 0: cordoned: takes no new work"],
    );
    want_err(
        s.allocate(task("t").on("h100").instance(1, "1g.10gb@0").a()),
        &["gpu 1: cordoned"],
    );
    s.release("v100", "holder").unwrap();
    s.cordon("v100", 0, false).unwrap();
    allocate(&mut s, &[task("t").on("v100").whole(0)]);
    want_err(s.cordon("v100", 8, true), &["node v100: no GPU 8"]);
    assert!(s.cordon("nope", 0, true).unwrap_err().is_not_found());
    let d = s.node_by_name("h100").unwrap().describe();
    assert!(d.contains("gpu1 H100-80GB cordoned mig"), "{d}");
    must_check(&s);
}

#[test]
fn gpu_free_starts_agrees_with_the_models_free_placements() {
    let mut s = busy_world();
    s.set_layout("h100", 1, &must_layout("1g.10gb+me@0,2g.20gb@2"))
        .unwrap();
    for n in s.nodes() {
        for g in n.gpus().iter().filter(|g| g.mig()) {
            for p in &g.model().profiles {
                let want = g.model().free_starts(&g.layout(), &p.name).unwrap();
                assert_eq!(
                    g.free_starts(p),
                    want,
                    "{} gpu {} {}",
                    n.name(),
                    g.index(),
                    p.name
                );
            }
        }
    }
}
