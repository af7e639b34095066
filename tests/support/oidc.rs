//! A real OpenID provider for the browser tests: `tests/oidc/op.mjs`, npm's
//! `oidc-provider` under Node, with one confidential client ([`CLIENT_ID`],
//! [`CLIENT_SECRET`], `client_secret_basic`, code flow, PKCE S256
//! required). No forms: the user named by the authorization request's
//! `login_hint` (default `alice`) is logged in and consents at once, and
//! RP-initiated logout (the `end_session_endpoint`) needs no confirmation.
//! The ID token carries `sub`, `email` (`<sub>@example.test`),
//! `email_verified`, `name` and `groups`, with scope `openid email profile
//! groups`.
//!
//! [`Provider::start`] installs the provider's packages on first use
//! (`npm ci` from the committed lockfile, when `tests/oidc/node_modules`
//! is missing), starts `node op.mjs` on a free port of 127.0.0.1 and waits
//! for it. The process holds the read end of a pipe whose write end the
//! [`Provider`] keeps: it exits when the provider is dropped, or when the
//! test process exits however it exits (the OS closes the pipe), so a
//! provider may live in a `static OnceLock` for a whole test binary.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rand::distr::{Alphanumeric, SampleString};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The client the provider knows.
pub const CLIENT_ID: &str = "partita";
pub const CLIENT_SECRET: &str = "partita-test-secret";

/// How long [`Provider::start`] waits for `OP ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running provider. Dropping it stops the process.
pub struct Provider {
    issuer: String,
    child: Child,
    /// Never written: the provider exits when it closes.
    _stdin: ChildStdin,
    /// Everything the process printed so far, for diagnostics.
    log: Arc<Mutex<String>>,
}

/// `tests/oidc`, where `op.mjs` and its `package.json` are.
pub fn op_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oidc")
}

/// `node`, or env `PARTITA_NODE`.
fn node() -> String {
    std::env::var("PARTITA_NODE").unwrap_or_else(|_| "node".into())
}

/// Installs the provider's packages if `node_modules` lacks them: `npm
/// ci` from the committed lockfile, once per test binary (tests running
/// side by side wait for the first).
fn ensure_installed() {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _once = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = op_dir();
    if dir.join("node_modules/oidc-provider/package.json").exists() {
        return;
    }
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "`npm ci` in {} failed ({}): the browser tests need the test OpenID provider's \
             packages (npm registry reachable, or run `npm ci` there by hand)\n\
             --- stdout\n{}\n--- stderr\n{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        ),
        Err(e) => panic!(
            "cannot run `npm ci` in {}: {e}: the browser tests need Node.js and npm \
             (Debian: apt-get install nodejs npm)",
            dir.display()
        ),
    }
}

impl Provider {
    /// Starts a provider whose client may redirect to `redirect_uris`
    /// (e.g. `http://127.0.0.1:PORT/auth/callback`), with the users' groups
    /// in `users_json` (`{"lena":["team:vision","role:lead"]}`; users not
    /// in it log in too, with no groups). Post-logout redirects are allowed
    /// to the redirect URIs' origins plus `/`.
    pub fn start(redirect_uris: &[String], users_json: &str) -> Provider {
        Self::start_with(redirect_uris, None, users_json)
    }

    /// [`Provider::start`] with the post-logout redirect URIs given
    /// (`None`: the redirect URIs' origins plus `/`).
    pub fn start_with(
        redirect_uris: &[String],
        post_logout_redirect_uris: Option<&[String]>,
        users_json: &str,
    ) -> Provider {
        assert!(
            !redirect_uris.is_empty(),
            "Provider::start: no redirect URI"
        );
        serde_json::from_str::<std::collections::BTreeMap<String, Vec<String>>>(users_json)
            .unwrap_or_else(|e| panic!("Provider::start: users_json {users_json:?}: {e}"));
        ensure_installed();

        let mut cmd = Command::new(node());
        cmd.arg("op.mjs")
            .current_dir(op_dir())
            .env("OP_PORT", "0")
            .env("OP_USERS", users_json)
            .env_remove("OP_REDIRECT_URIS")
            .env_remove("OP_POST_LOGOUT_REDIRECT_URIS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for uri in redirect_uris {
            cmd.arg("--redirect-uri").arg(uri);
        }
        if let Some(uris) = post_logout_redirect_uris {
            cmd.env("OP_POST_LOGOUT_REDIRECT_URIS", uris.join(" "));
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| {
            panic!(
                "cannot start `{} op.mjs`: {e} (Node.js needed; or set PARTITA_NODE)",
                node()
            )
        });
        let stdin = child.stdin.take().expect("piped stdin");
        let log = Arc::new(Mutex::new(String::new()));

        // Both streams are read to their end (the process never blocks on a
        // full pipe) into the log; stdout's `OP ready` line is reported.
        let (ready_tx, ready_rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        spawn_reader(stdout, log.clone(), Some(ready_tx));
        spawn_reader(stderr, log.clone(), None);

        let issuer = match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(issuer) => issuer,
            Err(e) => {
                let _ = child.kill();
                let status = child.wait().ok();
                // The readers finish once the process is gone.
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "the test OpenID provider ({}/op.mjs) did not print `OP ready` ({}; exit: {:?}); its output:\n{}",
                    op_dir().display(),
                    match e {
                        mpsc::RecvTimeoutError::Timeout => "timed out after 60 s",
                        mpsc::RecvTimeoutError::Disconnected => "its stdout closed",
                    },
                    status,
                    log.lock().unwrap_or_else(|e| e.into_inner()),
                );
            }
        };
        Provider {
            issuer,
            child,
            _stdin: stdin,
            log,
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash: what the
    /// discovery document's `issuer` and the ID tokens' `iss` say.
    pub fn issuer(&self) -> String {
        self.issuer.clone()
    }

    /// What the process printed so far (stdout and stderr).
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The discovery document, `<issuer>/.well-known/openid-configuration`.
    pub async fn discovery(&self) -> Value {
        let (status, body) = http(
            "GET",
            &format!("{}/.well-known/openid-configuration", self.issuer),
            None,
            None,
        )
        .await;
        assert_eq!(status, 200, "discovery document: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("discovery document: {e}: {body}"))
    }

    /// Exchanges an authorization code at the token endpoint as the client
    /// (basic auth): the token response (`id_token`, `access_token`, ...).
    /// Panics on an error response.
    pub async fn exchange_code(&self, code: &str, redirect_uri: &str, verifier: &str) -> Value {
        let (status, body) = self.token_request(code, redirect_uri, verifier).await;
        assert_eq!(status, 200, "token endpoint: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("token response: {e}: {body}"))
    }

    /// The token request of [`Provider::exchange_code`], whatever the
    /// answer: its status and body.
    pub async fn token_request(
        &self,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
    ) -> (u16, String) {
        let token_endpoint = self.discovery().await["token_endpoint"]
            .as_str()
            .expect("token_endpoint")
            .to_owned();
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_verifier", verifier)
            .finish();
        let basic = format!(
            "Basic {}",
            STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
        );
        http("POST", &token_endpoint, Some(&basic), Some(form)).await
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `stream` line by line into `log`; the first `OP ready <issuer>`
/// line's issuer goes to `ready`.
fn spawn_reader(
    stream: impl Read + Send + 'static,
    log: Arc<Mutex<String>>,
    mut ready: Option<mpsc::Sender<String>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if let Some(issuer) = line.strip_prefix("OP ready ")
                && let Some(tx) = ready.take()
            {
                let _ = tx.send(issuer.trim().to_owned());
            }
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            log.push_str(&line);
            log.push('\n');
        }
    });
}

/// A PKCE pair: a fresh verifier (43 characters) and its S256 challenge.
pub fn pkce() -> (String, String) {
    let verifier = random_string(43);
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// A random alphanumeric string (for `state`, `nonce`).
pub fn random_string(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::rng(), len)
}

/// The payload of a JWT (its middle part, base64url), signature unchecked.
pub fn jwt_payload(jwt: &str) -> Value {
    let mut parts = jwt.split('.');
    let payload = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(payload), Some(_), None) => payload,
        _ => panic!("not a JWS compact serialization: {jwt}"),
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .unwrap_or_else(|e| panic!("JWT payload is not base64url: {e}: {payload}"));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("JWT payload is not JSON: {e}"))
}

/// One plain-HTTP request (the provider is on 127.0.0.1): status and body.
/// A form body is sent as `application/x-www-form-urlencoded`. Panics on a
/// transport error or after 30 s.
pub async fn http(
    method: &str,
    url: &str,
    authorization: Option<&str>,
    form: Option<String>,
) -> (u16, String) {
    try_http(method, url, authorization, form)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`http`], with transport errors returned.
pub async fn try_http(
    method: &str,
    url: &str,
    authorization: Option<&str>,
    form: Option<String>,
) -> Result<(u16, String), String> {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let mut req = hyper::Request::builder().method(method).uri(url);
    if let Some(auth) = authorization {
        req = req.header("authorization", auth);
    }
    if form.is_some() {
        req = req.header("content-type", "application/x-www-form-urlencoded");
    }
    let req = req
        .body(Full::new(Bytes::from(form.unwrap_or_default())))
        .map_err(|e| format!("{method} {url}: {e}"))?;
    let resp = tokio::time::timeout(Duration::from_secs(30), client.request(req))
        .await
        .map_err(|_| format!("{method} {url}: no answer in 30 s"))?
        .map_err(|e| format!("{method} {url}: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("{method} {url}: reading the body: {e}"))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Whether Node.js is here to run the test provider. Without it the
/// tests that need the provider say so and pass, unless env CI is set
/// (then it must be there, as `.ci/run` installs it).
pub fn node_available() -> bool {
    let node = std::env::var("PARTITA_NODE").unwrap_or_else(|_| "node".into());
    let ok = Command::new(&node)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but `{node}` cannot run: the portal's SSO tests need Node.js for the test OpenID provider"
        );
        eprintln!("skipped: no Node.js (`{node}`) for the test OpenID provider");
    }
    ok
}
