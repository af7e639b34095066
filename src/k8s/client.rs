//! The scheduler's API client: a port of go/cmd/partita/kube.go's
//! `restConfig` and of client-go's client-side rate limit
//! (`rest.Config.QPS`/`Burst`, a token bucket from golang.org/x/time/rate).
//!
//! The config is the in-cluster one (service account), else the kubeconfig
//! named by `--kubeconfig`, else $KUBECONFIG or ~/.kube/config. Every request
//! carries the user agent "partita-scheduler" and waits for a token of the
//! bucket before it is sent, as client-go's do.

use std::future::Future as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::time::{Instant, Sleep};

/// The user agent of every request (the Go build's).
pub const USER_AGENT: &str = "partita-scheduler";

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("no in-cluster config and no kubeconfig ($KUBECONFIG or ~/.kube/config): {0}")]
    Infer(kube::config::KubeconfigError),
    #[error("building the API client: {0}")]
    Build(#[from] kube::Error),
}

/// The configuration as Go's restConfig finds it: in-cluster when
/// `kubeconfig` is None and the process runs in a pod, else the file named
/// by `kubeconfig`, else $KUBECONFIG or ~/.kube/config.
pub async fn config(kubeconfig: Option<&Path>) -> Result<kube::Config, ClientError> {
    if let Some(path) = kubeconfig {
        let file = Kubeconfig::read_from(path).map_err(|source| ClientError::Kubeconfig {
            path: path.display().to_string(),
            source,
        })?;
        return kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .map_err(|source| ClientError::Kubeconfig {
                path: path.display().to_string(),
                source,
            });
    }
    if let Ok(config) = kube::Config::incluster() {
        return Ok(config);
    }
    kube::Config::from_kubeconfig(&KubeConfigOptions::default())
        .await
        .map_err(ClientError::Infer)
}

/// A client of `config` with the user agent "partita-scheduler" and a
/// client-side limit of `qps` requests a second, `burst` at once.
pub fn build(mut config: kube::Config, qps: f64, burst: u32) -> Result<kube::Client, ClientError> {
    config.headers.push((
        axum::http::header::USER_AGENT,
        axum::http::HeaderValue::from_static(USER_AGENT),
    ));
    let bucket = Arc::new(TokenBucket::new(qps, burst));
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&RateLimitLayer { bucket })
        .build())
}

/// [`config`] then [`build`]: what `partita kube` calls.
pub async fn connect(
    kubeconfig: Option<&Path>,
    qps: f64,
    burst: u32,
) -> Result<kube::Client, ClientError> {
    build(config(kubeconfig).await?, qps, burst)
}

/// A token bucket with golang.org/x/time/rate's semantics, which client-go's
/// rate limiter uses: it holds up to `burst` tokens and gains `qps` a
/// second; a request takes one, and when none is left it reserves the next
/// one to come (the count goes below zero) and waits until then, so waiters
/// are served in order at exactly `qps`. A `qps` that is not positive and
/// finite turns the limit off.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket (client-go starts with `burst` tokens).
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        // A burst of 0 would never let anything through; x/time/rate
        // allows one at a time then.
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            state: Mutex::new(BucketState {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    fn unlimited(&self) -> bool {
        !(self.qps.is_finite() && self.qps > 0.0)
    }

    /// Takes a token now and says how long to wait before using it (zero
    /// when one was there).
    pub fn reserve(&self) -> Duration {
        if self.unlimited() {
            return Duration::ZERO;
        }
        let now = Instant::now();
        // The lock is held for arithmetic only; a poisoned one still holds
        // numbers that make sense.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(state.last).as_secs_f64();
        state.tokens = (state.tokens + elapsed * self.qps).min(self.burst);
        state.last = now;
        state.tokens -= 1.0;
        if state.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-state.tokens / self.qps)
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// The tower layer that puts a [`TokenBucket`] in front of the client.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    pub bucket: Arc<TokenBucket>,
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// A service that is ready only once it holds a token. kube's client puts
/// a buffer in front of its stack, whose worker polls readiness before
/// each request, so waiting here queues requests in order without holding
/// any of them.
#[derive(Debug)]
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    wait: Option<std::pin::Pin<Box<Sleep>>>,
    permitted: bool,
}

impl<S, R> tower::Service<R> for RateLimit<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if !self.permitted {
            if self.wait.is_none() {
                let wait = self.bucket.reserve();
                if !wait.is_zero() {
                    self.wait = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
            if let Some(sleep) = self.wait.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            self.permitted = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        // One token, one request: the next needs a token of its own.
        self.permitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, Service, ServiceExt};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A full bucket lets `burst` through at once, then one every 1/qps,
    /// each waiter in turn (client-go's QPS 500, burst 1000 scaled down).
    #[tokio::test(start_paused = true)]
    async fn a_bucket_lets_a_burst_through_then_qps() {
        let bucket = TokenBucket::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
        // Reservations queue: the 4th waits 100 ms, the 5th 200 ms.
        assert_eq!(bucket.reserve(), ms(100));
        assert_eq!(bucket.reserve(), ms(200));
        tokio::time::advance(ms(200)).await;
        // Both reserved tokens have come; the bucket is empty, not negative.
        assert_eq!(bucket.reserve(), ms(100));
    }

    /// Idle time refills the bucket, but never beyond `burst`.
    #[tokio::test(start_paused = true)]
    async fn a_bucket_refills_up_to_its_burst() {
        let bucket = TokenBucket::new(100.0, 5);
        for _ in 0..5 {
            bucket.acquire().await;
        }
        tokio::time::advance(Duration::from_secs(60)).await;
        for _ in 0..5 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(), ms(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_bucket_with_no_qps_does_not_limit() {
        let bucket = TokenBucket::new(0.0, 1);
        for _ in 0..10_000 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
    }

    /// Through the layer: 1,000 requests at qps 100, burst 100 take 9 s of
    /// (paused) time, the first 100 at once.
    #[tokio::test(start_paused = true)]
    async fn the_layer_holds_requests_to_the_rate() {
        let bucket = Arc::new(TokenBucket::new(100.0, 100));
        let start = Instant::now();
        let sent = Arc::new(Mutex::new(Vec::new()));
        let log = sent.clone();
        let inner = tower::service_fn(move |_: ()| {
            log.lock().unwrap().push(start.elapsed());
            async { Ok::<_, std::convert::Infallible>(()) }
        });
        let mut service = RateLimitLayer { bucket }.layer(inner);
        for _ in 0..1000 {
            service.ready().await.unwrap().call(()).await.unwrap();
        }
        let sent = sent.lock().unwrap();
        assert_eq!(sent.len(), 1000);
        assert!(sent[99] < ms(1), "the burst waited: {:?}", sent[99]);
        assert!(sent[100] >= ms(10), "the 101st went early: {:?}", sent[100]);
        let last = sent[999];
        assert!(
            last >= ms(9000) && last < ms(9010),
            "1,000 requests at 100/s after a burst of 100 took {last:?}"
        );
    }
}
