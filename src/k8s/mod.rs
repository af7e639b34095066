//! Kubernetes: Partita's custom resources as Rust types, from which
//! their CustomResourceDefinitions are generated (`partita crdgen`). The
//! scheduler and controllers come next (issue 48); until then `partita
//! kube` is the Go build's (`go/internal/kube`).

pub mod resources;
