"""A search request: the question, and how to run it, as one value every front end builds.

`semfs search`, a mount's ``.search/@k=5/QUESTION/`` folder and its ``.similar/`` folders, the
MCP search tool and the Python API each make a :class:`SearchRequest`; the library
(:meth:`semfs.ingest.search.Searcher.search`) runs it. So the defaults (``k``, the mode), the
checks of a value (a mode that exists, ``k`` within 1 to :data:`MAX_K`, a finite score floor)
and the one-line description a results file shows are written once, here.

Rules a caller may rely on:

* Building one checks it: a bad value raises :class:`~semfs.ingest.errors.SemfsError` with one
  line saying what is allowed, before any search runs.
* ``under`` is normalized (``"./deploy/"`` -> ``"deploy"``, the root -> None), so two
  spellings of one folder are one request (one cache entry of a mount).
* :meth:`SearchRequest.describe` is the settings line of every results file:
  ``hybrid · k 3 · min 0.2 · more · in deploy/``.
* The mode vocabulary is :data:`semfs.ingest.store.MODES` (name -> what it matches): a new
  mode is a row there and its query in the store's core; the CLI's ``--mode``, the ``@`` folder
  words, the MCP tool and this check follow from it.

Imports nothing but the store interface: a mount's start reads it.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, asdict, dataclass
from typing import Any

from semfs.ingest.errors import SemfsError
from semfs.ingest.store import DEFAULT_K, MAX_K, MODES

# The mode of a request that names none: meaning and words (dense + BM25, fused).
DEFAULT_MODE = "hybrid"
assert DEFAULT_MODE in MODES


def normalize_under(under: str | None) -> str | None:
    """``"deploy/"``, ``"./deploy"`` -> ``"deploy"``; the root -> None."""
    if under is None:
        return None
    parts = [p for p in under.strip().split("/") if p not in ("", ".")]
    return "/".join(parts) or None


@dataclass(frozen=True)
class SearchRequest:
    """One search: ``query`` (a question, or for ``symbol`` names), the ``k`` documents
    wanted, the ``mode``, a floor on match strength (``min_score``, 0-1), the folder to
    search ``under`` (None: everywhere), ``more`` (answering lines from more of the hits)
    and ``full`` (a results file with whole passages: the mount's ``@full``)."""

    query: str = ""
    _: KW_ONLY
    k: int = DEFAULT_K
    mode: str = DEFAULT_MODE
    min_score: float | None = None
    under: str | None = None
    more: bool = False
    full: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SemfsError(f"unknown mode {self.mode!r}: use one of {', '.join(MODES)}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or not 1 <= self.k <= MAX_K:
            raise SemfsError(f"k must be between 1 and {MAX_K}, not {self.k}")
        if self.min_score is not None and not math.isfinite(self.min_score):
            raise SemfsError(f"the score floor must be a finite number, not {self.min_score}")
        object.__setattr__(self, "under", normalize_under(self.under))

    @property
    def text(self) -> str:
        """The query as one line: its words joined by single spaces ("" for none)."""
        return " ".join(self.query.split())

    def describe(self, where: str | None = None) -> str:
        """The settings line: ``hybrid · k 3``, then only what is set (``· min 0.2``,
        ``· more``, ``· full passages``), then where it looked (``· in deploy/``, ``· in all``;
        ``where`` says it otherwise, as ``in guides/, faq/``)."""
        out = f"{self.mode} · k {self.k}"
        if self.min_score is not None:
            out += f" · min {self.min_score:g}"
        if self.more:
            out += " · more"
        if self.full:
            out += " · full passages"
        if where is None:
            where = f"in {self.under}/" if self.under else "in all"
        return f"{out} · {where}"

    def hit_fields(self) -> dict[str, Any]:
        """What the hits depend on, as plain values (``full`` only shapes a results file): what
        the owner's socket carries; ``SearchRequest(**fields)`` makes the search again."""
        fields = asdict(self)
        del fields["full"]
        return fields
