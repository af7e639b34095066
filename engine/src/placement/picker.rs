//! The pickers every policy may use: which GPUs of the winning node, which
//! share, which MIG instance.

use crate::cluster::{Gpu, Grant, Node};
use crate::random::Rand;
use crate::workload::Kind;

use super::fit::{Unit, hosts, slices_for, unit_for};
use super::{Hint, Picker, Request};

/// The device choice of the FGD protocol's "best" method, extended to MIG:
///   - whole GPUs: the lowest-index fully free GPUs;
///   - a share: the hinted GPU, else the GPU with the least room that still
///     fits (ties to the lowest index);
///   - a MIG instance: the hinted one, else the first free instance of the
///     profile on any GPU, else the first place one can be created.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultPicker;

impl Picker for DefaultPicker {
    fn pick(
        &mut self,
        n: &Node,
        r: &Request,
        hint: Option<&Hint>,
        _rng: &mut Rand,
    ) -> Option<Vec<Grant>> {
        pick_best(n, r, hint)
    }
}

/// `DefaultPicker`'s choice, which needs no randomness.
fn pick_best(n: &Node, r: &Request, hint: Option<&Hint>) -> Option<Vec<Grant>> {
    match r.kind() {
        Kind::NoGpu => return Some(Vec::new()),
        Kind::WholeGpus => return lowest_free_gpus(n, r),
        _ => {}
    }
    if let Some(h) = hint {
        return hinted(n, r, h);
    }
    if let Some(grants) = existing_slice(n, r) {
        return Some(grants);
    }
    let mut best: Option<(usize, i32)> = None; // GPU, its room
    for (i, g) in n.gpus().iter().enumerate() {
        let Ok(u) = unit_for(r, g) else {
            continue;
        };
        if !hosts(g, u) {
            continue;
        }
        if u.profile.is_some() {
            return Some(slice_grant(g, u));
        }
        if best.is_none_or(|(_, room)| g.free() < room) {
            best = Some((i, g.free()));
        }
    }
    let (i, _) = best?;
    let u = unit_for(r, &n.gpus()[i]).ok()?;
    Some(vec![Grant::share(i as i32, u.milli)])
}

/// Grants the lowest-index fully free GPUs a whole-GPU request may use.
pub fn lowest_free_gpus(n: &Node, r: &Request) -> Option<Vec<Grant>> {
    let want = usize::try_from(r.count()).unwrap_or(0);
    let mut grants = Vec::with_capacity(want);
    for (i, g) in n.gpus().iter().enumerate() {
        if unit_for(r, g).is_err() || g.mig() || g.cordoned() || g.used() != 0 {
            continue;
        }
        grants.push(Grant::whole(i as i32));
        if grants.len() == want {
            return Some(grants);
        }
    }
    None
}

/// Grants the device a scorer named. A hint without an instance for a
/// request that takes one picks nothing.
fn hinted(n: &Node, r: &Request, h: &Hint) -> Option<Vec<Grant>> {
    let g = n.gpus().get(h.gpu)?;
    let u = unit_for(r, g).ok()?;
    if !hosts(g, u) {
        return None;
    }
    if u.profile.is_none() {
        return Some(vec![Grant::share(h.gpu as i32, u.milli)]);
    }
    let slice = h.slice.clone()?;
    Some(vec![Grant::instance(h.gpu as i32, slice)])
}

/// Grants the first free MIG instance of the profile `r` takes, on any GPU
/// of `n`: using one that exists needs no reconfiguration.
fn existing_slice(n: &Node, r: &Request) -> Option<Vec<Grant>> {
    for (i, g) in n.gpus().iter().enumerate() {
        let Some(p) = r.profile_on(g) else {
            continue;
        };
        if g.cordoned() {
            continue;
        }
        if let Some(s) = g
            .slices()
            .iter()
            .find(|s| s.is_free() && s.profile() == p.name)
        {
            return Some(vec![Grant::instance(i as i32, s.placement().clone())]);
        }
    }
    None
}

/// Grants the first place for `u`'s instance on `g`, which `hosts` said
/// there is.
fn slice_grant(g: &Gpu, u: Unit<'_>) -> Vec<Grant> {
    let p = u.profile.expect("slice_grant of a unit with a profile");
    let first = slices_for(g, p)
        .next()
        .expect("slice_grant after hosts said there is room");
    vec![Grant::instance(g.index() as i32, first)]
}

/// The FGD protocol's "random" GPU choice: a share goes to a GPU drawn
/// uniformly among those that fit, fully free ones included (one draw,
/// `rng.below(count)`). Whole GPUs and MIG instances are picked as
/// `DefaultPicker` picks them, with no draw.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomPicker;

impl Picker for RandomPicker {
    fn pick(
        &mut self,
        n: &Node,
        r: &Request,
        hint: Option<&Hint>,
        rng: &mut Rand,
    ) -> Option<Vec<Grant>> {
        if r.kind() != Kind::Fraction {
            return pick_best(n, r, hint);
        }
        // Counted, drawn, then found again: the same draw as indexing a
        // list of the GPUs that fit, without building the list.
        let fit = |g: &Gpu| unit_for(r, g).is_ok_and(|u| hosts(g, u));
        let count = n.gpus().iter().filter(|g| fit(g)).count();
        if count == 0 {
            return None;
        }
        let k = rng.below(count);
        let (i, _) = n.gpus().iter().enumerate().filter(|(_, g)| fit(g)).nth(k)?;
        Some(vec![Grant::share(i as i32, r.milli())])
    }
}
