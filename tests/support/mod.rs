//! Test support: one real PostgreSQL per test binary, started by the
//! tests themselves from the machine's binaries (no mocks, no Docker), and
//! a fresh database per test.
//!
//! The server is Partita's own [`EmbeddedPostgres`] in a temporary
//! directory, with durability off (fsync) for speed. It is started on
//! first use and stopped when the test binary exits, however it exits, by
//! a small guardian shell that waits for the end of a pipe the test
//! process holds open: when the process is gone, the pipe closes, and the
//! guardian stops the server (SIGINT, PostgreSQL's fast shutdown) and
//! removes the directory.
//!
//! Each test gets its own database, `CREATE DATABASE test_N TEMPLATE
//! partita_template`, a copy of a database migrated once ([`fresh_db`]),
//! or an empty one ([`empty_db`]) for the migration tests.

#![allow(dead_code)] // each test binary uses a part

pub mod api;
pub mod browser;
pub mod kube;
pub mod kube_env;
pub mod kube_nodes;
pub mod kube_scheduler;
pub mod oidc;
pub mod portal;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use partita::db::{self, EmbeddedPostgres, PgBinaries, Settings};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{ConnectOptions, Connection, Executor};

/// The shared server of this test binary.
pub struct TestServer {
    pub pg: EmbeddedPostgres,
    /// The guardian, whose stdin (kept in it, never written) closes when
    /// this process exits. Never waited for: it outlives the tests.
    _guardian: Child,
    _dir: PathBuf,
}

const TEMPLATE: &str = "partita_template";

static SERVER: OnceLock<TestServer> = OnceLock::new();
static NEXT_DB: AtomicUsize = AtomicUsize::new(0);

/// The server, started on first use.
pub fn server() -> &'static TestServer {
    SERVER.get_or_init(start_server)
}

fn start_server() -> TestServer {
    let dir = tempfile::Builder::new()
        .prefix("partita-test-pg-")
        .tempdir()
        .expect("a temporary directory")
        .keep();
    let settings = Settings {
        extra: vec![
            ("fsync".into(), "off".into()),
            ("synchronous_commit".into(), "off".into()),
            ("full_page_writes".into(), "off".into()),
            ("max_connections".into(), "200".into()),
        ],
    };
    let bins = PgBinaries::find().expect("PostgreSQL binaries (apt-get install postgresql)");
    let pgdata = dir.join("pg");
    let pg = EmbeddedPostgres::start(bins, &pgdata, &settings).expect("the test PostgreSQL starts");
    let guardian = spawn_guardian(&pgdata, &dir);
    // Migrate the template once, on a runtime of its own (the caller may be
    // inside a test's runtime, where blocking on another is not allowed).
    let admin = pg.connect_options("postgres");
    let template = pg.connect_options(TEMPLATE);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut conn = admin.connect().await.expect("connect to the test server");
            conn.execute("CREATE DATABASE partita_template")
                .await
                .unwrap();
            conn.close().await.unwrap();
            let mut conn = template.connect().await.unwrap();
            db::MIGRATOR
                .run(&mut conn)
                .await
                .expect("migrations apply to the template");
            conn.close().await.unwrap();
        });
    })
    .join()
    .expect("the template database is migrated");
    TestServer {
        pg,
        _guardian: guardian,
        _dir: dir,
    }
}

fn spawn_guardian(pgdata: &Path, dir: &Path) -> Child {
    let script = r#"
trap '' INT TERM HUP
cat >/dev/null
pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null)
if [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null; then
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i+1)); done
fi
rm -rf "$2"
"#;
    Command::new("sh")
        .args(["-c", script, "guardian"])
        .arg(pgdata)
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the guardian shell starts")
}

/// Options to connect to `database` on the shared server.
pub fn options(database: &str) -> PgConnectOptions {
    server().pg.connect_options(database)
}

/// A URL for `database` on the shared server (for `partita serve --database-url`).
pub fn url(database: &str) -> String {
    server().pg.url(database)
}

async fn create_database(template: &str) -> String {
    let name = format!("test_{}", NEXT_DB.fetch_add(1, Ordering::SeqCst));
    let mut conn = options("postgres").connect().await.expect("connect");
    // Names are ours (no user input), so formatting them in is safe.
    conn.execute(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE {name} TEMPLATE {template}"
    )))
    .await
    .expect("create the test database");
    conn.close().await.unwrap();
    name
}

/// A fresh database with every migration applied, and its name.
pub async fn fresh_db() -> (PgPool, String) {
    let name = create_database(TEMPLATE).await;
    let pool = db::connect(options(&name))
        .await
        .expect("connect to the test database");
    (pool, name)
}

/// A fresh, empty database (no migrations), and its name.
pub async fn empty_db() -> (PgPool, String) {
    let name = create_database("template0").await;
    let pool = db::connect(options(&name))
        .await
        .expect("connect to the test database");
    (pool, name)
}

/// A running `partita serve`, its output read by threads.
pub struct Serve {
    pub child: Child,
    pub addr: String,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

/// How long a `partita serve` may take to start (initdb included).
pub const START_TIMEOUT: Duration = Duration::from_secs(90);

impl Serve {
    /// Starts `partita serve --listen 127.0.0.1:0 ARGS` with `envs` and
    /// waits (bounded) for its first line, which says where it listens.
    pub fn start(args: &[&str], envs: &[(&str, &str)]) -> Result<Serve, String> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_partita"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("DATABASE_URL")
            .envs(envs.iter().copied())
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("partita serve runs");
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let (tx, rx) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("Partita listening on http://") {
                        let addr = rest.split_whitespace().next().unwrap().to_string();
                        return Ok(Serve {
                            child,
                            addr,
                            stderr,
                        });
                    }
                }
                Err(_) => {
                    // Ended (or timed out) before listening: its error.
                    let _ = child.kill();
                    let status = child.wait().unwrap();
                    std::thread::sleep(Duration::from_millis(100)); // let the reader drain
                    let err = stderr.lock().unwrap().clone();
                    return Err(format!(
                        "exited ({status}) before listening; stderr:\n{err}"
                    ));
                }
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// What it has written to stderr (its log) so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits (bounded) for it to exit; its exit code.
    pub fn terminate(mut self) -> (Option<i32>, String) {
        signal(self.pid(), nix::sys::signal::Signal::SIGTERM);
        let code = wait_exit(&mut self.child, Duration::from_secs(60));
        (code, self.log())
    }

    /// SIGKILL, then reaps it.
    pub fn kill9(mut self) {
        signal(self.pid(), nix::sys::signal::Signal::SIGKILL);
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    /// A test that fails midway leaves no server behind: SIGTERM (which
    /// stops its PostgreSQL too), then SIGKILL if it is still there after
    /// a bounded wait. After `terminate` or `kill9` this finds it gone.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid()),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = Instant::now() + Duration::from_secs(30);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).expect("signal sent");
}

/// Waits up to `limit` for `child` to exit; panics after that.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        assert!(Instant::now() < deadline, "did not exit within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits up to `limit` for `done()`; false if it never held.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// A plain HTTP/1.1 GET: the status code and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the server");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("a response");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}
