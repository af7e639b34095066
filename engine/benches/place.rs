//! Placements per second on the Alibaba cluster (1,213 nodes, 6,212 GPUs)
//! with the default pod list arriving in a shuffled order, each placement
//! applied to the cluster as the fill simulator applies it: the Go build's
//! `BenchmarkPlace` (go/internal/engine/policies/bench_test.go), measured
//! the same way so that the two can be read side by side:
//!
//! ```text
//! cargo bench -p partita-engine --bench place
//! cd go && go test -run NONE -bench BenchmarkPlace ./internal/engine/policies
//! ```
//!
//! When every pod has arrived the cluster is rebuilt (outside the timer),
//! so the figure covers empty-to-full fills, the placer's cache warm-up
//! included. Criterion reports elements/s: placements per second.
//!
//! The bench reads the trace from `../shared/data/alibaba-gpu-v2023` beside
//! the repository (or `PARTITA_ALIBABA_DATA`) and skips when it is absent.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use partita_engine::cluster::State;
use partita_engine::placement::Placer;
use partita_engine::policies;
use partita_engine::random::Rand;
use partita_engine::sim::fill;
use partita_engine::trace;

/// The policies Go's `BenchmarkPlace` measures, in its order, then the
/// four it leaves out.
const POLICIES: [&str; 8] = [
    "fgd",
    "partita",
    "best-fit",
    "k8s-default",
    "random",
    "dot-product",
    "gpu-clustering",
    "gpu-packing",
];

fn data_dir() -> PathBuf {
    match std::env::var_os("PARTITA_ALIBABA_DATA") {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/alibaba-gpu-v2023")
        }
    }
}

/// The node and pod lists, or none when the shared data is absent.
fn read_trace() -> Option<(Vec<trace::Node>, Vec<trace::Pod>)> {
    let dir = data_dir();
    let nodes_file = dir.join("openb_node_list_gpu_node.csv");
    let pods_file = dir.join("openb_pod_list_default.csv");
    let (Ok(nodes), Ok(pods)) = (std::fs::read(&nodes_file), std::fs::read(&pods_file)) else {
        return None;
    };
    let nodes =
        trace::parse_nodes(nodes, &nodes_file.to_string_lossy()).expect("the node list parses");
    let pods = trace::parse_pods(pods, &pods_file.to_string_lossy()).expect("the pod list parses");
    Some((nodes, pods))
}

/// One policy's placer on a fresh, empty cluster.
fn fresh(policy: &str, nodes: &[trace::Node], pods: &[trace::Pod]) -> (State, Placer) {
    // Ranks by position: the Go benchmark gives no ranks either.
    let st = fill::nodes(nodes, None).expect("the cluster builds");
    let mut cfg = policies::config_for(&st, fill::typical(pods));
    cfg.shapes = fill::shapes(pods);
    let policy = policies::new(policy, cfg).expect("the policy builds");
    (st, Placer::new(policy, Rand::new(1)))
}

fn place(c: &mut Criterion) {
    let Some((nodes, pods)) = read_trace() else {
        eprintln!(
            "place: shared data not present in {}; skipped",
            data_dir().display()
        );
        return;
    };
    let milli: i64 = nodes.iter().map(|n| n.gpus as i64 * 1000).sum();
    let arrivals = fill::arrivals(&pods, milli, 1.3, &mut Rand::new(42));
    let mut group = c.benchmark_group("place");
    group.throughput(Throughput::Elements(1));
    for policy in POLICIES {
        let (mut st, mut placer) = fresh(policy, &nodes, &pods);
        let mut next = 0;
        group.bench_function(policy, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    if next == arrivals.len() {
                        (st, placer) = fresh(policy, &nodes, &pods);
                        next = 0;
                    }
                    // Go passes the task by value, a shallow copy; the deep
                    // copy Rust's `place` takes is made outside the timer.
                    let task = arrivals[next].task.clone();
                    let start = Instant::now();
                    let placed = placer.place(&st, task);
                    if let Ok(a) = placed {
                        // Dropped pods are skipped, as in the fill protocol.
                        st.allocate(black_box(&a)).expect("the placement allocates");
                    }
                    spent += start.elapsed();
                    next += 1;
                }
                spent
            });
        });
    }
    group.finish();
}

criterion_group!(benches, place);
criterion_main!(benches);
