"""Section ``answers``: the public question sets through a real mount, beside issue 19's targets.

``scripts/answers.py`` does the work (real-model ingest of each corpus, every question asked
as ``ls .search/QUESTION/`` + a read of ``00-results.md``); this module turns each set's
overall figures into rows with the targets, and keeps its per-kind table for the report. The
sets the defaults were tuned on are marked in-sample; the held-out sets are the out-of-sample
figures.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from semfs.ingest.store import DEFAULT_K

from .config import Config
from .harness import REPO, CannotMeasure, logger
from .results import IN_SAMPLE, OUT_OF_SAMPLE, Results, Row

# Issue 19's targets, each public set: the answer in about 1 kB.
RESULTS_P50_BYTES = 1200
RESULTS_P95_BYTES = 2048
COST_BYTES = 1536
# (figure key in answers.summarise, row name, target, met, unit)
FIGURES: tuple[tuple[str, str, str, Callable[[float], bool] | None, str], ...] = (
    ("hit@1", "hit@1", "≥ 0.85", lambda v: v >= 0.85, ""),
    ("hit@3", "hit@3", "≥ 0.95", lambda v: v >= 0.95, ""),
    ("mrr", "MRR", "", None, ""),
    ("answer_in_results", "answer-in-results", "≥ 0.75", lambda v: v >= 0.75, ""),
    (
        "results_bytes_p50",
        "00-results.md bytes p50",
        "≤ 1.2 KB (1,200 B)",
        lambda v: v <= RESULTS_P50_BYTES,
        "B",
    ),
    (
        "results_bytes_p95",
        "00-results.md bytes p95",
        "≤ 2 KB (2,048 B)",
        lambda v: v <= RESULTS_P95_BYTES,
        "B",
    ),
    (
        "cost_bytes_mean",
        "bytes read to reach the answer, mean",
        "≤ 1.5 KB (1,536 B)",
        lambda v: v <= COST_BYTES,
        "B",
    ),
    ("listing_ms_p50", "query-dir listing p50 (fresh question)", "", None, "ms"),
    (
        "warm_listing_ms_p50",
        "query-dir listing p50 (same question again)",
        "≤ 50 ms",
        lambda v: v <= 50,
        "ms",
    ),
)
ROWS = tuple(name for _key, name, *_ in FIGURES)


def measure_answers(cfg: Config, res: Results) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    import answers

    questions = answers.SHARED / "datasets" / "doc-questions"
    missing = [s for s in answers.DEFAULT_SETS if not (questions / f"{s}.tsv").exists()]
    if missing:
        raise CannotMeasure(f"no question set {', '.join(missing)} under {answers.SHARED}")
    # The sets the defaults were tuned on, then those held out from tuning (where present).
    held_out = [s for s in answers.HELD_OUT_SETS if (questions / f"{s}.tsv").exists()]
    reports = answers.run(
        [*answers.DEFAULT_SETS, *held_out],
        cfg.workdir / "answers",
        "mount",
        log=lambda m: logger.info("%s", m),
    )
    for r in reports:
        corpus = f"{r.name} ({r.chunks} chunks)"
        sample = IN_SAMPLE if r.name in answers.DEFAULT_SETS else OUT_OF_SAMPLE
        for key, name, target, check, unit in FIGURES:
            if key not in r.overall:  # a figure answers.py does not report (yet)
                continue
            value = float(r.overall[key])
            res.add(
                Row(
                    "answers",
                    name,
                    corpus,
                    value=value,
                    unit=unit,
                    target=target,
                    met=check(value) if check else None,
                    sample="" if unit == "ms" else sample,  # speed was not tuned on them
                    chunks=r.chunks,
                    note=(
                        f"{int(r.overall['n'])} questions; default settings (hybrid, k {DEFAULT_K})"
                    ),
                )
            )
    res.details["answers_markdown"] = answers.markdown(reports, "mount")
    res.details["answers_misses"] = {r.name: r.misses for r in reports}
