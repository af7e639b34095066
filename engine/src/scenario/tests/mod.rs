//! The Go build's scenario tests (go/internal/scenario/*_test.go), and a
//! comparison of every shipped scenario's jobs with the Go build's.

mod golden;
mod jobs;
mod nodes;
mod parse;
mod validate;

use super::{Error, Scenario, parse};

/// A small valid scenario; tests edit one line of it at a time, so the
/// line numbers in expected errors refer to this text.
pub(super) const BASE: &str = "name: t
duration: 24h
nodes:
  - group: h100
    count: 2
    gpu: H100-80GB
    gpus: 8
    mig: true
    cpu: 192
    memory: 2Ti
    leaves: [leaf-a, leaf-b]
teams:
  - name: search
    guaranteed_gpus: 8
    burst_gpus: 16
  - name: research
    guaranteed_gpus: 4
workloads:
  - name: chat
    team: search
    class: production
    profile: llm-7b-bf16
    arrival: {process: poisson, rate_per_hour: 30}
    duration: {dist: exponential, mean: 2h}
    replicas: 2
  - name: train
    team: research
    class: batch
    profile: pretrain-13b-worker
    arrival: {process: fixed, at: [0s, 10m]}
    duration: {dist: fixed, value: 1h}
    gang: {sizes: [4, 8], weights: [0.5, 0.5]}
    checkpoint_every: 30m
";

/// `text` with `old`, which must occur exactly once, replaced by `new`.
pub(super) fn edit(text: &str, old: &str, new: &str) -> String {
    let n = text.matches(old).count();
    assert_eq!(n, 1, "{old:?} occurs {n} times in the scenario, want once");
    text.replacen(old, new, 1)
}

pub(super) fn must_parse(text: &str) -> Scenario {
    parse(text, "t.yaml").unwrap_or_else(|e| panic!("parse: {e}"))
}

/// Checks that `result` failed with exactly the message `want`.
pub(super) fn want_error<T: std::fmt::Debug>(result: Result<T, Error>, want: &str) {
    match result {
        Ok(v) => panic!("got no error ({v:?}), want {want:?}"),
        Err(e) => assert_eq!(e.to_string(), want),
    }
}

/// The repository's root, for the shipped scenarios and docs.
pub(super) fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// Reads and parses a scenario file, named as the Go tests name it.
pub(super) fn load(path: &str, name: &str) -> Scenario {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse(data, name).unwrap_or_else(|e| panic!("{e}"))
}

/// Trace files read from disk, relative to the repository root when the
/// path is relative (the Go tests run in go/internal/scenario).
pub(super) fn files_from(root: std::path::PathBuf) -> impl FnMut(&str) -> Result<Vec<u8>, String> {
    move |path: &str| {
        let full = root.join(path);
        std::fs::read(&full).map_err(|e| super::go_open_error(path, &e))
    }
}

/// For scenarios without trace arrivals.
pub(super) fn no_files(path: &str) -> Result<Vec<u8>, String> {
    panic!("read {path}: no trace files expected")
}
