#!/usr/bin/env bash
# Install semfs with its test tools, then run lint, type checks and the test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -k mount -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# pytest exits 5 when it collects no test; set -e makes that a failure too.
.venv/bin/pytest "$@"
