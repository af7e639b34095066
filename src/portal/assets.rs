//! The portal's static files, compiled into the binary: no CDN, nothing
//! fetched at run time. URLs carry a hash of the files (`?v=`), so
//! browsers may keep them for a year and still see a new release's.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// Each file: its name under /static/, its media type and its bytes.
/// htmx is vendored from npm (`npm pack htmx.org@2.0.11`, its LICENSE
/// beside it); a test pins its SHA-256.
pub const FILES: &[(&str, &str, &[u8])] = &[
    (
        "portal.css",
        "text/css; charset=utf-8",
        include_bytes!("../../static/portal.css"),
    ),
    (
        "portal.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../static/portal.js"),
    ),
    (
        "htmx-2.0.11.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../static/vendor/htmx-2.0.11.min.js"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_bytes!("../../static/favicon.svg"),
    ),
];

/// A short hash of every static file, for the URLs' `?v=`.
pub fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let mut h = Sha256::new();
        for (name, _, bytes) in FILES {
            h.update(name.as_bytes());
            h.update(bytes);
        }
        h.finalize()[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    })
}

/// GET /static/{file}.
pub async fn serve(Path(file): Path<String>) -> Response {
    match FILES.iter().find(|(name, _, _)| *name == file) {
        Some((_, media, bytes)) => (
            [
                (header::CONTENT_TYPE, *media),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            *bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such file\n").into_response(),
    }
}
