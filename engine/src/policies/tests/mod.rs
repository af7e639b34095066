//! The Go build's policy tests, ported: scores computed by hand
//! (`scores`), the registry, FGD, k8s-default, partita (its placements
//! and its internals) and the property tests that compare runs which must
//! agree; the property runs against the Go build's own placements
//! (`property::placements_match_the_go_build`); and tests of partita's
//! MIG choice and reservation, which the Go build tests only through
//! whole runs.

mod fgd;
mod helpers;
mod k8sdefault;
mod mig;
mod partita;
mod partita_internal;
mod property;
mod registry;
mod reserve;
mod scores;
