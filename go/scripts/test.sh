#!/usr/bin/env bash
# The whole test suite: what README.md's test command and CI run.
# Unit, property and integration tests of the main module (real SQLite
# files, real headless Chromium where installed), then the Kubernetes
# integration tests, which start a real kube-apiserver and etcd in-process
# from their own nested module.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== go vet"
go vet ./...
echo "== go test (main module)"
go test -count=1 ./...
echo "== go vet (scripts/fillbound, its own module)"
(cd scripts/fillbound && go vet ./...)
if [ -d test/integration ]; then
  echo "== go test (Kubernetes integration, test/integration)"
  (cd test/integration && go vet ./... && go test -count=1 -timeout 30m ./...)
fi
