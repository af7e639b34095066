//! The scheduler's HTTP side, a port of go/internal/kube/run.go's
//! `healthMux`, `serve` and `certFiles`: /metrics, /healthz and /readyz
//! over plain HTTP, and the admission webhook over TLS.
//!
//! The webhook's certificate is read from its files at each handshake
//! (webhook calls are few: one per pod created) and parsed again when the
//! bytes change: the Secret that holds it may be mounted after the process
//! starts (it is optional in the Deployment, so the scheduler runs without
//! the webhook), and cert-manager renews it in place. Until the files are
//! readable, handshakes fail and the log says why; a renewal that cannot be
//! read keeps the last good pair.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::LazyConfigAcceptor;

use super::leader::Watchdog;
use super::metrics::{CONTENT_TYPE, Metrics};

/// How long a client has for the TLS handshake and the request's headers
/// (the Go build's ReadHeaderTimeout).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// /metrics, /healthz and /readyz. `/healthz` fails (500) when this
/// replica leads and has not renewed its lease in time (the watchdog);
/// `/readyz` answers 503 until `ready` says the caches are synced.
pub fn health_router(
    metrics: Arc<Metrics>,
    watchdog: Watchdog,
    ready: impl Fn() -> bool + Send + Sync + 'static,
) -> Router {
    let ready = Arc::new(ready);
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.encode()) }
            }),
        )
        .route(
            "/healthz",
            get(move || {
                let watchdog = watchdog.clone();
                async move {
                    match watchdog.check() {
                        Ok(()) => (StatusCode::OK, "ok\n".to_string()),
                        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
                    }
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move {
                    if ready() {
                        (StatusCode::OK, "ok\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "informers not synced\n")
                    }
                }
            }),
        )
}

/// Listens on `addr` as Go does: ":8080" is every interface.
pub async fn bind(addr: &str) -> io::Result<TcpListener> {
    let addr = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_string()
    };
    TcpListener::bind(&addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("listening on {addr}: {e}")))
}

/// Serves `router` over plain HTTP until `shutdown`, then lets requests in
/// progress finish.
pub fn spawn_http(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> JoinHandle<io::Result<()>> {
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
    })
}

/// Serves `router` over TLS with the certificate in `certs` until
/// `shutdown`; connections already open finish on their own.
pub fn spawn_https(
    listener: TcpListener,
    router: Router,
    certs: Arc<CertFiles>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> JoinHandle<io::Result<()>> {
    tokio::spawn(async move {
        tokio::pin!(shutdown);
        loop {
            let (tcp, peer) = tokio::select! {
                _ = &mut shutdown => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    // A connection that failed before we got it (reset,
                    // out of file descriptors for a moment): not the
                    // server's end.
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook: accepting a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let (router, certs) = (router.clone(), certs.clone());
            tokio::spawn(async move {
                if let Err(e) = serve_tls(tcp, router, &certs).await {
                    tracing::warn!(%peer, error = %e, "webhook: TLS connection");
                }
            });
        }
    })
}

/// One TLS connection: the handshake with the certificate as the files
/// hold it now, then HTTP/1.1.
async fn serve_tls(tcp: TcpStream, router: Router, certs: &CertFiles) -> Result<(), String> {
    let handshake = async {
        let start = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), tcp)
            .await
            .map_err(|e| format!("reading the client hello: {e}"))?;
        let config = certs.server_config().await.map_err(|e| e.to_string())?;
        start
            .into_stream(config)
            .await
            .map_err(|e| format!("handshake: {e}"))
    };
    let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .map_err(|_| format!("no handshake within {HANDSHAKE_TIMEOUT:?}"))??;
    let service = TowerToHyperService::new(router);
    hyper::server::conn::http1::Builder::new()
        .header_read_timeout(HANDSHAKE_TIMEOUT)
        .timer(hyper_util::rt::TokioTimer::new())
        .serve_connection(TokioIo::new(tls), service)
        .await
        .map_err(|e| format!("serving: {e}"))
}

/// Why the webhook has no certificate to serve.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("webhook certificate: reading {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("webhook certificate: {cert}, {key}: {why}")]
    Parse {
        cert: String,
        key: String,
        why: String,
    },
}

/// The certificate and key in a pair of files (the Go build's certFiles).
#[derive(Debug)]
pub struct CertFiles {
    cert: PathBuf,
    key: PathBuf,
    loaded: Mutex<Option<Loaded>>,
}

#[derive(Debug)]
struct Loaded {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    config: Arc<ServerConfig>,
}

impl CertFiles {
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> CertFiles {
        CertFiles {
            cert: cert.into(),
            key: key.into(),
            loaded: Mutex::new(None),
        }
    }

    /// The TLS configuration for a handshake now: the files read again,
    /// parsed again only when their bytes changed; the last good pair when
    /// they cannot be read or parsed; an error saying why when there was
    /// never a good one.
    pub async fn server_config(&self) -> Result<Arc<ServerConfig>, CertError> {
        let read = async {
            let cert = read(&self.cert).await?;
            let key = read(&self.key).await?;
            Ok::<_, CertError>((cert, key))
        };
        let result = match read.await {
            Ok((cert_pem, key_pem)) => {
                {
                    let loaded = self.lock();
                    if let Some(l) = loaded.as_ref()
                        && l.cert_pem == cert_pem
                        && l.key_pem == key_pem
                    {
                        return Ok(l.config.clone());
                    }
                }
                match parse(&cert_pem, &key_pem) {
                    Ok(config) => {
                        let config = Arc::new(config);
                        *self.lock() = Some(Loaded {
                            cert_pem,
                            key_pem,
                            config: config.clone(),
                        });
                        return Ok(config);
                    }
                    Err(why) => Err(CertError::Parse {
                        cert: self.cert.display().to_string(),
                        key: self.key.display().to_string(),
                        why,
                    }),
                }
            }
            Err(e) => Err(e),
        };
        if let Some(l) = self.lock().as_ref() {
            if let Err(e) = &result {
                tracing::warn!(error = %e, "webhook: keeping the last good certificate");
            }
            return Ok(l.config.clone());
        }
        result
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Loaded>> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn read(path: &Path) -> Result<Vec<u8>, CertError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| CertError::Read {
            path: path.display().to_string(),
            source,
        })
}

/// A server configuration from PEM: TLS 1.2 and 1.3 (the Go build's
/// MinVersion 1.2), ring's ciphers, the key checked against the
/// certificate (a key renewed before its certificate is refused).
fn parse(cert_pem: &[u8], key_pem: &[u8]) -> Result<ServerConfig, String> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the certificate: {e}"))?;
    if chain.is_empty() {
        return Err("no certificate in the file".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("the key: {e}"))?;
    ServerConfig::builder_with_provider(Arc::new(ring_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| e.to_string())
}

/// ring's provider, as kube's client uses (no aws-lc-rs C build). rustls
/// 0.23.48 deprecates it for want of post-quantum key exchange, which the
/// API server calling the webhook does not need.
#[allow(deprecated)]
fn ring_provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::leader::LeaseConfig;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tower::ServiceExt;

    async fn get(router: &Router, path: &str) -> (StatusCode, String) {
        let request = axum::http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn health_readiness_and_metrics() {
        let metrics = Arc::new(Metrics::new());
        metrics.cycles.inc();
        let watchdog = Watchdog::default();
        let ready = Arc::new(AtomicBool::new(false));
        let is_ready = ready.clone();
        let router = health_router(metrics, watchdog.clone(), move || {
            is_ready.load(Ordering::SeqCst)
        });

        assert_eq!(
            get(&router, "/readyz").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "informers not synced\n".into()
            )
        );
        ready.store(true, Ordering::SeqCst);
        assert_eq!(
            get(&router, "/readyz").await,
            (StatusCode::OK, "ok\n".into())
        );

        // Not leading: healthy. Leading and renewing: healthy. Leading
        // and 36 s without a renewal (lease 15 s + 20 s): not.
        assert_eq!(
            get(&router, "/healthz").await,
            (StatusCode::OK, "ok\n".into())
        );
        watchdog.renewed(&LeaseConfig::new("ns", "partita-scheduler", "me"));
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(get(&router, "/healthz").await.0, StatusCode::OK);
        tokio::time::advance(Duration::from_secs(6)).await;
        let (status, body) = get(&router, "/healthz").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.contains("partita-scheduler"), "{body}");

        let (status, body) = get(&router, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("partita_kube_cycles_total 1"), "{body}");
    }

    #[tokio::test]
    async fn missing_files_say_which() {
        let certs = CertFiles::new("/nonexistent/tls.crt", "/nonexistent/tls.key");
        let err = certs.server_config().await.unwrap_err().to_string();
        assert!(err.contains("/nonexistent/tls.crt"), "{err}");
    }

    #[tokio::test]
    async fn garbage_is_refused_with_the_file_names() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, "garbage").unwrap();
        std::fs::write(&key, "garbage").unwrap();
        let err = CertFiles::new(&cert, &key)
            .server_config()
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tls.crt") && err.contains("no certificate"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn go_style_addresses_bind_every_interface() {
        let listener = bind(":0").await.unwrap();
        assert!(listener.local_addr().unwrap().ip().is_unspecified());
        assert!(bind("nonsense").await.is_err());
    }
}
