//! A headless Chromium for the portal's end-to-end tests, driven over W3C
//! WebDriver (fantoccini) through its own `chromedriver`.
//!
//! The binaries: `chromedriver` from env `PARTITA_CHROMEDRIVER`, else
//! `PATH`, else `/usr/bin/chromedriver` (Debian's `chromium-driver`);
//! Chromium from env `PARTITA_CHROMIUM`, else `/usr/bin/chromium`, else
//! `chromium` on `PATH` (Debian's `chromium`; the two packages share a
//! version). When one is missing, [`available`] fails the test if env `CI`
//! is set, and otherwise says why the test is skipped and returns false:
//!
//! ```ignore
//! if !browser::available() { return; }
//! let browser = Browser::start().await;
//! browser.goto("http://127.0.0.1:PORT/").await;
//! ```
//!
//! Each [`Browser`] is one chromedriver (port chosen by itself, `--port=0`)
//! with one WebDriver session: a fresh Chromium profile in a temporary
//! directory, 1280x900, no network beyond what the test opens. chromedriver
//! and the Chromium it starts run in a process group of their own, which is
//! killed when the [`Browser`] is dropped, and, by a small guardian shell
//! waiting on a pipe this process holds, when the test process exits
//! however it exits.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use fantoccini::wd::Capabilities;
use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::json;
use url::Url;

/// How long chromedriver may take to listen and to report itself ready.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The window's size, in CSS pixels.
pub const WINDOW: (u32, u32) = (1280, 900);

/// The first file among `candidates` that exists, or `name` found on
/// `PATH`, or env `var` when set (which wins, even if wrong: it is then
/// reported as missing).
fn find(var: &str, path_names: &[&str], candidates: &[&str]) -> Result<PathBuf, String> {
    if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(v);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{var}={} does not exist", p.display()))
        };
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default();
    for name in path_names {
        if let Some(p) = on_path.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
            return Ok(p);
        }
    }
    for c in candidates {
        if Path::new(c).is_file() {
            return Ok(PathBuf::from(c));
        }
    }
    Err(format!(
        "no {} (on PATH or {}; or set {var})",
        path_names[0],
        candidates.join(", ")
    ))
}

/// `chromedriver`: env `PARTITA_CHROMEDRIVER`, `PATH`, `/usr/bin/chromedriver`.
pub fn chromedriver() -> Result<PathBuf, String> {
    find(
        "PARTITA_CHROMEDRIVER",
        &["chromedriver"],
        &["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"],
    )
}

/// Chromium: env `PARTITA_CHROMIUM`, `/usr/bin/chromium`, `PATH`.
pub fn chromium() -> Result<PathBuf, String> {
    if std::env::var_os("PARTITA_CHROMIUM").is_none() && Path::new("/usr/bin/chromium").is_file() {
        return Ok(PathBuf::from("/usr/bin/chromium"));
    }
    find(
        "PARTITA_CHROMIUM",
        &["chromium", "chromium-browser"],
        &["/usr/bin/chromium"],
    )
}

/// Whether the browser tests can run. When chromedriver or Chromium is
/// missing: panics if env `CI` is set (CI installs them; a skip there
/// would hide the tests), else prints `skipped: ...` and returns false.
pub fn available() -> bool {
    let missing: Vec<String> = [chromedriver(), chromium()]
        .into_iter()
        .filter_map(Result::err)
        .collect();
    if missing.is_empty() {
        return true;
    }
    let why = missing.join("; ");
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!(
            "browser tests: {why} (CI is set, so this fails rather than skips; \
             Debian: apt-get install chromium chromium-driver)"
        );
    }
    eprintln!("skipped: {why} (Debian: apt-get install chromium chromium-driver)");
    false
}

/// Chromium's arguments: headless, no sandbox (tests may run as root),
/// nothing that reaches for the network on its own, a fresh profile.
pub fn chromium_args(profile: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--disable-extensions",
    ]
    .map(String::from)
    .into();
    args.push(format!("--window-size={},{}", WINDOW.0, WINDOW.1));
    args.push(format!("--user-data-dir={}", profile.display()));
    args
}

/// One headless Chromium under its own chromedriver, with a WebDriver
/// session open. Derefs to its [`fantoccini::Client`].
pub struct Browser {
    client: Client,
    webdriver: String,
    // Dropped after `client`: kills chromedriver and Chromium.
    procs: Processes,
}

/// chromedriver, its Chromium and their profile; killed and removed when
/// dropped.
struct Processes {
    chromedriver: Child,
    /// The process group of chromedriver and its Chromium.
    pgid: Pid,
    /// Kills the group when this process exits: waits for the end of its
    /// stdin, which only this process holds.
    guardian: Child,
    /// chromedriver's output.
    log: Arc<Mutex<String>>,
    /// The Chromium profile; removed after the processes are gone.
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium (a new session). Panics
    /// when they are missing: call [`available`] first.
    pub async fn start() -> Browser {
        let driver = chromedriver().unwrap_or_else(|e| panic!("browser tests: {e}"));
        let chromium = chromium().unwrap_or_else(|e| panic!("browser tests: {e}"));
        let profile = tempfile::Builder::new()
            .prefix("partita-chromium-")
            .tempdir()
            .expect("a temporary directory for the Chromium profile");

        let mut child = {
            use std::os::unix::process::CommandExt;
            Command::new(&driver)
                .args(["--port=0", "--log-level=WARNING"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver.display()))
        };
        let pgid = Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
        let guardian = Command::new("sh")
            .args([
                "-c",
                "read _ignored; kill -TERM -- -\"$1\" 2>/dev/null; sleep 1; kill -KILL -- -\"$1\" 2>/dev/null",
                "partita-browser-guardian",
            ])
            .arg(pgid.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let guardian = match guardian {
            Ok(g) => g,
            Err(e) => {
                let _ = killpg(pgid, Signal::SIGKILL);
                let _ = child.wait();
                panic!("cannot start the browser's guardian shell (sh): {e}");
            }
        };
        let log = Arc::new(Mutex::new(String::new()));
        let (port_tx, port_rx) = mpsc::channel();
        spawn_reader(
            child.stdout.take().expect("piped"),
            log.clone(),
            Some(port_tx),
        );
        spawn_reader(child.stderr.take().expect("piped"), log.clone(), None);
        // From here on, a panic drops `procs`, which kills them.
        let procs = Processes {
            chromedriver: child,
            pgid,
            guardian,
            log,
            _profile: profile,
        };

        // Polled, not blocked on: tests may run on a current-thread runtime.
        let deadline = Instant::now() + START_TIMEOUT;
        let port = loop {
            match port_rx.try_recv() {
                Ok(port) => break port,
                Err(e) if e == mpsc::TryRecvError::Disconnected || Instant::now() > deadline => {
                    panic!(
                        "{} did not say which port it listens on ({}); its output:\n{}",
                        driver.display(),
                        if e == mpsc::TryRecvError::Disconnected {
                            "it closed its output"
                        } else {
                            "timed out"
                        },
                        procs.log()
                    )
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let webdriver = format!("http://127.0.0.1:{port}");
        loop {
            match super::oidc::try_http("GET", &format!("{webdriver}/status"), None, None).await {
                Ok((200, body))
                    if serde_json::from_str::<serde_json::Value>(&body)
                        .is_ok_and(|v| v["value"]["ready"] == true) =>
                {
                    break;
                }
                answer if Instant::now() > deadline => panic!(
                    "chromedriver at {webdriver} not ready after {START_TIMEOUT:?} (last: {answer:?}); its output:\n{}",
                    procs.log()
                ),
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }

        let mut caps = Capabilities::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": chromium_args(procs._profile.path()),
            }),
        );
        caps.insert(
            "timeouts".into(),
            json!({ "pageLoad": 30_000, "script": 30_000, "implicit": 0 }),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&webdriver)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "no WebDriver session with {} at {webdriver}: {e}; chromedriver's output:\n{}",
                    chromium.display(),
                    procs.log()
                )
            });
        Browser {
            client,
            webdriver,
            procs,
        }
    }

    /// The WebDriver client (also reachable through `Deref`).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// chromedriver's URL, `http://127.0.0.1:PORT`.
    pub fn webdriver_url(&self) -> &str {
        &self.webdriver
    }

    /// What chromedriver printed so far.
    pub fn log(&self) -> String {
        self.procs.log()
    }

    /// Navigates to `url` and waits for the page to load (redirects
    /// followed). Panics on a WebDriver error.
    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("browser: goto {url}: {e}"));
    }

    /// The URL of the current page.
    pub async fn current_url(&self) -> Url {
        self.client
            .current_url()
            .await
            .unwrap_or_else(|e| panic!("browser: current URL: {e}"))
    }

    /// Waits until the current URL satisfies `pred`, polling every 50 ms;
    /// panics after `timeout` with the URL and the page source.
    pub async fn wait_for_url(&self, timeout: Duration, pred: impl Fn(&Url) -> bool) -> Url {
        let deadline = Instant::now() + timeout;
        loop {
            let url = self.current_url().await;
            if pred(&url) {
                return url;
            }
            if Instant::now() > deadline {
                let source = self.client.source().await.unwrap_or_default();
                panic!("browser: after {timeout:?} still at {url}; the page:\n{source}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The current page's HTML.
    pub async fn source(&self) -> String {
        self.client
            .source()
            .await
            .unwrap_or_else(|e| panic!("browser: page source: {e}"))
    }

    /// A PNG screenshot of the viewport, written to `path` (parent
    /// directories created).
    pub async fn screenshot_to(&self, path: impl AsRef<Path>) {
        let path = path.as_ref();
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("browser: screenshot: {e}"));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("browser: creating {}: {e}", dir.display()));
        }
        std::fs::write(path, png)
            .unwrap_or_else(|e| panic!("browser: writing {}: {e}", path.display()));
    }

    /// Ends the WebDriver session (Chromium quits), then stops chromedriver.
    /// Dropping the browser does the same, less politely.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl std::ops::Deref for Browser {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Processes {
    fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        // chromedriver and Chromium: TERM, then KILL what is left after a
        // second. The guardian is not needed any more.
        let _ = killpg(self.pgid, Signal::SIGTERM);
        let _ = self.chromedriver.wait();
        let deadline = Instant::now() + Duration::from_secs(1);
        while killpg(self.pgid, None).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(self.pgid, Signal::SIGKILL);
        let _ = self.guardian.kill();
        let _ = self.guardian.wait();
    }
}

/// Reads chromedriver's `stream` line by line into `log`; the port of its
/// "ChromeDriver was started successfully on port N." goes to `port`.
fn spawn_reader(
    stream: impl Read + Send + 'static,
    log: Arc<Mutex<String>>,
    mut port: Option<mpsc::Sender<u16>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split("started successfully on port ").nth(1)
                && let Ok(p) = rest.trim_end_matches('.').trim().parse::<u16>()
                && let Some(tx) = port.take()
            {
                let _ = tx.send(p);
            }
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            log.push_str(&line);
            log.push('\n');
        }
    });
}

/// Where a screenshot goes: docs/screenshots/ with env
/// `PARTITA_SCREENSHOTS` set (to refresh the committed ones), else a
/// temporary directory (taken all the same, so a page that cannot be
/// drawn still fails).
pub fn screenshot_path(name: &str) -> PathBuf {
    if std::env::var_os("PARTITA_SCREENSHOTS").is_some() {
        return Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/screenshots")
            .join(name);
    }
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .join(name)
}
