//! The portal's pages, one module each.

pub mod overview;

// The cluster, queues, submit, team and job pages and their helpers.
pub mod clock;
pub mod job;
pub mod parts;
pub mod queue;
pub mod submit;
pub mod svg;
pub mod team;
