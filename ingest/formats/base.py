"""What every extractor returns: text, or :class:`Unsupported` with the reason."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Unsupported:
    """Why a file's bytes cannot be ingested, in one line (shown per file by ``semfs ingest``)."""

    reason: str


# extract(path, data) -> the text, or why not. Never raises for a bad file.
Extractor = Callable[[str, bytes], "str | Unsupported"]
