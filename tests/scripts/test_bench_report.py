"""BENCHMARKS.md as scripts/bench.py writes it: the targets table, and the sections measured by
other scripts (after the kept marker) carried over unchanged by a regeneration."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))

from benchmarks.config import parse_args
from benchmarks.report import KEPT_MARKER, write_outputs
from benchmarks.results import IN_SAMPLE, OUT_OF_SAMPLE, Results, Row

KEPT = f"""{KEPT_MARKER}

## 9. grep: measured by scripts/bench_grep.py

| corpus | result |
|---|---|
| 100k | 18.1x, measured 2026-11-30 |
"""


def _meta() -> dict[str, object]:
    machine = {
        "nproc": 2,
        "cpu": "test",
        "ram_gb": 1.0,
        "python": "3",
        "kernel": "k",
        "loadavg_start": [0.5, 0, 0],
        "loadavg_end": [0.7, 0, 0],
    }
    return {
        "date": "2026-11-30T08:00:00+00:00",
        "command": "scripts/bench.py",
        "duration_s": 2400.0,
        "machine": machine,
        "workdir_fs": "ext4",
    }


def _results() -> Results:
    res = Results()
    res.add(
        Row(
            "reading",
            "grep -r (warm)",
            "synthetic 100k",
            value=900.0,
            unit="ms",
            baseline="native",
            baseline_value=300.0,
            ratio=3.0,
            target="≤ 4x",
            met=True,
        )
    )
    res.add(
        Row("memory", "daemon peak RSS, model not loaded", "synthetic 100k", value=680.0, unit="MB")
    )
    res.rows[-1].target, res.rows[-1].met = "≤ 300 MB", False
    res.skipped("answers", "hit@1", "fastapi-docs, mem0-docs", "not run (--no-answers)")
    return res


def test_regeneration_keeps_the_separately_measured_sections(tmp_path: Path) -> None:
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# semfs benchmarks\n\n## 1. Ingest\n\nold figures\n\n" + KEPT)
    cfg = parse_args(
        ["--markdown", str(md), "--out", str(tmp_path / "r.json"), "--workdir", str(tmp_path)]
    )
    write_outputs(cfg, _results(), _meta())
    text = md.read_text()
    assert "old figures" not in text
    assert text.count(KEPT_MARKER) == 1
    assert text.rstrip().endswith(KEPT.rstrip())
    assert text.index("## Targets") < text.index("## 1. Ingest") < text.index(KEPT_MARKER)
    # Each target's figure in the summary: the ratio for a ratio target, else the value.
    assert "| grep -r (warm) | synthetic 100k | 3.00x | ≤ 4x | ✓ met |" in text
    assert "| 680 MB | ≤ 300 MB | ✗ MISSED |" in text
    assert "hit@1 | fastapi-docs, mem0-docs | — | | skipped: not run (--no-answers) |" in text
    assert "kept as they are" in text or "keeps them as they are" in text
    # A second regeneration keeps them again, once.
    write_outputs(cfg, _results(), _meta())
    assert md.read_text().count(KEPT_MARKER) == 1


def test_a_new_report_has_no_kept_part(tmp_path: Path) -> None:
    md = tmp_path / "quick.md"
    args = ["--quick", "--markdown", str(md), "--out", str(tmp_path / "q.json")]
    cfg = parse_args([*args, "--workdir", str(tmp_path)])
    write_outputs(cfg, _results(), _meta())
    text = md.read_text()
    assert KEPT_MARKER not in text
    assert "## Targets" in text and "## 8. Answers" in text


def test_figures_say_whether_the_defaults_were_tuned_on_their_data(tmp_path: Path) -> None:
    res = _results()
    for corpus, sample in (("fastapi-docs (3352 chunks)", IN_SAMPLE), ("mintlify-docs", "")):
        res.add(Row("answers", "hit@1", corpus, value=0.9, target="≥ 0.88", met=True))
        res.rows[-1].sample = sample or OUT_OF_SAMPLE
    md = tmp_path / "quick.md"
    args = ["--quick", "--markdown", str(md), "--out", str(tmp_path / "q.json")]
    write_outputs(parse_args([*args, "--workdir", str(tmp_path)]), res, _meta())
    text = md.read_text()
    tuned = "0.900 <br><sub>in-sample: tuned on these questions</sub>"
    held = "0.900 <br><sub>out-of-sample: no default was chosen on these questions</sub>"
    # Beside the figure in the targets table and in the section, and said what it means.
    assert text.count(f"| fastapi-docs (3352 chunks) | {tuned} |") == 2, text
    assert text.count(f"| mintlify-docs | {held} |") == 2, text
    assert "*In-sample*: the excerpt budgets and weights, `DEFAULT_K` and `STRENGTH_FIT`" in text
    assert "| grep -r (warm) | synthetic 100k | 3.00x |" in text  # other figures: no label
