//! What the client commands (`submit`, `jobs`, `queue`, `cancel`,
//! `requeue`, `cluster`, `report`, `admin`) share (Go:
//! `go/cmd/partita/client.go`): the flags that say which server and which
//! token, and the helpers that print tables as Go's `tabwriter` does.
//!
//! The server is `--server`, else `$PARTITA_SERVER`, else
//! `http://127.0.0.1:8080`. The token is, first found:
//!
//! 1. `--token`;
//! 2. `DIR/admin.token` with `--data-dir DIR` (the data dir of `partita
//!    serve`, which writes its admin token there on the first start);
//! 3. `$PARTITA_TOKEN`;
//! 4. `./partita-data/admin.token` (`partita serve`'s default data dir).
//!
//! Go has no `--data-dir` on its clients and reads steps 1, 3 and 4 in that
//! order, flags before the environment; `--data-dir` is a flag too, so it
//! comes before `$PARTITA_TOKEN`: a command line that names a data dir
//! means that server's token, whatever the shell exports.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use tabwriter::TabWriter;

use super::usage_error;
use crate::client::Client;
use crate::db::bootstrap::ADMIN_TOKEN_FILE;

/// Where the client looks when neither `--server` nor `PARTITA_SERVER`
/// says.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";
/// `partita serve`'s default data dir, where the client looks for a token
/// when nothing else gives one.
pub const DEFAULT_DATA_DIR: &str = "partita-data";

/// The flags every client command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// server address (default $PARTITA_SERVER or http://127.0.0.1:8080)
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// API token (default DIR/admin.token with --data-dir, else $PARTITA_TOKEN, else ./partita-data/admin.token)
    #[arg(long)]
    pub token: Option<String>,
    /// the server's data dir: use the admin token it wrote there (DIR/admin.token)
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// print the API's JSON
    #[arg(long)]
    pub json: bool,
}

/// The server's base URL (no trailing slash), the token, and where the
/// token came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub base: String,
    pub token: String,
    pub token_from: String,
}

/// Finds the server and the token as the module documentation says. No
/// token is a usage error (exit 2), as in Go.
pub fn resolve(
    server: Option<&str>,
    token: Option<&str>,
    data_dir: Option<&Path>,
) -> anyhow::Result<Resolved> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut base = server
        .filter(|s| !s.is_empty())
        .map(String::from)
        .or_else(|| env("PARTITA_SERVER"))
        .unwrap_or_else(|| DEFAULT_SERVER.to_string());
    if !base.contains("://") {
        base = format!("http://{base}");
    }
    let base = base.trim_end_matches('/').to_string();
    let found = |token: String, from: String| {
        Ok(Resolved {
            base: base.clone(),
            token,
            token_from: from,
        })
    };
    if let Some(t) = token.filter(|t| !t.is_empty()) {
        return found(t.to_string(), "--token".into());
    }
    if let Some(dir) = data_dir {
        let file = dir.join(ADMIN_TOKEN_FILE);
        return match read_token(&file) {
            Ok(t) => found(t, file.display().to_string()),
            Err(why) => Err(usage_error(format!(
                "no token: --data-dir {}: {why} (is it the data dir of `partita serve`, started at least once?)",
                dir.display()
            ))),
        };
    }
    if let Some(t) = env("PARTITA_TOKEN") {
        return found(t, "$PARTITA_TOKEN".into());
    }
    let file = Path::new(DEFAULT_DATA_DIR).join(ADMIN_TOKEN_FILE);
    match read_token(&file) {
        Ok(t) => found(t, format!("./{}", file.display())),
        Err(_) => Err(usage_error(
            "no token: pass --token or --data-dir DIR (the server's), set PARTITA_TOKEN, or run where ./partita-data/admin.token is",
        )),
    }
}

/// The token in `file`, trimmed; why not when it cannot be read or is
/// empty.
fn read_token(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("{} is empty", file.display()));
    }
    Ok(token.to_string())
}

/// A client of the server the flags name, with its token.
pub fn connect(args: &ClientArgs) -> anyhow::Result<Client> {
    let r = resolve(
        args.server.as_deref(),
        args.token.as_deref(),
        args.data_dir.as_deref(),
    )?;
    let client = Client::new(&r.base, &r.token).map_err(usage_error)?;
    Ok(client.with_token_from(&r.token_from))
}

/// A table as Go's `tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)` writes it.
pub fn table(out: &mut dyn Write) -> TabWriter<&mut dyn Write> {
    TabWriter::new(out).minwidth(0).padding(2)
}

/// A time as Go's `Format(time.RFC3339)` writes a UTC time:
/// "2026-01-02T03:04:05Z".
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// How long before `now` `t` was, as Go's
/// `now.Sub(t).Round(time.Second).String()` writes it: "1h2m3s".
pub fn ago(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - t).num_milliseconds() as f64 / 1000.0;
    // Go's Round(time.Second): halves away from zero.
    let secs = secs.round() as i64;
    partita_engine::scenario::duration::format_duration(secs.saturating_mul(1_000_000_000))
}

/// At most `n` characters of `s`, the last one "…" when cut (Go's
/// `shorten`, which counts bytes; characters here, so that a cut never
/// splits one).
pub fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// "-" for an empty string (Go's `orDash`).
pub fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_come_before_the_environment_and_the_default_file() {
        // Only what the flags decide: the environment is the process's,
        // shared by the tests running beside this one.
        let r = resolve(Some("127.0.0.1:9/"), Some("t"), None).unwrap();
        assert_eq!(r.base, "http://127.0.0.1:9");
        assert_eq!((r.token.as_str(), r.token_from.as_str()), ("t", "--token"));

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("admin.token"), "pt_abc\n").unwrap();
        let r = resolve(Some("http://h:1"), None, Some(dir.path())).unwrap();
        assert_eq!(r.token, "pt_abc", "the file's token, trimmed");
        assert!(r.token_from.ends_with("admin.token"), "{}", r.token_from);
        // --token wins over --data-dir.
        let r = resolve(Some("http://h:1"), Some("t2"), Some(dir.path())).unwrap();
        assert_eq!(r.token, "t2");

        let empty = tempfile::tempdir().unwrap();
        let err = resolve(Some("http://h:1"), None, Some(empty.path())).unwrap_err();
        assert!(super::super::is_usage_error(&err));
        let msg = err.to_string();
        assert!(
            msg.starts_with("no token: --data-dir ") && msg.contains("admin.token"),
            "{msg}"
        );
        std::fs::write(empty.path().join("admin.token"), " \n").unwrap();
        let msg = resolve(Some("http://h:1"), None, Some(empty.path()))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("is empty"), "{msg}");
    }

    #[test]
    fn helpers_print_as_go() {
        let t = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.678Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(rfc3339(t), "2026-01-02T03:04:05Z");
        let later = t + chrono::Duration::milliseconds(3_723_600);
        assert_eq!(ago(t, later), "1h2m4s");
        assert_eq!(ago(t, t), "0s");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abcd", 4), "abcd");
        assert_eq!(shorten("ééééé", 3), "éé…");
        assert_eq!(or_dash(""), "-");
        assert_eq!(or_dash("x"), "x");
    }
}
