#!/usr/bin/env bash
# Install semfs into ./.venv on Debian/Ubuntu: FUSE from apt, the CPU build of torch, then the
# project. On macOS: FUSE-T (or an installed macFUSE) and the tools from Homebrew, never apt
# (that branch has not been run on a Mac: CI runs Linux).
# Usage: scripts/setup.sh [EXTRA]   (EXTRA: test, bench or test,bench)
# Env: SEMFS_TORCH_SPEC (default torch==2.13.0), SEMFS_TORCH_INDEX (a pip index URL serving
# CPU-only torch wheels; without it pip takes torch from your default index).
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

if [ "$(uname -s)" = Darwin ]; then
  # macOS: a FUSE library where semfs looks for one (ingest/platform.py: macFUSE's
  # libfuse.2.dylib, else FUSE-T's libfuse-t.dylib). FUSE-T needs no kernel extension, so it is
  # what this installs; macFUSE (brew install --cask macfuse) works too, once its system
  # extension is allowed in System Settings.
  fuse=""
  for dir in /usr/local/lib /opt/homebrew/lib; do
    for name in libfuse.2.dylib libfuse-t.dylib; do [ -e "$dir/$name" ] && fuse="$dir/$name"; done
  done
  brew_pkgs=()
  if [[ ",$extra," == *,test,* ]]; then
    command -v rg >/dev/null || brew_pkgs+=(ripgrep)
    command -v rsync >/dev/null || brew_pkgs+=(rsync)
    command -v git >/dev/null || brew_pkgs+=(git)
  fi
  if [ -z "$fuse" ] || [ ${#brew_pkgs[@]} -gt 0 ]; then
    if ! command -v brew >/dev/null; then
      echo "setup: cannot proceed: install Homebrew (https://brew.sh), then run scripts/setup.sh again" >&2
      exit 1
    fi
    if [ -z "$fuse" ]; then
      echo "setup: installing FUSE-T with Homebrew (or install macFUSE: brew install --cask macfuse)" >&2
      brew tap macos-fuse-t/homebrew-cask
      brew install fuse-t
    fi
    [ ${#brew_pkgs[@]} -eq 0 ] || brew install "${brew_pkgs[@]}"
  fi
  if [[ ",$extra," == *,bench,* ]] && ! command -v bindfs >/dev/null; then
    echo "setup: no bindfs on macOS: the benchmark's C passthrough baseline is skipped" >&2
  fi
  python3 -c 'import ensurepip, venv' 2>/dev/null || {
    echo "setup: cannot proceed: python3 has no venv module; brew install python, then run again" >&2
    exit 1
  }
else
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
fi  # Darwin / Linux

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
