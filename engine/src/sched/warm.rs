//! The warm pool. Creating a MIG instance takes a reconfiguration delay
//! (about 30 s) before the task on it can run, which alone would break a
//! 30 s start-up promise for production inference. So, after placing what
//! it can, a cycle creates free instances ahead of demand: for each profile
//! production work started recently, up to `WARM_TARGET` free instances,
//! on GPUs already split (never turning a whole GPU to MIG for a guess) and
//! only where space is free (running instances are never touched).

use std::collections::BTreeMap;

use super::Scheduler;
use super::snapshot::Cycle;
use super::types::{HOUR, MINUTE, Nanos, Reconfig};
use crate::cluster::State;
use crate::gpu::{Layout, Placement};
use crate::workload::Class;

/// How far back recent starts count.
const WARM_WINDOW: Nanos = HOUR;
/// The free instances kept per profile and model: 4 rather than 2 met the
/// production start-up target on more seeds, with fewer preemptions.
const WARM_TARGET: usize = 4;
/// The pool is topped up at most this often.
const WARM_EVERY: Nanos = MINUTE;

/// A GPU model and a MIG profile of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct WarmKey {
    model: String,
    profile: String,
}

/// The free MIG instances of each model and profile.
fn free_instances(st: &State) -> BTreeMap<WarmKey, usize> {
    let mut counts = BTreeMap::new();
    for n in st.nodes() {
        for g in n.gpus() {
            if !g.mig() {
                continue;
            }
            for sl in g.slices() {
                if sl.task().is_none() {
                    let k = WarmKey {
                        model: g.model().name.clone(),
                        profile: sl.profile().to_string(),
                    };
                    *counts.entry(k).or_insert(0) += 1;
                }
            }
        }
    }
    counts
}

impl Scheduler {
    /// Remembers the MIG profiles production work just started.
    pub(super) fn note_starts(&mut self, c: &Cycle<'_>) {
        for s in &c.d.starts {
            let Some(j) = self.job(c, &s.job) else {
                continue;
            };
            if j.spec.class < Class::Production {
                continue;
            }
            let Some(n) = c.st.node_by_name(&s.assignment.node) else {
                continue;
            };
            for g in &s.assignment.grants {
                let Some(slice) = &g.slice else { continue };
                let Some(gpu) = n.gpus().get(g.gpu as usize) else {
                    continue;
                };
                let k = WarmKey {
                    model: gpu.model().name.clone(),
                    profile: slice.profile.to_string(),
                };
                self.recent.entry(k).or_default().push(c.now);
            }
        }
    }

    /// Creates free instances for the recently used profiles.
    pub(super) fn warm(&mut self, c: &mut Cycle<'_>) {
        if !self.cfg.mig {
            return;
        }
        self.note_starts(c);
        if c.now - self.last_warm < WARM_EVERY && self.last_warm != 0 {
            return;
        }
        self.last_warm = c.now;
        let now = c.now;
        let mut keys: Vec<(WarmKey, usize)> = Vec::new();
        for (k, times) in self.recent.iter_mut() {
            times.retain(|&t| now - t <= WARM_WINDOW);
            if !times.is_empty() {
                keys.push((k.clone(), times.len()));
            }
        }
        // Most used first; ties by the model's and profile's names run
        // together (two keys tie only in theory).
        keys.sort_by(|(a, na), (b, nb)| {
            nb.cmp(na).then_with(|| {
                let (x, y) = (
                    format!("{}{}", a.model, a.profile),
                    format!("{}{}", b.model, b.profile),
                );
                x.cmp(&y)
            })
        });
        // The free instances of every profile, counted in one pass, again
        // only after an instance was added.
        let mut counts: Option<BTreeMap<WarmKey, usize>> = None;
        for (k, used) in keys {
            let want = WARM_TARGET.min(used);
            let mut free = counts
                .get_or_insert_with(|| free_instances(&c.st))
                .get(&k)
                .copied()
                .unwrap_or(0);
            while free < want {
                if !self.create_one(c, &k) {
                    break;
                }
                counts = None;
                free += 1;
            }
        }
    }

    /// Adds one free instance of `k`'s profile on the split GPU that fits
    /// it most tightly, keeping what is there.
    fn create_one(&mut self, c: &mut Cycle<'_>, k: &WarmKey) -> bool {
        let mut best: Option<(usize, usize, Placement)> = None;
        let mut best_free = 9;
        let mut layout: Vec<Placement> = Vec::new();
        for i in 0..c.st.len() {
            let n = c.st.node(i);
            for (x, g) in n.gpus().iter().enumerate() {
                if !g.mig() || g.cordoned() || g.model().name != k.model {
                    continue;
                }
                // Only a GPU with less free memory than the best so far,
                // and some, can win: listing placements for every GPU was
                // most of the warm pool's cost.
                let free = g.free_memory_slices().count_ones();
                if free == 0 || free >= best_free {
                    continue;
                }
                layout.clear();
                g.append_layout(&mut layout);
                let Ok(places) = g.model().free_placements(&layout, &k.profile) else {
                    continue;
                };
                let Some(last) = places.last() else {
                    continue;
                };
                best = Some((i, x, last.clone()));
                best_free = free;
            }
        }
        let Some((i, x, place)) = best else {
            return false;
        };
        let n = c.st.node(i);
        let mut layout: Layout = n.gpus()[x].layout();
        layout.push(place);
        let rc = Reconfig {
            node: n.name().to_string(),
            gpu: x,
            mig: true,
            layout,
            add: true,
            for_job: "warm pool".to_string(),
        };
        self.apply(c, None, rc, false)
    }
}
