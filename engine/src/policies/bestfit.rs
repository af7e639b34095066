use crate::cluster::Node;
use crate::placement::{Hint, Policy, Request, Scorer};

use super::{Config, PolicyError};

/// Prefers the node left with the least CPU and GPU after placement (the
/// FGD protocol's BestFit):
///
/// ```text
/// score = ⌊100 × (1 − ½(cpuL − cpu)/C − ½(gL − gpu)/G)⌋
/// ```
///
/// with C, G the largest node's CPU and GPU. The protocol then min-max
/// normalises scores over the feasible nodes, which changes neither the
/// winner nor the ties, so that is left out.
pub fn best_fit(c: &Config) -> Result<Policy, PolicyError> {
    super::registry::need_norms("best-fit", c)?;
    let scorer = BestFit {
        cpu: c.norm_cpu as f64,
        gpu: c.norm_gpu as f64,
    };
    Ok(Policy {
        scorer: Some(Box::new(scorer)),
        ..Policy::new("best-fit")
    })
}

struct BestFit {
    cpu: f64,
    gpu: f64,
}

impl Scorer for BestFit {
    fn name(&self) -> &'static str {
        "best-fit"
    }

    fn score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>) {
        let cpu = (n.cpu_free() - r.cpu_milli()) as f64 / self.cpu;
        let g = f64::from(n.gpu_free_milli() - r.gpu_milli()) / self.gpu;
        ((100.0 * (1.0 - 0.5 * cpu - 0.5 * g)).floor() as i64, None)
    }
}
