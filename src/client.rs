//! A small client of Partita's HTTP API, for the CLI commands (the Go
//! build's `go/internal/client`): one server, one token, JSON in and out,
//! and the server's error answers as [`ClientError::Api`] with its message
//! and field.
//!
//! It is blocking to its callers (the CLI runs one request after another)
//! and runs hyper's HTTP/1.1 client connection, already in the tree
//! through axum, on a runtime of its own. Plain `http://` only: there is no
//! TLS client in the tree, so an `https://` server is refused up front
//! with a message saying so.
//!
//! The typed calls return the types of [`crate::api`], but for the
//! reports, whose server type only serialises: [`report`] reads them.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api;

/// How long one request may take (Go's `http.Client.Timeout`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The most of an answer read (Go's `io.LimitReader(resp.Body, 64<<20)`).
const MAX_ANSWER: usize = 64 << 20;

/// What went wrong with a call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered 4xx or 5xx: its status, message and field.
    #[error("{}", api_error_text(*.status, .message, .field))]
    Api {
        status: u16,
        message: String,
        /// The request field at fault, or "".
        field: String,
    },
    /// No answer: the connection failed, or it took too long.
    #[error("{method} {url}: {reason}")]
    Transport {
        method: Method,
        url: String,
        reason: String,
    },
    /// An answer that is not the JSON expected.
    #[error("{method} {path}: answer is not the expected JSON: {reason}")]
    Decode {
        method: Method,
        path: String,
        reason: String,
    },
}

/// "400 Bad Request: gpu.mig: ... (field gpu.mig)": the status in words,
/// the server's message, and the field when the message does not already
/// start with it.
fn api_error_text(status: u16, message: &str, field: &str) -> String {
    let reason = StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut text = format!("{status} {reason}: {message}");
    if !field.is_empty() && !message.starts_with(&format!("{field}:")) {
        text.push_str(&format!(" (field {field})"));
    }
    text
}

/// Host and port of an `http://` base URL, and the path prefix after it
/// ("" or "/partita"). An error says what is wrong with the address.
pub fn split_base(base: &str) -> Result<(String, String), String> {
    let Some(rest) = base.strip_prefix("http://") else {
        return Err(format!(
            "--server {base}: only http:// servers (this client has no TLS; reach an https server through a local proxy)"
        ));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(format!("--server {base}: no host"));
    }
    // A port after the last colon, unless that colon is inside an IPv6
    // address's brackets.
    let authority = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| !p.contains(']'))
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok((authority, path.trim_end_matches('/').to_string()))
}

/// Percent-encodes `s` for a path segment or a query value: everything
/// but the unreserved characters of RFC 3986.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A query string from name, value pairs, skipping empty values (Go's
/// `query`): "" or "?a=1&b=x%2Cy".
pub fn query(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", escape(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// Talks to one server with one token.
pub struct Client {
    /// "http://127.0.0.1:8080", for messages.
    base: String,
    /// host:port to connect to.
    authority: String,
    /// The server URL's path, put before every request's path.
    prefix: String,
    token: String,
    /// Where the token came from ("--token", a file), named when the
    /// server refuses it.
    token_from: String,
    runtime: tokio::runtime::Runtime,
}

impl Client {
    /// A client of the server at `base` (an `http://` URL without a
    /// trailing slash) with `token`. An error says what is wrong with the
    /// address.
    pub fn new(base: &str, token: &str) -> Result<Client, String> {
        let (authority, prefix) = split_base(base)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting the async runtime: {e}"))?;
        Ok(Client {
            base: base.to_string(),
            authority,
            prefix,
            token: token.to_string(),
            token_from: String::new(),
            runtime,
        })
    }

    /// Says where the token came from, for the message of a 401.
    pub fn with_token_from(mut self, from: &str) -> Client {
        self.token_from = from.to_string();
        self
    }

    /// Sends a request (with a JSON body when `body` is Some) and decodes
    /// its JSON answer.
    pub fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, ClientError> {
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| ClientError::Decode {
                method: method.clone(),
                path: path.to_string(),
                reason: format!("the request: {e}"),
            })?;
        let data = self.send(method.clone(), path, body)?;
        serde_json::from_slice(&data).map_err(|e| ClientError::Decode {
            method,
            path: path.to_string(),
            reason: e.to_string(),
        })
    }

    /// A GET whose JSON answer is decoded into `T`.
    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.call(Method::GET, path, None::<&()>)
    }

    /// A GET whose answer is returned as it is (CSV reports).
    pub fn get_raw(&self, path: &str) -> Result<Bytes, ClientError> {
        self.send(Method::GET, path, None)
    }

    /// Sends one request on a connection of its own; the answer's body
    /// for a 2xx or 3xx, else [`ClientError::Api`].
    pub fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, ClientError> {
        let transport = |reason: String| ClientError::Transport {
            method: method.clone(),
            url: format!("{}{path}", self.base),
            reason,
        };
        let exchange = self.exchange(method.clone(), path, body);
        let (status, data) = self
            .runtime
            .block_on(async { tokio::time::timeout(REQUEST_TIMEOUT, exchange).await })
            .map_err(|_| transport(format!("no answer within {REQUEST_TIMEOUT:?}")))?
            .map_err(transport)?;
        if status.as_u16() >= 400 {
            // The API's error body; anything else (a proxy's page) is
            // shown as it is.
            let (mut message, field) = match serde_json::from_slice::<api::Error>(&data) {
                Ok(e) if !e.error.is_empty() => (e.error, e.field),
                _ => (
                    String::from_utf8_lossy(&data).trim().to_string(),
                    String::new(),
                ),
            };
            if status == StatusCode::UNAUTHORIZED && !self.token_from.is_empty() {
                message.push_str(&format!(" (the token from {})", self.token_from));
            }
            return Err(ClientError::Api {
                status: status.as_u16(),
                message,
                field,
            });
        }
        Ok(data)
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), String> {
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .map_err(|e| format!("connecting to {}: {e}", self.authority))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            // Ends when the sender is dropped or the server closes it.
            let _ = connection.await;
        });
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.prefix))
            .header(header::HOST, &self.authority)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .header(header::ACCEPT, "application/json");
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let data = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok((status, data))
    }

    /// `POST /jobs` with `body` (a [`api::SubmitRequest`] or a JSON object
    /// of one): an [`api::Job`].
    pub fn submit<T: DeserializeOwned>(&self, body: &impl Serialize) -> Result<T, ClientError> {
        self.call(Method::POST, &format!("{}/jobs", api::PREFIX), Some(body))
    }

    /// `GET /jobs` with a query string from [`query`]: an [`api::JobList`].
    pub fn jobs<T: DeserializeOwned>(&self, query: &str) -> Result<T, ClientError> {
        self.get(&format!("{}/jobs{query}", api::PREFIX))
    }

    /// `GET /jobs/{id}`: a [`api::Job`], the job with its events,
    /// its queue slot while queued and each task's placement while it runs.
    pub fn job<T: DeserializeOwned>(&self, id: &str) -> Result<T, ClientError> {
        self.get(&job_path(id, ""))
    }

    /// `POST /jobs/{id}/cancel`: the [`api::Job`].
    pub fn cancel<T: DeserializeOwned>(&self, id: &str) -> Result<T, ClientError> {
        self.call(Method::POST, &job_path(id, "/cancel"), None::<&()>)
    }

    /// `POST /jobs/{id}/requeue`: the [`api::Job`].
    pub fn requeue<T: DeserializeOwned>(&self, id: &str) -> Result<T, ClientError> {
        self.call(Method::POST, &job_path(id, "/requeue"), None::<&()>)
    }

    /// `POST /jobs/{id}/move`: the [`api::Job`], one place `up` or `down`
    /// in its team's queue.
    pub fn move_job<T: DeserializeOwned>(
        &self,
        id: &str,
        direction: &str,
    ) -> Result<T, ClientError> {
        let body = api::JobMove {
            direction: direction.to_string(),
        };
        self.call(Method::POST, &job_path(id, "/move"), Some(&body))
    }

    /// `GET /queue`: an [`api::Queue`].
    pub fn queue<T: DeserializeOwned>(&self, query: &str) -> Result<T, ClientError> {
        self.get(&format!("{}/queue{query}", api::PREFIX))
    }

    /// `GET /cluster`: an [`api::Cluster`].
    pub fn cluster<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        self.get(&format!("{}/cluster", api::PREFIX))
    }

    /// `GET /reports/{kind}` (usage or chargeback) as JSON: a
    /// [`report::Report`].
    pub fn report<T: DeserializeOwned>(&self, kind: &str, query: &str) -> Result<T, ClientError> {
        self.get(&format!("{}/reports/{kind}{query}", api::PREFIX))
    }

    /// `GET /teams`: a `Vec<`[`api::Team`]`>`.
    pub fn teams<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        self.get(&format!("{}/teams", api::PREFIX))
    }

    /// `POST /teams`: the new [`api::Team`].
    pub fn create_team<T: DeserializeOwned>(
        &self,
        req: &api::TeamRequest,
    ) -> Result<T, ClientError> {
        self.call(Method::POST, &format!("{}/teams", api::PREFIX), Some(req))
    }

    /// `PATCH /teams/{team}`: the [`api::Team`].
    pub fn update_team<T: DeserializeOwned>(
        &self,
        team: &str,
        req: &api::TeamRequest,
    ) -> Result<T, ClientError> {
        let path = format!("{}/teams/{}", api::PREFIX, escape(team));
        self.call(Method::PATCH, &path, Some(req))
    }

    /// `GET /teams/{team}/projects`: a `Vec<`[`api::Project`]`>`.
    pub fn projects<T: DeserializeOwned>(&self, team: &str) -> Result<T, ClientError> {
        self.get(&format!("{}/teams/{}/projects", api::PREFIX, escape(team)))
    }

    /// `POST /teams/{team}/projects`: the new [`api::Project`].
    pub fn create_project<T: DeserializeOwned>(
        &self,
        team: &str,
        name: &str,
    ) -> Result<T, ClientError> {
        let path = format!("{}/teams/{}/projects", api::PREFIX, escape(team));
        let req = api::ProjectRequest {
            name: name.to_string(),
        };
        self.call(Method::POST, &path, Some(&req))
    }

    /// `GET /users`: a `Vec<`[`api::User`]`>`.
    pub fn users<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        self.get(&format!("{}/users", api::PREFIX))
    }

    /// `POST /users`: the new [`api::User`].
    pub fn create_user<T: DeserializeOwned>(
        &self,
        req: &api::UserRequest,
    ) -> Result<T, ClientError> {
        self.call(Method::POST, &format!("{}/users", api::PREFIX), Some(req))
    }

    /// `PATCH /users/{user}`: the [`api::User`].
    pub fn update_user<T: DeserializeOwned>(
        &self,
        user: &str,
        req: &api::UserPatch,
    ) -> Result<T, ClientError> {
        let path = format!("{}/users/{}", api::PREFIX, escape(user));
        self.call(Method::PATCH, &path, Some(req))
    }

    /// `GET /tokens`: a `Vec<`[`api::Token`]`>`.
    pub fn tokens<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        self.get(&format!("{}/tokens", api::PREFIX))
    }

    /// `POST /users/{user}/tokens`: an [`api::NewToken`], with its secret.
    pub fn create_token<T: DeserializeOwned>(
        &self,
        user: &str,
        req: &api::TokenRequest,
    ) -> Result<T, ClientError> {
        let path = format!("{}/users/{}/tokens", api::PREFIX, escape(user));
        self.call(Method::POST, &path, Some(req))
    }

    /// `DELETE /tokens/{id}`: the revoked [`api::Token`].
    pub fn revoke_token<T: DeserializeOwned>(&self, id: &str) -> Result<T, ClientError> {
        let path = format!("{}/tokens/{}", api::PREFIX, escape(id));
        self.call(Method::DELETE, &path, None::<&()>)
    }

    /// `GET /audit` with a query string from [`query`]: an
    /// [`api::AuditList`].
    pub fn audit<T: DeserializeOwned>(&self, query: &str) -> Result<T, ClientError> {
        self.get(&format!("{}/audit{query}", api::PREFIX))
    }
}

fn job_path(id: &str, action: &str) -> String {
    format!("{}/jobs/{}{action}", api::PREFIX, escape(id))
}

/// A usage or chargeback report as the client reads it (the server's
/// `accounting::Report` only serialises). Every other answer is read into
/// the server's own types in [`crate::api`].
pub mod report {
    use chrono::{DateTime, Utc};
    use serde::Deserialize;

    /// A usage or chargeback report (the server's
    /// `accounting::Report`, which only serialises).
    #[derive(Debug, Clone, Deserialize)]
    pub struct Report {
        pub from: DateTime<Utc>,
        pub to: DateTime<Utc>,
        pub group_by: Vec<String>,
        pub currency: String,
        #[serde(default)]
        pub prices: String,
        #[serde(default)]
        pub rows: Vec<ReportRow>,
        pub total: ReportRow,
    }

    /// One group's usage; the keys not grouped on are absent.
    #[derive(Debug, Clone, Deserialize)]
    pub struct ReportRow {
        #[serde(default)]
        pub business_unit: Option<String>,
        #[serde(default)]
        pub team: Option<String>,
        #[serde(default)]
        pub project: Option<String>,
        #[serde(default)]
        pub user: Option<String>,
        #[serde(default)]
        pub model: Option<String>,
        #[serde(default)]
        pub tier: Option<String>,
        #[serde(default)]
        pub class: Option<String>,
        pub gpu_hours: String,
        pub cost: String,
        pub holds: u64,
    }

    impl ReportRow {
        /// The value of the group key `key` ("team", "model", ...).
        pub fn key(&self, key: &str) -> Option<&str> {
            let v = match key {
                "business_unit" => &self.business_unit,
                "team" => &self.team,
                "project" => &self.project,
                "user" => &self.user,
                "model" => &self.model,
                "tier" => &self.tier,
                "class" => &self.class,
                _ => return None,
            };
            v.as_deref()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_split_into_authority_and_path() {
        assert_eq!(
            split_base("http://127.0.0.1:8080").unwrap(),
            ("127.0.0.1:8080".into(), String::new())
        );
        assert_eq!(
            split_base("http://example.org/partita/").unwrap(),
            ("example.org:80".into(), "/partita".into())
        );
        assert_eq!(
            split_base("http://[::1]:9000").unwrap(),
            ("[::1]:9000".into(), String::new())
        );
        assert_eq!(
            split_base("http://[::1]").unwrap(),
            ("[::1]:80".into(), String::new())
        );
        let err = split_base("https://example.org").unwrap_err();
        assert!(err.contains("only http://"), "{err}");
        assert!(split_base("http:///x").is_err());
    }

    #[test]
    fn queries_escape_values_and_skip_empty_ones() {
        assert_eq!(query(&[("team", ""), ("limit", "")]), "");
        assert_eq!(
            query(&[("state", "queued,running"), ("team", ""), ("user", "a b/c")]),
            "?state=queued%2Crunning&user=a%20b%2Fc"
        );
        assert_eq!(escape("job-00ff_x.y~"), "job-00ff_x.y~");
        assert_eq!(escape("é"), "%C3%A9");
    }

    #[test]
    fn api_errors_name_the_status_the_message_and_the_field() {
        let e = ClientError::Api {
            status: 400,
            message: "gpu.mig: no such profile".into(),
            field: "gpu.mig".into(),
        };
        assert_eq!(e.to_string(), "400 Bad Request: gpu.mig: no such profile");
        let e = ClientError::Api {
            status: 409,
            message: "the key was used with another request".into(),
            field: "idempotency_key".into(),
        };
        assert_eq!(
            e.to_string(),
            "409 Conflict: the key was used with another request (field idempotency_key)"
        );
        let e = ClientError::Api {
            status: 404,
            message: "job \"x\" not found".into(),
            field: String::new(),
        };
        assert_eq!(e.to_string(), "404 Not Found: job \"x\" not found");
    }

    #[test]
    fn a_job_answer_reads_its_queue_slot_and_placements() {
        let body = r#"{"id":"job-1","team":"t","project":"default","user":"u","class":"batch",
            "state":"queued","gpus":1,"tasks":[{"name":"job-1-0","cpu_milli":1000,"memory_mib":1024,"gpu":"1 GPU",
            "placement":{"node":"h100-0","tier":"t","grants":[{"gpu":3,"model":"H100-80GB","milli":1000}]}}],
            "submitted_at":"2026-01-02T03:04:05Z","attempts":0,
            "queue":{"position":2,"reason":"waiting for quota","wait_seconds":12.5,"estimated_start":"2026-01-02T04:00:00Z"}}"#;
        let j: api::Job = serde_json::from_str(body).unwrap();
        assert_eq!(j.id, "job-1");
        assert_eq!(j.tasks[0].gpu, "1 GPU");
        let q = j.queue.unwrap();
        assert_eq!((q.position, q.wait_seconds), (2, Some(12.5)));
        let p = j.tasks[0].placement.as_ref().unwrap();
        assert_eq!((p.node.as_str(), p.grants[0].gpu), ("h100-0", 3));
    }
}
