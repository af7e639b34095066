//! The portal's pages, one module each.

pub mod overview;
