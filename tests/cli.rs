//! The binary's exit codes and where its messages go, as the Go build's:
//! 0 after help, 2 for a usage error, 1 for a failed run with the
//! command's prefix on stderr.

use std::process::{Command, Output};

fn partita(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_goes_to_stdout_and_exits_0() {
    for args in [
        &["--help"][..],
        &["mig", "help"],
        &["bench", "fill", "--help"],
    ] {
        let out = partita(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(!out.stdout.is_empty(), "{args:?}: no help on stdout");
    }
}

#[test]
fn usage_errors_exit_2_with_the_flag_on_stderr() {
    let out = partita(&["bench", "fill", "--nodes", "n", "--pods", "p", "--nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--nope"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());

    let out = partita(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Usage"));
}

#[test]
fn a_failed_run_exits_1_with_the_commands_prefix() {
    let out = partita(&[
        "bench",
        "fill",
        "--nodes",
        "/nonexistent/nodes.csv",
        "--pods",
        "/nonexistent/pods.csv",
        "--quiet",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("bench fill: "),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_mig_flags_are_usage_errors_named_as_go_names_them() {
    // Checked after parsing, as the Go build does, so that an unknown
    // model is reported before a missing --want.
    for (args, want) in [
        (
            &["mig", "layouts"][..],
            "partita mig layouts: --gpu is required, e.g. --gpu H100-80GB\n",
        ),
        (
            &["mig", "fit", "--gpu", "H100-80GB"],
            "partita mig fit: --want is required, e.g. --want 1g.10gb\n",
        ),
    ] {
        let out = partita(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(text(&out.stderr), want);
    }
    let out = partita(&["mig", "fit", "--gpu", "T4"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("model \"T4\" does not support MIG"),
        "{}",
        text(&out.stderr)
    );
}
