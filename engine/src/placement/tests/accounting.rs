//! capacity.go and share.go, which the Go build tests only through their
//! callers.

use super::*;
use crate::gpu;
use crate::placement::{capacity_of, grant_share, need};

#[test]
fn capacity_of_takes_the_largest_of_each_across_nodes() {
    let st = world(&[
        node("small").cpu(8000).memory(16384).gpus(2, "V100-16GB"),
        node("h100")
            .cpu(64000)
            .memory(1024)
            .gpus(4, "H100-80GB")
            .mig(),
        node("more-v100")
            .cpu(1000)
            .memory(1024)
            .gpus(8, "V100-16GB"),
        node("cpu").cpu(4000).memory(512 * 1024),
    ]);
    let c = capacity_of(&st);
    assert_eq!((c.max_cpu_milli, c.max_memory_mib), (64000, 512 * 1024));
    let max: Vec<(&str, i32)> = c.max_gpus.iter().map(|(m, &k)| (m.as_str(), k)).collect();
    assert_eq!(max, [("H100-80GB", 4), ("V100-16GB", 8)]);
    let memory: Vec<(&str, i64)> = c
        .gpu_memory_mib
        .iter()
        .map(|(m, &k)| (m.as_str(), k))
        .collect();
    let h100 = gpu::lookup("H100-80GB");
    assert_eq!(
        memory,
        [("H100-80GB", h100.memory_mib), ("V100-16GB", 16384)]
    );
    // Every profile of the H100, each offered by the H100 alone (the MIG
    // mode of the GPUs does not matter: the model could).
    assert_eq!(c.mig_profiles.len(), h100.profiles.len());
    for p in &h100.profiles {
        assert_eq!(c.mig_profiles[&*p.name], ["H100-80GB"], "{}", p.name);
    }
}

#[test]
fn capacity_of_lists_each_model_offering_a_profile_once() {
    let st = world(&[
        node("a").gpus(1, "A100-80GB"),
        node("h1").gpus(1, "H100-80GB"),
        node("h2").gpus(1, "H100-80GB").mig(),
    ]);
    let c = capacity_of(&st);
    // 1g.10gb is a profile of both 80 GB models, in the order the nodes
    // show them.
    assert_eq!(c.mig_profiles["1g.10gb"], ["A100-80GB", "H100-80GB"]);
    assert!(c.mig_profiles.values().all(|ms| {
        let mut seen = ms.clone();
        seen.dedup();
        seen.len() == ms.len()
    }));
}

#[test]
fn grant_share_counts_a_mig_instance_by_its_larger_share() {
    let st = world(&[
        node("h100").gpus(1, "H100-80GB").mig(),
        node("v100").gpus(1, "V100-16GB"),
    ]);
    let (h100, v100) = (st.node(0), st.node(1));
    let cases = [
        ("a share by its milli", v100, Grant::share(0, 250), 0.25),
        ("a whole GPU as one", v100, Grant::whole(0), 1.0),
        // 3g.40gb: 3 of 7 compute slices, 4 of 8 memory slices.
        (
            "3g.40gb by its memory",
            h100,
            Grant::instance(0, Placement::new("3g.40gb", 0)),
            0.5,
        ),
        // 1g.10gb: 1 of 7 compute, 1 of 8 memory.
        (
            "1g.10gb by its compute",
            h100,
            Grant::instance(0, Placement::new("1g.10gb", 0)),
            1.0 / 7.0,
        ),
        (
            "a profile the model lacks as nothing",
            h100,
            Grant::instance(0, Placement::new("1g.5gb", 0)),
            0.0,
        ),
        (
            "an instance of a GPU the node lacks as nothing",
            h100,
            Grant::instance(3, Placement::new("1g.10gb", 0)),
            0.0,
        ),
    ];
    for (name, n, g, want) in cases {
        assert_eq!(grant_share(n, &g), want, "{name}");
    }
}

#[test]
fn need_is_what_the_task_asks_whatever_it_was_given() {
    let st = world(&[
        node("h100").gpus(2, "H100-80GB").mig(),
        node("v100").gpus(1, "V100-16GB"),
        node("g2").gpus(1, "G2"),
        node("cpu"),
    ]);
    let (h100, v100, g2, cpu) = (st.node(0), st.node(1), st.node(2), st.node(3));
    let on = |gpu| Assignment {
        grants: vec![Grant::share(gpu, 1000)],
        ..Assignment::default()
    };
    let none = Assignment::default();
    let cases = [
        (
            "whole GPUs count whole",
            v100,
            &none,
            task("t").gpus(2),
            2.0,
        ),
        (
            "a share counts its share",
            v100,
            &none,
            task("t").share(250),
            0.25,
        ),
        ("no GPU counts nothing", v100, &none, task("t"), 0.0),
        // 2g.20gb: 2 of 7 compute, 2 of 8 memory.
        (
            "a MIG profile counts its share",
            h100,
            &none,
            task("t").mig_profile("2g.20gb"),
            2.0 / 7.0,
        ),
        // 9000 MiB and 10 % headroom fit 1g.10gb (10240 MiB).
        (
            "a memory profile counts the smallest instance",
            h100,
            &on(1),
            task("t").gpu_memory(9000, 0.0),
            1.0 / 7.0,
        ),
        (
            "without MIG, the memory share",
            v100,
            &none,
            task("t").gpu_memory(4096, 0.1),
            0.25,
        ),
        (
            "without MIG, the compute share when larger",
            v100,
            &none,
            task("t").gpu_memory(4096, 0.5),
            0.5,
        ),
        (
            "without MIG, at most one GPU",
            v100,
            &none,
            task("t").gpu_memory(20000, 0.0),
            1.0,
        ),
        (
            "of unknown memory, the compute share",
            g2,
            &none,
            task("t").gpu_memory(4096, 0.3),
            0.3,
        ),
        (
            "a MIG profile of a model without it, as a share of nothing",
            v100,
            &none,
            task("t").mig_profile("1g.10gb"),
            0.0,
        ),
        (
            "on a node without GPUs, nothing",
            cpu,
            &none,
            task("t").gpu_memory(4096, 0.3),
            0.0,
        ),
    ];
    for (name, n, a, b, want) in cases {
        assert_eq!(need(n, a, &b.build()), want, "{name}");
    }
}
