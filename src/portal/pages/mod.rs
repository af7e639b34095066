//! The portal's pages, one module each.

pub mod overview;
// Admin and finance pages (issue 47 items 4 and 5).
pub mod admin;
pub mod chargeback;
pub mod sso_admin;

// The cluster, queues, submit, team and job pages and their helpers.
pub mod clock;
pub mod job;
pub mod parts;
pub mod queue;
pub mod submit;
pub mod svg;
pub mod team;
