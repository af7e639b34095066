//! The admin pages (role admin): teams and quotas, users, tokens and
//! sessions, prices, the audit log. Each calls the API as the signed-in
//! admin; the API decides what may be done. Everyone else gets a 403 page
//! that says so, and the navigation shows them no link here.
//!
//! The single sign-on claim mapping (`/admin/sso`) is another page's: the
//! admin navigation links to it.

pub mod audit;
pub mod prices;
pub mod teams;
pub mod tokens;
pub mod users;

use std::collections::BTreeMap;

use axum::response::{IntoResponse, Redirect, Response};

use crate::portal::render::PageError;
use crate::portal::session::Viewer;
use crate::server::error::ApiError;

/// GET /admin: the first admin page.
pub async fn index(viewer: Viewer) -> Response {
    match require_admin(&viewer) {
        Ok(()) => Redirect::to("/admin/teams").into_response(),
        Err(e) => e.into_response(),
    }
}

/// 403 in words unless the viewer is an admin.
pub fn require_admin(viewer: &Viewer) -> Result<(), PageError> {
    if viewer.who.role == crate::api::ROLE_ADMIN {
        return Ok(());
    }
    let who = &viewer.who;
    let as_what = if who.team.is_empty() {
        format!("{} ({})", who.user, who.role)
    } else {
        format!("{} ({} of team {})", who.user, who.role, who.team)
    };
    Err(PageError::forbidden(format!(
        "The admin pages are for administrators only. You are signed in as {as_what}; \
         ask an administrator if something here needs changing."
    )))
}

/// What a form's fields got wrong, by field name: shown beside each
/// field, all together.
#[derive(Debug, Clone, Default)]
pub struct FieldErrors {
    by_field: BTreeMap<String, String>,
    /// A problem that is no one field's.
    pub form: Vec<String>,
}

impl FieldErrors {
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.by_field.entry(field.into()).or_insert(message.into());
    }

    /// The error of `field`, or "".
    pub fn of(&self, field: &str) -> &str {
        self.by_field.get(field).map(String::as_str).unwrap_or("")
    }

    pub fn has(&self, field: &str) -> bool {
        self.by_field.contains_key(field)
    }

    pub fn is_empty(&self) -> bool {
        self.by_field.is_empty() && self.form.is_empty()
    }

    /// An API error: beside its field when it names one of `fields`,
    /// else for the whole form; without the API's "field: " prefix.
    pub fn api(&mut self, e: &ApiError, fields: &[&str]) {
        let message = people(e);
        let field = e.field.split(['[', '.']).next().unwrap_or("");
        if fields.contains(&field) {
            self.add(field, message);
        } else {
            self.form.push(message);
        }
    }
}

/// An API error's message as a sentence for people: without the leading
/// "field: " the API puts there, capitalised, with a full stop.
pub fn people(e: &ApiError) -> String {
    let mut m = e.message.as_str();
    if let Some((head, rest)) = m.split_once(": ")
        && !head.contains(' ')
    {
        m = rest;
    }
    let mut out: String = m
        .chars()
        .take(1)
        .flat_map(char::to_uppercase)
        .chain(m.chars().skip(1))
        .collect();
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

/// A number typed into a form: None with a message when it is not one.
pub fn number(text: &str) -> Result<f64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("Give a number.".into());
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{t:?} is not a number.")),
    }
}

/// A name as teams, projects and users have them (the API's rule, in
/// words): the message when it is not one.
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("Give a name.".into());
    }
    crate::server::accounts::check_name("name", name)
        .err()
        .map(|_| {
            "Use lower-case letters, digits and '-', starting with a letter and not ending with '-', at most 40 characters."
                .to_string()
        })
}

/// A number as the pages show it (Rust's shortest form: 16, 0.5).
pub fn num(v: f64) -> String {
    format!("{v}")
}
