use std::sync::Arc;

use crate::cluster::Node;
use crate::fmath;
use crate::frag::Distribution;
use crate::placement::{Hint, Policy, Request, Scorer};
use crate::workload::Kind;

use super::{Config, PolicyError, gpu_left, model_name};

/// Fragmentation Gradient Descent (Weng et al., ATC'23): place each task
/// where it grows the expected fragmentation least. With F the node's
/// fragment (`Distribution::node`) before and F' after placement,
///
/// ```text
/// score = ⌊100 × σ((F − F') / 1000)⌋      (σ the logistic function)
/// ```
///
/// For a share, every GPU that fits is tried and the node scores its best
/// GPU; the hint names the first GPU reaching that score. Other tasks take
/// the lowest-index fully free GPUs. Range 0..100. MIG demands are outside
/// FGD's model and score 0 (the shared filter still checks they fit).
pub fn fgd(c: &Config) -> Result<Policy, PolicyError> {
    let typical = c.typical.clone().ok_or(PolicyError::FgdNeedsTypical)?;
    let scorer = FragScorer::new("fgd", FgdFragment(typical));
    Ok(Policy {
        scorer: Some(Box::new(scorer)),
        ..Policy::new("fgd")
    })
}

/// ⌊100·σ((before − after)/1000)⌋, with the Go build's `fmath.Exp`.
pub(super) fn gradient(before: f64, after: f64) -> i64 {
    (100.0 / (1.0 + fmath::exp(-(before - after) / 1000.0))) as i64
}

/// A node's expected fragment in GPU milli, from what is left on it: the
/// measure a `FragScorer` descends.
///
/// It must depend on the GPUs' rooms and not on their order: the scorer
/// tries a share on one GPU per distinct room.
pub(super) trait Fragment: Send {
    fn node(&self, model: &str, cpu_left: i64, mem_left: i64, left: &[i64]) -> f64;
}

/// FGD's own measure.
struct FgdFragment(Arc<Distribution>);

impl Fragment for FgdFragment {
    fn node(&self, model: &str, cpu_left: i64, mem_left: i64, left: &[i64]) -> f64 {
        self.0.node(model, cpu_left, mem_left, left)
    }
}

/// Rates a node by how placing the task changes its expected fragment
/// (`gradient`).
pub(super) struct FragScorer<F> {
    name: &'static str,
    fragment: F,
    /// Scratch: the milli left on each GPU before and after placement.
    left: Vec<i64>,
    after: Vec<i64>,
}

impl<F: Fragment> FragScorer<F> {
    pub(super) fn new(name: &'static str, fragment: F) -> Self {
        FragScorer {
            name,
            fragment,
            left: Vec::new(),
            after: Vec::new(),
        }
    }

    pub(super) fn frag_score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>) {
        let (milli, whole) = share_of(n, r);
        if r.kind() == Kind::MigProfile || (r.kind() == Kind::MemoryProfile && milli == 0) {
            return (0, None);
        }
        let model = model_name(n);
        gpu_left(n, &mut self.left);
        let before = self
            .fragment
            .node(model, n.cpu_free(), n.mem_free(), &self.left);
        self.after.clone_from(&self.left);
        let (cpu, mem) = (n.cpu_free() - r.cpu_milli(), n.mem_free() - r.mem_mib());
        if whole || milli == 0 {
            take_free(&mut self.after, r.count());
            let after = self.fragment.node(model, cpu, mem, &self.after);
            return (gradient(before, after), None);
        }
        let mut best: Option<(i64, usize)> = None;
        for (i, &l) in self.left.iter().enumerate() {
            if l < milli || !r.allows_model(n.gpus()[i].model()) {
                continue;
            }
            if tried(&self.left[..i], l, n, r) {
                // The same room as a GPU tried before: the node's GPUs
                // then hold the same amounts, which the fragment depends
                // on, not their order; that GPU keeps the hint.
                continue;
            }
            self.after[i] = l - milli;
            let sc = gradient(before, self.fragment.node(model, cpu, mem, &self.after));
            self.after[i] = l;
            if best.is_none_or(|(b, _)| sc > b) {
                best = Some((sc, i));
            }
        }
        match best {
            Some((sc, i)) => (sc, Some(Hint::on_gpu(i))),
            None => (0, None),
        }
    }
}

impl<F: Fragment> Scorer for FragScorer<F> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>) {
        self.frag_score(n, r)
    }
}

/// The share `r` takes of one non-MIG GPU on `n`, and whether it takes
/// whole GPUs. A memory profile's share is resolved on the node's model
/// (0 when it cannot fit one GPU).
fn share_of(n: &Node, r: &Request) -> (i64, bool) {
    match r.kind() {
        Kind::WholeGpus => (1000, true),
        Kind::Fraction => (i64::from(r.milli()), false),
        Kind::MemoryProfile => {
            let milli = n.model().map_or(0, |m| r.resolve(m).1);
            (i64::from(milli), false)
        }
        _ => (0, false),
    }
}

/// Marks the first `k` fully free GPUs of `left` as used.
fn take_free(left: &mut [i64], k: i32) {
    let mut k = k;
    for l in left {
        if k == 0 {
            return;
        }
        if *l == 1000 {
            *l = 0;
            k -= 1;
        }
    }
}

/// Whether a GPU before the one tried now (`left` holds those) with `l`
/// milli left was tried for `r`: one of a model `r` may use.
fn tried(left: &[i64], l: i64, n: &Node, r: &Request) -> bool {
    left.iter()
        .zip(n.gpus())
        .any(|(&x, g)| x == l && r.allows_model(g.model()))
}
