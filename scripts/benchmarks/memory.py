"""Section ``memory``: the mount daemon's peak RSS with and without the model."""

from __future__ import annotations

import functools
import subprocess
import sys

from semfs.ingest.embedding.embedder import HASH_MODEL

from .harness import REPO
from .results import CorpusInfo, Results, Row

# -- memory --------------------------------------------------------------------------------


# Issue 11: the daemon without model weights stays under this at 100k chunks.
MEMORY_TARGET_MB = 300.0


def memory_without_model(info: CorpusInfo, mb: float) -> Row:
    big = info.big
    return Row(
        "memory",
        "daemon peak RSS, model not loaded",
        info.name,
        value=mb,
        unit="MB",
        baseline="a Python process that only imports the daemon's modules (the floor)",
        baseline_value=import_floor_mb(),
        ratio=mb / import_floor_mb(),
        ratio_note="÷ floor",
        chunks=info.chunks,
        target=f"≤ {MEMORY_TARGET_MB:g} MB" if big else "",
        met=mb <= MEMORY_TARGET_MB if big else None,
        note="VmHWM after mounting and every reading benchmark (hash stand-in store: no model "
        "weights)",
    )


def memory_with_model(info: CorpusInfo, mb: float, res: Results) -> Row:
    """Peak RSS after the searches, beside the same corpus's daemon without model weights."""
    before = [
        r.value
        for r in res.rows
        if r.what == "daemon peak RSS, model not loaded" and r.corpus == info.name and r.value
    ]
    note = "VmHWM after every reading benchmark and the query-dir listings"
    if info.model == HASH_MODEL:
        note += " (hash stand-in: there are no model weights to load)"
    return Row(
        "memory",
        "daemon peak RSS, model loaded",
        info.name,
        value=mb,
        unit="MB",
        baseline="the daemon without model weights (row above)",
        baseline_value=before[0] if before else None,
        ratio=mb / before[0] if before else None,
        ratio_note="with ÷ without",
        chunks=info.chunks,
        note=f"{note}; model {info.model}",
    )


@functools.cache
def import_floor_mb() -> float:
    """Peak RSS of a bare interpreter that imports the mount's modules (the wiring, the start,
    the unmounting and the log file, as `semfs mount` does): what any daemon costs."""
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forked parent across exec.
    code = (
        "import semfs.fusefs.mount.logfile, semfs.fusefs.mount.start; "
        "print(next(l.split()[1] for l in open('/proc/self/status') "
        "if l.startswith('VmHWM:')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(out.stdout.split()[-1]) / 1024
