#!/usr/bin/env bash
# Install semfs with its test and benchmark tools, then run lint, type checks and the test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -k mount -x
set -euo pipefail
cd "$(dirname "$0")/.."
# The bench extra too: CI runs the benchmark as a smoke test, plot included.
scripts/setup.sh test,bench
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# mypy finds modules by folder; `semfs` is a mapping (pyproject's [tool.setuptools]), so give
# it the installed layout as links.
mkdir -p build/typecheck/semfs
ln -sfn ../../../ingest build/typecheck/semfs/ingest
ln -sfn ../../../fusefs build/typecheck/semfs/fusefs
.venv/bin/mypy
# The README's command reference and search syntax are generated from the code (see
# ARCHITECTURE.md): fail when they drift. `.venv/bin/cog -r README.md docs/cli.md` regenerates them.
.venv/bin/cog --check README.md docs/cli.md
# pytest exits 5 when it collects no test; set -e makes that a failure too.
.venv/bin/pytest "$@"
