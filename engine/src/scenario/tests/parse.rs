//! parse_test.go: what the reader refuses and what it reads.

use super::*;
use crate::cluster::{State, Tier};
use crate::scenario::duration::{HOUR, MINUTE};
use crate::scenario::{MAX_FILE_BYTES, NodeGroup, raw};
use crate::workload::{Class, classes};

#[test]
fn parse_refuses_what_it_cannot_read() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "reports a YAML syntax error with its line",
            "name: t\nduration",
            "name: [\nduration",
            "t.yaml:2: did not find expected ',' or ']'",
        ),
        (
            "refuses an unknown top-level field and lists the known ones",
            "name: t\n",
            "name: t\ncolour: red\n",
            "t.yaml:2: colour: unknown field (known here: name, duration, seed, production_reserve_gpus, nodes, teams, workloads)",
        ),
        (
            "refuses an unknown field in a node group",
            "    gpus: 8",
            "    gpus: 8\n    colour: red",
            "t.yaml:8: nodes[0].colour: unknown field (known here: group, count, gpu, gpus, mig, cpu, memory, tier, leaves, spine, block, nvlink)",
        ),
        (
            "refuses an unknown field in a flow mapping",
            "rate_per_hour: 30}",
            "rate: 30}",
            "t.yaml:23: workloads[0].arrival.rate: unknown field (known here: process, rate_per_hour, file, time_scale, at)",
        ),
        (
            "refuses text where a number belongs",
            "    gpus: 8",
            "    gpus: eight",
            r#"t.yaml:7: nodes[0].gpus: "eight" is not a whole number"#,
        ),
        (
            "refuses a fraction where a whole number belongs",
            "    replicas: 2",
            "    replicas: 2.5",
            r#"t.yaml:25: workloads[0].replicas: "2.5" is not a whole number"#,
        ),
        (
            "refuses a list where a number belongs",
            "    gpus: 8",
            "    gpus: [8]",
            "t.yaml:7: nodes[0].gpus: a list is not a whole number",
        ),
        (
            "refuses a word that is not a boolean",
            "    mig: true",
            "    mig: maybe",
            r#"t.yaml:8: nodes[0].mig: "maybe" is not true or false"#,
        ),
        (
            "refuses a text rate",
            "rate_per_hour: 30}",
            "rate_per_hour: lots}",
            r#"t.yaml:23: workloads[0].arrival.rate_per_hour: "lots" is not a number"#,
        ),
        (
            "refuses a key given twice",
            "    gpus: 8",
            "    gpus: 8\n    gpus: 4",
            "t.yaml:8: nodes[0].gpus: given twice (first at line 7)",
        ),
        (
            "refuses a second document",
            "    checkpoint_every: 30m\n",
            "    checkpoint_every: 30m\n---\nname: x\n",
            "t.yaml:34: a second YAML document; put one scenario in a file",
        ),
        (
            "refuses days, which Go durations do not have",
            "duration: 24h",
            "duration: 7d",
            r#"t.yaml:2: duration: "7d" is not a duration (Go syntax with a unit: 90s, 30m, 2h, 168h)"#,
        ),
        (
            "refuses a duration without a unit",
            "duration: 24h",
            "duration: 3600",
            r#"t.yaml:2: duration: "3600" is not a duration (Go syntax with a unit: 90s, 30m, 2h, 168h)"#,
        ),
        (
            "refuses a mapping where a duration belongs",
            "mean: 2h}",
            "mean: {a: 1}}",
            "t.yaml:24: workloads[0].duration.mean: a mapping is not a duration",
        ),
        (
            "refuses a CPU quantity it cannot read",
            "    cpu: 192",
            "    cpu: lots",
            r#"t.yaml:9: nodes[0].cpu: "lots" is not a CPU quantity (cores such as 192 or 1.5, or millicores such as 1500m)"#,
        ),
        (
            "refuses a CPU quantity finer than a millicore",
            "    cpu: 192",
            "    cpu: 0.0005",
            r#"t.yaml:9: nodes[0].cpu: "0.0005" is not a CPU quantity (cores such as 192 or 1.5, or millicores such as 1500m)"#,
        ),
        (
            "refuses memory without a unit",
            "    memory: 2Ti",
            "    memory: 2048",
            r#"t.yaml:10: nodes[0].memory: "2048" needs a binary unit: Ki, Mi, Gi or Ti (such as 512Gi or 2Ti)"#,
        ),
        (
            "refuses decimal memory units",
            "    memory: 2Ti",
            "    memory: 2T",
            r#"t.yaml:10: nodes[0].memory: "2T" needs a binary unit: Ki, Mi, Gi or Ti (such as 512Gi or 2Ti)"#,
        ),
        (
            "refuses memory that is not whole MiB",
            "    memory: 2Ti",
            "    memory: 1.5Ki",
            r#"t.yaml:10: nodes[0].memory: "1.5Ki" is not a whole number of MiB"#,
        ),
        (
            "refuses a missing horizon",
            "duration: 24h\n",
            "",
            "t.yaml: duration: missing: the simulated horizon, such as 168h",
        ),
        (
            "refuses a missing GPU count, at its group's line",
            "    gpus: 8\n",
            "",
            "t.yaml:4: nodes[0].gpus: missing: GPUs per node, such as 8",
        ),
        (
            "refuses a missing GPU model",
            "    gpu: H100-80GB\n",
            "",
            "t.yaml:4: nodes[0].gpu: missing: a GPU model such as H100-80GB",
        ),
        (
            "refuses missing CPU",
            "    cpu: 192\n",
            "",
            "t.yaml:4: nodes[0].cpu: missing: CPU cores per node, such as 192",
        ),
        (
            "refuses missing memory",
            "    memory: 2Ti\n",
            "",
            "t.yaml:4: nodes[0].memory: missing: host memory per node, such as 2Ti",
        ),
        (
            "refuses a scenario without nodes",
            "nodes:\n",
            "nodes: []\nx:\n",
            "t.yaml:4: x: unknown field (known here: name, duration, seed, production_reserve_gpus, nodes, teams, workloads)",
        ),
    ];
    for (name, old, new, want) in cases {
        println!("{name}");
        want_error(parse(edit(BASE, old, new), "t.yaml"), want);
    }
}

#[test]
fn parse_refuses_whole_files() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "refuses an empty file",
            "",
            "t.yaml: empty scenario: no YAML document",
        ),
        (
            "refuses a file of comments",
            "# nothing\n",
            "t.yaml: empty scenario: no YAML document",
        ),
        (
            "refuses a scalar document",
            "hello",
            r#"t.yaml:1: "hello" is not a mapping"#,
        ),
        (
            "refuses a list document",
            "- a\n- b",
            "t.yaml:1: a list is not a mapping",
        ),
        (
            "refuses a scenario without node groups",
            "duration: 1h\n",
            "t.yaml: nodes: missing: at least one node group",
        ),
        (
            "refuses tabs for indentation",
            "name: t\n\tduration: 1h\n",
            "t.yaml:2: found a tab character that violates indentation",
        ),
        (
            // An alias naming the sequence it sits in: the Go build's
            // index recursed on it until its stack overflowed.
            "refuses a merge key that names its own sequence",
            "<<: &a [*a]\n",
            "t.yaml: map merge requires map or sequence of maps as the value",
        ),
    ];
    for (name, text, want) in cases {
        println!("{name}");
        want_error(parse(text, "t.yaml"), want);
    }
}

#[test]
fn parse_refuses_a_file_larger_than_the_limit() {
    let text = format!("{BASE}# {}\n", "x".repeat(MAX_FILE_BYTES));
    want_error(parse(text, "t.yaml"), "t.yaml: larger than 4 MiB");
}

#[test]
fn go_open_error_words_a_missing_file_as_go_does() {
    let e = std::fs::read("/nonexistent/absent.yaml").unwrap_err();
    assert_eq!(
        crate::scenario::go_open_error("absent.yaml", &e),
        "open absent.yaml: no such file or directory"
    );
}

#[test]
fn parse_reads_every_field() {
    let s = must_parse(BASE);
    assert_eq!(
        (s.name.as_str(), s.duration, s.seed, s.gpus()),
        ("t", 24 * HOUR, 1, 16)
    );
    let want = NodeGroup {
        group: "h100".into(),
        count: 2,
        gpu: "H100-80GB".into(),
        gpus: 8,
        mig: true,
        cpu_milli: 192_000,
        memory_mib: 2 << 20,
        tier: Tier::Reserved,
        leaves: vec!["leaf-a".into(), "leaf-b".into()],
        ..NodeGroup::default()
    };
    assert_eq!(s.node_groups[0], want);
    let (search, research) = (&s.teams[0], &s.teams[1]);
    assert_eq!(
        (
            search.guaranteed_gpus,
            search.burst_gpus,
            search.weight,
            search.classes.len()
        ),
        (8, 16, 1.0, 3)
    );
    assert_eq!(research.burst_gpus, 16, "the cluster's GPUs by default");
    let (chat, train) = (&s.workloads[0], &s.workloads[1]);
    assert_eq!(chat.class, Class::Production);
    assert_eq!(chat.mix[0].profile.name, "llm-7b-bf16");
    assert_eq!(chat.replicas, 2);
    assert_eq!(chat.arrival.rate_per_hour, 30.0);
    assert_eq!(chat.duration.mean, 2 * HOUR);
    assert!(chat.gang.sizes.is_empty());
    assert_eq!(train.gang.sizes, [4, 8]);
    assert_eq!(train.gang.weights, [0.5, 0.5]);
    assert_eq!(train.checkpoint_every, 30 * MINUTE);
    assert_eq!(train.replicas, 0);
    assert_eq!(train.arrival.at, [0, 10 * MINUTE]);
    assert_eq!(train.duration.value, HOUR);
}

#[test]
fn parse_applies_defaults() {
    let text = edit(BASE, "name: t\n", "");
    let text = edit(&text, "    count: 2\n", "");
    let text = edit(&text, "    gpus: 8", "    gpus: 16"); // the one node keeps the cluster at 16 GPUs
    let text = edit(
        &text,
        "    gang: {sizes: [4, 8], weights: [0.5, 0.5]}\n",
        "",
    );
    let text = edit(&text, "    replicas: 2\n", "");
    let s = parse(text, "dir/my-scenario.yaml").unwrap();
    assert_eq!(s.name, "my-scenario");
    assert_eq!(s.node_groups[0].count, 1);
    assert_eq!(s.workloads[0].replicas, 1);
    assert_eq!(s.workloads[1].gang.sizes, [1]);
    assert_eq!(s.workloads[1].gang.weights, [1.0]);
    assert_eq!(s.teams[1].weight, 1.0);
    assert_eq!(s.teams[1].classes, classes());
}

#[test]
fn parse_accepts_quantity_syntax() {
    for (cpu, memory, milli, mib) in [
        ("192", "2Ti", 192_000, 2 << 20),
        ("192000m", "512Gi", 192_000, 512 << 10),
        ("1.5", "1536Mi", 1500, 1536),
        (r#""64""#, "2048Ki", 64_000, 2),
        ("96", "1.5Ti", 96_000, 3 << 19),
    ] {
        let text = edit(BASE, "    cpu: 192", &format!("    cpu: {cpu}"));
        let text = edit(&text, "    memory: 2Ti", &format!("    memory: {memory}"));
        let g = &must_parse(&text).node_groups[0];
        assert_eq!(
            (g.cpu_milli, g.memory_mib),
            (milli, mib),
            "cpu {cpu} memory {memory}"
        );
    }
}

#[test]
fn parse_reads_a_mix_in_name_order() {
    let text = edit(
        BASE,
        "    profile: llm-7b-bf16",
        "    mix: {llm-7b-bf16: 3, embed-335m: 1}",
    );
    let w = &must_parse(&text).workloads[0];
    let got: Vec<(&str, f64)> = w
        .mix
        .iter()
        .map(|m| (m.profile.name.as_str(), m.weight))
        .collect();
    assert_eq!(got, [("embed-335m", 1.0), ("llm-7b-bf16", 3.0)]);
}

#[test]
fn parse_resolves_trace_paths_against_the_scenario() {
    let text = edit(
        BASE,
        "    arrival: {process: poisson, rate_per_hour: 30}",
        "    arrival: {process: trace, file: pods.csv}",
    );
    let text = edit(&text, "    duration: {dist: exponential, mean: 2h}\n", "");
    let s = parse(text, "some/dir/s.yaml").unwrap();
    let a = &s.workloads[0].arrival;
    assert_eq!((a.file.as_str(), a.time_scale), ("some/dir/pods.csv", 1.0));
    assert_eq!(s.workloads[0].duration.dist, "", "the trace's run times");
}

#[test]
fn validate_checks_scenarios_built_in_code() {
    let mut s = must_parse(BASE);
    s.node_groups[0].gpus = 0;
    s.lines.clear();
    want_error(s.validate(), "t.yaml: nodes[0].gpus: 0 must be ≥ 1");
    let s = Scenario::new("x", HOUR);
    want_error(
        s.validate(),
        "scenario: nodes: missing: at least one node group",
    );
}

/// Every .yaml file in the repository directory `dir`.
pub(super) fn yaml_files(dir: &str) -> Vec<String> {
    let mut paths: Vec<String> = std::fs::read_dir(repo(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn shipped_scenarios_parse() {
    let paths = yaml_files("scenarios");
    assert!(paths.len() >= 3, "found {} scenarios", paths.len());
    for path in paths {
        let s = load(repo(&path).to_str().unwrap(), &path);
        s.validate().unwrap_or_else(|e| panic!("revalidate: {e}"));
        let nodes = s.nodes().unwrap_or_else(|e| panic!("{e}"));
        let gpus: usize = nodes.iter().map(|n| n.gpus().len()).sum();
        assert_eq!(gpus as i64, s.gpus(), "{path}: the nodes hold {gpus} GPUs");
        State::new(nodes).unwrap_or_else(|e| panic!("{path}: State::new: {e}"));
    }
}

#[test]
fn shipped_scenarios_are_documented() {
    let doc = std::fs::read_to_string(repo("docs/scenario.md")).unwrap();
    for (go_type, fields) in raw::all_known_fields() {
        for f in fields {
            assert!(
                doc.contains(&format!("`{f}`")),
                "docs/scenario.md does not document {f} (a field of {go_type})"
            );
        }
    }
}

#[test]
fn the_documented_example_parses() {
    let doc = std::fs::read_to_string(repo("docs/scenario.md")).unwrap();
    let (_, rest) = doc
        .split_once("## A complete example\n\n```yaml\n")
        .expect("docs/scenario.md has a complete example");
    let (example, _) = rest
        .split_once("```")
        .expect("the example's block is closed");
    let s = must_parse(example);
    assert_eq!((s.gpus(), s.workloads.len()), (64, 2));
}

#[test]
fn parse_follows_merge_keys() {
    let text = edit(
        BASE,
        "    leaves: [leaf-a, leaf-b]\n",
        "    leaves: [leaf-a, leaf-b]\n  - <<: *h100\n    group: spot\n    tier: spot\n",
    );
    let text = edit(&text, "  - group: h100\n", "  - &h100\n    group: h100\n");
    let s = must_parse(&text);
    let spot = &s.node_groups[1];
    assert_eq!(
        (
            spot.group.as_str(),
            spot.gpus,
            spot.count,
            spot.tier,
            spot.memory_mib
        ),
        ("spot", 8, 2, Tier::Spot, 2 << 20)
    );
}
