//! `partita sim`: a small demo that places a mixed inference and training
//! workload on a four-node cluster with several policies (Go:
//! `go/cmd/partita/sim.go`), with its texts and numbers.

use std::io::Write;

use anyhow::anyhow;
use partita_engine::cluster::{self, Assignment, Node, NodeSpec, State};
use partita_engine::frag::{self, Shape};
use partita_engine::gpu::{Layout, Placement};
use partita_engine::placement::Placer;
use partita_engine::policies;
use partita_engine::random::Rand;
use partita_engine::workload::{Demand, Kind, Task};

use super::{split_list, usage_error};

/// The flags of `partita sim`, with the Go build's defaults.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// policies to compare
    #[arg(long, default_value = "k8s-default,partita")]
    pub policies: String,

    /// policy whose placement is drawn
    #[arg(long, default_value = "partita")]
    pub show: String,

    /// random seed
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: i64,
}

/// Two HGX H100 nodes with MIG on, split as the GPU Operator's
/// "all-balanced" config does (2×1g.10gb, 2g.20gb, 3g.40gb), and two A100
/// nodes without MIG: the shape of a small mixed cluster.
fn demo_cluster() -> anyhow::Result<State> {
    let balanced = Layout(vec![
        Placement::new("3g.40gb", 4),
        Placement::new("2g.20gb", 0),
        Placement::new("1g.10gb", 2),
        Placement::new("1g.10gb", 3),
    ]);
    let spec = |name: &str, cpu: i64, mem: i64, model: &str, mig: bool| NodeSpec {
        name: name.to_string(),
        cpu_milli: cpu,
        memory_mib: mem,
        gpu_model: model.to_string(),
        gpus: 8,
        mig,
        layout: if mig {
            balanced.clone()
        } else {
            Layout::default()
        },
        ..NodeSpec::default()
    };
    let specs = [
        spec("h100-a", 192_000, 2 << 20, "H100-80GB", true),
        spec("h100-b", 192_000, 2 << 20, "H100-80GB", true),
        spec("a100-a", 128_000, 1 << 20, "A100-80GB", false),
        spec("a100-b", 128_000, 1 << 20, "A100-80GB", false),
    ];
    let nodes = specs
        .iter()
        .map(cluster::build_node)
        .collect::<Result<Vec<Node>, _>>()?;
    Ok(State::new(nodes)?)
}

/// A day's mix: LLM and embedding services sized by memory, notebooks on
/// shares, and training on whole GPUs.
fn demo_tasks() -> Vec<Task> {
    let mut ts = Vec::new();
    let mut add = |n: usize, name: &str, cpu: i64, mem_mib: i64, d: Demand| {
        for i in 0..n {
            ts.push(Task {
                name: format!("{name}-{i}"),
                cpu_milli: cpu,
                memory_mib: mem_mib,
                gpu: d.clone(),
            });
        }
    };
    const GIB: i64 = 1024;
    // Peak GPU memory: weights (params × 2 bytes in bf16) plus KV cache.
    add(
        4,
        "llm-7b",
        8000,
        32 * GIB,
        Demand::memory_profile(14 * GIB + 6 * GIB, 0.25),
    );
    add(
        2,
        "llm-13b",
        8000,
        48 * GIB,
        Demand::memory_profile(26 * GIB + 8 * GIB, 0.40),
    );
    add(
        8,
        "embed",
        4000,
        8 * GIB,
        Demand::memory_profile(3 * GIB, 0.10),
    );
    add(
        4,
        "rerank",
        4000,
        8 * GIB,
        Demand::memory_profile(5 * GIB, 0.10),
    );
    add(4, "notebook", 4000, 16 * GIB, Demand::fraction(250));
    add(2, "finetune", 32000, 256 * GIB, Demand::whole_gpus(4));
    add(1, "pretrain", 64000, 512 * GIB, Demand::whole_gpus(8));
    add(2, "llm-70b", 16000, 128 * GIB, Demand::whole_gpus(2));
    ts
}

/// Runs the demo.
pub fn run(args: &SimArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let tasks = demo_tasks();
    let mut shapes = Vec::with_capacity(tasks.len());
    for t in &tasks {
        match t.gpu.kind {
            Kind::Fraction => shapes.push(Shape {
                cpu_milli: t.cpu_milli,
                mem_mib: t.memory_mib,
                milli: i64::from(t.gpu.milli),
                num: 1,
                ..Shape::default()
            }),
            Kind::WholeGpus => shapes.push(Shape {
                cpu_milli: t.cpu_milli,
                mem_mib: t.memory_mib,
                milli: 1000,
                num: usize::try_from(t.gpu.count).unwrap_or(0),
                ..Shape::default()
            }),
            _ => {}
        }
    }
    writeln!(
        stdout,
        "Demo cluster: 2 nodes of 8 H100-80GB (MIG all-balanced) and 2 of 8 A100-80GB; {} tasks arrive in order.\n",
        tasks.len()
    )?;
    writeln!(
        stdout,
        "{:<12} {:>7} {:>9} {:>13} {:>12}",
        "policy", "placed", "waiting", "GPUs held", "GPUs needed"
    )?;
    let mut drawn: Option<State> = None;
    for name in split_list(&args.policies) {
        let mut st = demo_cluster()?;
        let mut cfg =
            policies::config_for(&st, frag::typicals(&shapes, frag::DEFAULT_THRESHOLD, None));
        cfg.shapes = shapes.clone();
        let pol = policies::new(&name, cfg).map_err(|e| usage_error(e.to_string()))?;
        let mut placer = Placer::new(pol, Rand::new(args.seed));
        let (mut placed, mut held, mut needed) = (0, 0.0, 0.0);
        for t in &tasks {
            let Ok(a) = placer.place(&st, t.clone()) else {
                continue;
            };
            st.allocate(&a).map_err(|e| anyhow!("{e}"))?;
            placed += 1;
            let n = st
                .node_by_name(&a.node)
                .expect("placed on a node of the cluster");
            let (h, nd) = held_and_needed(n, &a, t);
            held += h;
            needed += nd;
        }
        writeln!(
            stdout,
            "{:<12} {:7} {:9} {:13.2} {:12.2}",
            name,
            placed,
            tasks.len() - placed,
            held,
            needed
        )?;
        if name == args.show {
            drawn = Some(st);
        }
    }
    if let Some(st) = drawn {
        writeln!(stdout, "\nWhere {} put them:", args.show)?;
        for n in st.nodes() {
            write!(stdout, "{}", n.describe())?;
        }
    }
    writeln!(
        stdout,
        "\nGPUs held counts what the placement takes; GPUs needed what the tasks use (a MIG slice or share counts its compute share)."
    )?;
    Ok(())
}

/// The GPU a task holds and the GPU it needs, in GPUs.
fn held_and_needed(n: &Node, a: &Assignment, t: &Task) -> (f64, f64) {
    let held = f64::from(a.gpu_milli(n)) / 1000.0;
    let needed = match t.gpu.kind {
        Kind::WholeGpus => f64::from(t.gpu.count),
        Kind::Fraction => f64::from(t.gpu.milli) / 1000.0,
        Kind::MemoryProfile => {
            let mut needed = t.gpu.compute;
            if let Some(m) = n.model()
                && m.memory_mib > 0
            {
                let by_memory = t.gpu.peak_memory_mib as f64 / m.memory_mib as f64;
                // Go's max: NaN if either is.
                needed = if needed.is_nan() || by_memory.is_nan() {
                    f64::NAN
                } else {
                    needed.max(by_memory)
                };
            }
            needed
        }
        _ => 0.0,
    };
    (held, needed)
}
