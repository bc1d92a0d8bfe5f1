"""HTML: the main content as Markdown (lxml, BSD-3; markdownify's rules, MIT, in
:mod:`semfs.ingest.formats.htmlmd`; BeautifulSoup, MIT, for a declared charset).

Scripts, styles and other non-content elements are dropped; the navigation, header, footer
and sidebars go too, and where the page marks its main content (``<main>``, ``role=main``,
one ``<article>``) only that is kept. Headings become Markdown headings, so chunks and search
hits carry the section they are in (unit "section").
"""

from __future__ import annotations

import re
from typing import Any

from semfs.ingest.formats import htmlmd
from semfs.ingest.formats.base import Extracted, Unsupported, ViewBuilder, clean_lines, first_line

# Never content: code, styling, embedded objects, forms.
_DROP = (
    "script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas",
    "form", "button", "input", "select", "textarea", "link", "meta",
)  # fmt: skip
# Page furniture: what a site repeats on every page.
_FURNITURE = ("nav", "header", "footer", "aside")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_PERMALINKS = frozenset({"", "¶", "#", "§", "🔗"})
_HEADING = re.compile(r"^(#{1,6}) +(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def decode(data: bytes) -> str:
    """HTML bytes as text: UTF-8 (with or without a BOM), else the page's declared charset,
    else Windows-1252 (what browsers assume)."""
    from bs4.dammit import EncodingDetector

    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    declared = EncodingDetector.find_declared_encoding(data, is_html=True)
    for encoding in (declared, "windows-1252"):
        if encoding:
            try:
                return data.decode(encoding, "replace")
            except LookupError:
                continue
    return data.decode("utf-8", "replace")


def _parse(markup: str) -> Any:
    """The lxml tree of ``markup``, or None when it holds no element (white space, comments, a
    doctype only). Raises MemoryError past the worker's bound and ValueError for a page whose
    elements nest deeper than libxml2's 2,048 (the rest would be cut off without a word)."""
    import lxml.etree
    import lxml.html

    # huge_tree: libxml2 stops at 256 levels otherwise (latex2html's index pages nest 755).
    parser = lxml.html.HTMLParser(encoding="utf-8", huge_tree=True)
    try:
        # Bytes, not text: lxml refuses text that declares an encoding (<?xml ...?>), and the
        # parser's encoding is the one decode() found, whatever the page declares.
        root = lxml.html.document_fromstring(markup.encode("utf-8"), parser=parser)
    except lxml.etree.ParserError as exc:
        if str(exc) == "Document is empty":
            return None
        raise
    except lxml.etree.XMLSyntaxError:
        if any(e.type_name == "ERR_NO_MEMORY" for e in parser.error_log):
            raise MemoryError from None
        raise
    if any(e.type_name == "ERR_RESOURCE_LIMIT" for e in parser.error_log):
        raise ValueError("its elements nest over 2,048 deep")
    return root


def to_markdown(markup: str) -> tuple[str, str]:
    """(title, Markdown of the main content) of an HTML document."""
    root = _parse(markup)
    if root is None:
        return "", ""
    title_tag = next(root.iter("title"), None)
    title = " ".join("".join(title_tag.itertext()).split()) if title_tag is not None else ""
    for tag in list(root.iter(_DROP)):
        htmlmd.skip(tag)
    main = next(root.iter("main"), None)
    if main is None:
        main = next(iter(root.xpath('//*[@role="main"]')), None)
    if main is None:
        articles = list(root.iter("article"))
        body = root.find("body")
        main = articles[0] if len(articles) == 1 else root if body is None else body
    for tag in list(main.iter(_FURNITURE)):
        if tag is not main:
            htmlmd.skip(tag)
    # "# [What is rustdoc?](#what-is-rustdoc)" and "Install ¶": a heading's own anchor or
    # permalink is no part of its title (nor of a label that quotes it); the converter drops
    # it and unwraps a heading's other links.
    return title, clean_lines(htmlmd.Converter(_PERMALINKS).convert(main))


def headings(text: str) -> list[tuple[int, str]]:
    """(1-based line, text) of each Markdown heading outside code fences."""
    out: list[tuple[int, str]] = []
    fence = ""
    for number, line in enumerate(text.split("\n"), 1):
        opened = _FENCE.match(line)
        if opened:
            fence = "" if fence and opened.group(1).startswith(fence) else fence or opened.group(1)
            continue
        if not fence:
            found = _HEADING.match(line)
            if found and found.group(2):
                out.append((number, found.group(2)))
    return out


def sections(body: str, title: str) -> Extracted:
    """A view of Markdown ``body``: ``# title`` first unless the body starts with a heading;
    each heading starts a section."""
    view = ViewBuilder("section")
    if title and not _HEADING.match(body.split("\n", 1)[0]):
        view.add(f"# {title}")
        view.add("")
    if body:
        view.add(body)
    built = view.build()
    return Extracted(built.text, True, "section", tuple(headings(built.text)))


def extract(path: str, data: bytes) -> Extracted | Unsupported:
    try:
        title, body = to_markdown(decode(data))
    except (ValueError, TypeError, AssertionError, RecursionError) as exc:
        return Unsupported(f"unreadable HTML ({first_line(exc)})")
    if not body.strip():
        return Unsupported("HTML page with no text content, not ingested")
    return sections(body, title)
