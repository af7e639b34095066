//! The Go build's policy tests, ported: scores computed by hand
//! (`scores`), the registry, FGD, k8s-default, partita (its placements
//! and its internals) and the property tests that compare runs which must
//! agree.

mod fgd;
mod helpers;
mod k8sdefault;
mod partita;
mod partita_internal;
mod property;
mod registry;
mod scores;
