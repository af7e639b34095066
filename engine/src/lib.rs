//! Partita's decision engine. It does no I/O and reads no clock: given the
//! same input (and seed) it returns the same output, bit for bit.

pub mod cluster;
pub mod fmath;
pub mod frag;
pub mod gpu;
pub mod numfmt;
pub mod placement;
pub mod policies;
pub mod profiles;
pub mod quote;
pub mod random;
pub mod scenario;
pub mod sched;
pub mod sim;
pub mod svgchart;
pub mod trace;
pub mod workload;
