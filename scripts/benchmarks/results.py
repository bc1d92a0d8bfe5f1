"""Rows of figures, each beside its baseline, and how a measurement that cannot run is recorded."""

from __future__ import annotations

import contextlib
import re
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .harness import SKIPPED, CannotMeasure, logger

# -- results -----------------------------------------------------------------------------

BIG_CHUNKS = 50_000  # from here a corpus is held to the targets issue 11 sets at 100k chunks
# Beside a figure measured on data that search defaults were chosen on (docs/search.md "What
# was tuned on what"): it says how well they fit, not how well they carry over.
IN_SAMPLE = "in-sample: tuned on these questions"
IN_SAMPLE_CRANFIELD = "in-sample: FUSION_CANDIDATES and DBSF fusion chosen on these queries"
OUT_OF_SAMPLE = "out-of-sample: no default was chosen on these questions"


@dataclass
class Row:
    """One figure beside its baseline. ``ratio`` is semfs / baseline in ``ratio_note``'s sense."""

    section: str
    what: str
    corpus: str
    value: float | None = None
    unit: str = ""
    baseline: str = ""
    baseline_value: float | None = None
    ratio: float | None = None
    ratio_note: str = ""
    target: str = ""
    met: bool | None = None
    status: str = "ok"  # "ok", "skipped", "error"
    # Whether defaults were chosen on this figure's data: IN_SAMPLE / OUT_OF_SAMPLE text, or "".
    sample: str = ""
    reason: str = ""
    note: str = ""
    chunks: int | None = None
    samples: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CorpusInfo:
    name: str
    source: Path  # the files semfs ingested; also the "native copy on local disk"
    store: Path
    model: str
    hash_store: Path | None = None  # the same files with the hash stand-in: a daemon w/o model
    files: int = 0
    bytes: int = 0
    chunks: int = 0
    grep_pattern: str = "the"
    note: str = ""

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", self.name).strip("-")

    @property
    def real(self) -> bool:
        """The real documentation corpus (mintlify-docs), not a synthetic size."""
        return not self.name.startswith("synthetic")

    @property
    def big(self) -> bool:
        """Held to issue 11's 100k-chunk targets."""
        return self.chunks >= BIG_CHUNKS

    def reps(self, reps: int) -> int:
        """Runs per reading measurement: at most 3 on big corpora, to fit the time budget."""
        return reps if self.chunks <= 20_000 else min(reps, 3)


class Results:
    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.corpora: list[CorpusInfo] = []
        self.details: dict[str, Any] = {}

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        logger.info("%s", _row_line(row))
        return row

    def skipped(self, section: str, what: str, corpus: str, reason: str) -> None:
        self.add(Row(section, what, corpus, status=SKIPPED, reason=reason))

    @contextlib.contextmanager
    def guard(
        self, section: str, whats: Sequence[str | tuple[str, str]], corpus: str
    ) -> Iterator[None]:
        """Run a measurement; on CannotMeasure or a crash, record ``whats`` not measured, with why.

        ``whats`` are names in ``section`` or ``(section, name)`` pairs."""
        before = {(r.section, r.what, r.corpus) for r in self.rows}
        try:
            yield
        except CannotMeasure as exc:
            self._fill(section, whats, corpus, before, SKIPPED, str(exc))
        except Exception as exc:
            logger.error("%s/%s on %s failed:\n%s", section, whats, corpus, traceback.format_exc())
            self._fill(section, whats, corpus, before, "error", f"{type(exc).__name__}: {exc}")

    def _fill(
        self,
        section: str,
        whats: Sequence[str | tuple[str, str]],
        corpus: str,
        before: set[tuple[str, str, str]],
        status: str,
        reason: str,
    ) -> None:
        done = {(r.section, r.what, r.corpus) for r in self.rows} - before
        for what in whats:
            sec, name = what if isinstance(what, tuple) else (section, what)
            if (sec, name, corpus) not in done:
                self.add(Row(sec, name, corpus, status=status, reason=reason))


def _row_line(row: Row) -> str:
    if row.status != "ok":
        return f"[{row.section}] {row.what} ({row.corpus}): {row.status}: {row.reason}"
    base = f" vs {row.baseline} {fmt(row.baseline_value, row.unit)}" if row.baseline else ""
    ratio = f" ratio {row.ratio:.2f}" if row.ratio is not None else ""
    return f"[{row.section}] {row.what} ({row.corpus}): {fmt(row.value, row.unit)}{base}{ratio}"


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "":
        return f"{value:.3f}" if abs(value) < 10 else f"{value:g}"
    if unit in ("ms", "s", "MB", "B") or unit.startswith("B/"):
        digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
        if unit == "s" and abs(value) < 10:
            digits = 3 if abs(value) < 1 else 2
        return f"{value:,.{digits}f} {unit}"
    if unit == "chunks/s":
        return f"{value:,.0f} chunks/s" if value >= 100 else f"{value:.1f} chunks/s"
    if unit == "bool":
        return "yes" if value else "no"
    return f"{value:g} {unit}".strip()
