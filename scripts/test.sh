#!/usr/bin/env bash
# The whole test suite: what README.md's test command and CI run.
# The Rust workspace (format, the sqlx query data, lints, unit, property and
# integration tests; the server's tests start their own PostgreSQL from
# Debian's `postgresql` package),
# a quick comparison of its outputs with the Go build's, the fuzz targets
# for a bounded time, then the Go build, which stays under go/ as the
# oracle until the port is done, with its own suite.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== sqlx offline data (.sqlx/) is current (scripts/sqlx-prepare --check)"
scripts/sqlx-prepare --check
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
