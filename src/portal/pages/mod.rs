//! The portal's pages, one module each.

pub mod overview;
// Admin and finance pages (issue 47 items 4 and 5).
pub mod admin;
pub mod chargeback;
pub mod sso_admin;
