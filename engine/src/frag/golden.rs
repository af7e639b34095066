//! The Go build's outputs, bit for bit: testdata/golden.txt holds random
//! workloads and nodes (and the typical mixes of two real pod lists) with
//! what the Go build's Typicals, Node, NodeOver, NodeOverRooms and
//! Unbalanced returned for them. testdata/golden_gen_test.go.txt wrote it
//! and says how to write it again.
//!
//! Lines: `dist NAME THRESHOLD` then its `shape` lines (a workload), or
//! `trace FILE WITH_MEMORY THRESHOLD` (a real pod list's workload); then
//! `typ` lines (the typical mix) and `node` lines (measures of one node).
//! Floats are written as their IEEE-754 bits in hex; an empty spec or
//! model as "-".

use std::path::Path;

use super::tests::CANONICAL;
use super::*;
use crate::trace;

const GOLDEN: &str = include_str!("testdata/golden.txt");

fn float(hex: &str) -> f64 {
    f64::from_bits(u64::from_str_radix(hex, 16).expect("float bits"))
}

fn int<T: std::str::FromStr>(s: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    s.parse().expect("integer")
}

fn word(s: &str) -> &str {
    if s == "-" { "" } else { s }
}

/// The rooms table the generator used: h × (0, 1 or 2) by bands of 50
/// milli.
fn rooms_table(len: usize, h: usize) -> Vec<usize> {
    (0..len).map(|l| h * ((l / 50) % 3)).collect()
}

/// A pod list's shapes as the fill experiment builds them (sim/fill's
/// Shapes): CPU-only pods carry no spec.
fn trace_shapes(pods: &[trace::Pod]) -> Vec<Shape> {
    pods.iter()
        .map(|p| {
            if p.num_gpu == 0 {
                return Shape {
                    cpu_milli: p.cpu_milli,
                    mem_mib: p.memory_mib,
                    ..Shape::default()
                };
            }
            Shape {
                cpu_milli: p.cpu_milli,
                mem_mib: p.memory_mib,
                milli: p.gpu_milli.min(1000),
                num: p.num_gpu,
                spec: p.gpu_spec_raw.clone(),
            }
        })
        .collect()
}

/// One workload of the file and the lines that follow it.
struct Section<'a> {
    header: Vec<&'a str>,
    shapes: Vec<Shape>,
    typicals: Vec<Typical>,
    nodes: Vec<Vec<&'a str>>,
}

fn sections() -> Vec<Section<'static>> {
    let mut out: Vec<Section> = Vec::new();
    for line in GOLDEN.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f[0] {
            "dist" | "trace" => out.push(Section {
                header: f,
                shapes: Vec::new(),
                typicals: Vec::new(),
                nodes: Vec::new(),
            }),
            "shape" | "typ" => {
                let s = Shape {
                    cpu_milli: int(f[1]),
                    mem_mib: int(f[2]),
                    milli: int(f[3]),
                    num: int(f[4]),
                    spec: word(f[5]).to_string(),
                };
                let sec = out.last_mut().expect("a section");
                if f[0] == "shape" {
                    sec.shapes.push(s);
                } else {
                    sec.typicals.push(Typical {
                        shape: s,
                        p: float(f[6]),
                    });
                }
            }
            "node" => out.last_mut().expect("a section").nodes.push(f),
            other => panic!("golden.txt: unknown line kind {other:?}"),
        }
    }
    out
}

/// The typical mix of a section, computed as the Go build did; for a real
/// pod list without the shared trace at hand, the mix the file records.
fn distribution(sec: &Section) -> Option<Distribution> {
    let threshold = float(sec.header[sec.header.len() - 1]);
    if sec.header[0] == "dist" {
        return Some(typicals(&sec.shapes, threshold, CANONICAL));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/alibaba-gpu-v2023");
    let file = sec.header[1];
    let Ok(data) = std::fs::read(dir.join(file)) else {
        return None;
    };
    let pods = trace::parse_pods(&data, file).expect("shared pod list");
    let mut shapes = trace_shapes(&pods);
    if sec.header[2] == "0" {
        shapes = without_memory(&shapes);
    }
    Some(typicals(&shapes, threshold, CANONICAL))
}

#[test]
fn typicals_match_the_go_build_bit_for_bit() {
    let mut checked = 0;
    for sec in sections() {
        let Some(d) = distribution(&sec) else {
            eprintln!("{}: shared trace not available, skipped", sec.header[1]);
            continue;
        };
        let name = sec.header[1];
        assert_eq!(d.pods().len(), sec.typicals.len(), "{name}: kept shapes");
        for (got, want) in d.pods().iter().zip(&sec.typicals) {
            assert_eq!(got.shape, want.shape, "{name}");
            assert_eq!(
                got.p.to_bits(),
                want.p.to_bits(),
                "{name}: P of {:?}",
                want.shape
            );
        }
        checked += 1;
    }
    assert!(checked >= 24, "only {checked} workloads checked");
}

#[test]
fn measures_match_the_go_build_bit_for_bit() {
    let mut checked = 0;
    for sec in sections() {
        // The recorded mix stands in for a real list's when the trace is
        // absent; typicals_match_the_go_build_bit_for_bit checks it when
        // it is present.
        let d = distribution(&sec)
            .unwrap_or_else(|| Distribution::new(sec.typicals.clone(), CANONICAL));
        for f in &sec.nodes {
            let model = word(f[1]);
            let (cpu, mem): (i64, i64) = (int(f[2]), int(f[3]));
            let (h, rooms_len): (usize, usize) = (int(f[4]), int(f[5]));
            let left: Vec<i64> = f[6].split(',').map(int).collect();
            let rooms = rooms_table(rooms_len, h);
            let got = [
                d.node(model, cpu, mem, &left),
                d.node_over(model, cpu, mem, &left, 1),
                d.node_over(model, cpu, mem, &left, h),
                d.node_over_rooms(model, cpu, mem, &left, h, &rooms),
                d.unbalanced(model, cpu, mem, &left),
            ];
            let names = [
                "node",
                "node_over 1",
                "node_over h",
                "node_over_rooms",
                "unbalanced",
            ];
            for ((name, got), want) in names.iter().zip(got).zip(&f[7..12]) {
                assert_eq!(
                    got.to_bits(),
                    float(want).to_bits(),
                    "{}: {name} of {} (got {got}, Go {})",
                    sec.header[1],
                    f[..7].join(" "),
                    float(want)
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 1000, "only {checked} nodes checked");
}
