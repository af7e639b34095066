#!/usr/bin/env bash
# Runs each cargo-fuzz target in fuzz/ for a bounded time, seeded with the
# parsers' test fixtures, and exits non-zero if any target finds a crash
# (libFuzzer leaves the input under fuzz/artifacts/TARGET/).
#
#   scripts/fuzz.sh                  every target, 30 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh  longer
#   scripts/fuzz.sh trace_pods       only the targets named
#
# Needs a nightly toolchain (libFuzzer's instrumentation); without one it
# says so and exits 0. Installs cargo-fuzz when it is missing.
set -euo pipefail

cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-30}"

# One line per target: its name, then the files that seed its corpus.
targets=(
    "trace_nodes engine/src/trace/testdata/nodes_*.csv engine/src/trace/testdata/bad/nodes_*.csv"
    "trace_pods engine/src/trace/testdata/pods_*.csv engine/src/trace/testdata/bad/pods_*.csv"
    "mig_layout fuzz/seeds/mig_layout/*"
    "scenario_yaml scenarios/*.yaml go/internal/scenario/testdata/*.yaml go/internal/sim/mixed/testdata/*.yaml fuzz/seeds/scenario_yaml/*"
)

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: skipped: no nightly Rust toolchain (rustup toolchain install nightly)"
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install --locked cargo-fuzz
fi

shopt -s nullglob
failed=()
for line in "${targets[@]}"; do
    read -r name seeds <<<"$line"
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
        continue
    fi
    corpus="fuzz/corpus/$name"
    mkdir -p "$corpus"
    # $seeds is left unquoted on purpose: it holds globs.
    # shellcheck disable=SC2086
    for seed in $seeds; do
        cp "$seed" "$corpus/seed-$(basename "$seed")"
    done
    echo "fuzz: $name for ${seconds} s"
    # -a: debug assertions and overflow checks on, so that an overflow
    # is a crash here rather than a silent wrap in a release build.
    if ! cargo +nightly fuzz run -a "$name" "$corpus" -- -max_total_time="$seconds" -print_final_stats=1; then
        failed+=("$name")
    fi
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (inputs under fuzz/artifacts/)"
    exit 1
fi
echo "fuzz: no crash"
