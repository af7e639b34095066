//! The portal's pages, one module each.

pub mod overview;
pub mod sso_admin;
