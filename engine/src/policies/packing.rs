use crate::cluster::Node;
use crate::placement::{Hint, Policy, Request, Scorer};

use super::gpu_left;

/// Fills shared GPUs first, then partly used nodes, then empty nodes (the
/// FGD protocol's GpuPacking, `getPackingScore`):
///   - a node with every GPU free: max(33 − G, G);
///   - taking GPUs in ascending order of what is left, if a fully free GPU
///     must be used: max(50 − fully free GPUs used, 33);
///   - otherwise: max(100 − ⌊Σ⌊left×100/1000⌋ / 10⌋, 50).
///
/// CPU-only tasks score 0.
pub fn gpu_packing() -> Policy {
    Policy {
        scorer: Some(Box::new(Packing::default())),
        ..Policy::new("gpu-packing")
    }
}

#[derive(Default)]
struct Packing {
    /// Scratch: the milli left on each GPU of the node scored.
    left: Vec<i64>,
}

impl Scorer for Packing {
    fn name(&self) -> &'static str {
        "gpu-packing"
    }

    fn score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>) {
        let (milli, mut num) = match r.gpu_milli() {
            0 => return (0, None),
            _ if r.is_fractional() => (i64::from(r.milli()), 1),
            _ => (1000, i64::from(r.count())),
        };
        gpu_left(n, &mut self.left);
        let free = self.left.iter().filter(|&&l| l == 1000).count() as i64;
        let gpus = self.left.len() as i64;
        if free == gpus {
            return ((33 - free).max(free), None);
        }
        // The original takes GPUs in a stable ascending order of what is
        // left; what it adds up depends only on the amounts, so the order
        // among equal amounts does not matter and an unstable sort of the
        // amounts (which allocates nothing) takes the same ones.
        self.left.sort_unstable();
        let (mut free_used, mut pct) = (0, 0);
        for &l in &self.left {
            if num == 0 {
                break;
            }
            if l >= milli {
                num -= 1;
                pct += l * 100 / 1000;
                if l == 1000 {
                    free_used += 1;
                }
            }
        }
        if free_used > 0 {
            return ((50 - free_used).max(33), None);
        }
        ((100 - pct / 10).max(50), None)
    }
}
