"""HTML: the main content as Markdown (BeautifulSoup, MIT; markdownify, MIT).

Scripts, styles and other non-content elements are dropped; the navigation, header, footer
and sidebars go too, and where the page marks its main content (``<main>``, ``role=main``,
one ``<article>``) only that is kept. Headings become Markdown headings, so chunks and search
hits carry the section they are in (unit "section").
"""

from __future__ import annotations

import re

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


def to_markdown(markup: str) -> tuple[str, str]:
    """(title, Markdown of the main content) of an HTML document."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(markup, "html.parser")
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text().split()) if title_tag else ""
    for tag in soup.find_all(_DROP):
        tag.decompose()
    main = soup.find("main") or soup.select_one('[role="main"]')
    if main is None:
        articles = soup.find_all("article")
        main = articles[0] if len(articles) == 1 else soup.body or soup
    for tag in main.find_all(_FURNITURE):
        tag.decompose()
    for heading in main.find_all(_HEADINGS):
        # "# [What is rustdoc?](#what-is-rustdoc)" and "Install ¶": a heading's own anchor
        # or permalink is no part of its title (nor of a label that quotes it).
        for link in heading.find_all("a"):
            if link.get_text().strip() in _PERMALINKS:
                link.decompose()
            else:
                link.unwrap()
    converter = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img"])
    return title, clean_lines(converter.convert_soup(main))


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
