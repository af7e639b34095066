//! One run of the experiment: one seed of one policy on one pod list.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cluster::{Assignment, State};
use crate::frag::Distribution;
use crate::numfmt::round2;
use crate::placement::{PlaceError, Placer};
use crate::policies;
use crate::random::Rand;

use super::arrivals::{self, Pod};
use super::{COLUMNS, FillError, Input};

/// What a run is asked to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub policy: String,
    pub seed: i64,
    /// 1.3 in every published run.
    pub tune: f64,
}

/// One run's curves.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    pub policy: String,
    pub seed: i64,
    pub total_gpus: i64,
    /// Arrived pods, tuned copies included.
    pub pods: usize,
    pub failed: usize,
    /// The GPU demand (milli) of the pods that failed before the arrived
    /// workload reached 100 %, by kind ("share", "1-gpu", …): the
    /// unallocated GPUs at 100 % are exactly these.
    pub failed_at_100: BTreeMap<String, i64>,
    /// `alloc[n]` is the mean GPU allocation rate (%) over the events at
    /// n % arrived workload; `frag[n]` the mean fragmentation (% of all
    /// GPUs); `frag_ratio[n]` the mean fragment as % of idle GPU.
    pub alloc: [f64; COLUMNS],
    pub frag: [f64; COLUMNS],
    pub frag_ratio: [f64; COLUMNS],
}

impl RunResult {
    /// 100 minus the allocation rate at arrived = 100 %: the headline
    /// number of the FGD paper's Figure 7 and of our benchmark.
    pub fn unallocated(&self) -> f64 {
        round2(100.0 - self.alloc[100])
    }
}

/// Replays one seed of the experiment with one policy.
pub fn run(input: &Input, opt: &Options) -> Result<RunResult, FillError> {
    if input.nodes.is_empty() || input.pods.is_empty() {
        return Err(FillError::Empty);
    }
    let cluster_milli: i64 = input.nodes.iter().map(|n| n.gpus as i64 * 1000).sum();
    if cluster_milli == 0 {
        return Err(FillError::NoGpu);
    }
    let mut rng = Rand::new(opt.seed);
    let pods = arrivals::arrivals(&input.pods, cluster_milli, opt.tune, &mut rng);
    let ranks = rng.perm(input.nodes.len());
    let st = arrivals::nodes(&input.nodes, Some(&ranks))?;
    let mut cfg = policies::config_for(&st, Arc::clone(&input.typical));
    cfg.shapes = input.shapes.clone();
    cfg.canonical = Some(arrivals::canonical);
    let policy = policies::new(&opt.policy, cfg).map_err(FillError::Policy)?;
    let mut placer = Placer::new(policy, rng);
    // A pod that fits nowhere is only counted, so the placer need not say
    // why each node refused it (a tenth of k8s-default's run, which drops
    // many).
    placer.set_brief_failures(true);
    let mut world = World {
        placer,
        typical: &input.typical,
        total: cluster_milli,
        node_frag: vec![0.0; st.len()],
        st,
        frag_sum: 0.0,
        arrived: 0,
        used: 0,
        acc: [Accumulator::default(); COLUMNS],
        spill: Vec::new(),
        res: RunResult {
            policy: opt.policy.clone(),
            seed: opt.seed,
            total_gpus: cluster_milli / 1000,
            pods: pods.len(),
            failed: 0,
            failed_at_100: BTreeMap::new(),
            alloc: [0.0; COLUMNS],
            frag: [0.0; COLUMNS],
            frag_ratio: [0.0; COLUMNS],
        },
    };
    for i in 0..world.st.len() {
        world.refresh_frag(i);
    }
    // Pods carry no timestamps in the protocol (§3.5): one per instant,
    // in order, so the event queue of the Go build is this loop.
    for p in &pods {
        world.arrive(p)?;
        world.sample();
    }
    world.finish();
    Ok(world.res)
}

/// The fill experiment's world: the cluster, the engine's placer, and the
/// running measurements.
struct World<'a> {
    st: State,
    placer: Placer,
    typical: &'a Distribution,
    /// The cluster's GPU milli.
    total: i64,
    res: RunResult,
    arrived: i64,
    used: i64,
    /// Per node, kept current so that a sample costs one node.
    node_frag: Vec<f64>,
    frag_sum: f64,
    acc: [Accumulator; COLUMNS],
    /// Samples beyond the last column, for the ±1 rule.
    spill: Vec<Sample>,
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    col: i64,
    alloc: f64,
    frag: f64,
    frag_ratio: f64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Accumulator {
    n: usize,
    alloc: f64,
    frag: f64,
    frag_ratio: f64,
}

impl Accumulator {
    fn add(&mut self, alloc: f64, frag: f64, frag_ratio: f64, n: usize) {
        self.n += n;
        self.alloc += alloc;
        self.frag += frag;
        self.frag_ratio += frag_ratio;
    }
}

impl World<'_> {
    fn arrive(&mut self, p: &Pod) -> Result<(), FillError> {
        self.arrived += p.gpu_milli;
        match self.placer.place(&self.st, p.task.clone()) {
            Ok(a) => self.allocate(&a, p),
            Err(PlaceError::Failure(_) | PlaceError::NoFit) => {
                // Dropped, never retried (§3.6).
                self.res.failed += 1;
                if self.arrived <= self.total {
                    *self.res.failed_at_100.entry(kind_of(p)).or_insert(0) += p.gpu_milli;
                }
                Ok(())
            }
            Err(e) => Err(FillError::Place(e)),
        }
    }

    fn allocate(&mut self, a: &Assignment, p: &Pod) -> Result<(), FillError> {
        self.st.allocate(a).map_err(FillError::Refused)?;
        self.used += p.gpu_milli;
        let i = self
            .st
            .lookup(&a.node)
            .expect("the placer chose a node of the state");
        self.refresh_frag(i);
        Ok(())
    }

    fn refresh_frag(&mut self, i: usize) {
        let n = self.st.node(i);
        let mut buf = [0i64; 16];
        let mut heap = Vec::new();
        let gpus = n.gpus();
        let left: &mut [i64] = if gpus.len() <= buf.len() {
            &mut buf[..gpus.len()]
        } else {
            heap.resize(gpus.len(), 0);
            &mut heap
        };
        for (slot, g) in left.iter_mut().zip(gpus) {
            *slot = i64::from(g.free());
        }
        let model = n.model().map_or("", |m| m.name.as_str());
        let f = self.typical.node(model, n.cpu_free(), n.mem_free(), left);
        self.frag_sum += f - self.node_frag[i];
        self.node_frag[i] = f;
    }

    /// Records one event's measurements (§4).
    fn sample(&mut self) {
        let col = (self.arrived as f64 / self.total as f64 * 100.0).round_ties_even() as i64;
        let alloc = round2(self.used as f64 / self.total as f64 * 100.0);
        let frag = self.frag_sum / 1000.0 / (self.total / 1000) as f64 * 100.0;
        let idle = (self.total - self.used) as f64;
        let frag_ratio = if idle > 0.0 {
            100.0 * self.frag_sum / idle
        } else {
            0.0
        };
        match usize::try_from(col) {
            Ok(c) if c < COLUMNS => self.acc[c].add(alloc, frag, frag_ratio, 1),
            _ => self.spill.push(Sample {
                col,
                alloc,
                frag,
                frag_ratio,
            }),
        }
    }

    /// Turns the samples into columns: the mean of the events at N %, or,
    /// where there are none, of those at N−1..N+1 (§4).
    fn finish(&mut self) {
        for c in 0..COLUMNS {
            let mut a = self.acc[c];
            if a.n == 0 {
                for neighbour in [c.checked_sub(1), Some(c + 1)].into_iter().flatten() {
                    if let Some(b) = self.acc.get(neighbour) {
                        a.add(b.alloc, b.frag, b.frag_ratio, b.n);
                    }
                }
                if c == COLUMNS - 1 {
                    for s in self.spill.iter().filter(|s| s.col == COLUMNS as i64) {
                        a.add(s.alloc, s.frag, s.frag_ratio, 1);
                    }
                }
            }
            if a.n == 0 {
                continue;
            }
            let n = a.n as f64;
            self.res.alloc[c] = round2(a.alloc / n);
            self.res.frag[c] = round2(a.frag / n);
            self.res.frag_ratio[c] = round2(a.frag_ratio / n);
        }
    }
}

/// A pod's kind for failure reports.
fn kind_of(p: &Pod) -> String {
    if p.gpu_milli == 0 {
        "cpu".to_string()
    } else if p.shape.num == 1 && p.shape.milli < 1000 {
        "share".to_string()
    } else {
        format!("{}-gpu", p.shape.num)
    }
}
