"""What an ingest run did: :class:`IngestReport` (``semfs ingest --json``), and
:class:`Interrupted`, the Ctrl-C that carries it. :mod:`semfs.ingest.pipeline` fills it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from semfs.ingest.sources import Skipped
from semfs.ingest.unsearched import kind_of


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # Files added or updated that are stored as they are, not searched, and why (an image,
    # a binary, a scanned PDF): the mount serves them, a search never ranks them.
    unsearched: list[Skipped] = field(default_factory=list)
    # Documents that failed to read this time and keep their previous version (keep_failed).
    kept: list[str] = field(default_factory=list)
    # Paths the source's .gitignore and .ignore files leave out (a folder with a "/": not
    # entered), as ripgrep would (semfs.ingest.ignores).
    ignored: list[str] = field(default_factory=list)
    # Chunks given their dense vector by the model in this run (one per distinct text), and
    # chunks that took the stored vector of the same text instead.
    chunks_embedded: int = 0
    vectors_reused: int = 0
    # Chunks written by the keyword pass, and the documents it committed.
    chunks_written: int = 0
    committed: int = 0
    # Chunks still without a dense vector when the run ended (another process embeds them,
    # or dense=False), and who embeds them when it is not this run.
    dense_pending: int = 0
    dense_elsewhere: str = ""
    seconds: float = 0.0
    # When the last document was committed (s since the start): keyword-searchable from then.
    keywords_seconds: float = 0.0
    model: str = ""
    compacted: bool = False
    # Unchanged in the source but damaged in the store (verify): re-ingested.
    repaired: list[str] = field(default_factory=list)
    # What the user should know about the run as a whole (the source folder moved, ...).
    notes: list[str] = field(default_factory=list)
    # Words past MAX_WORD_CHARS that keyword search indexes by their beginning only.
    words_cut: int = 0

    def unsearched_counts(self) -> dict[str, int]:
        """How many files of ``unsearched`` each kind of reason holds (``vendored``,
        ``not a document``, ``binary file``, ...), most first."""
        counts: dict[str, int] = {}
        for s in self.unsearched:
            kind = kind_of(s.reason)
            counts[kind] = counts.get(kind, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_embedded / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "deleted": len(self.deleted),
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "unsearched": [{"path": s.path, "reason": s.reason} for s in self.unsearched],
            "unsearched_counts": self.unsearched_counts(),
            "kept": self.kept,
            "ignored": self.ignored,
            "chunks_written": self.chunks_written,
            "committed": self.committed,
            "chunks_embedded": self.chunks_embedded,
            "vectors_reused": self.vectors_reused,
            "dense_pending": self.dense_pending,
            "seconds": round(self.seconds, 3),
            "keywords_seconds": round(self.keywords_seconds, 3),
            "chunks_per_second": round(self.chunks_per_second, 1),
            "model": self.model,
            "compacted": self.compacted,
            "repaired": self.repaired,
            "notes": self.notes,
            "words_cut": self.words_cut,
            "added_paths": self.added,
            "updated_paths": self.updated,
            "deleted_paths": self.deleted,
        }


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM made one) during a run: ``report`` says what is in. ``phase``:
    "keywords" (the documents committed so far are kept, the rest was not reached) or
    "embedding" (every document is in; ``report.dense_pending`` chunks wait for meaning)."""

    def __init__(self, report: IngestReport, phase: str) -> None:
        super().__init__(phase)
        self.report = report
        self.phase = phase
