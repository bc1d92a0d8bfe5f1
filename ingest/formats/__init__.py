"""Document formats: how the bytes of a source file become the text that is chunked.

One table, :data:`EXTRACTORS`, chosen in one place (:func:`extractor_for`), as ratarmount picks
an archive backend: a file name's suffix -> the module that reads that format, with
:mod:`semfs.ingest.formats.text` (UTF-8 text: Markdown, plain text, source code) for every name
the table does not list. Each extractor module has one function,
``extract(path: str, data: bytes) -> str | Unsupported``, which never raises for a bad file:
it returns the text, or an :class:`Unsupported` with the one-line reason the ingest reports.

Rules a caller may rely on:

* The text of a text file *is* its bytes decoded: the chunker's byte spans index ``data``
  itself, so the mount serves the original file (its sha256 matches the source).
* A format is added as one module here plus one row in :data:`EXTRACTORS`; nothing outside
  this package names a format.
"""

from __future__ import annotations

from . import text
from .base import Extractor, Unsupported

__all__ = ["EXTRACTORS", "Extractor", "Unsupported", "extract", "extractor_for"]

# Suffix (lower case, with the dot) -> extractor. Empty for now: every file is read as text.
EXTRACTORS: dict[str, Extractor] = {}


def extractor_for(path: str) -> Extractor:
    """The extractor for ``path`` (a relative path in the source): by suffix, else text."""
    dot = path.rfind(".")
    if dot > path.rfind("/"):
        found = EXTRACTORS.get(path[dot:].lower())
        if found is not None:
            return found
    return text.extract


def extract(path: str, data: bytes) -> str | Unsupported:
    """``data`` (the whole file) as text, or why not."""
    return extractor_for(path)(path, data)
