//! `partita`, the one binary of Partita: the simulator and benchmarks, MIG
//! geometry, and (to come) the server, the CLI client and the Kubernetes
//! scheduler.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use clap::Parser;
use partita::cli;

fn main() -> ExitCode {
    // clap prints --help and exits 0, and prints a usage error and exits 2,
    // as Go's flag package does.
    let cli = cli::Cli::parse();
    let mut stdout = BufWriter::new(io::stdout().lock());
    // Not locked for the whole run: the server's log (tracing) writes to
    // stderr from other threads.
    let mut stderr = io::stderr();
    let result = cli::run(&cli, &mut stdout, &mut stderr).and_then(|()| Ok(stdout.flush()?));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // What was written before the error is kept, as in Go, which
            // writes unbuffered.
            let _ = stdout.flush();
            let _ = writeln!(stderr, "{}: {err:#}", cli.command.error_prefix());
            if cli::is_usage_error(&err) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
