//! Kubernetes: Partita's custom resources as Rust types, from which
//! their CustomResourceDefinitions are generated (`partita crdgen`), and
//! the pure translation of API objects into the engine's types (nodes so
//! far), and `partita kube`: the scheduler and the process around it
//! (`run`), ported from the Go build's `go/internal/kube` (issue 48).

pub mod act;
pub mod client;
pub mod cycle;
pub mod devices;
pub mod events;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod jobs;
pub mod leader;
pub mod metrics;
pub mod mig;
pub mod migconfig;
pub mod names;
pub mod node;
pub mod pod;
pub mod resources;
pub mod run;
pub mod scheduler;
pub mod serve;
pub mod snapshot;
pub mod status;
pub mod waiting;
pub mod webhook;
pub mod workloads;
