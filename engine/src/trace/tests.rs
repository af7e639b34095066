//! The Go build's trace tests (errors_test.go, read_test.go,
//! shared_test.go), ported. Error texts are compared whole: they are part
//! of what both builds must print alike.

use std::path::{Path, PathBuf};

use super::invariants::{nodes_invariant, pods_invariant};
use super::table::parse_count;
use super::*;

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/trace/testdata")
        .join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(testdata(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const POD_KNOWN: &str = "known: name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time";
const NODE_KNOWN: &str = "known: sn, cpu_milli, memory_mib, gpu, model";

// Each malformed fixture must fail with exactly this message: the file,
// the line and, for a bad cell, the column and the value.
#[test]
fn pod_errors() {
    let unknown =
        format!(r#"pods_unknown_columns.csv:1: unknown columns "foo", "bar" ({POD_KNOWN})"#);
    let cases: &[(&str, &str)] = &[
        (
            "pods_empty.csv",
            "pods_empty.csv: empty file: no header row",
        ),
        ("pods_unknown_columns.csv", &unknown),
        (
            "pods_missing_columns.csv",
            "pods_missing_columns.csv:1: missing required columns num_gpu, gpu_milli",
        ),
        (
            "pods_duplicate_header.csv",
            r#"pods_duplicate_header.csv:1: duplicate column "name" (fields 1 and 6)"#,
        ),
        (
            "pods_field_count.csv",
            "pods_field_count.csv:3: row has 10 fields, header has 11",
        ),
        (
            "pods_trailing_comma.csv",
            "pods_trailing_comma.csv:3: row has 6 fields, header has 5",
        ),
        (
            "pods_bare_quote.csv",
            r#"pods_bare_quote.csv:3: bare " in non-quoted-field"#,
        ),
        (
            "pods_not_integer.csv",
            r#"pods_not_integer.csv:3: column gpu_milli: "abc": not an integer"#,
        ),
        (
            "pods_negative_cpu.csv",
            r#"pods_negative_cpu.csv:2: column cpu_milli: "-100": negative"#,
        ),
        (
            "pods_float_memory.csv",
            r#"pods_float_memory.csv:3: column memory_mib: "1024.5": not an integer"#,
        ),
        (
            "pods_overflow.csv",
            r#"pods_overflow.csv:2: column cpu_milli: "99999999999999999999": out of range"#,
        ),
        (
            "pods_empty_name.csv",
            r#"pods_empty_name.csv:2: column name: "": empty name"#,
        ),
        (
            "pods_name_spaces.csv",
            r#"pods_name_spaces.csv:2: column name: " pod": leading or trailing white space"#,
        ),
        (
            "pods_newline_in_name.csv",
            r#"pods_newline_in_name.csv:2: column name: "a\nb": control character in text"#,
        ),
        (
            "pods_duplicate_name.csv",
            r#"pods_duplicate_name.csv:4: column name: "p1": duplicate name, first used on line 2"#,
        ),
        (
            "pods_negative_num_gpu.csv",
            r#"pods_negative_num_gpu.csv:2: column num_gpu: "-1": negative"#,
        ),
        (
            "pods_milli_over.csv",
            r#"pods_milli_over.csv:2: column gpu_milli: "1001": must be between 0 and 1000"#,
        ),
        (
            "pods_milli_no_gpu.csv",
            r#"pods_milli_no_gpu.csv:2: column gpu_milli: "500": GPU share given for a pod with num_gpu 0"#,
        ),
        (
            "pods_milli_zero.csv",
            r#"pods_milli_zero.csv:2: column gpu_milli: "0": pod asks for GPUs but gpu_milli is 0"#,
        ),
        (
            "pods_multi_share.csv",
            r#"pods_multi_share.csv:2: column gpu_milli: "500": multi-GPU pods must ask for whole GPUs (gpu_milli 1000)"#,
        ),
        (
            "pods_spec_empty_model.csv",
            r#"pods_spec_empty_model.csv:2: column gpu_spec: "T4||P100": empty model in the | list"#,
        ),
        (
            "pods_spec_nan_model.csv",
            r#"pods_spec_nan_model.csv:2: column gpu_spec: "T4|nan": "nan" inside a | list"#,
        ),
        (
            "pods_spec_spaces.csv",
            r#"pods_spec_spaces.csv:2: column gpu_spec: "T4 |P100": leading or trailing white space"#,
        ),
        (
            "pods_bad_time.csv",
            r#"pods_bad_time.csv:2: column creation_time: "12.5": not an integer"#,
        ),
        (
            "pods_negative_time.csv",
            r#"pods_negative_time.csv:3: column deletion_time: "-5": negative"#,
        ),
    ];
    for (file, want) in cases {
        let path = format!("testdata/bad/{file}");
        let err = parse_pods(read(&format!("bad/{file}")), &path).expect_err(file);
        assert_eq!(err.to_string(), format!("testdata/bad/{want}"));
        assert!(
            std::error::Error::source(&err).is_some(),
            "{file}: no source"
        );
    }
}

#[test]
fn node_errors() {
    let unknown = format!(r#"nodes_unknown_column.csv:1: unknown columns "rack" ({NODE_KNOWN})"#);
    let cases: &[(&str, &str)] = &[
        (
            "nodes_blank_lines.csv",
            "nodes_blank_lines.csv: empty file: no header row",
        ),
        ("nodes_unknown_column.csv", &unknown),
        (
            "nodes_missing_model.csv",
            "nodes_missing_model.csv:1: missing required columns model",
        ),
        (
            "nodes_duplicate_header.csv",
            r#"nodes_duplicate_header.csv:1: duplicate column "sn" (fields 1 and 6)"#,
        ),
        (
            "nodes_field_count.csv",
            "nodes_field_count.csv:2: row has 6 fields, header has 5",
        ),
        (
            "nodes_empty_sn.csv",
            r#"nodes_empty_sn.csv:2: column sn: "": empty name"#,
        ),
        (
            "nodes_duplicate_sn.csv",
            r#"nodes_duplicate_sn.csv:5: column sn: "n2": duplicate name, first used on line 3"#,
        ),
        (
            "nodes_negative_gpu.csv",
            r#"nodes_negative_gpu.csv:2: column gpu: "-2": negative"#,
        ),
        (
            "nodes_gpu_no_model.csv",
            r#"nodes_gpu_no_model.csv:3: column model: "": node has GPUs but no model"#,
        ),
        (
            "nodes_gpu_nan_model.csv",
            r#"nodes_gpu_nan_model.csv:2: column model: "nan": node has GPUs but no model"#,
        ),
        (
            "nodes_model_no_gpu.csv",
            r#"nodes_model_no_gpu.csv:2: column model: "T4": model given for a node without GPUs"#,
        ),
        (
            "nodes_model_list.csv",
            r#"nodes_model_list.csv:2: column model: "T4|P100": node model must be a single model, not a | list"#,
        ),
    ];
    for (file, want) in cases {
        let path = format!("testdata/bad/{file}");
        let err = parse_nodes(read(&format!("bad/{file}")), &path).expect_err(file);
        assert_eq!(err.to_string(), format!("testdata/bad/{want}"));
    }
}

/// Every malformed fixture has a case above: a new fixture without an
/// expected text would otherwise go untested.
#[test]
fn every_bad_fixture_is_checked() {
    let mut names: Vec<String> = std::fs::read_dir(testdata("bad"))
        .expect("testdata/bad")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 25 + 12, "fixtures: {names:?}");
}

fn node(
    name: &str,
    cpu_milli: i64,
    memory_mib: i64,
    gpus: usize,
    model: &str,
    line: usize,
) -> Node {
    Node {
        name: name.to_string(),
        cpu_milli,
        memory_mib,
        gpus,
        model: model.to_string(),
        line,
    }
}

#[test]
fn node_fixtures() {
    let cases: &[(&str, &str, Vec<Node>)] = &[
        (
            "CPU-only nodes may write the model as empty or any-case nan",
            "nodes_all.csv",
            vec![
                node("node-cpu-a", 32000, 262144, 0, "", 2),
                node("node-cpu-b", 32000, 262144, 0, "", 3),
                node("node-p100", 64000, 262144, 2, "P100", 4),
                node("node-v100", 96000, 786432, 8, "V100M32", 5),
                node("node-cpu-c", 16000, 65536, 0, "", 6),
            ],
        ),
        (
            "columns are found by name, in any order, quoted or not",
            "nodes_reordered.csv",
            vec![
                node("node-t4", 32000, 131072, 1, "T4", 2),
                node("node-g2", 96000, 786432, 8, "G2", 3),
            ],
        ),
        (
            "a BOM and CRLF line ends are tolerated",
            "nodes_bom_crlf.csv",
            vec![
                node("node-a", 1000, 2048, 1, "A10", 2),
                node("node-b", 2000, 4096, 0, "", 3),
            ],
        ),
        (
            "a header alone is an empty list",
            "nodes_header_only.csv",
            vec![],
        ),
    ];
    for (what, file, want) in cases {
        let got = parse_nodes(read(file), file).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&got, want, "{what}");
        // The reader path reads the same.
        let again = read_nodes(&read(file)[..], file).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&again, want, "{what}: read_nodes");
    }
}

/// A pod with the given request and nothing else set.
fn pod(
    name: &str,
    cpu_milli: i64,
    memory_mib: i64,
    num_gpu: usize,
    gpu_milli: i64,
    line: usize,
) -> Pod {
    Pod {
        name: name.to_string(),
        cpu_milli,
        memory_mib,
        num_gpu,
        gpu_milli,
        gpu_spec: Vec::new(),
        gpu_spec_raw: String::new(),
        qos: String::new(),
        phase: String::new(),
        creation_time: None,
        deletion_time: None,
        scheduled_time: None,
        line,
    }
}

/// `p` with the full list's optional columns.
fn full(
    p: Pod,
    spec: &[&str],
    raw: &str,
    qos: &str,
    phase: &str,
    times: (Option<i64>, Option<i64>, Option<i64>),
) -> Pod {
    Pod {
        gpu_spec: spec.iter().map(|s| s.to_string()).collect(),
        gpu_spec_raw: raw.to_string(),
        qos: qos.to_string(),
        phase: phase.to_string(),
        creation_time: times.0,
        deletion_time: times.1,
        scheduled_time: times.2,
        ..p
    }
}

#[test]
fn pod_fixtures() {
    let cases: &[(&str, &str, Vec<Pod>)] = &[
        (
            "full eleven-column list",
            "pods_full.csv",
            vec![
                full(
                    pod("pod-cpu", 12500, 57344, 0, 0, 2),
                    &[],
                    "",
                    "LS",
                    "Running",
                    (Some(10971827), Some(10972394), Some(10971829)),
                ),
                full(
                    pod("pod-share", 6000, 12288, 1, 460, 3),
                    &[],
                    "nan",
                    "BE",
                    "Running",
                    (Some(427061), Some(12902960), Some(427061)),
                ),
                full(
                    pod("pod-whole", 16000, 32768, 1, 1000, 4),
                    &["V100M16", "V100M32"],
                    "V100M16|V100M32",
                    "LS",
                    "Running",
                    (Some(9967058), Some(9968575), Some(9967063)),
                ),
                full(
                    pod("pod-dup-spec", 88000, 327680, 8, 1000, 5),
                    &["V100M16", "V100M32"],
                    "V100M16|V100M32|V100M32",
                    "Burstable",
                    "Succeeded",
                    (Some(9437497), Some(10769854), Some(9437497)),
                ),
                full(
                    pod("pod-pending", 4000, 15258, 1, 220, 6),
                    &[],
                    "",
                    "BE",
                    "Pending",
                    (Some(9679175), Some(9973826), None),
                ),
                full(
                    pod("pod-quoted", 1, 0, 2, 1000, 7),
                    &["T4", "P100"],
                    "T4|P100",
                    "Guaranteed",
                    "Failed",
                    (Some(0), Some(0), Some(0)),
                ),
            ],
        ),
        (
            "multigpu five-column list leaves the optional fields unset",
            "pods_multigpu.csv",
            vec![
                pod("openb-pod-0000", 12000, 16384, 1, 1000, 2),
                pod("openb-pod-0001", 6000, 12288, 1, 460, 3),
                pod("openb-pod-0002", 88000, 327680, 8, 1000, 4),
                pod("openb-pod-0003", 4000, 8192, 0, 0, 5),
            ],
        ),
        (
            "a header alone is an empty list",
            "pods_header_only.csv",
            vec![],
        ),
    ];
    for (what, file, want) in cases {
        let got = parse_pods(read(file), file).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&got, want, "{what}");
        pods_invariant(&got).unwrap_or_else(|e| panic!("{what}: {e}"));
        let again = read_pods(&read(file)[..], file).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&again, want, "{what}: read_pods");
    }
}

/// A reader that fails, as a file on a broken disk would.
struct Broken;

impl std::io::Read for Broken {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(std::io::Error::other("disk on fire"))
    }
}

#[test]
fn reader_failures_name_the_file() {
    let err = read_pods(Broken, "p.csv").expect_err("pods");
    assert_eq!(err.to_string(), "p.csv: disk on fire");
    assert!(matches!(err.cause, Cause::Read(_)));
    let err = read_nodes(Broken, "n.csv").expect_err("nodes");
    assert_eq!(err.to_string(), "n.csv: disk on fire");
}

fn error(
    file: &str,
    line: usize,
    column: Option<&'static str>,
    value: &[u8],
    cause: Cause,
) -> ParseError {
    ParseError {
        file: file.to_string(),
        line,
        column,
        value: value.to_vec(),
        cause,
    }
}

#[test]
fn parse_error_format() {
    let long = "x".repeat(100);
    let cases = [
        (
            "cell errors quote the value",
            error("f.csv", 12, Some("gpu_milli"), b"abc", Cause::NotInteger),
            r#"f.csv:12: column gpu_milli: "abc": not an integer"#.to_string(),
        ),
        (
            "row errors have no column",
            error("f.csv", 3, None, b"", Cause::NoModel),
            "f.csv:3: node has GPUs but no model".to_string(),
        ),
        (
            "file errors have no line",
            error("f.csv", 0, None, b"", Cause::NoHeader),
            "f.csv: empty file: no header row".to_string(),
        ),
        (
            "an unnamed input still reads as a location",
            error("", 2, Some("sn"), b"", Cause::EmptyName),
            r#"<input>:2: column sn: "": empty name"#.to_string(),
        ),
        (
            "long values are cut short",
            error("f", 2, Some("name"), long.as_bytes(), Cause::Spaces),
            format!(
                r#"f:2: column name: "{}...": leading or trailing white space"#,
                "x".repeat(61)
            ),
        ),
        (
            // As Go: the cut is by bytes, here inside an "é", whose first
            // byte then prints as an escape.
            "long values are cut by bytes",
            error(
                "f",
                2,
                Some("name"),
                format!("{}é", "x".repeat(60)).repeat(2).as_bytes(),
                Cause::Spaces,
            ),
            format!(
                r#"f:2: column name: "{}\xc3...": leading or trailing white space"#,
                "x".repeat(60)
            ),
        ),
    ];
    for (what, err, want) in cases {
        assert_eq!(err.to_string(), want, "{what}");
    }
}

#[test]
fn parse_count_cases() {
    let cases: &[(&str, Result<i64, &str>)] = &[
        ("0", Ok(0)),
        ("007", Ok(7)),
        ("9223372036854775807", Ok(i64::MAX)),
        ("9223372036854775808", Err("out of range")),
        ("", Err("empty cell")),
        ("-", Err("not an integer")),
        ("-0", Err("negative")),
        ("-12", Err("negative")),
        ("+12", Err("not an integer")),
        (" 12", Err("not an integer")),
        ("1e3", Err("not an integer")),
        ("1.0", Err("not an integer")),
        ("99999999999999999999x", Err("not an integer")),
        ("-99999999999999999999", Err("negative")),
        ("٣", Err("not an integer")),
    ];
    for (input, want) in cases {
        let got = parse_count(input.as_bytes()).map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_string), "parse_count({input:?})");
    }
}

// Cases beyond the fixtures, each checked against the Go build's text.
#[test]
fn text_cell_edge_cases() {
    let header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n";
    let cases: &[(&[u8], &str)] = &[
        // A no-break space is white space; invalid UTF-8 is reported after
        // the white-space check, as in Go.
        (
            "p\u{a0},1,1,0,0,\n".as_bytes(),
            r#"f:2: column name: "p\u00a0": leading or trailing white space"#,
        ),
        (
            b"\xffp,1,1,0,0,\n",
            r#"f:2: column name: "\xffp": invalid UTF-8"#,
        ),
        (
            b" \xff,1,1,0,0,\n",
            r#"f:2: column name: " \xff": leading or trailing white space"#,
        ),
        (
            b"p\x7f,1,1,0,0,\n",
            r#"f:2: column name: "p\x7f": control character in text"#,
        ),
        (
            "p\u{85}q,1,1,0,0,\n".as_bytes(),
            r#"f:2: column name: "p\u0085q": control character in text"#,
        ),
        (b"p,1,1,1,1000,A|a|A\n", ""),
        (b"p,1,1,1,1000,NaN\n", ""),
        (
            b"p,1,1,1,1000,A|NAN\n",
            r#"f:2: column gpu_spec: "A|NAN": "nan" inside a | list"#,
        ),
        (
            b"p,1,1,1,1000,|\n",
            r#"f:2: column gpu_spec: "|": empty model in the | list"#,
        ),
        (b"p,1,1,0,0,,\n", "f:2: row has 7 fields, header has 6"),
        (b"p,1,1,0,0\n", "f:2: row has 5 fields, header has 6"),
    ];
    for (row, want) in cases {
        let mut data = header.as_bytes().to_vec();
        data.extend_from_slice(row);
        let got = match parse_pods(&data, "f") {
            Ok(pods) => {
                pods_invariant(&pods).expect("invariant");
                String::new()
            }
            Err(e) => e.to_string(),
        };
        assert_eq!(got, *want, "row {:?}", String::from_utf8_lossy(row));
    }
}

#[test]
fn cell_errors_name_the_cells_own_line() {
    // The gpu_spec cell spans lines 2 and 3; memory_mib, checked before it,
    // starts on line 3.
    let data = "gpu_spec,name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\"a\nb\",p,1,x,0,0\n";
    let err = parse_pods(data, "f").expect_err("bad memory");
    assert_eq!(
        err.to_string(),
        r#"f:3: column memory_mib: "x": not an integer"#
    );
    let data = "gpu_spec,name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\"a\nb\",p,1,1,0,0\n";
    let err = parse_pods(data, "f").expect_err("bad spec");
    assert_eq!(
        err.to_string(),
        r#"f:2: column gpu_spec: "a\nb": control character in text"#
    );
}

#[test]
fn spec_is_deduplicated_in_order_even_when_long() {
    let models: Vec<String> = (0..40).map(|i| format!("M{}", i % 20)).collect();
    let data = format!(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1,1,1,1000,{}\n",
        models.join("|")
    );
    let pods = parse_pods(&data, "f").expect("parses");
    let want: Vec<String> = (0..20).map(|i| format!("M{i}")).collect();
    assert_eq!(pods[0].gpu_spec, want);
}

#[test]
fn header_errors() {
    let cases: &[(&str, &str)] = &[
        // A duplicate is reported even after an unknown column.
        ("x,x\n", r#"f:1: duplicate column "x" (fields 1 and 2)"#),
        (
            "\n\nsn,\"cpu\"\n",
            r#"f:3: unknown columns "cpu" (known: sn, cpu_milli, memory_mib, gpu, model)"#,
        ),
        ("sn\"\n", r#"f:1: bare " in non-quoted-field"#),
        (
            "sn,gpu\n",
            "f:1: missing required columns cpu_milli, memory_mib, model",
        ),
    ];
    for (data, want) in cases {
        let err = parse_nodes(data, "f").expect_err(data);
        assert_eq!(err.to_string(), *want);
    }
}

// The real trace, when the workspace has it; skipped otherwise.
fn shared_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/alibaba-gpu-v2023");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("shared trace not available at {}: skipped", dir.display());
        None
    }
}

/// Row counts of every pod list, from the upstream files (lines minus
/// header).
const SHARED_POD_COUNTS: &[(&str, usize)] = &[
    ("openb_pod_list_cpu0.csv", 7064),
    ("openb_pod_list_cpu037.csv", 7336),
    ("openb_pod_list_cpu072.csv", 7608),
    ("openb_pod_list_cpu100.csv", 7853),
    ("openb_pod_list_cpu200.csv", 8832),
    ("openb_pod_list_cpu235.csv", 9240),
    ("openb_pod_list_cpu250.csv", 9420),
    ("openb_pod_list_cpu300.csv", 10094),
    ("openb_pod_list_default.csv", 8152),
    ("openb_pod_list_gpushare20.csv", 8152),
    ("openb_pod_list_gpushare40.csv", 8152),
    ("openb_pod_list_gpushare60.csv", 8152),
    ("openb_pod_list_gpushare80.csv", 8152),
    ("openb_pod_list_gpuspec05.csv", 8152),
    ("openb_pod_list_gpuspec10.csv", 8152),
    ("openb_pod_list_gpuspec20.csv", 8152),
    ("openb_pod_list_gpuspec25.csv", 8152),
    ("openb_pod_list_multigpu20.csv", 8324),
    ("openb_pod_list_multigpu30.csv", 8508),
    ("openb_pod_list_multigpu40.csv", 8746),
];

// Every CSV of the shared trace must parse: the strict rules were checked
// against this data, and a rule that rejects it is a wrong rule.
#[test]
fn shared_trace_parses() {
    let Some(dir) = shared_dir() else { return };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("shared dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no CSV files in {}", dir.display());
    for path in paths {
        let base = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_string();
        let data = std::fs::read(&path).expect("read");
        if base.starts_with("openb_node_list_") {
            let nodes = parse_nodes(&data, &base).unwrap_or_else(|e| panic!("{e}"));
            nodes_invariant(&nodes).unwrap_or_else(|e| panic!("{base}: {e}"));
        } else if base.starts_with("openb_pod_list_") {
            let pods = parse_pods(&data, &base).unwrap_or_else(|e| panic!("{e}"));
            pods_invariant(&pods).unwrap_or_else(|e| panic!("{base}: {e}"));
            let want = SHARED_POD_COUNTS
                .iter()
                .find(|(name, _)| *name == base)
                .map(|&(_, n)| n)
                .unwrap_or_else(|| {
                    panic!("no known row count for {base}; add it to SHARED_POD_COUNTS")
                });
            assert_eq!(pods.len(), want, "{base}");
        } else {
            panic!("CSV of unknown kind: {base}");
        }
    }
}

#[test]
fn shared_node_lists() {
    let Some(dir) = shared_dir() else { return };
    // (file, nodes, GPUs, CPU-only nodes, models, first node's model)
    let cases = [
        ("openb_node_list_gpu_node.csv", 1213, 6212, 0, 7, "P100"),
        ("openb_node_list_all_node.csv", 1523, 6212, 310, 7, ""),
    ];
    for (file, want_nodes, want_gpus, want_cpu_only, want_models, first_model) in cases {
        let data = std::fs::read(dir.join(file)).expect("read");
        let nodes = parse_nodes(&data, file).unwrap_or_else(|e| panic!("{e}"));
        let gpus: usize = nodes.iter().map(|n| n.gpus).sum();
        let cpu_only = nodes.iter().filter(|n| n.gpus == 0).count();
        let models: std::collections::BTreeSet<&str> = nodes
            .iter()
            .filter(|n| n.gpus > 0)
            .map(|n| n.model.as_str())
            .collect();
        assert_eq!(
            (nodes.len(), gpus, cpu_only, models.len()),
            (want_nodes, want_gpus, want_cpu_only, want_models),
            "{file}"
        );
        assert_eq!(nodes[0].model, first_model, "{file}");
    }
}

#[test]
fn shared_default_pods() {
    let Some(dir) = shared_dir() else { return };
    let file = "openb_pod_list_default.csv";
    let pods = parse_pods(std::fs::read(dir.join(file)).expect("read"), file)
        .unwrap_or_else(|e| panic!("{e}"));
    let cpu_only = pods.iter().filter(|p| p.num_gpu == 0).count();
    let shares = pods
        .iter()
        .filter(|p| p.num_gpu == 1 && p.gpu_milli < 1000)
        .count();
    let unscheduled: Vec<&Pod> = pods.iter().filter(|p| p.scheduled_time.is_none()).collect();
    for p in &unscheduled {
        assert_eq!(p.phase, "Pending", "line {}: no scheduled_time", p.line);
    }
    let with_spec = pods.iter().filter(|p| !p.gpu_spec.is_empty()).count();
    // Figures from the upstream file: 1088 CPU-only pods, 3078 GPU-sharing
    // pods, 897 Pending pods without a scheduled_time, no gpu_spec at all.
    assert_eq!(
        (pods.len(), cpu_only, shares, unscheduled.len(), with_spec),
        (8152, 1088, 3078, 897, 0)
    );
}

// The gpuspec lists hold the one repeated-model spec of the trace; it must
// come back de-duplicated while the raw text keeps the repeat.
#[test]
fn shared_repeated_spec() {
    let Some(dir) = shared_dir() else { return };
    let file = "openb_pod_list_gpuspec25.csv";
    let pods = parse_pods(std::fs::read(dir.join(file)).expect("read"), file)
        .unwrap_or_else(|e| panic!("{e}"));
    let with_spec = pods.iter().filter(|p| !p.gpu_spec.is_empty()).count();
    let repeated: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.gpu_spec_raw == "V100M16|V100M32|V100M32")
        .collect();
    for p in &repeated {
        assert_eq!(p.gpu_spec, ["V100M16", "V100M32"], "line {}", p.line);
    }
    assert_eq!(with_spec, 8152 - 6393);
    assert!(!repeated.is_empty());
}

/// The readers' result in the form testdata/go_results.txt records the Go
/// build's: the error text, or every field of every row, strings in hex.
fn dump(kind: &str, data: &[u8]) -> String {
    fn hx(s: &[u8]) -> String {
        s.iter().map(|b| format!("{b:02x}")).collect()
    }
    let opt = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    let result = if kind == "nodes" {
        parse_nodes(data, "f.csv").map(|nodes| {
            nodes
                .iter()
                .map(|x| {
                    format!(
                        "{} {} {} {} {} {};",
                        hx(x.name.as_bytes()),
                        x.cpu_milli,
                        x.memory_mib,
                        x.gpus,
                        hx(x.model.as_bytes()),
                        x.line
                    )
                })
                .collect::<String>()
        })
    } else {
        parse_pods(data, "f.csv").map(|pods| {
            pods.iter()
                .map(|x| {
                    let specs: Vec<String> = x.gpu_spec.iter().map(|s| hx(s.as_bytes())).collect();
                    format!(
                        "{} {} {} {} {} [{}] {} {} {} {} {} {} {};",
                        hx(x.name.as_bytes()),
                        x.cpu_milli,
                        x.memory_mib,
                        x.num_gpu,
                        x.gpu_milli,
                        specs.join(","),
                        hx(x.gpu_spec_raw.as_bytes()),
                        hx(x.qos.as_bytes()),
                        hx(x.phase.as_bytes()),
                        opt(x.creation_time),
                        opt(x.deletion_time),
                        opt(x.scheduled_time),
                        x.line
                    )
                })
                .collect::<String>()
        })
    };
    match result {
        Ok(rows) => rows,
        Err(e) => format!("ERR {}", hx(e.to_string().as_bytes())),
    }
}

/// Inputs mutated from the fixtures and found by fuzzing, a few for each
/// error the Go build gave and some it accepted, with the Go build's
/// result: the same error texts (quoting, line numbers) and the same rows.
/// Each line: kind, the input in hex, the result. They were picked from
/// 13,600 such inputs on which both builds' results were compared whole
/// and found identical (as were their results on every shared list).
#[test]
fn results_match_the_go_build_on_mutated_inputs() {
    let cases = String::from_utf8(read("go_results.txt")).expect("UTF-8");
    let mut checked = 0;
    for line in cases.lines() {
        let mut f = line.splitn(3, ' ');
        let (kind, input, want) = (
            f.next().expect("kind"),
            f.next().expect("input"),
            f.next().unwrap_or(""),
        );
        let data: Vec<u8> = (0..input.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&input[i..i + 2], 16).expect("hex"))
            .collect();
        let got = dump(kind, &data);
        let show = |s: &str| match s.strip_prefix("ERR ") {
            Some(hex) => {
                let bytes: Vec<u8> = (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                    .collect();
                format!("error {}", String::from_utf8_lossy(&bytes))
            }
            None => s.to_string(),
        };
        assert_eq!(
            show(&got),
            show(want),
            "{kind} input {:?}",
            String::from_utf8_lossy(&data)
        );
        checked += 1;
    }
    assert!(checked > 200, "only {checked} cases");
}
