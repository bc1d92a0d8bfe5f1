#!/usr/bin/env python3
"""Extraction on real documents, per format: CPU per file and per thousand characters of text
out, and the HTML converter against markdownify on BeautifulSoup (what it replaced), page by
page: identical Markdown, or the difference.

For each file under the given folders whose format is converted (PDF, DOCX, PPTX, HTML, ...),
``formats.extract`` runs in this process (``isolated=False``: the work of one worker child) and
its CPU time (``time.process_time``) is added to its format's row. With ``--compare`` (needs the
``bench`` extra's markdownify), every HTML page is also converted the old way and the two
Markdown texts and heading marks are compared; the differing pages' diffs go to ``--diffs``.

Examples:
    nice -n 10 .venv/bin/python scripts/bench_extract.py /var/tmp/big/collection
    nice -n 10 .venv/bin/python scripts/bench_extract.py --compare --diffs /tmp/html.diff \\
        /usr/share/doc
"""

from __future__ import annotations

import argparse
import collections
import difflib
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from semfs.ingest import formats
from semfs.ingest.formats import html
from semfs.ingest.formats.base import Extracted, Unsupported, clean_lines


def markdownify_page(data: bytes) -> tuple[str, str]:
    """(title, Markdown) as html.to_markdown made them before lxml (semfs 2026-12, fdb886a)."""
    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning
    from markdownify import MarkdownConverter

    warnings.filterwarnings("ignore", category=XMLParsedAsHTMLWarning)
    soup = BeautifulSoup(html.decode(data), "html.parser")
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text().split()) if title_tag else ""
    for tag in soup.find_all(html._DROP):
        tag.decompose()
    main: Any = soup.find("main") or soup.select_one('[role="main"]')
    if main is None:
        articles = soup.find_all("article")
        main = articles[0] if len(articles) == 1 else soup.body or soup
    for tag in main.find_all(html._FURNITURE):
        tag.decompose()
    for heading in main.find_all(html._HEADINGS):
        for link in heading.find_all("a"):
            if link.get_text().strip() in html._PERMALINKS:
                link.decompose()
            else:
                link.unwrap()
    converter = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img"])
    return title, clean_lines(converter.convert_soup(main))


def markdownify_extract(data: bytes) -> Extracted | Unsupported:
    try:
        title, body = markdownify_page(data)
    except (ValueError, TypeError, AssertionError, RecursionError) as exc:
        return Unsupported(f"unreadable HTML ({exc})")
    if not body.strip():
        return Unsupported("HTML page with no text content, not ingested")
    return html.sections(body, title)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--compare", action="store_true", help="HTML against markdownify")
    parser.add_argument("--diffs", type=Path, help="where the differing pages' diffs go")
    args = parser.parse_args()
    sys.setrecursionlimit(20_000)
    cpu: dict[str, float] = collections.defaultdict(float)
    files: collections.Counter[str] = collections.Counter()
    size: collections.Counter[str] = collections.Counter()
    chars: collections.Counter[str] = collections.Counter()
    old_cpu, same, differ, marks_differ = 0.0, 0, 0, 0
    diffs = args.diffs.open("w") if args.diffs else None
    for folder in args.folders:
        for parent, _, names in os.walk(folder):
            for name in sorted(names):
                path = os.path.join(parent, name)
                module = formats.format_of(name)
                if module is None or not os.path.isfile(path):
                    continue
                data = Path(path).read_bytes()
                start = time.process_time()
                got = formats.extract(name, data, isolated=False)
                cpu[module] += time.process_time() - start
                files[module] += 1
                size[module] += len(data)
                chars[module] += len(got.text) if isinstance(got, Extracted) else 0
                if not (args.compare and module == "html"):
                    continue
                start = time.process_time()
                old = markdownify_extract(data)
                old_cpu += time.process_time() - start
                if old == got:
                    same += 1
                    continue
                differ += 1
                old_marks = old.marks if isinstance(old, Extracted) else None
                new_marks = got.marks if isinstance(got, Extracted) else None
                marks_differ += old_marks != new_marks
                if diffs:
                    a = old.text if isinstance(old, Extracted) else repr(old)
                    b = got.text if isinstance(got, Extracted) else repr(got)
                    diffs.write(f"=== {path}\n")
                    lines = difflib.unified_diff(a.splitlines(True), b.splitlines(True), n=1)
                    diffs.writelines(list(lines)[2:200])
    print("format  files     MB  CPU s  ms/file  µs per 1,000 chars out")
    for module in sorted(cpu):
        print(
            f"{module:6} {files[module]:6} {size[module] / 1e6:6.1f} {cpu[module]:6.2f}"
            f" {1000 * cpu[module] / files[module]:8.1f}"
            f" {1e9 * cpu[module] / max(chars[module], 1):8.0f}"
        )
    if args.compare and files["html"]:
        print(
            f"html vs markdownify: {same} identical, {differ} differ ({marks_differ} in their"
            f" heading marks); CPU {old_cpu:.2f} s before, {cpu['html']:.2f} s now:"
            f" {old_cpu / max(cpu['html'], 1e-9):.1f}x"
        )


if __name__ == "__main__":
    main()
