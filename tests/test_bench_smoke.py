"""Smoke test of the benchmark: ``scripts/bench.py --quick`` runs and reports every section.

Every figure must be there, either measured or explicitly "skipped" with the reason (for
example when this machine cannot mount). This is how CI runs the
benchmark; the figures themselves are not checked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

SECTIONS = ("ingest", "mount", "reading", "search", "memory", "store", "backends", "answers")
# Figures each section must report (measured or "skipped"), per corpus where it applies.
REQUIRED = {
    "ingest": {"ingest throughput (real model)", "ingest throughput (hash stand-in)"},
    "mount": {"mount → first ls, p50", "mount → first ls, p90"},
    "reading": {
        "grep -r (cold)",
        "grep -r (warm)",
        "find",
        "cat of every file",
        "du -s",
        "8 parallel readers (xargs -P8 cat)",
    },
    "search": {"query-dir listing p50", "Searcher.search in-process p50"},
    "memory": {"daemon peak RSS, model not loaded", "daemon peak RSS, model loaded"},
    "store": {"bytes on disk per chunk", "Edge vs local: upsert all points"},
    # Not run by --quick (minutes of real-model work each): present as "skipped", with why.
    "backends": {"encode throughput, onnx-int8 vs torch"},
    "answers": {"hit@1"},
}
# The quick run is meant to take < 2 min on 2 cores; this only stops a hung run.
TIMEOUT = 300


@pytest.mark.mount
@pytest.mark.model
def test_quick_bench_reports_every_section(tmp_path: Path) -> None:
    out, markdown = tmp_path / "quick.json", tmp_path / "quick.md"
    cmd = [
        sys.executable,
        str(REPO / "scripts" / "bench.py"),
        "--quick",
        "--out",
        str(out),
        "--markdown",
        str(markdown),
    ]
    # Its scratch directory goes under tmp_path and is removed when the run ends.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        log, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the script unmounts on SIGTERM
        try:
            log, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            log, _ = proc.communicate()
        pytest.fail(f"bench.py --quick still running after {TIMEOUT} s:\n{log[-4000:]}")
    assert proc.returncode == 0, log[-4000:]

    data = json.loads(out.read_text())
    assert data["meta"]["mode"] == "quick"
    assert data["meta"]["machine"]["nproc"] >= 1
    for section in SECTIONS:
        rows = data["sections"][section]["rows"]
        assert rows, f"section {section} is empty"
        for row in rows:
            where = f"{section}: {row['what']} ({row['corpus']})"
            if row["status"] == "ok":
                assert isinstance(row["value"], (int, float)), where
            else:
                assert row["status"] == "skipped", f"{where}: {row['status']}: {row['reason']}"
                assert row["reason"].strip(), f"{where}: 'skipped' without a reason"
        missing = REQUIRED[section] - {row["what"] for row in rows}
        assert not missing, f"section {section} lacks {sorted(missing)}"

    text = markdown.read_text()
    assert all(f"## {n}." in text for n in range(1, 9)), text[:2000]
    assert "## Targets" in text
    assert "Machine:" in text
    assert markdown.with_suffix(".png").stat().st_size > 0
    with open("/proc/mounts") as mounts:
        assert str(tmp_path) not in mounts.read(), "the benchmark left a mount behind"
    assert not list(tmp_path.glob("semfs-bench-*")), "the scratch directory was not removed"
