//! Partita's decision engine. It does no I/O and reads no clock: given the
//! same input (and seed) it returns the same output, bit for bit.

pub mod fmath;
pub mod random;
