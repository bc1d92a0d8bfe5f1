"""EPUB: the chapters of the spine, in reading order, as Markdown (zipfile + BeautifulSoup).

Each chapter starts with a ``# Chapter N: Title`` heading (its own first heading's text), so
a search hit names its chapter (unit "chapter"). A spine entry that cannot be read (missing,
damaged) is left out and the rest of the book is kept; numbering counts the chapters kept.
"""

from __future__ import annotations

import posixpath
import xml.etree.ElementTree as ET
from urllib.parse import unquote

from semfs.ingest.formats.base import Extracted, Unsupported, ViewBuilder, first_line, open_zip
from semfs.ingest.formats.html import decode, headings, to_markdown

_CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
_OPF = "http://www.idpf.org/2007/opf"


def extract(path: str, data: bytes) -> Extracted | Unsupported:
    archive = open_zip(data, "EPUB")
    if isinstance(archive, Unsupported):
        return archive
    with archive:
        try:
            return _chapters(archive)
        except KeyError as exc:
            return Unsupported(f"corrupt EPUB (missing {exc})")
        except Exception as exc:  # ParseError, zlib errors, CRC mismatch: one reason
            return Unsupported(f"corrupt EPUB ({first_line(exc)})")


def _chapters(archive: object) -> Extracted | Unsupported:
    read = archive.read  # type: ignore[attr-defined]
    container = ET.fromstring(read("META-INF/container.xml"))
    rootfile = container.find(f".//{{{_CONTAINER}}}rootfile")
    if rootfile is None or not rootfile.get("full-path"):
        return Unsupported("corrupt EPUB (no package document in META-INF/container.xml)")
    opf_path = str(rootfile.get("full-path"))
    opf = ET.fromstring(read(opf_path))
    base = posixpath.dirname(opf_path)
    hrefs = {
        item.get("id"): item.get("href", "")
        for item in opf.iter(f"{{{_OPF}}}item")
        if "html" in (item.get("media-type") or "")
    }
    view = ViewBuilder("chapter")
    number = 0
    failed: list[str] = []  # spine entries that could not be read
    # A chapter the spine names again is read once: a 2 KB book whose spine named one 20 KB
    # chapter 100 times took 4.3 s to make 1.8 MB of text (issue 39.5), and the time grows
    # with the names, which cost the file a few bytes each.
    seen: set[str] = set()
    for ref in opf.iter(f"{{{_OPF}}}itemref"):
        href = hrefs.get(ref.get("idref"))
        if not href or ref.get("linear") == "no":
            continue
        name = posixpath.normpath(posixpath.join(base, unquote(href)))
        if name in seen:
            continue
        seen.add(name)
        try:
            title, body = to_markdown(decode(read(name)))
        except Exception as exc:  # a missing or damaged chapter: the others still count
            failed.append(f"{name}: {first_line(exc)}")
            continue
        if not body.strip():
            continue
        number += 1
        found = headings(body)
        lines = body.split("\n")
        if found and found[0][0] == 1:  # the chapter's own first heading becomes the marker
            title = found[0][1]
            lines = lines[1:]
        heading = f"# Chapter {number}: {title}" if title else f"# Chapter {number}"
        view.mark(str(number), heading)
        view.add("\n".join(lines).strip("\n"))
    if not number and failed:
        return Unsupported(f"corrupt EPUB (no chapter readable; {failed[0]})")
    if not number:
        return Unsupported("EPUB with no text in its chapters, not ingested")
    return view.build()
