//! What the cluster, queue, submit, team and job pages share: numbers in
//! words, live regions that are re-sent only when they changed, API
//! errors in words for people, and the answer to an action's form.

use askama::Template;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::portal::render::{Flash, PageError};
use crate::portal::session::Viewer;
use crate::server::error::ApiError;

/// Jobs per page of a queue.
pub const PAGE_SIZE: usize = 50;

/// A GPU amount with at most two decimals: 8, 0.43, 2.5.
pub fn gpus(f: f64) -> String {
    let r = (f * 100.0).round() / 100.0;
    let s = format!("{r:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.to_string() }
}

/// A share as a whole percentage.
pub fn pct(f: f64) -> String {
    format!("{}%", (f * 100.0).round() as i64)
}

/// MiB in words: "512 MiB", "80 GiB", "1.5 GiB".
pub fn mib(m: i64) -> String {
    if m >= 1024 && m % 1024 == 0 {
        format!("{} GiB", m / 1024)
    } else if m >= 1024 {
        format!("{:.1} GiB", m as f64 / 1024.0)
    } else {
        format!("{m} MiB")
    }
}

/// Millicores as cores: "4", "0.5".
pub fn cpu(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        let s = format!("{:.3}", milli as f64 / 1000.0);
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// An API error's message for people: without the field's name in front
/// (the message is shown beside the field) and without the API's paths.
pub fn words(message: &str, field: &str) -> String {
    let mut m = message.trim().to_string();
    if !field.is_empty() {
        for prefix in [format!("{field}: "), format!("{field} ")] {
            if let Some(rest) = m.strip_prefix(&prefix) {
                m = rest.to_string();
                break;
            }
        }
    }
    // "(create it with POST /api/v1/teams/x/projects)": no API in words.
    while let Some(at) = m.find("/api/") {
        let open = m[..at].rfind('(');
        let close = m[at..].find(')').map(|c| at + c);
        match (open, close) {
            (Some(o), Some(c)) => {
                m.replace_range(o..=c, "");
            }
            _ => {
                m.replace_range(at.., "");
            }
        }
        m = m.trim_end().to_string();
    }
    // "role viewer may not cancel jobs (allowed: admin, lead, member)"
    if let Some(rest) = m.strip_prefix("role ")
        && let Some((role, what)) = rest.split_once(" may not ")
    {
        let (what, allowed) = match what.split_once(" (allowed: ") {
            Some((w, a)) => (w, a.trim_end_matches(')')),
            None => (what, ""),
        };
        let mut out = format!("As a {role} you may not {what}.");
        if !allowed.is_empty() {
            out.push_str(&format!(" Only these roles may: {allowed}."));
        }
        return out;
    }
    let mut chars = m.chars();
    match chars.next() {
        Some(c) => {
            let mut out = c.to_uppercase().collect::<String>() + chars.as_str();
            if !out.ends_with(['.', '!', '?']) {
                out.push('.');
            }
            out
        }
        None => m,
    }
}

/// Text escaped for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A page of a list: which page, how many, and the links' query.
#[derive(Debug, Clone, Default)]
pub struct Pager {
    pub page: usize,
    pub pages: usize,
    pub total: usize,
    /// The first item's index on this page.
    pub from: usize,
    /// The query before `page=`, ending in `&` or `?`.
    pub base: String,
}

impl Pager {
    pub fn new(total: usize, asked: usize, base: String) -> Pager {
        let pages = total.div_ceil(PAGE_SIZE).max(1);
        let page = asked.clamp(1, pages);
        Pager {
            page,
            pages,
            total,
            from: (page - 1) * PAGE_SIZE,
            base,
        }
    }

    /// The index range of this page's items.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.from..(self.from + PAGE_SIZE).min(self.total)
    }

    pub fn prev(&self) -> usize {
        self.page.saturating_sub(1)
    }

    pub fn next(&self) -> usize {
        if self.page < self.pages {
            self.page + 1
        } else {
            0
        }
    }

    /// "1–50 of 300".
    pub fn shown(&self) -> String {
        let r = self.range();
        if r.is_empty() {
            format!("0 of {}", self.total)
        } else {
            format!("{}–{} of {}", r.start + 1, r.end, self.total)
        }
    }
}

/// A short hash of a rendered fragment: the live region's version.
pub fn version(html: &str) -> String {
    let h = Sha256::digest(html.as_bytes());
    h[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// A live region: its element, what it shows, and where htmx asks for it
/// again (with the version it has, so an unchanged region is not
/// re-sent).
#[derive(Template)]
#[template(path = "parts/live.html")]
pub struct Live {
    pub id: &'static str,
    /// The fragment's path and query, without `since`.
    pub url: String,
    pub every: &'static str,
    pub version: String,
    pub inner: String,
}

impl Live {
    pub fn new(id: &'static str, url: String, inner: String) -> Live {
        Live {
            id,
            url,
            every: "5s",
            version: version(&inner),
            inner,
        }
    }

    /// The url with the version it shows.
    pub fn src(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}since={}", self.url, self.version)
    }

    /// Rendered, for a page.
    pub fn html(&self) -> String {
        self.render().unwrap_or_else(|e| {
            tracing::error!(error = %e, "portal: rendering a live region");
            String::new()
        })
    }
}

/// The query a live fragment is asked with: the version the page has.
#[derive(Debug, Default, Deserialize)]
pub struct Since {
    #[serde(default)]
    pub since: String,
}

/// The answer to a live fragment's request: 204 (htmx swaps nothing)
/// when the region is as the page has it (`since`, or the ETag in
/// If-None-Match), else the region with its new version.
pub fn live_answer(live: Live, since: &str, headers: &HeaderMap) -> Response {
    let etag = format!("\"{}\"", live.version);
    let unchanged = since == live.version
        || headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut response = if unchanged {
        let mut r = StatusCode::NO_CONTENT.into_response();
        r.headers_mut()
            .insert("HX-Reswap", HeaderValue::from_static("none"));
        r
    } else {
        axum::response::Html(live.html()).into_response()
    };
    if let Ok(v) = HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The flash a page shows after a redirect: `?done=` or `?refused=`, with
/// `&tag=`, an HMAC of the text keyed by the session's CSRF token. A link
/// that someone else made (a text of their choosing on this site's page)
/// has no valid tag for the viewer's session and shows nothing.
#[derive(Debug, Default, Deserialize)]
pub struct FlashQuery {
    #[serde(default)]
    pub done: String,
    #[serde(default)]
    pub refused: String,
    #[serde(default)]
    pub tag: String,
}

/// The tag of a flash (`key` "done" or "refused") for a session.
pub fn flash_tag(csrf: &str, key: &str, text: &str) -> String {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(csrf.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(key.as_bytes());
    mac.update(b"\0");
    mac.update(text.as_bytes());
    mac.finalize().into_bytes()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl FlashQuery {
    pub fn flash(&self, viewer: &Viewer) -> Option<Flash> {
        let (key, text) = if !self.refused.is_empty() {
            ("refused", &self.refused)
        } else {
            ("done", &self.done)
        };
        let expected = flash_tag(&viewer.csrf, key, text);
        if text.is_empty()
            || !crate::portal::session::constant_time_eq(expected.as_bytes(), self.tag.as_bytes())
        {
            return None;
        }
        if !self.refused.is_empty() {
            Some(Flash {
                error: true,
                text: clip(&self.refused),
            })
        } else if !self.done.is_empty() {
            Some(Flash {
                error: false,
                text: clip(&self.done),
            })
        } else {
            None
        }
    }
}

fn clip(s: &str) -> String {
    s.chars().take(300).collect()
}

/// Where to come back to after a form: `back` if it is a path on this
/// site, else `fallback`; with the outcome in the query.
pub fn back_with(viewer: &Viewer, back: &str, fallback: &str, key: &str, text: &str) -> Response {
    let path = if back.starts_with('/') && !back.starts_with("//") && !back.starts_with("/\\") {
        back
    } else {
        fallback
    };
    // Drop an earlier outcome from the query.
    let (p, q) = path.split_once('?').unwrap_or((path, ""));
    let kept: Vec<&str> = q
        .split('&')
        .filter(|kv| {
            !kv.is_empty()
                && !kv.starts_with("done=")
                && !kv.starts_with("refused=")
                && !kv.starts_with("tag=")
        })
        .collect();
    let mut url = p.to_string();
    url.push('?');
    for kv in kept {
        url.push_str(kv);
        url.push('&');
    }
    url.push_str(key);
    url.push('=');
    url.push_str(&crate::portal::session::encode(text));
    url.push_str("&tag=");
    url.push_str(&flash_tag(&viewer.csrf, key, text));
    Redirect::to(&url).into_response()
}

/// An action's refusal: a page in words for 401, 403, 404 and 5xx (the
/// viewer may not, or the job is gone), else `None`: the caller shows it
/// beside what was tried.
pub fn refusal_page(e: &ApiError) -> Option<PageError> {
    let status = e.status;
    if status == StatusCode::FORBIDDEN
        || status == StatusCode::NOT_FOUND
        || status == StatusCode::UNAUTHORIZED
        || status.is_server_error()
    {
        return Some(PageError {
            status,
            message: words(&e.message, &e.field),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_messages_become_words_for_people() {
        assert_eq!(
            words(
                "project: \"x\" is not a project of team s (create it with POST /api/v1/teams/s/projects)",
                "project"
            ),
            "\"x\" is not a project of team s."
        );
        assert_eq!(
            words(
                "role viewer may not cancel jobs (allowed: admin, lead, member)",
                ""
            ),
            "As a viewer you may not cancel jobs. Only these roles may: admin, lead, member."
        );
        assert_eq!(gpus(2.5), "2.5");
        assert_eq!(gpus(8.0), "8");
        assert_eq!(gpus(0.428), "0.43");
        assert_eq!(cpu(500), "0.5");
        assert_eq!(mib(81920), "80 GiB");
    }

    #[test]
    fn a_pager_clamps_its_page() {
        let p = Pager::new(300, 9, "/queue?".into());
        assert_eq!((p.page, p.pages), (6, 6));
        assert_eq!(p.range(), 250..300);
        assert_eq!(p.next(), 0);
        assert_eq!(Pager::new(0, 1, String::new()).shown(), "0 of 0");
    }
}
