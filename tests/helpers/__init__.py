"""What the tests share that is not a fixture: paths, the installed console script, users.

Imported as ``tests.helpers`` (pytest puts the repository root on ``sys.path``; see
pyproject's ``pythonpath``), never as ``conftest``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "tests" / "corpus" / "mintlify-sample"
SHARED = REPO.parent / "shared"
# The installed console script, beside this interpreter (tests run from the project venv).
SEMFS = str(Path(sys.executable).with_name("semfs"))


def shared_path(*parts: str) -> Path:
    """A path in ../shared, or skip the test with the reason when this clone has none."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (only beside the project's own checkout)")
    return path


def sample_subset(dst: Path, files: int = 12) -> Path:
    """A copy of the first ``files`` Markdown files of the sample corpus in ``dst``: several
    documents to rank, quick to embed with the real model."""
    for f in sorted(SAMPLE_CORPUS.rglob("*.md*"))[:files]:
        target = dst / f.relative_to(SAMPLE_CORPUS)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.read_bytes())
    return dst


# Another local user, for tests of what the store and the mount let others see.
NOBODY = 65534


# An exec wrapper that sets the open-files limit of the command it runs: not preexec_fn,
# which is unsafe beside threads.
_LIMITED = (
    "import os, resource, sys; n = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); os.execv(sys.argv[2], sys.argv[2:])"
)


def with_open_files(open_files: int | None) -> list[str]:
    """The command prefix that runs a command under ``open_files`` (None: nothing)."""
    return [] if open_files is None else [sys.executable, "-c", _LIMITED, str(open_files)]
