use crate::cluster::Node;
use crate::placement::{Hint, Policy, Request, Scorer};

use super::{Config, PolicyError};

/// Prefers the node whose free resources are least aligned with the
/// request (Grandl et al.'s Tetris alignment, as the FGD protocol runs it
/// with `-dimext merge -norm max`):
///
/// ```text
/// score = ⌊100 × (1 − ½[(cpuL/C)(cpu/C) + (gL/G)(gpu/G)])⌋
/// ```
///
/// with cpuL, gL what is left before placement and C, G the largest
/// node's CPU and GPU (`Config::norm_cpu`, `norm_gpu`). Range 0..100 (0
/// when a task matches a whole empty node).
pub fn dot_product(c: &Config) -> Result<Policy, PolicyError> {
    super::registry::need_norms("dot-product", c)?;
    let scorer = DotProduct {
        cpu: c.norm_cpu as f64,
        gpu: c.norm_gpu as f64,
    };
    Ok(Policy {
        scorer: Some(Box::new(scorer)),
        ..Policy::new("dot-product")
    })
}

struct DotProduct {
    cpu: f64,
    gpu: f64,
}

impl Scorer for DotProduct {
    fn name(&self) -> &'static str {
        "dot-product"
    }

    fn score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>) {
        // Left to right, as the Go build divides and multiplies.
        let cpu = n.cpu_free() as f64 / self.cpu * r.cpu_milli() as f64 / self.cpu;
        let g = f64::from(n.gpu_free_milli()) / self.gpu * f64::from(r.gpu_milli()) / self.gpu;
        ((100.0 * (1.0 - 0.5 * (cpu + g))).floor() as i64, None)
    }
}
