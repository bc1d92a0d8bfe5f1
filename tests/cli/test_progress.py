"""Progress of an ingest (semfs.fusefs.cli.progress and the pipeline's reports): the model's load
and its time, a bar redrawn at least once a second on a terminal, a plain line every
LOG_EVERY seconds elsewhere, and progress in model batches, not 256-chunk windows."""

from __future__ import annotations

import io
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from semfs.fusefs.cli.progress import IngestProgress, eta_text
from semfs.ingest.pipeline import ingest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import SAMPLE_CORPUS, SEMFS


def test_a_log_gets_a_line_every_interval_and_a_last_one() -> None:
    out = io.StringIO()
    progress = IngestProgress(out, tty=False, log_every=0.2)
    progress.on_load("some-model", None)
    progress.on_load("some-model", 1.25)
    progress.start(100)
    progress.advance(10)
    time.sleep(2.2)  # no batch ends meanwhile: the lines still come (ticks every 0.5 s)
    progress.advance(90)
    lines = out.getvalue().splitlines()
    time.sleep(0.6)
    progress.close()
    assert out.getvalue().splitlines() == lines  # nothing after the end
    assert lines[:2] == ["Loading model some-model ...", "Loaded model some-model in 1.2 s"]
    middle = [x for x in lines if x.startswith("Embedding: 10/100 chunks (10%)")]
    assert len(middle) >= 2, lines
    assert all(re.search(r"\d+\.\d chunks/s, ETA \d+:\d\d", x) for x in middle), middle
    assert lines[-1].startswith("Embedding: 100/100 chunks (100%)"), lines
    assert "\r" not in out.getvalue()


def test_a_terminal_bar_is_redrawn_while_a_batch_embeds() -> None:
    out = io.StringIO()
    progress = IngestProgress(out, tty=True)
    progress.start(50)
    progress.advance(5)
    before = out.getvalue().count("\r")
    time.sleep(1.6)  # one slow batch: the bar still moves (elapsed, rate, ETA)
    redraws = out.getvalue().count("\r") - before
    progress.advance(45)
    progress.close()
    assert redraws >= 2, out.getvalue()
    text = out.getvalue()
    assert "5/50" in text and "50/50" in text and "chunks/s" in text, text


def test_a_stop_as_the_bar_starts_leaves_nothing_to_join(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C or SIGTERM right when a pass's bar starts (the signal's KeyboardInterrupt raised
    as its ticker thread starts): close() still ends the display. Before, it raised
    "cannot join thread before it is started", and the ingest said that instead of what it
    kept (seen in CI under load)."""
    out = io.StringIO()
    progress = IngestProgress(out, tty=False)

    def interrupted(self: threading.Thread) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", interrupted)
    with pytest.raises(KeyboardInterrupt):
        progress.start(100)
    monkeypatch.undo()
    progress.close()  # no RuntimeError
    assert out.getvalue().startswith("Embedding: 0/100 chunks")


def test_eta_text() -> None:
    assert eta_text(62) == "1:02" and eta_text(3723) == "1:02:03" and eta_text(None) == "?"
    assert eta_text(float("nan")) == "?"


def test_the_pipeline_reports_every_file_and_every_model_batch(tmp_path: Path) -> None:
    """Two phases: the keyword pass counts files (one step each), the dense pass chunks in
    batch_size steps (it came in 256-chunk windows: a small folder went from 0 to 100 % at
    once), adding up to the chunks written."""
    phases: dict[str, int] = {}
    steps: dict[str, list[int]] = {}
    current = [""]

    def on_phase(name: str, total: int) -> None:
        phases[name] = total
        current[0] = name
        steps[name] = []

    def on_progress(n: int) -> None:
        steps[current[0]].append(n)

    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        report = ingest(
            SAMPLE_CORPUS,
            store,
            model="hash",
            batch_size=8,
            on_phase=on_phase,
            on_progress=on_progress,
        )
    files = len(report.added) + len(report.skipped)
    assert phases["reading"] == files and steps["reading"] == [1] * files
    assert phases["embedding"] == report.chunks_written
    assert sum(steps["embedding"]) == report.chunks_written
    assert len(steps["embedding"]) >= report.chunks_embedded // 8
    assert max(steps["embedding"]) <= 8


def test_cli_ingest_to_a_log_prints_progress_lines(tmp_path: Path) -> None:
    run = subprocess.run(
        [SEMFS, "ingest", str(SAMPLE_CORPUS), "--store", str(tmp_path / "s"), "-m", "hash"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert re.search(r"^Embedding: (\d+)/\1 chunks \(100%\)", run.stderr, re.M), run.stderr
    assert "\r" not in run.stderr
