//! Where a MIG instance goes, in order of what matters:
//!  1. a free instance of the profile that already exists: no
//!     reconfiguration, no delay;
//!  2. a GPU already split and in use rather than an idle one, and a node
//!     already in use rather than an idle one: whole GPUs and whole nodes
//!     stay free for training;
//!  3. a node with more GPUs in MIG mode: MIG gathers on few nodes;
//!  4. the place that keeps the GPU most flexible: the most maximal
//!     layouts of the model still reachable from the new layout;
//!  5. the tightest fit: the fewest free memory slices left.
//!
//! Each criterion has its own decimal band of the score, wide enough that
//! no lower one can outweigh it.

use crate::cluster::Node;
use crate::gpu::{MEMORY_SLICES, Model, Placement, same_name};
use crate::placement::{Hint, Request, slices_for};

/// Every MIG score is at least this: above every other score of partita.
pub(super) const MIG_BAND: i64 = 1_000_000_000_000;
pub(super) const MIG_EXISTING: i64 = 10_000_000_000;
const MIG_BUSY_GPU: i64 = 1_000_000_000;
const MIG_BUSY_NODE: i64 = 100_000_000;
/// Per MIG GPU on the node (counted up to 64).
const MIG_NODE_UNIT: i64 = 1_000_000;
/// Per maximal layout still reachable (at most about 80 per model).
pub(super) const MIG_FLEX_UNIT: i64 = 1_000;
/// Per memory slice taken.
const MIG_TIGHT_UNIT: i64 = 10;

/// Rates MIG places; keeps the maximal layouts of each model it met (the
/// Go build keeps them in a process-wide map) and scratch layouts.
#[derive(Default)]
pub(super) struct MigChooser {
    /// Each model met, in the order first met, with its maximal layouts.
    maximal: Vec<Maximal>,
    layout: Vec<Placement>,
    grown: Vec<Placement>,
}

/// A model's maximal layouts, each as a set of bits over the distinct
/// placements they hold: whether a layout contains every instance of
/// another is then one mask test, not a search by profile name (the
/// comparisons were a tenth of a week-1000 run). A model has at most one
/// placement per profile and memory slice: a catalog model has far fewer
/// than 128 (a test checks each).
pub(super) struct Maximal {
    model: String,
    /// The placements of any maximal layout, each once: bit `i` of a mask
    /// is `placements[i]`.
    pub(super) placements: Vec<Placement>,
    masks: Vec<u128>,
}

impl Maximal {
    pub(super) fn of(m: &Model) -> Maximal {
        let layouts = m.maximal_layouts();
        let mut placements: Vec<Placement> = Vec::new();
        for l in &layouts {
            for p in l {
                if !placements.contains(p) {
                    placements.push(p.clone());
                }
            }
        }
        assert!(
            placements.len() <= 128,
            "{}: {} distinct MIG placements, more than a mask holds",
            m.name,
            placements.len()
        );
        let masks = layouts
            .iter()
            .map(|l| {
                l.iter().fold(0u128, |mask, p| {
                    let bit = placements
                        .iter()
                        .position(|q| q == p)
                        .expect("listed above");
                    mask | 1 << bit
                })
            })
            .collect();
        Maximal {
            model: m.name.clone(),
            placements,
            masks,
        }
    }

    /// How many of the layouts contain every instance of `l`.
    pub(super) fn containing(&self, l: &[Placement]) -> i64 {
        let mut want = 0u128;
        for p in l {
            let Some(bit) = self.placements.iter().position(|q| q == p) else {
                return 0; // in no maximal layout
            };
            want |= 1 << bit;
        }
        self.masks.iter().filter(|&&m| m & want == want).count() as i64
    }
}

impl MigChooser {
    /// The best MIG place for `r` on `n` and its score, or none when `r`
    /// takes no MIG instance on any GPU of `n`.
    pub(super) fn choice(&mut self, n: &Node, r: &Request) -> Option<(i64, Hint)> {
        let node_busy = !n.tasks().is_empty();
        let mig_gpus = n.gpus().iter().filter(|g| g.mig()).count() as i64;
        let mut best: Option<(i64, Hint)> = None;
        for (i, g) in n.gpus().iter().enumerate() {
            let Some(p) = r.profile_on(g) else {
                continue;
            };
            self.layout.clear();
            g.append_layout(&mut self.layout);
            for pl in slices_for(g, p) {
                let mut sc = MIG_BAND;
                let existing = self.layout.contains(&pl);
                if existing {
                    sc += MIG_EXISTING;
                } else {
                    self.grown.clone_from(&self.layout);
                    self.grown.push(pl.clone());
                }
                if !g.idle() {
                    sc += MIG_BUSY_GPU;
                }
                if node_busy {
                    sc += MIG_BUSY_NODE;
                }
                sc += MIG_NODE_UNIT * mig_gpus.min(64);
                let next = if existing { &self.layout } else { &self.grown };
                sc += MIG_FLEX_UNIT * flexibility(&mut self.maximal, g.model(), next);
                let left = (g.free_memory_slices() & !p.mask(pl.start)).count_ones();
                sc += MIG_TIGHT_UNIT * (i64::from(MEMORY_SLICES) - i64::from(left));
                if best.as_ref().is_none_or(|(b, _)| sc > *b) {
                    best = Some((sc, Hint::on_slice(i, pl)));
                }
            }
        }
        best
    }
}

/// How many maximal layouts of `m` contain every instance of `l`: how many
/// ways the GPU can still be completed. `maximal` caches each model's
/// layouts by name.
fn flexibility(maximal: &mut Vec<Maximal>, m: &Model, l: &[Placement]) -> i64 {
    let at = match maximal.iter().position(|x| same_name(&x.model, &m.name)) {
        Some(at) => at,
        None => {
            maximal.push(Maximal::of(m));
            maximal.len() - 1
        }
    };
    maximal[at].containing(l)
}
