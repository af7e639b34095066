//! nodes_test.go: the nodes a scenario builds.

use super::*;
use crate::cluster::topology_from_labels;

#[test]
fn nodes_spread_over_leaves_round_robin() {
    let text = edit(BASE, "    count: 2", "    count: 3");
    let text = edit(
        &text,
        "    leaves: [leaf-a, leaf-b]",
        "    leaves: [leaf-a, leaf-b]
    spine: spine-0
    block: block-0
    tier: spot
    nvlink: pairs
  - group: a100
    gpu: A100-80GB
    gpus: 4
    cpu: 1500m
    memory: 512Gi",
    );
    let text = edit(&text, "    burst_gpus: 16", "    burst_gpus: 24");
    let nodes = must_parse(&text).nodes().unwrap();
    let got: Vec<String> = nodes
        .iter()
        .map(|n| {
            let topo = topology_from_labels(n.labels());
            let g = n.gpus();
            format!(
                "{} {}/{}/{} {} {}×{} mig={} link0={} link1={} cpu={} mem={}",
                n.name(),
                topo.block,
                topo.spine,
                topo.leaf,
                n.tier(),
                g[0].model().name,
                g.len(),
                g[0].mig(),
                g[0].link(),
                g[2].link(),
                n.cpu_milli(),
                n.memory_mib()
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "h100-0 block-0/spine-0/leaf-a spot H100-80GB×8 mig=true link0=0 link1=1 cpu=192000 mem=2097152",
            "h100-1 block-0/spine-0/leaf-b spot H100-80GB×8 mig=true link0=0 link1=1 cpu=192000 mem=2097152",
            "h100-2 block-0/spine-0/leaf-a spot H100-80GB×8 mig=true link0=0 link1=1 cpu=192000 mem=2097152",
            "a100-0 // reserved A100-80GB×4 mig=false link0=0 link1=0 cpu=1500 mem=524288",
        ]
    );
}

#[test]
fn nodes_reports_what_build_node_refuses() {
    let mut s = must_parse(BASE);
    s.node_groups[0].nvlink = "mesh".into(); // validate would refuse it; nodes must not panic
    want_error(
        s.nodes(),
        r#"t.yaml:4: nodes[0]: node h100-0: nvlink "mesh": want none, all or pairs"#,
    );
}
