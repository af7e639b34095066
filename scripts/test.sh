#!/usr/bin/env bash
# The whole test suite: what README.md's test command and CI run.
# The Rust workspace (format, lints, unit, property and integration tests),
# a quick comparison of its outputs with the Go build's, the fuzz targets
# for a bounded time, then the Go build, which stays under go/ as the
# oracle until the port is done, with its own suite.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
echo "== equal to the Go build (scripts/compare-go --quick)"
scripts/compare-go --quick
if [ -x scripts/fuzz.sh ]; then
  echo "== fuzz targets (bounded)"
  scripts/fuzz.sh
fi
echo "== Go build (the oracle, go/)"
go/scripts/test.sh
