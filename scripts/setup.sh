#!/usr/bin/env bash
# Install semfs into ./.venv on Debian/Ubuntu: FUSE from apt, the CPU build of torch, then the
# project. Usage: scripts/setup.sh [EXTRA]   (EXTRA: test, bench or test,bench)
# Env: SEMFS_TORCH_SPEC (default torch==2.13.0), SEMFS_TORCH_INDEX (a pip index URL serving
# CPU-only torch wheels; without it pip takes torch from your default index).
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

missing=()
command -v fusermount3 >/dev/null || command -v fusermount >/dev/null || missing+=(fuse3)
ldconfig -p 2>/dev/null | grep -q 'libfuse.so.2' || missing+=(libfuse2)
# libfuse 3's library: the mount prefers it (kernel cache invalidation; see fusefs/mount/bindings.py).
ldconfig -p 2>/dev/null | grep -q 'libfuse3.so.3' || missing+=(libfuse3-3)
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
# Commands the README and docs/ tell you to run, as command:apt-package (tests/test_setup.py
# checks the docs against this list): getfattr reads a mount's freshness attributes.
DOC_TOOLS="getfattr:attr"
for pair in $DOC_TOOLS; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
# Commands the tests run, as command:apt-package (tests/test_setup.py checks this list against
# the tests). coreutils, diffutils, findutils, grep and dash are Essential on Debian.
TEST_TOOLS="rg:ripgrep mount:mount umount:mount rsync:rsync git:git"
if [[ ",$extra," == *,test,* ]]; then
  for pair in $TEST_TOOLS; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
  done
fi
# The benchmark's C passthrough baseline (scripts/benchmarks/reading.py). bindfs is GPL: the bench
# extra installs it as a tool to measure against, never the default install.
BENCH_TOOLS="bindfs:bindfs"
if [[ ",$extra," == *,bench,* ]]; then
  for pair in $BENCH_TOOLS; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null; then
    echo "setup: installing ${missing[*]} with apt-get" >&2
    sudo_ apt-get update -qq
    sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: please install ${missing[*]} (FUSE, python venv, test tools) with your package manager" >&2
  fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
# sentence-transformers would pull a multi-GB CUDA torch if none is present: install the CPU one first.
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  echo "setup: installing ${SEMFS_TORCH_SPEC:-torch==2.13.0} (CPU)" >&2
  if [ -n "${SEMFS_TORCH_INDEX:-}" ]; then
    "${pip[@]}" --index-url "$SEMFS_TORCH_INDEX" "${SEMFS_TORCH_SPEC:-torch==2.13.0}"
  else
    "${pip[@]}" "${SEMFS_TORCH_SPEC:-torch==2.13.0}"
  fi
fi
echo "setup: installing semfs${extra:+[$extra]}" >&2
log=$(mktemp)
if ! "${pip[@]}" -e ".${extra:+[$extra]}" >"$log" 2>&1; then
  grep -v '^WARNING: Location' "$log" >&2; rm -f "$log"; exit 1
fi
rm -f "$log"
.venv/bin/semfs --version >/dev/null
echo "setup: done; run .venv/bin/semfs, or: source .venv/bin/activate" >&2
