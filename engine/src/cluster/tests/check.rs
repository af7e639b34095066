use super::*;

/// `check` is the oracle of the property tests, so it must itself be able
/// to fail: each case breaks one invariant by hand and expects it to say so.
#[test]
fn check_catches_each_broken_invariant() {
    type Corrupt = fn(&mut State);
    fn node_mut<'a>(s: &'a mut State, name: &str) -> &'a mut Node {
        let i = s.lookup(name).unwrap();
        s.mutable(i)
    }
    fn first_task(n: &mut Node) -> &mut Assignment {
        Arc::make_mut(&mut n.tasks[0])
    }
    let cases: Vec<(&str, Corrupt, &[&str])> = vec![
        (
            "catches CPU in use that the tasks do not hold",
            |s| node_mut(s, "v100").cpu_used += 1,
            &["node v100: cpu/memory in use 1001/1024, tasks add up to 1000/1024"],
        ),
        (
            "catches memory in use that the tasks do not hold",
            |s| node_mut(s, "cpu").mem_used = 7,
            &["node cpu: cpu/memory in use 0/7, tasks add up to 0/0"],
        ),
        (
            "catches tasks holding more memory than the node has",
            |s| {
                let n = node_mut(s, "v100");
                let over = n.memory_mib() + 1;
                first_task(n).memory_mib = over;
                n.mem_used = over;
            },
            &["node v100: cpu/memory in use 1000/262145 outside 0..32000/262144"],
        ),
        (
            "catches milli in use that no task holds",
            |s| node_mut(s, "v100").gpus[0].used += 1,
            &["node v100: gpu 0: used 501 milli, tasks hold 500"],
        ),
        (
            "catches a GPU over 1000 milli",
            |s| {
                let n = node_mut(s, "v100");
                first_task(n).grants[0].milli = 1001;
                n.gpus[0].used = 1001;
            },
            &["node v100: gpu 0: used 1001 milli"],
        ),
        (
            "catches holders that do not add up",
            |s| node_mut(s, "v100").gpus[0].holders[0].milli = 400,
            &["node v100: gpu 0: used 500 milli, holders hold 400"],
        ),
        (
            "catches milli held on a MIG GPU",
            |s| {
                let n = node_mut(s, "h100");
                first_task(n).grants.push(Grant::share(1, 5));
                n.gpus[1].used = 5;
                n.gpus[1].holders.push(Hold {
                    task: "inst".into(),
                    milli: 5,
                });
            },
            &["node h100: gpu 1: MIG GPU holds 5 milli outside instances"],
        ),
        (
            "catches an invalid MIG layout",
            |s| {
                let g = &mut node_mut(s, "h100").gpus[1];
                for p in ["4g.40gb@0", "1g.10gb@2"] {
                    g.slices.push(Slice {
                        placement: must_placement(p),
                        task: None,
                    });
                }
            },
            &["node h100: gpu 1", "1g.10gb@2 overlaps 4g.40gb@0"],
        ),
        (
            "catches counters the instances do not add up to",
            |s| node_mut(s, "h100").gpus[0].compute = 3,
            &[
                "node h100: gpu 0: instances take memory 00011111 and 4 compute, counted 00011111 and 3",
            ],
        ),
        (
            "catches an instance held by a task the node does not run",
            |s| node_mut(s, "h100").gpus[0].slices[1].task = Some("ghost".into()),
            &[r#"node h100: gpu 0: instance 1g.10gb+me@4 held by "ghost", tasks say """#],
        ),
        (
            "catches a task holding an instance that is gone",
            |s| {
                let g = &mut node_mut(s, "h100").gpus[0];
                g.slices.remove(0);
                g.recount();
            },
            &["node h100: gpu 0: task inst holds a missing instance 3g.40gb@0"],
        ),
    ];
    for (name, corrupt, want) in cases {
        let mut s = busy_world();
        corrupt(&mut s);
        let err = s.check().expect_err(name);
        for sub in want {
            assert!(
                err.to_string().contains(sub),
                "{name}: {err} does not contain {sub:?}"
            );
        }
    }
}

#[test]
fn node_describe() {
    let s = busy_world();
    let cases = [
        ("cpu", "cpu cpu 0/4000m mem 0/8192 MiB\n"),
        (
            "v100",
            "v100 cpu 1000/32000m mem 1024/262144 MiB\n  gpu0 V100-32GB 500/1000 [holder 500]\n  gpu1 V100-32GB 0/1000\n  gpu2 V100-32GB 0/1000\n  gpu3 V100-32GB 0/1000\n  gpu4 V100-32GB 0/1000\n  gpu5 V100-32GB 0/1000\n  gpu6 V100-32GB 0/1000\n  gpu7 V100-32GB 0/1000\n",
        ),
        (
            "h100",
            "h100 cpu 1000/32000m mem 1024/262144 MiB\n  gpu0 H100-80GB mig [3g.40gb@0 inst] [1g.10gb+me@4 -]\n  gpu1 H100-80GB mig\n",
        ),
    ];
    for (name, want) in cases {
        assert_eq!(s.node_by_name(name).unwrap().describe(), want);
    }
}

#[test]
fn json_has_the_go_field_names() {
    let a = task("t")
        .on("h")
        .cpu(5)
        .memory(6)
        .share(0, 250)
        .instance(1, "3g.40gb@4")
        .a()
        .clone();
    let v = serde_json::to_value(&a).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"task": "t", "node": "h", "cpu_milli": 5, "memory_mib": 6,
            "grants": [{"gpu": 0, "milli": 250}, {"gpu": 1, "slice": {"profile": "3g.40gb", "start": 4}}]})
    );
    assert_eq!(serde_json::from_value::<Assignment>(v).unwrap(), a);
    let bare = serde_json::to_value(task("u").a()).unwrap();
    assert_eq!(
        bare,
        serde_json::json!({"task": "u", "node": "", "cpu_milli": 0, "memory_mib": 0})
    );
}
