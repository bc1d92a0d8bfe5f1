"""UTF-8 text (Markdown, plain text, source code): the text is the bytes, decoded.

Anything else is refused with the reason a person can act on: UTF-16 (convert it), NUL bytes
(a binary file), or the offset of the first byte that is not UTF-8.
"""

from __future__ import annotations

import codecs

from semfs.ingest.formats.base import Extracted, Unsupported


def extract(path: str, data: bytes) -> Extracted | Unsupported:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return Unsupported("UTF-16 text is not supported (convert it to UTF-8)")
    if b"\0" in data:
        return Unsupported("binary file (contains NUL bytes)")
    try:
        return Extracted(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return Unsupported(f"not UTF-8 text (invalid byte at offset {exc.start})")
