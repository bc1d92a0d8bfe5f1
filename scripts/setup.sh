#!/usr/bin/env bash
# Install semfs into ./.venv on Debian/Ubuntu: FUSE from apt, then the project (no torch: the
# default model runs on ONNX Runtime). On macOS: FUSE-T (or an installed macFUSE) and the tools
# from Homebrew, never apt (that branch has not been run on a Mac: CI runs Linux).
# Usage: scripts/setup.sh [EXTRA]   (EXTRA: any of test, bench, torch, comma-separated)
# The torch extra (other sentence-transformers models; the check of the default model against
# torch) installs PyTorch first, CPU-only where there is no NVIDIA GPU.
# Env: SEMFS_VENV (default .venv), SEMFS_TORCH_SPEC (default torch==2.13.0), SEMFS_TORCH_INDEX
# (the pip index of CPU-only torch wheels; default PyTorch's own, https://download.pytorch.org/whl/cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:-}"
venv="${SEMFS_VENV:-.venv}"

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

if [ "$(uname -s)" = Darwin ]; then
  # macOS: a FUSE library where semfs looks for one (ingest/portable.py: macFUSE's
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
# The linker's cache, read once: `ldconfig -p | grep -q` under pipefail fails when grep stops
# reading early (ldconfig dies of SIGPIPE), which reported a listed libfuse2 missing. ldconfig
# is in /sbin, which a user's PATH may lack.
libs=$({ command -v ldconfig >/dev/null && ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null || true)
[[ "$libs" == *libfuse.so.2* ]] || missing+=(libfuse2)
# libfuse 3's library: the mount prefers it (kernel cache invalidation; see fusefs/mount/bindings.py).
[[ "$libs" == *libfuse3.so.3* ]] || missing+=(libfuse3-3)
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
# Commands the README and docs/ tell you to run, as command:apt-package (tests/test_setup.py
# checks the docs against this list): getfattr reads a mount's freshness attributes.
DOC_TOOLS="getfattr:attr"
for pair in $DOC_TOOLS; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
# Commands the tests run, as command:apt-package (tests/test_setup.py checks this list against
# the tests). coreutils, diffutils, findutils, grep and dash are Essential on Debian; ps and
# sysctl (procps) and setpriv (util-linux, the other-user tests) are listed all the same, as a
# minimal image may lack them and their tests would skip.
TEST_TOOLS="rg:ripgrep mount:mount umount:mount rsync:rsync git:git mkfs.ext4:e2fsprogs ps:procps sysctl:procps setpriv:util-linux flock:util-linux man:man-db"
# Libraries the tests load, as soname:apt-package: libbsd's getpeereid stands in for macOS's.
TEST_LIBS="libbsd.so.0:libbsd0"
if [[ ",$extra," == *,test,* ]]; then
  for pair in $TEST_TOOLS; do
    command -v "${pair%%:*}" >/dev/null || [ -x "/usr/sbin/${pair%%:*}" ] || [ -x "/sbin/${pair%%:*}" ] || missing+=("${pair#*:}")
  done
  for pair in $TEST_LIBS; do
    [[ "$libs" == *"${pair%%:*}"* ]] || missing+=("${pair#*:}")
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
    # Another apt (unattended-upgrades, often, on a fresh machine) may hold the dpkg lock:
    # wait for it, up to 10 minutes, rather than fail at once; apt says it is waiting.
    wait_lock=(-o DPkg::Lock::Timeout=600)
    sudo_ apt-get "${wait_lock[@]}" update -qq
    sudo_ env DEBIAN_FRONTEND=noninteractive apt-get "${wait_lock[@]}" install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: please install ${missing[*]} (FUSE, python venv, test tools) with your package manager" >&2
  fi
fi
fi  # Darwin / Linux

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# pip install, with a line on stderr per package it collects and for what it installed: a
# quiet pip said nothing for ten minutes on a busy machine. Its whole output is shown only
# when it fails.
pip_progress() {
  local log rc
  log=$(mktemp)
  set +e
  "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
    | tee "$log" \
    | grep --line-buffered -E '^(Obtaining|Collecting|Processing|  Installing build dep|Building wheel|Installing collected)' \
    | sed -u -e 's/ (from .*//' -e 's/^ *\(.\{120\}\).*/\1 .../' -e 's/^ */setup: pip: /' >&2
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -eq 0 ] || grep -v '^WARNING: Location' "$log" >&2
  rm -f "$log"
  return "$rc"
}
if [[ ",$extra," == *,torch,* ]]; then
  # sentence-transformers needs torch, and PyPI's Linux x86_64 torch is a CUDA build (~3 GB with
  # its nvidia-* packages): install torch first, from PyTorch's CPU-only index unless the
  # machine has an NVIDIA GPU. Where that index cannot be reached, the default index's build it
  # is, and the line after the install says which build that was and its size.
  torch_spec="${SEMFS_TORCH_SPEC:-torch==2.13.0}"
  cpu_index="${SEMFS_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
  if ! "$venv/bin/python" -c 'import importlib.util as u; exit(u.find_spec("torch") is None)'; then
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
      echo "setup: an NVIDIA GPU is here: installing $torch_spec from the default index" >&2
      pip_progress "$torch_spec"
    elif "$venv/bin/python" - "$cpu_index" <<'PY'
import os, ssl, sys, urllib.request
context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
try:  # the index page of torch: a second at most when the host answers
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=15, context=context)
except Exception as exc:
    print(f"setup: PyTorch's CPU-only index {sys.argv[1]} cannot be reached ({exc})", file=sys.stderr)
    sys.exit(1)
PY
    then
      echo "setup: installing $torch_spec from PyTorch's CPU-only index $cpu_index" >&2
      pip_progress --index-url "$cpu_index" "$torch_spec"
    else
      echo "setup: installing $torch_spec from the default index instead" >&2
      pip_progress "$torch_spec"
    fi
  fi
  # What is installed, read off the files (importing torch takes seconds): "(CPU)" only if it is.
  "$venv/bin/python" - <<'PY' >&2
import importlib.metadata as md, re
torch = md.distribution("torch")
version = (torch.locate_file("torch/version.py")).read_text()
cuda = re.search(r"^cuda\b[^=]*=\s*'([^']+)'", version, re.M)
heavy = [d for d in md.distributions() if re.match(r"(torch|triton|nvidia-|cuda-)", d.metadata["Name"].lower())]
mb = sum(f.size or 0 for d in heavy for f in d.files or ()) / 1e6
build = f"a CUDA {cuda.group(1)} build" if cuda else "the CPU-only build"
others = sorted(d.metadata["Name"] for d in heavy if d.metadata["Name"].lower() != "torch")
print(f"setup: torch {torch.version} is {build}: {mb:,.0f} MB installed"
      + (f" with {len(others)} CUDA packages ({', '.join(others[:3])}, ...)" if others else ""))
PY
fi
echo "setup: installing semfs${extra:+[$extra]} into $venv" >&2
pip_progress -e ".${extra:+[$extra]}" || exit 1
"$venv/bin/semfs" --version >/dev/null
# An editable install leaves out the package's data files: link semfs(1) where `man` looks for
# the pages of the commands on PATH (bin/../share/man), as a wheel's install puts it.
mkdir -p "$venv/share/man/man1" && ln -sfn "$PWD/man/semfs.1" "$venv/share/man/man1/semfs.1"
# The venv's size, and what takes most of it (installed files, as pip recorded them).
"$venv/bin/python" - "$venv" <<'PY' >&2
import importlib.metadata as md, pathlib, subprocess, sys
venv = sys.argv[1]
total = int(subprocess.run(["du", "-sm", venv], capture_output=True, text=True).stdout.split()[0])
sizes = sorted(
    ((sum(f.size or 0 for f in d.files or ()) / 1e6, d.metadata["Name"]) for d in md.distributions()),
    reverse=True,
)
largest = ", ".join(f"{name} {mb:.0f}" for mb, name in sizes[:5])
# An editable install keeps the packaged model's files in the checkout, not in the venv.
folder = pathlib.Path("ingest/embedding/all-MiniLM-L6-v2")
model = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6
beside = f"; the model's files, {model:.0f} MB, are in ingest/embedding/ of this checkout" if model else ""
print(f"setup: done: {venv} is {total:,} MB (largest, MB: {largest}){beside}")
print(f"setup: run {venv}/bin/semfs, or: source {venv}/bin/activate")
PY
