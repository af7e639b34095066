//! The scheduler under test, `partita kube`, as a child process with the
//! Go build's command-line flags (go/cmd/partita/kube.go). The binary is
//! env PARTITA_KUBE_SCHEDULER when set (e.g. the Go build, to prove the
//! tests against it), else this build's `partita`. It is killed when its
//! guard is dropped, also when a test panics; then its last log lines are
//! printed (with PARTITA_TEST_LOG set, all of them as they come).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many of the scheduler's log lines are kept for a failing test.
const LOG_TAIL_LINES: usize = 300;

/// The scheduler's flags, each given once (a flag parser may refuse a
/// repeated one). [`test_flags`] are the Go tests' quick defaults.
#[derive(Clone, Debug)]
pub struct Flags(Vec<(String, String)>);

/// The Go tests' `testOptions`, as flags: a short grace period and MIG
/// cooldown, so tests do not wait on time-based rules (the Go tests also
/// shorten the cycle interval, which has no flag: the default 2 s is
/// what a waiting test may see between cycles when nothing changes), no
/// leader election (the Go tests run `kube.New` without it) and a
/// metrics server on a free port.
pub fn test_flags() -> Flags {
    Flags(Vec::new())
        .set("metrics-addr", "127.0.0.1:0")
        .set("leader-elect", "false")
        .set("preemption-grace", "1s")
        .set("mig-cooldown", "1s")
}

impl Flags {
    /// Sets `--name=value`, replacing an earlier value.
    pub fn set(mut self, name: &str, value: &str) -> Flags {
        self.0.retain(|(n, _)| n != name);
        self.0.push((name.to_string(), value.to_string()));
        self
    }

    fn args(&self) -> Vec<String> {
        self.0.iter().map(|(n, v)| format!("--{n}={v}")).collect()
    }
}

/// A free loopback address, for a server whose address the test must know
/// before it starts (`--metrics-addr`, `--webhook-addr`). Another process
/// could take the port first; unlikely enough for tests.
pub fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    l.local_addr().unwrap().to_string()
}

/// The binary under test.
pub fn binary() -> PathBuf {
    match std::env::var_os("PARTITA_KUBE_SCHEDULER") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_partita")),
    }
}

/// Runs the scheduler ("$@") under a guardian shell whose stdin the test
/// holds: when it closes (the guard is dropped, or the test process is
/// gone, however it ended) the scheduler is killed, so none is left
/// running against a dead API server. The shell exits with the
/// scheduler's status. (An asynchronous list's stdin is /dev/null unless
/// redirected: hence fd 3.)
const GUARDIAN: &str = r#"exec 3<&0
"$@" </dev/null 3<&- &
pid=$!
{ cat <&3 >/dev/null 2>&1; kill -9 "$pid" 2>/dev/null; } >/dev/null 2>&1 &
exec 3<&-
wait "$pid"
"#;

/// A running `partita kube`; killed on drop.
#[must_use = "the scheduler is killed when its guard is dropped"]
pub struct Scheduler {
    child: Arc<Mutex<Child>>,
    log: Arc<Mutex<VecDeque<String>>>,
    /// Set before the test kills it, so its end is not taken for a death.
    killed: Arc<AtomicBool>,
}

/// Why a scheduler exited on its own (its status and last log lines),
/// until a test's wait reports it: a scheduler that died (or a binary
/// without `kube`) fails the test at once instead of at a timeout.
static DIED: Mutex<Option<String>> = Mutex::new(None);

/// Panics if a scheduler of this test exited on its own. The waits of
/// tests/support/kube_env.rs call it at every poll.
pub fn check_none_died() {
    let died = DIED.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(why) = died {
        panic!("{why}");
    }
}

/// Forgets deaths of earlier tests' schedulers (a new test starts).
pub fn forget_deaths() {
    *DIED.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

impl Scheduler {
    /// Starts `partita kube --kubeconfig KUBECONFIG FLAGS`.
    pub fn start(kubeconfig: &Path, flags: &Flags) -> Scheduler {
        let bin = binary();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", GUARDIAN, "sh"])
            .arg(&bin)
            .arg("kube")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(flags.args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env(
                "RUST_LOG",
                "debug,kube=info,hyper=info,tower=info,rustls=info",
            );
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {} kube: {e}", bin.display()));
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let echo = std::env::var_os("PARTITA_TEST_LOG").is_some();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for pipe in [
            Box::new(out) as Box<dyn std::io::Read + Send>,
            Box::new(err),
        ] {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if echo {
                        eprintln!("scheduler: {line}");
                    }
                    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                    log.push_back(line);
                    if log.len() > LOG_TAIL_LINES {
                        log.pop_front();
                    }
                }
            });
        }
        let child = Arc::new(Mutex::new(child));
        let killed = Arc::new(AtomicBool::new(false));
        let watched = (child.clone(), killed.clone(), log.clone());
        std::thread::spawn(move || watch(watched.0, watched.1, watched.2));
        Scheduler { child, log, killed }
    }

    /// Its last log lines.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }

    /// Panics (with its log) if it has exited: a scheduler that died is a
    /// failure, however the test's conditions look.
    pub fn assert_running(&mut self) {
        let exited = self
            .child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .try_wait();
        if let Ok(Some(status)) = exited {
            // Let the readers drain what it wrote last.
            std::thread::sleep(Duration::from_millis(200));
            panic!(
                "the scheduler exited ({status}); its last log lines:\n{}",
                self.log_tail()
            );
        }
    }

    /// SIGKILL, as a crash: nothing is cleaned up. (Closing the
    /// guardian's stdin has it kill the scheduler; the guardian then exits.)
    pub fn kill(&mut self) {
        self.killed.store(true, Ordering::SeqCst);
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        drop(child.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while matches!(child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn tail(log: &Mutex<VecDeque<String>>) -> String {
    let log = log.lock().unwrap_or_else(|e| e.into_inner());
    log.iter().cloned().collect::<Vec<_>>().join("\n")
}

/// Records in [`DIED`] the exit of a scheduler the test did not kill.
fn watch(child: Arc<Mutex<Child>>, killed: Arc<AtomicBool>, log: Arc<Mutex<VecDeque<String>>>) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let exited = child.lock().unwrap_or_else(|e| e.into_inner()).try_wait();
        match exited {
            Ok(None) => continue,
            Ok(Some(status)) if !killed.load(Ordering::SeqCst) => {
                // Let the readers drain what it wrote last.
                std::thread::sleep(Duration::from_millis(200));
                *DIED.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                    "the scheduler ({} kube) exited ({status}); its last log lines:\n{}",
                    binary().display(),
                    tail(&log)
                ));
                return;
            }
            _ => return,
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("the scheduler's last log lines:\n{}", self.log_tail());
        }
    }
}
