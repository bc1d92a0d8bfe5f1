"""What every extractor returns: the text (with where its pages are), or why not.

A converted format (PDF, Word, ...) is served twice by the mount: the original bytes under
its own name, and the extracted text as a sibling *text view* (``report.pdf`` ->
``report.pdf.md``). The view is Markdown whose marker headings say where each page, slide or
chapter starts (``## Page 7``, ``## Slide 3: Title``, ``# Chapter 2: Title``), so that
``grep -n`` and ``sed -n`` find them and the chunker starts a chunk there.
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a zip is opened: a mount's start needs no zipfile (lzma, bz2)
    import zipfile

# What a text view's name adds to its original's: report.pdf -> report.pdf.md.
VIEW_SUFFIX = ".md"
# A marker line of a view: the unit ("Page", "Slide", "Chapter") and its number.
MARKER = re.compile(r"^#{1,2} (Page|Slide|Chapter) (\d+)(?::[^\n]*)?$", re.MULTILINE)
# Zip containers (DOCX, PPTX, ODT, EPUB): what their members may add up to, uncompressed,
# and how many there may be. A 10 MB document that claims more is a zip bomb, refused before
# anything is inflated.
ZIP_MAX_BYTES = 256 * 1024 * 1024
ZIP_MAX_MEMBERS = 10_000
# Amplification: members that declare over ZIP_MAX_RATIO times the container's own size are
# refused once they declare over ZIP_RATIO_FLOOR (a 211 KB DOCX holding a 40 MB
# document.xml took 22 minutes and 2 GB to embed). Office XML compresses 5-20x; text and
# a few MB of anything may compress further without harm.
ZIP_MAX_RATIO = 100
ZIP_RATIO_FLOOR = 8 * 1024 * 1024
# A member's declared size is no bound by itself: zipfile truncates what it returns to that
# size, but only after inflating a whole read's worth, and ZipFile.read() asks for it all at
# once (a "lying" member inflated ~1 GB in the worker). So open_zip inflates every member
# first, this many bytes at a time, and refuses one that goes past what it declares.
_INFLATE_STEP = 64 * 1024


@dataclass(frozen=True)
class Unsupported:
    """Why a file's bytes cannot be ingested, in one line (shown per file by ``semfs ingest``).
    ``transient``: it ran out of time or its worker died (a crash, the kernel's OOM killer, a
    machine under load): not the bytes' fault for sure, so tried again once, later."""

    reason: str
    transient: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Extracted:
    """A file's text. ``view``: the text is a converted view (served at the original's name
    plus :data:`VIEW_SUFFIX`; the original bytes are stored beside it); else the text is the
    file itself. ``unit`` names what ``marks`` count ("page", "slide", "chapter", "section",
    or "" for none); ``marks`` holds, for each, the 1-based line of the text where it starts
    and its label ("7" for page 7, a heading's text for a section)."""

    text: str
    view: bool = False
    unit: str = ""
    marks: tuple[tuple[int, str], ...] = field(default=())


# extract(path, data) -> the text, or why not. Never raises for a bad file.
Extractor = Callable[[str, bytes], "Extracted | Unsupported"]


class ViewBuilder:
    """Builds a text view line by line, recording where each unit starts."""

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self._parts: list[str] = []
        self._line = 1  # the line the next part starts on
        self._marks: list[tuple[int, str]] = []

    def mark(self, label: str, heading: str) -> None:
        """Start unit ``label`` with the heading line ``heading`` (a blank line before it)."""
        if self._parts:
            self.add("")
        self._marks.append((self._line, label))
        self.add(heading)
        self.add("")

    def add(self, text: str) -> None:
        """Append ``text`` as whole lines (a trailing newline is added)."""
        text = text.rstrip("\n") + "\n"
        self._parts.append(text)
        self._line += text.count("\n")

    def has_content(self) -> bool:
        return bool(self._parts)

    def build(self) -> Extracted:
        return Extracted("".join(self._parts), True, self.unit, tuple(self._marks))


def clean_lines(text: str) -> str:
    """Line ends as ``\\n``, trailing blanks dropped, runs of blank lines kept to one."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip("\n")


_HEADING_LIKE = re.compile(r"^( {0,3})(#{1,6})(?=[ \t]|$)", re.MULTILINE)


def literal(text: str) -> str:
    """Page text with a line that would read as a Markdown heading (``# This file was
    generated``) escaped as ``\\#``: a view's headings are its title and marks, never a
    stray ``#`` in the text."""
    return _HEADING_LIKE.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


def open_zip(data: bytes, what: str) -> zipfile.ZipFile | Unsupported:
    """``data`` as a zip archive, or why not: not a zip, or one that would inflate past
    :data:`ZIP_MAX_BYTES` or hold over :data:`ZIP_MAX_MEMBERS` members (a zip bomb)."""
    import zipfile

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        return Unsupported(f"corrupt {what} (not a zip archive: {exc})")
    infos = archive.infolist()
    total = sum(i.file_size for i in infos)
    if len(infos) > ZIP_MAX_MEMBERS:
        return Unsupported(
            f"{what} holds {len(infos)} members, over the {ZIP_MAX_MEMBERS} bound "
            "(a zip bomb?), not ingested"
        )
    if total > ZIP_MAX_BYTES:
        return Unsupported(
            f"{what} would inflate to {total} bytes, over the {ZIP_MAX_BYTES}-byte bound "
            "(a zip bomb?), not ingested"
        )
    if total > ZIP_RATIO_FLOOR and total > ZIP_MAX_RATIO * len(data):
        return Unsupported(
            f"{what} would inflate {len(data)} bytes to {total}, over {ZIP_MAX_RATIO} times "
            "its size (a zip bomb?), not ingested"
        )
    liar = _inflates_past_declared(data, infos)
    if liar is not None:
        return Unsupported(f"{what} {liar} (a zip bomb?), not ingested")
    return archive


def _inflates_past_declared(data: bytes, infos: list[zipfile.ZipInfo]) -> str | None:
    """Why a member of ``data`` cannot be read within its declared size, or None. Each is
    inflated in steps of :data:`_INFLATE_STEP` bytes, so at most its declared size plus
    one step is ever made (and freed at once)."""
    import zipfile

    view = memoryview(data)
    for info in infos:
        start = info.header_offset
        header = bytes(view[start : start + 30])
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            return f"member {info.filename!r} has no local header"
        start += (
            30 + int.from_bytes(header[26:28], "little") + int.from_bytes(header[28:30], "little")
        )
        raw = view[start : start + info.compress_size]
        if info.compress_type == zipfile.ZIP_STORED:
            continue  # its bytes are what zipfile returns, cut to the declared size
        if info.compress_type != zipfile.ZIP_DEFLATED:
            return f"member {info.filename!r} uses compression method {info.compress_type}"
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        made = 0
        pending: bytes | memoryview = raw
        try:
            while True:
                out = inflater.decompress(pending, _INFLATE_STEP)
                made += len(out)
                if made > info.file_size:
                    return (
                        f"member {info.filename!r} inflates past the {info.file_size} bytes "
                        "it declares"
                    )
                pending = inflater.unconsumed_tail
                if inflater.eof or not (out or pending):
                    break
        except zlib.error:
            continue  # damaged, not amplified: the extractor says "corrupt"
    return None


def first_line(exc: BaseException) -> str:
    """An exception as one short line for a skip reason."""
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(exc).__name__}: {msg}"[:200] if msg else type(exc).__name__
