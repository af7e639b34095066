//! The Partita application: the command line, the server and its
//! portal, the store, the worker and the outputs they write. `main.rs` is
//! a thin wrapper; a library lets integration tests under `tests/` call
//! the same code.

pub mod accounting;
pub mod api;
pub mod cli;
pub mod client;
pub mod db;
pub mod k8s;
pub mod metrics;
pub mod output;
pub mod portal;
pub mod server;
pub mod store;
pub mod worker;
