#!/usr/bin/env bash
# Install semfs with its test and benchmark tools, then run lint, type checks and the test suite;
# then the tests that compare with torch, in a second venv (.venv-torch) with the [torch] extra.
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
ln -sfn ../../../ingest/front/__init__.py build/typecheck/semfs/__init__.py
.venv/bin/mypy
# The command reference, search syntax and agent guide in docs/ are generated from the code (see
# ARCHITECTURE.md): fail when they drift. `.venv/bin/cog -r README.md docs/cli.md docs/searching.md
# docs/agents.md` regenerates them.
.venv/bin/cog --check README.md docs/cli.md docs/searching.md docs/agents.md
# pytest exits 5 when it collects no test; set -e makes that a failure too. One worker per core
# (pytest-xdist), each a module at a time so that a module's shared store or mount is made
# once: the tests wait on mounts, daemons and subprocesses more than they compute.
.venv/bin/pytest -n auto --dist loadscope "$@"
# The suite above ran as the default install does, without torch (its tests marked `torch`
# skipped). Those tests compare the default model's torch-free graph with sentence-transformers
# on torch: they run in a second venv with the [torch] extra (SEMFS_TORCH_CHECK=0 skips this).
if [ "${SEMFS_TORCH_CHECK:-1}" != 0 ]; then
  SEMFS_VENV=.venv-torch scripts/setup.sh torch,test
  rc=0
  .venv-torch/bin/pytest -m torch -p no:cacheprovider "$@" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || exit "$rc"  # 5: arguments that select no torch test
fi
