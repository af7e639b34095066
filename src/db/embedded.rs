//! The embedded PostgreSQL: a private server that Partita runs from the
//! machine's own PostgreSQL binaries (Debian's `postgresql` package) in a
//! directory of its data dir, reachable only through a Unix socket inside
//! that directory.
//!
//! The life of one, in order:
//!
//! 1. [`PgBinaries::find`] looks for `initdb`, `pg_ctl` and `postgres`:
//!    in `PARTITA_PG_BIN` when it is set (and only there), else in the
//!    newest `/usr/lib/postgresql/*/bin`, else on `PATH`.
//! 2. [`EmbeddedPostgres::start`] runs `initdb` once (when the directory
//!    has no `PG_VERSION`), writes `partita.conf` (no TCP:
//!    `listen_addresses = ''`; the socket in the data directory), clears a
//!    stale `postmaster.pid` left by a killed run, and runs `pg_ctl start`.
//! 3. [`EmbeddedPostgres::stop`] runs `pg_ctl stop -m fast` (also on drop).
//!
//! PostgreSQL refuses to run as root. When Partita runs as root, every
//! PostgreSQL program runs as the `postgres` system user instead (the one
//! Debian's package creates; `PARTITA_PG_USER` names another), through
//! `std::os::unix::process::CommandExt::{uid, gid}`, and the data
//! directory is handed to that user. Partita itself, as root, can still
//! reach the socket.
//!
//! Everything here is synchronous (`std::process`): it runs once at start
//! and once at stop; async callers wrap it in `spawn_blocking`.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;

/// The environment variable that names the one directory to take the
/// PostgreSQL binaries from (used as is: no other place is searched).
pub const BIN_ENV: &str = "PARTITA_PG_BIN";
/// The environment variable that names the system user PostgreSQL runs as
/// when Partita runs as root (default [`DEFAULT_SERVICE_USER`]).
pub const USER_ENV: &str = "PARTITA_PG_USER";
/// The system user PostgreSQL runs as when Partita runs as root: Debian's
/// `postgresql` package creates it.
pub const DEFAULT_SERVICE_USER: &str = "postgres";
/// The database superuser that `initdb` creates, whom Partita connects as.
pub const SUPERUSER: &str = "partita";
/// The port number only names the socket file (`.s.PGSQL.5432`): with
/// `listen_addresses = ''` nothing listens on TCP.
pub const PORT: u16 = 5432;
/// The longest Unix socket path Linux takes (`sun_path` is 108 bytes).
const MAX_SOCKET_PATH: usize = 107;
/// How long `pg_ctl` may take to start or stop the server.
const PG_CTL_TIMEOUT_SECS: u64 = 60;
/// How long a start keeps retrying while a killed server's processes still
/// hold its shared memory.
const STALE_SHMEM_WAIT: Duration = Duration::from_secs(20);

/// What can go wrong with the embedded PostgreSQL. Each message says what
/// to do about it.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error(
        "no PostgreSQL binaries found ({searched}): install Debian's PostgreSQL \
         (`apt-get install postgresql`), or point Partita at an existing server \
         with --database-url / DATABASE_URL"
    )]
    NoBinaries { searched: String },
    #[error(
        "Partita runs as root, and PostgreSQL refuses to, but there is no system user \
         {user:?} to run it as: install Debian's PostgreSQL (`apt-get install postgresql`, \
         which creates the user `postgres`), name another user in {USER_ENV}, or use \
         --database-url"
    )]
    NoServiceUser { user: String },
    #[error(
        "the PostgreSQL user {user:?} cannot reach {dir}: make every directory above it \
         searchable (chmod o+x) or choose a --data-dir elsewhere (e.g. /var/lib/partita)"
    )]
    Unreachable { user: String, dir: PathBuf },
    #[error(
        "the socket path {path} is too long for a Unix socket ({len} bytes, at most \
         {MAX_SOCKET_PATH}): choose a shorter --data-dir"
    )]
    SocketPathTooLong { path: PathBuf, len: usize },
    #[error("{what} failed ({status}): {detail}")]
    Command {
        what: String,
        status: String,
        detail: String,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> EmbeddedError {
    let what = what.into();
    move |source| EmbeddedError::Io { what, source }
}

/// The directory that holds `initdb`, `pg_ctl` and `postgres`.
#[derive(Debug, Clone)]
pub struct PgBinaries {
    dir: PathBuf,
}

const PROGRAMS: [&str; 3] = ["initdb", "pg_ctl", "postgres"];

impl PgBinaries {
    /// Finds the binaries: in `$PARTITA_PG_BIN` when it is set (and only
    /// there, so that a test can point it at an empty directory), else in
    /// the newest `/usr/lib/postgresql/<version>/bin`, else on `PATH`.
    pub fn find() -> Result<Self, EmbeddedError> {
        match std::env::var_os(BIN_ENV) {
            Some(dir) => Self::find_in(&[PathBuf::from(dir)], BIN_ENV),
            None => {
                let mut dirs = debian_bin_dirs();
                let path = std::env::var_os("PATH").unwrap_or_default();
                dirs.extend(std::env::split_paths(&path));
                Self::find_in(&dirs, "/usr/lib/postgresql/*/bin, then PATH")
            }
        }
    }

    /// The first of `dirs` that holds all of `initdb`, `pg_ctl` and
    /// `postgres`; `searched` describes `dirs` in the error.
    pub fn find_in(dirs: &[PathBuf], searched: &str) -> Result<Self, EmbeddedError> {
        for dir in dirs {
            if PROGRAMS.iter().all(|p| is_executable(&dir.join(p))) {
                return Ok(PgBinaries { dir: dir.clone() });
            }
        }
        let listed: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        Err(EmbeddedError::NoBinaries {
            searched: format!("searched {searched}: {}", listed.join(", ")),
        })
    }

    /// The directory the binaries are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The full path of one program (`pg_ctl`).
    pub fn program(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// `/usr/lib/postgresql/<version>/bin`, the newest version first.
fn debian_bin_dirs() -> Vec<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by_key(|v| std::cmp::Reverse(v.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The system user the PostgreSQL programs run as when Partita runs as
/// root.
#[derive(Debug, Clone)]
pub struct ServiceUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl ServiceUser {
    /// `None` when Partita does not run as root (PostgreSQL then runs as
    /// Partita's own user); else the user named by `$PARTITA_PG_USER`, by
    /// default `postgres`.
    pub fn for_this_process() -> Result<Option<Self>, EmbeddedError> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(None);
        }
        let name = std::env::var(USER_ENV).unwrap_or_else(|_| DEFAULT_SERVICE_USER.to_string());
        match nix::unistd::User::from_name(&name) {
            Ok(Some(user)) => Ok(Some(ServiceUser {
                name,
                uid: user.uid.as_raw(),
                gid: user.gid.as_raw(),
            })),
            _ => Err(EmbeddedError::NoServiceUser { user: name }),
        }
    }
}

/// Extra settings for the server, written to `partita.conf` beside the
/// ones that keep it private. Tests turn durability off for speed.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `name = value` lines, the value as PostgreSQL's configuration
    /// syntax wants it (`'off'`, `100`).
    pub extra: Vec<(String, String)>,
}

/// A running (or stopped) embedded PostgreSQL.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    bins: PgBinaries,
    pgdata: PathBuf,
    user: Option<ServiceUser>,
    /// Whether `initdb` ran in this start (a new cluster).
    initialized: bool,
    running: bool,
}

impl EmbeddedPostgres {
    /// Starts the server whose data directory is `pgdata` (created and
    /// initialized when it has no cluster yet), waiting until it accepts
    /// connections.
    pub fn start(
        bins: PgBinaries,
        pgdata: &Path,
        settings: &Settings,
    ) -> Result<Self, EmbeddedError> {
        let user = ServiceUser::for_this_process()?;
        let pgdata = std::path::absolute(pgdata).map_err(io_err("resolving the data directory"))?;
        let socket = pgdata.join(format!(".s.PGSQL.{PORT}"));
        let len = socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(EmbeddedError::SocketPathTooLong { path: socket, len });
        }
        let mut pg = EmbeddedPostgres {
            bins,
            pgdata,
            user,
            initialized: false,
            running: false,
        };
        pg.prepare_directory()?;
        if !pg.pgdata.join("PG_VERSION").exists() {
            pg.initdb()?;
            pg.initialized = true;
        }
        pg.write_conf(settings)?;
        pg.clear_leftover()?;
        pg.pg_ctl_start()?;
        pg.running = true;
        Ok(pg)
    }

    /// The data directory (`DATA_DIR/postgres`), which also holds the socket.
    pub fn pgdata(&self) -> &Path {
        &self.pgdata
    }

    /// Whether this start ran `initdb` (the directory had no cluster).
    pub fn initialized(&self) -> bool {
        self.initialized
    }

    /// The user the server runs as, when Partita runs as root.
    pub fn service_user(&self) -> Option<&ServiceUser> {
        self.user.as_ref()
    }

    /// How to connect to `database` as the superuser, over the socket.
    pub fn connect_options(&self, database: &str) -> PgConnectOptions {
        PgConnectOptions::new()
            .socket(&self.pgdata)
            .port(PORT)
            .username(SUPERUSER)
            .database(database)
    }

    /// A URL for the same (`postgres://partita@localhost/DB?host=DIR`), for
    /// tools such as psql or the sqlx macros.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@localhost/{database}?host={}&port={PORT}",
            self.pgdata.display()
        )
    }

    /// The postmaster's process ID, read from `postmaster.pid`.
    pub fn postmaster_pid(&self) -> Option<i32> {
        read_postmaster_pid(&self.pgdata)
    }

    /// A command for one of the PostgreSQL programs, run as the service
    /// user when Partita runs as root.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bins.program(program));
        if let Some(user) = &self.user {
            cmd.uid(user.uid).gid(user.gid);
        }
        // The server's messages in English, whatever the caller's locale,
        // so that errors read the same everywhere.
        cmd.env("LC_MESSAGES", "C").stdin(Stdio::null());
        cmd
    }

    /// Stops the server (`pg_ctl stop -m fast`: running transactions are
    /// rolled back, then it shuts down cleanly) and waits until it is gone.
    pub fn stop(&mut self) -> Result<(), EmbeddedError> {
        if !self.running {
            return Ok(());
        }
        self.running = false;
        self.pg_ctl_stop()
    }

    fn prepare_directory(&self) -> Result<(), EmbeddedError> {
        let parent = self.pgdata.parent().unwrap_or(Path::new("/"));
        fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
        if let Some(user) = &self.user {
            // The service user must pass through the parent (the data dir,
            // which keeps admin.token at mode 0600) to reach its own
            // directory: others may traverse it, not list it.
            let mode = fs::metadata(parent)
                .map_err(io_err(format!("reading {}", parent.display())))?
                .permissions()
                .mode();
            if mode & 0o001 == 0 {
                fs::set_permissions(parent, fs::Permissions::from_mode((mode & 0o7777) | 0o001))
                    .map_err(io_err(format!("chmod o+x {}", parent.display())))?;
            }
            let status = Command::new("test")
                .arg("-x")
                .arg(parent)
                .uid(user.uid)
                .gid(user.gid)
                .status()
                .map_err(io_err("running test -x as the PostgreSQL user"))?;
            if !status.success() {
                return Err(EmbeddedError::Unreachable {
                    user: user.name.clone(),
                    dir: parent.to_path_buf(),
                });
            }
        }
        if !self.pgdata.exists() {
            fs::create_dir(&self.pgdata)
                .map_err(io_err(format!("creating {}", self.pgdata.display())))?;
        }
        if let Some(user) = &self.user {
            chown(&self.pgdata, Some(user.uid), Some(user.gid))
                .map_err(io_err(format!("chown {}", self.pgdata.display())))?;
        }
        // PostgreSQL wants its directory private to its owner.
        fs::set_permissions(&self.pgdata, fs::Permissions::from_mode(0o700))
            .map_err(io_err(format!("chmod 700 {}", self.pgdata.display())))?;
        Ok(())
    }

    fn initdb(&self) -> Result<(), EmbeddedError> {
        tracing::info!(dir = %self.pgdata.display(), "initializing a new PostgreSQL cluster (initdb)");
        let output = self
            .command("initdb")
            .arg("--pgdata")
            .arg(&self.pgdata)
            .args(["--username", SUPERUSER])
            // Only Partita can reach the socket (it sits in a directory
            // private to the server's user), so no password is needed.
            .args(["--auth", "trust", "--encoding", "UTF8", "--locale", "C"])
            .arg("--no-instructions")
            .output()
            .map_err(io_err("running initdb"))?;
        check(&output, "initdb")?;
        let conf = self.pgdata.join("postgresql.conf");
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(&conf)
            .map_err(io_err(format!("opening {}", conf.display())))?;
        writeln!(
            file,
            "\n# Partita's settings (rewritten at each start)\ninclude_if_exists = 'partita.conf'"
        )
        .map_err(io_err(format!("writing {}", conf.display())))?;
        Ok(())
    }

    /// Writes `partita.conf`: no TCP, the socket in the data directory
    /// (its absolute path, so it follows a moved data dir), and `settings`.
    fn write_conf(&self, settings: &Settings) -> Result<(), EmbeddedError> {
        let mut text = String::from(
            "# Written by Partita at each start: edits here are lost.\n\
             listen_addresses = ''\n",
        );
        text.push_str(&format!(
            "unix_socket_directories = '{}'\nport = {PORT}\n",
            self.pgdata.display().to_string().replace('\'', "''")
        ));
        for (name, value) in &settings.extra {
            text.push_str(&format!("{name} = {value}\n"));
        }
        let path = self.pgdata.join("partita.conf");
        fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))?;
        if let Some(user) = &self.user {
            chown(&path, Some(user.uid), Some(user.gid))
                .map_err(io_err(format!("chown {}", path.display())))?;
        }
        Ok(())
    }

    /// Deals with a `postmaster.pid` left by an earlier run. When its
    /// process is still a running postgres (Partita was killed and its
    /// server lived on), that server is stopped, to be started afresh.
    /// When it is not (the server was killed too, or the machine
    /// rebooted), the file is stale and is removed: PostgreSQL would
    /// refuse to start if its PID now belonged to another process.
    fn clear_leftover(&self) -> Result<(), EmbeddedError> {
        let Some(pid) = read_postmaster_pid(&self.pgdata) else {
            return Ok(());
        };
        if is_postgres_process(pid) {
            tracing::warn!(
                pid,
                "a PostgreSQL from an earlier run still runs in this data directory: stopping it"
            );
            return self.pg_ctl_stop();
        }
        // The socket's lock file names the same PID (which may linger as
        // a zombie, which PostgreSQL would take for a live server).
        tracing::warn!(
            pid,
            "removing a stale postmaster.pid and socket lock (their server is gone)"
        );
        for name in [
            "postmaster.pid".to_string(),
            format!(".s.PGSQL.{PORT}.lock"),
            format!(".s.PGSQL.{PORT}"),
        ] {
            let path = self.pgdata.join(name);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(format!("removing {}", path.display()))(e)),
            }
        }
        Ok(())
    }

    fn log_path(&self) -> PathBuf {
        self.pgdata.join("server.log")
    }

    fn pg_ctl_start(&self) -> Result<(), EmbeddedError> {
        let deadline = Instant::now() + STALE_SHMEM_WAIT;
        loop {
            let output = self
                .command("pg_ctl")
                .arg("start")
                .arg("--pgdata")
                .arg(&self.pgdata)
                .arg("--log")
                .arg(self.log_path())
                .args([
                    "--wait",
                    "--timeout",
                    &PG_CTL_TIMEOUT_SECS.to_string(),
                    "--silent",
                ])
                // pg_ctl's server inherits these: no stray output into ours.
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output()
                .map_err(io_err("running pg_ctl start"))?;
            if output.status.success() {
                return Ok(());
            }
            let log = self.log_tail();
            // A killed server's children can hold its shared memory for a
            // moment after it died; PostgreSQL then refuses to start.
            if log.contains("pre-existing shared memory block") && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            return Err(EmbeddedError::Command {
                what: "pg_ctl start".into(),
                status: output.status.to_string(),
                detail: format!(
                    "{}; the end of {}:\n{log}",
                    String::from_utf8_lossy(&output.stderr).trim(),
                    self.log_path().display()
                ),
            });
        }
    }

    fn pg_ctl_stop(&self) -> Result<(), EmbeddedError> {
        let output = self
            .command("pg_ctl")
            .arg("stop")
            .arg("--pgdata")
            .arg(&self.pgdata)
            .args([
                "--mode",
                "fast",
                "--wait",
                "--timeout",
                &PG_CTL_TIMEOUT_SECS.to_string(),
                "--silent",
            ])
            .output()
            .map_err(io_err("running pg_ctl stop"))?;
        check(&output, "pg_ctl stop")
    }

    /// The last lines of the server's log, for error messages.
    fn log_tail(&self) -> String {
        let text = fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        if let Err(err) = self.stop() {
            tracing::error!(%err, "stopping the embedded PostgreSQL");
        }
    }
}

fn check(output: &Output, what: &str) -> Result<(), EmbeddedError> {
    if output.status.success() {
        return Ok(());
    }
    let mut detail = String::from_utf8_lossy(&output.stderr).trim().to_string();
    if detail.is_empty() {
        detail = String::from_utf8_lossy(&output.stdout).trim().to_string();
    }
    Err(EmbeddedError::Command {
        what: what.into(),
        status: output.status.to_string(),
        detail,
    })
}

/// The PID on the first line of `pgdata/postmaster.pid`, if any.
pub fn read_postmaster_pid(pgdata: &Path) -> Option<i32> {
    let text = fs::read_to_string(pgdata.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// Whether process `pid` is alive and runs a `postgres` binary. A zombie
/// (killed, not yet reaped) has no `exe` link, so it does not count.
pub fn is_postgres_process(pid: i32) -> bool {
    fs::read_link(format!("/proc/{pid}/exe"))
        .is_ok_and(|exe| exe.file_name().is_some_and(|n| n == "postgres"))
}
