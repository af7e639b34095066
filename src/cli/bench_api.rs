//! `partita bench api`: load on a running server (Go:
//! `go/cmd/partita/bench_api.go`). `--concurrency` clients each hold one
//! HTTP/1.1 keep-alive connection and submit small jobs (a `1g.10gb` slice
//! each, best-effort, with a fresh idempotency key) to `POST
//! /api/v1/jobs` one after another for `--duration`; it prints the
//! acknowledged submissions per second, the errors and the latency
//! percentiles of the acknowledged ones.
//!
//! The client is hyper's own HTTP/1.1 connection (`hyper::client::conn`),
//! already in the tree through axum. It is closed-loop, as Go's: each
//! client waits for its answer before sending the next, so p50 ≈ clients /
//! rate. When the time is up no client sends another request, but each
//! waits for the answer to the one it has in flight, which counts (and
//! the run's seconds run to the last answer). Go's cancels those and
//! counts none of them, although the server may have stored them; here
//! every job the server stored without an error is in the count.

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use partita_engine::scenario::duration::parse_duration;
use serde::Serialize;

use super::usage_error;
use crate::output::write_json;

/// How long one request may take before it counts as an error (Go's
/// `http.Client.Timeout`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The flags of `partita bench api`, as the Go build names them, with its
/// defaults and help texts.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchApiArgs {
    /// server address (default $PARTITA_SERVER or http://127.0.0.1:8080)
    #[arg(long, default_value = "")]
    pub server: String,

    /// API token (default DIR/admin.token with --data-dir, else $PARTITA_TOKEN, else ./partita-data/admin.token)
    #[arg(long, default_value = "")]
    pub token: String,

    /// the server's data dir: use the admin token it wrote there (DIR/admin.token)
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,

    /// clients submitting at once
    #[arg(long, default_value_t = 32, allow_negative_numbers = true)]
    pub concurrency: i64,

    /// how long to submit
    #[arg(long, default_value = "10s", value_parser = duration_flag, allow_negative_numbers = true)]
    pub duration: i64,

    /// team to submit to
    #[arg(long, default_value = "research")]
    pub team: String,

    /// each job's run time on the virtual cluster
    #[arg(long, default_value = "2m")]
    pub job_duration: String,

    /// print one JSON object
    #[arg(long)]
    pub json: bool,
}

fn duration_flag(s: &str) -> Result<i64, String> {
    parse_duration(s).ok_or_else(|| "parse error".to_string())
}

/// What `partita bench api` measures (Go's `apiBenchResult`, with its
/// JSON names).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ApiBenchResult {
    pub server: String,
    pub concurrency: i64,
    pub seconds: f64,
    pub submitted: usize,
    pub errors: usize,
    pub submissions_per_second: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Runs `bench api`: a usage error (exit 2) for bad flags, an error (exit
/// 1) when no submission was acknowledged, after printing the result.
pub fn run(
    args: &BenchApiArgs,
    stdout: &mut dyn Write,
    _stderr: &mut dyn Write,
) -> anyhow::Result<()> {
    let r = super::client::resolve(
        Some(&args.server),
        Some(&args.token),
        args.data_dir.as_deref(),
    )?;
    let (base, token) = (r.base, r.token);
    if args.concurrency < 1 || args.duration <= 0 {
        return Err(usage_error("--concurrency and --duration must be positive"));
    }
    let (authority, prefix) = crate::client::split_base(&base).map_err(usage_error)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let load = Load {
        authority,
        uri: format!("{prefix}/api/v1/jobs"),
        token,
        team: args.team.clone(),
        job_duration: args.job_duration.clone(),
    };
    let duration = Duration::from_nanos(args.duration as u64);
    let mut r = runtime.block_on(load.run(args.concurrency as usize, duration));
    r.server = base;
    if args.json {
        write_json(stdout, &r)?;
    } else {
        writeln!(
            stdout,
            "bench api: {} clients for {:.1}s against {}: {} submissions acknowledged, {} errors: {:.0}/s; latency p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            r.concurrency,
            r.seconds,
            r.server,
            r.submitted,
            r.errors,
            r.submissions_per_second,
            r.p50_ms,
            r.p90_ms,
            r.p99_ms,
            r.max_ms
        )?;
    }
    if r.submitted == 0 {
        anyhow::bail!("no submission was acknowledged");
    }
    Ok(())
}

/// What every client sends.
#[derive(Clone)]
struct Load {
    /// host:port to connect to.
    authority: String,
    /// The request target: `/api/v1/jobs` after the server URL's path.
    uri: String,
    token: String,
    team: String,
    job_duration: String,
}

/// One client's tally.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    errors: usize,
}

impl Load {
    async fn run(&self, n: usize, d: Duration) -> ApiBenchResult {
        let run_id = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|t| t.as_nanos())
            .unwrap_or_default();
        let begin = Instant::now();
        let deadline = tokio::time::Instant::from_std(begin + d);
        let mut clients = Vec::with_capacity(n);
        for w in 0..n {
            let load = self.clone();
            clients.push(tokio::spawn(async move {
                load.client(run_id, w, deadline).await
            }));
        }
        let mut all = Vec::new();
        let mut errors = 0;
        for c in clients {
            // A client that panicked counts nothing.
            if let Ok(t) = c.await {
                all.extend(t.latencies);
                errors += t.errors;
            }
        }
        let elapsed = begin.elapsed().as_secs_f64();
        all.sort_unstable();
        let ms = |t: Duration| t.as_secs_f64() * 1e3;
        let q = |p: f64| ms(all[((p * all.len() as f64) as usize).min(all.len() - 1)]);
        let (p50, p90, p99, max) = if all.is_empty() {
            (0.0, 0.0, 0.0, 0.0)
        } else {
            (q(0.50), q(0.90), q(0.99), ms(all[all.len() - 1]))
        };
        ApiBenchResult {
            server: String::new(),
            concurrency: n as i64,
            seconds: elapsed,
            submitted: all.len(),
            errors,
            submissions_per_second: all.len() as f64 / elapsed,
            p50_ms: p50,
            p90_ms: p90,
            p99_ms: p99,
            max_ms: max,
        }
    }

    /// One client: sends submissions until `deadline` over one
    /// keep-alive connection, opening another when it breaks; the last
    /// one's answer is waited for.
    async fn client(&self, run_id: u128, w: usize, deadline: tokio::time::Instant) -> Tally {
        let mut tally = Tally::default();
        let mut conn: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>> = None;
        let mut i: u64 = 0;
        while tokio::time::Instant::now() < deadline {
            let body = serde_json::json!({
                "team": self.team,
                "cpu": "1",
                "memory": "2Gi",
                "gpu": {"mig": "1g.10gb"},
                "duration": self.job_duration,
                "class": "best-effort",
                "idempotency_key": format!("bench-{run_id}-{w}-{i}"),
            })
            .to_string();
            i += 1;
            let t0 = Instant::now();
            let status = tokio::time::timeout(REQUEST_TIMEOUT, self.post(&mut conn, body))
                .await
                .unwrap_or(None); // timed out
            match status {
                Some(StatusCode::CREATED) => tally.latencies.push(t0.elapsed()),
                Some(_) => tally.errors += 1,
                None => {
                    conn = None; // a broken connection: a fresh one next time
                    tally.errors += 1;
                }
            }
        }
        tally
    }

    /// Sends one submission; its status, or None when the connection
    /// failed.
    async fn post(
        &self,
        conn: &mut Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
        body: String,
    ) -> Option<StatusCode> {
        if conn.as_ref().is_none_or(|c| c.is_closed()) {
            *conn = Some(self.connect().await?);
        }
        let sender = conn.as_mut()?;
        sender.ready().await.ok()?;
        let req = Request::post(&self.uri)
            .header(header::HOST, &self.authority)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .ok()?;
        let resp = sender.send_request(req).await.ok()?;
        let status = resp.status();
        // Read the answer to the end so that the connection can be reused.
        resp.into_body().collect().await.ok()?;
        Some(status)
    }

    async fn connect(&self) -> Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
        let stream = tokio::net::TcpStream::connect(&self.authority).await.ok()?;
        stream.set_nodelay(true).ok()?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .ok()?;
        tokio::spawn(async move {
            // Ends when the sender is dropped or the server closes it.
            let _ = connection.await;
        });
        Some(sender)
    }
}
