"""Word (.docx): headings, paragraphs, lists and tables in document order (python-docx, MIT).

Heading styles ("Title", "Heading 1".."Heading 6") become Markdown headings, so search hits
name the section they are in (unit "section"); list paragraphs become ``-`` items and tables
Markdown tables.
"""

from __future__ import annotations

import io
import re

from semfs.ingest.formats.base import Extracted, Unsupported, first_line, open_zip
from semfs.ingest.formats.html import sections

_LEVEL = re.compile(r"heading (\d)$", re.IGNORECASE)


def extract(path: str, data: bytes) -> Extracted | Unsupported:
    archive = open_zip(data, "Word document")
    if isinstance(archive, Unsupported):
        return archive
    archive.close()
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(io.BytesIO(data))
        _keep_text_after_entities(document)
        blocks = list(_blocks(document))
    except (PackageNotFoundError, Exception) as exc:  # lxml's errors too: a reason, no crash
        return Unsupported(f"corrupt Word document ({first_line(exc)})")
    body = "\n\n".join(b for b in blocks if b)
    if not body.strip():
        return Unsupported("Word document with no text, not ingested")
    title = str(document.core_properties.title or "").strip()
    return sections(body, title)


def _keep_text_after_entities(document: object) -> None:
    """python-docx parses with entities unresolved (no XXE, no billion laughs), so ``&name;``
    in a run's text is a node and ``.text`` stops before it: the rest of the run was lost.
    Each such run keeps its text around the reference; the reference itself is dropped (its
    value may be an outside file or an expansion, which is why it is not resolved)."""
    from docx.oxml.ns import qn
    from lxml import etree

    for t in document.element.iter(qn("w:t")):  # type: ignore[attr-defined]
        if not len(t):
            continue
        parts = [t.text or ""]
        for child in list(t):
            if not isinstance(child, etree._Entity):
                parts.append("".join(child.itertext()))
            parts.append(child.tail or "")
            t.remove(child)
        t.text = "".join(parts)


def _blocks(document: object):  # type: ignore[no-untyped-def]
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    styles = _paragraph_styles(document)
    for item in document.iter_inner_content():  # type: ignore[attr-defined]
        if isinstance(item, Paragraph):
            yield _paragraph(item, styles)
        elif isinstance(item, Table):
            yield _table(item)


def _paragraph_styles(document: object) -> dict[str | None, str]:
    """Each paragraph style's id -> its name, and None -> the default paragraph style's.

    Read once: python-docx's ``Paragraph.style`` looks the style up among all of the
    document's styles for every paragraph (and the default style by a scan of every style),
    so a 40 KB DOCX of 2,000 short paragraphs took 3.2 s, and one of 10,000 paragraphs with a
    template's 160 styles took a minute (issue 39.5). A style id no paragraph style has means
    the default, as python-docx has it. Read from the styles part's elements, with
    python-docx's rules (the last default wins; names as its UI shows them; a style without
    a type is a paragraph style, where its ``Style`` objects raise KeyError): those objects
    cost a third of a Word template's extraction (issue 45.4)."""
    from docx.oxml.ns import qn
    from docx.styles import BabelFish

    w_type, w_id, w_default, w_name, w_val = (
        qn("w:type"), qn("w:styleId"), qn("w:default"), qn("w:name"), qn("w:val"),
    )  # fmt: skip
    names: dict[str | None, str] = {}
    default = ""
    for style in document.styles.element.iterchildren(qn("w:style")):  # type: ignore[attr-defined]
        if style.get(w_type, "paragraph") != "paragraph":
            continue
        named = style.find(w_name)
        raw = named.get(w_val) if named is not None else None
        name = BabelFish.internal2ui(raw) if raw else ""
        names[style.get(w_id)] = name
        if style.get(w_default) in ("1", "true", "on"):
            default = name
    names[None] = default
    return names


def _paragraph(p: object, styles: dict[str | None, str]) -> str:
    text = " ".join(p.text.split())  # type: ignore[attr-defined]
    if not text:
        return ""
    style_id = p._p.style  # type: ignore[attr-defined]  # the pStyle the paragraph names
    style = styles.get(style_id, styles[None]).strip()
    if style.lower() == "title":
        return f"# {text}"
    level = _LEVEL.match(style)
    if level:
        return "#" * min(int(level.group(1)), 6) + " " + text
    if style.lower().startswith("list"):
        return f"- {text}"
    return text


def _table(table: object) -> str:
    rows = [
        [" ".join(c.text.split()).replace("|", "\\|") for c in row.cells]
        for row in table.rows  # type: ignore[attr-defined]
    ]
    rows = [r for r in rows if any(r)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
    lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)
