"""The wheel installs like `llm`: `python -m build` makes an sdist and, from it, a wheel; `pip
install` of the wheel into a fresh venv gives a `semfs` (and `mount.semfs`, and `man semfs`)
that runs --version, ingest, search and mount on the sample corpus, with no torch installed,
and the package's metadata is complete. This is how CI builds both (scripts/test.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO, sample_subset
from tests.helpers.mounting import force_unmount, require_mount_marker, wait_mounted

# Building copies 90 MB twice and pip installs ~60 packages from the index: limits that only
# catch a hang on a loaded machine.
BUILD_TIMEOUT = 900
INSTALL_TIMEOUT = 1200


def _run(*args: str | Path, timeout: float = 300, **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False, **kw
    )
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


@pytest.mark.mount
@pytest.mark.model
def test_the_wheel_installs_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "build", "--outdir", dist, REPO, timeout=BUILD_TIMEOUT)
    wheels, sdists = sorted(dist.glob("semfs-*.whl")), sorted(dist.glob("semfs-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in dist.iterdir())

    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(meta_name).decode()
        entry_points = wheel.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    # The model's files, the man page and the licences are in it.
    assert "semfs/ingest/embedding/all-MiniLM-L6-v2/model.safetensors" in names
    assert "semfs/ingest/embedding/all-MiniLM-L6-v2/tokenizer.json" in names
    assert any(n.endswith(".data/data/share/man/man1/semfs.1") for n in names), names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert any(n.endswith("licenses/LICENSES/Apache-2.0.txt") for n in names)
    # The notice of markdownify, whose rules ingest/formats/htmlmd.py ports to lxml.
    assert any(n.endswith("licenses/LICENSES/markdownify-MIT.txt") for n in names)
    for field in ("License-Expression: MIT AND Apache-2.0", "Requires-Python: >=3.10"):
        assert field in metadata, field
    assert "Project-URL: Source, " in metadata, metadata[:2000]
    assert "Classifier: Topic :: System :: Filesystems" in metadata
    heavy = [
        line
        for line in metadata.splitlines()
        if line.startswith(("Requires-Dist: torch", "Requires-Dist: sentence-transformers"))
    ]
    assert heavy and all(line.endswith('extra == "torch"') for line in heavy), heavy
    assert "mount.semfs = semfs.fusefs.cli.mounthelper:main" in entry_points

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run(*pip, wheels[0], timeout=INSTALL_TIMEOUT)
    installed = _run(venv / "bin" / "python", "-m", "pip", "list", "--format=json").stdout
    packages = {p["name"].lower() for p in json.loads(installed)}
    assert not packages & {"torch", "sentence-transformers", "transformers"}, packages
    assert (venv / "bin" / "mount.semfs").exists()

    semfs = venv / "bin" / "semfs"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"SEMFS_MODEL_CACHE": str(tmp_path / "cache"), "SEMFS_STORE": str(tmp_path / "s")}
    version = _run(semfs, "--version", env=env, cwd=tmp_path).stdout
    # The front door: `import semfs` from the wheel (its __init__ is ingest/front/'s).
    front = "import semfs; print(semfs.open_collection.__module__, semfs.__file__)"
    found = _run(venv / "bin" / "python", "-c", front, env=env, cwd=tmp_path).stdout
    assert found.startswith("semfs.ingest.collection ") and str(venv) in found, found
    assert "onnxruntime" in version and "torch extra: not installed" in version, version

    source = sample_subset(tmp_path / "docs", 6)
    _run(semfs, "ingest", source, env=env, cwd=tmp_path, timeout=900)
    found = _run(semfs, "search", "custom domain", "--json", "-k", "3", env=env, cwd=tmp_path)
    assert json.loads(found.stdout), found.stdout
    status = _run(semfs, "status", "--json", env=env, cwd=tmp_path).stdout
    assert json.loads(status)["runtime"].startswith("onnxruntime "), status

    require_mount_marker("the wheel's `semfs mount`")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        log = tmp_path / "mount.log"
        _run(semfs, "mount", mnt, "--log-file", log, env=env, cwd=tmp_path, timeout=300)
        wait_mounted(mnt, None, log)
        assert sorted(os.listdir(mnt)) == sorted(os.listdir(source)), os.listdir(mnt)
    finally:
        subprocess.run([str(semfs), "umount", str(mnt)], env=env, timeout=120, check=False)
        force_unmount(mnt)

    # `man semfs` finds the page beside the venv's commands (bin/../share/man).
    man_env = {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"}
    man_env.pop("MANPATH", None)
    page = _run("man", "-w", "semfs", env=man_env).stdout.strip()
    assert Path(page) == venv / "share" / "man" / "man1" / "semfs.1", page
