use crate::cluster::State;
use crate::placement::{Policy, RandomPicker, Selector};
use crate::random::Rand;

/// Places each task on a node drawn uniformly from those that fit, and a
/// share on a GPU drawn uniformly from those that fit (the FGD protocol's
/// Random with `-gpusel random`).
pub fn random() -> Policy {
    Policy {
        selector: Some(Box::new(Uniform)),
        picker: Some(Box::new(RandomPicker)),
        ..Policy::new("random")
    }
}

/// Draws the winner uniformly from the feasible nodes.
struct Uniform;

impl Selector for Uniform {
    fn select(&mut self, _st: &State, feasible: &[usize], rng: &mut Rand) -> usize {
        feasible[rng.below(feasible.len())]
    }
}
