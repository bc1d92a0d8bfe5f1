"""OpenDocument text (.odt): headings, paragraphs, lists and tables of ``content.xml``.

Read with zipfile and the standard library's XML parser (expat, which refuses entity
expansion bombs): no dependency. Headings (``text:h`` with their outline level) become
Markdown headings (unit "section").
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from semfs.ingest.formats.base import Extracted, Unsupported, first_line, open_zip
from semfs.ingest.formats.html import sections

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
# Members read whole: content.xml of a document within the zip bound is small enough.
_MAX_XML = 64 * 1024 * 1024


def _t(name: str) -> str:
    return f"{{{_TEXT}}}{name}"


def extract(path: str, data: bytes) -> Extracted | Unsupported:
    archive = open_zip(data, "OpenDocument file")
    if isinstance(archive, Unsupported):
        return archive
    with archive:
        try:
            root = ET.fromstring(archive.read("content.xml"))
        except KeyError:
            return Unsupported("corrupt OpenDocument file (no content.xml)")
        except Exception as exc:  # ParseError, zlib errors, CRC mismatch: one reason
            return Unsupported(f"corrupt OpenDocument file ({first_line(exc)})")
    body = root.find(f"{{{_OFFICE}}}body/{{{_OFFICE}}}text")
    if body is None:
        return Unsupported("OpenDocument file without text (a spreadsheet or drawing?)")
    text = "\n\n".join(b for b in _blocks(body) if b)
    if not text.strip():
        return Unsupported("OpenDocument file with no text, not ingested")
    return sections(text, "")


def _blocks(parent: ET.Element, depth: int = 0):  # type: ignore[no-untyped-def]
    for el in parent:
        if el.tag == _t("h"):
            level = int(el.get(_t("outline-level"), "1") or 1)
            text = _inline(el)
            if text:
                yield "#" * max(1, min(level, 6)) + " " + text
        elif el.tag == _t("p"):
            yield _inline(el)
        elif el.tag == _t("list"):
            for item in el.iter(_t("list-item")):
                for p in item.findall(_t("p")):
                    text = _inline(p)
                    if text:
                        yield f"- {text}"
        elif el.tag == f"{{{_TABLE}}}table":
            rows = []
            for row in el.iter(f"{{{_TABLE}}}table-row"):
                cells = [" ".join(_inline(p) for p in c.iter(_t("p"))) for c in row]
                rows.append("| " + " | ".join(cells) + " |")
            yield "\n".join(rows)
        elif el.tag == _t("section") and depth < 20:
            yield from _blocks(el, depth + 1)


def _inline(el: ET.Element) -> str:
    parts: list[str] = []

    def walk(node: ET.Element) -> None:
        if node.text:
            parts.append(node.text)
        for child in node:
            if child.tag == _t("s"):
                parts.append(" " * int(child.get(_t("c"), "1") or 1))
            elif child.tag in (_t("tab"), _t("line-break")):
                parts.append(" ")
            elif child.tag != _t("note"):
                walk(child)
            if child.tail:
                parts.append(child.tail)

    walk(el)
    return " ".join("".join(parts).split())
