//! Reading request bodies as the Go build does (`decode.go`): exactly one
//! JSON value, unknown fields refused, at most [`MAX_BODY`] bytes, a JSON
//! content type (or none); every error names the field.

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// The largest body accepted: job specs are a few hundred bytes; anything
/// near this is a mistake or an attack.
pub const MAX_BODY: usize = 64 << 10;

/// A request body read but not yet decoded: handlers check the caller's
/// role first (a refused caller gets 403 whatever the body), then call
/// [`RawJson::decode`]. A wrong content type or a body over [`MAX_BODY`]
/// shows up there too.
#[derive(Debug)]
pub struct RawJson(Result<axum::body::Bytes, ApiError>);

impl RawJson {
    pub fn decode<T: DeserializeOwned>(self) -> Result<T, ApiError> {
        decode_json(&self.0?)
    }
}

impl<S: Send + Sync> FromRequest<S> for RawJson {
    type Rejection = std::convert::Infallible;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(RawJson(read_body(req).await))
    }
}

async fn read_body(req: Request) -> Result<axum::body::Bytes, ApiError> {
    if let Some(ct) = req.headers().get(CONTENT_TYPE) {
        let text = String::from_utf8_lossy(ct.as_bytes()).into_owned();
        let media = text.split(';').next().unwrap_or("").trim();
        if !media.eq_ignore_ascii_case("application/json") {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "",
                format!("Content-Type {text:?}: send application/json"),
            ));
        }
    }
    let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "",
                format!("body: larger than {MAX_BODY} bytes"),
            )
        })?;
    Ok(bytes)
}

/// Decodes one JSON value into `T`; the error is a 400 that names the
/// field (its path, such as `gpu.count`) and says what was wrong.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Err(ApiError::bad_request("", "body: empty; send a JSON object"));
    };
    // serde reads a struct from an array too (its fields in order), which
    // the Go build's decoder refuses: every body here is an object.
    if *first != b'{' {
        return Err(ApiError::bad_request("", "body: not a JSON object"));
    }
    if has_nul(bytes) {
        return Err(ApiError::bad_request(
            "",
            "body: a string holds the character U+0000 (\\u0000), which cannot be stored",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = match serde_path_to_error::deserialize(&mut de) {
        Ok(v) => v,
        Err(err) => {
            let path = err.path().to_string();
            return Err(describe(path, err.into_inner()));
        }
    };
    if de.end().is_err() {
        return Err(ApiError::bad_request(
            "",
            "body: more than one JSON value; send one object",
        ));
    }
    Ok(value)
}

/// Whether a JSON text has the escape `\u0000` in a string (a raw NUL is
/// not valid JSON): PostgreSQL's text cannot hold U+0000, so such a value
/// is refused here rather than failing in the database. An escape is a
/// backslash preceded by an even number of backslashes.
fn has_nul(bytes: &[u8]) -> bool {
    bytes.windows(6).enumerate().any(|(i, w)| {
        w.eq_ignore_ascii_case(b"\\u0000")
            && bytes[..i].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 0
    })
}

/// Turns serde_json's message into the Go build's words.
fn describe(path: String, err: serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    let msg = err.to_string();
    // serde_json appends " at line L column C"; the field says where.
    let what = msg.split(" at line ").next().unwrap_or(&msg).to_string();
    match err.classify() {
        Category::Eof => ApiError::bad_request("", "body: JSON ends too soon"),
        Category::Syntax | Category::Io => ApiError::bad_request(
            "",
            format!(
                "body: invalid JSON at line {} column {}: {what}",
                err.line(),
                err.column()
            ),
        ),
        Category::Data => {
            if let Some(rest) = what.strip_prefix("unknown field `") {
                let name = rest.split('`').next().unwrap_or("");
                let field = if path == "." || path.is_empty() {
                    name.to_string()
                } else if path.ends_with(name) {
                    path.clone()
                } else {
                    format!("{path}.{name}")
                };
                return ApiError::bad_request(&field, format!("{field}: unknown field"));
            }
            if path == "." || path.is_empty() {
                return ApiError::bad_request("", format!("body: {what}"));
            }
            ApiError::bad_request(&path, format!("{path}: {what}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SubmitRequest;

    #[test]
    fn errors_name_the_field() {
        let e = decode_json::<SubmitRequest>(br#"{"colour": 1}"#).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("colour", "colour: unknown field")
        );
        let e = decode_json::<SubmitRequest>(br#"{"gpu": {"count": "x"}}"#).unwrap_err();
        assert_eq!(e.field, "gpu.count");
        assert!(
            e.message.starts_with("gpu.count: invalid type"),
            "{}",
            e.message
        );
        let e = decode_json::<SubmitRequest>(br#"{"gpu": {"cores": 1}}"#).unwrap_err();
        assert_eq!(e.field, "gpu.cores");
        let e = decode_json::<SubmitRequest>(b"{} {}").unwrap_err();
        assert!(e.message.contains("more than one JSON value"));
        let e = decode_json::<SubmitRequest>(b"  ").unwrap_err();
        assert!(e.message.contains("empty"));
        let e = decode_json::<SubmitRequest>(b"{\"name\": ").unwrap_err();
        assert_eq!(e.message, "body: JSON ends too soon");
        let e = decode_json::<SubmitRequest>(b"[1]").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        // An array would fill a struct's fields in order: refused.
        let e = decode_json::<SubmitRequest>(br#" ["search"]"#).unwrap_err();
        assert_eq!(e.message, "body: not a JSON object");
        // U+0000 cannot be stored: refused, wherever it is.
        let e = decode_json::<SubmitRequest>(br#"{"team": "a\u0000"}"#).unwrap_err();
        assert!(e.message.contains("U+0000"), "{}", e.message);
        assert!(decode_json::<SubmitRequest>(br#"{"name": "a\\u0000"}"#).is_ok());
        let e = decode_json::<SubmitRequest>(br#"{"name": "a\\\u0000"}"#).unwrap_err();
        assert!(e.message.contains("U+0000"), "{}", e.message);
        assert!(decode_json::<SubmitRequest>(b"{}").is_ok());
    }
}
