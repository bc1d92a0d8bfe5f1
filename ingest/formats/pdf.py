"""PDF: the text layer of each page, read by PDFium (pypdfium2, Apache-2.0/BSD-3).

Chosen by measurement (BENCHMARKS.md, "Document formats"): PDFium reads ~8x the pages a
second of pdfminer.six or pypdf and keeps a two-column page's columns apart, where
pdfminer.six interleaves their lines. The view starts with ``# Title`` (the metadata's title,
else the file name) and has one ``## Page N`` heading per page; a page line that would read as
a heading is escaped (``\\#``).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from semfs.ingest.formats.base import (
    Extracted,
    Unsupported,
    ViewBuilder,
    clean_lines,
    first_line,
    literal,
)

# Pages of one PDF: a bound on the work a crafted page count could ask for.
MAX_PAGES = 20_000
# Bytes of the file per page, at least, past the first PAGES_FREE pages. A page tree may list
# one page object many times over (a node of 10 kids, each the same node of 10 kids, ...): a
# 1,001-byte file made 10,000 pages, 259 KB of text and 10,000 chunks to embed (issue 39.5).
# A real page holds its own object and content: hundreds of bytes, rarely under 50 compressed.
BYTES_PER_PAGE = 8
PAGES_FREE = 100


def extract(path: str, data: bytes) -> Extracted | Unsupported:
    import pypdfium2 as pdfium

    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            return Unsupported("encrypted PDF, not ingested")
        return Unsupported(f"corrupt PDF ({first_line(exc)})")
    try:
        pages = len(doc)
        if pages > MAX_PAGES:
            return Unsupported(f"PDF of {pages} pages, over the {MAX_PAGES}-page bound")
        if pages > PAGES_FREE + len(data) // BYTES_PER_PAGE:
            return Unsupported(
                f"PDF of {pages} pages in {len(data)} bytes: more pages than a file this size "
                "holds (a page tree that repeats its pages?), not ingested"
            )
        view = ViewBuilder("page")
        # The metadata's title, else the file name: never a line of the page text.
        view.add(f"# {_title(doc) or PurePosixPath(path).stem or path}")
        found = False
        for number in range(1, pages + 1):
            page = doc[number - 1]
            try:
                textpage = page.get_textpage()
                try:
                    text = clean_lines(textpage.get_text_bounded())
                finally:
                    textpage.close()
            finally:
                page.close()
            found = found or bool(text.strip())
            view.mark(str(number), f"## Page {number}")
            if text:
                view.add(literal(text))
        if not found:
            return Unsupported("no text layer (scanned?), not ingested")
        return view.build()
    except pdfium.PdfiumError as exc:
        return Unsupported(f"corrupt PDF ({first_line(exc)})")
    finally:
        doc.close()


def _title(doc: object) -> str:
    try:
        meta = doc.get_metadata_dict()  # type: ignore[attr-defined]
    except Exception:  # metadata is optional; a broken info dictionary is no reason to skip
        return ""
    return " ".join(str(meta.get("Title", "")).split())
