#!/usr/bin/env python3
"""Build the large mixed-format benchmark collection (issue 28) and its semfs store, from scratch.

The collection is real documentation, installable here by name, laid out one folder per product:

* thirteen Debian documentation packages (:data:`PRODUCTS`: the Python 3.11, PostgreSQL 15, CMake,
  Django, Git, BIND 9, Flask and pytest manuals, about 4,900 HTML pages; then SQLAlchemy, SymPy,
  Celery, Sphinx and the Node.js API reference, about 840 more, added to pass 100k chunks;
  every licence permissive or GPL-2, so redistributable for a benchmark). They are installed
  with ``apt-get install`` when missing (``--no-install`` only checks);
* the three shared corpora (``shared/corpora``: fastapi-docs, mem0-docs, mintlify-docs), copied
  as they are (Markdown).

Each Debian page keeps its HTML, or becomes Markdown, PDF, Word (DOCX) or PowerPoint (PPTX)
made from its own text with fpdf2, python-docx and python-pptx. Which page becomes which is a
seeded choice per page (a hash of ``--seed`` and the page's path, so adding a product moves no
other page), and the files are byte-identical from run to run: fixed creation dates in the PDFs,
fixed timestamps in the zip containers. A file whose bytes are already right is not rewritten,
so a rebuild followed by ``semfs ingest`` re-embeds nothing.

Then ``semfs ingest COLLECTION --store OUT/store`` builds the store (the default model; ``-m
hash`` for a quick smoke run, ``--no-store`` to skip it). Written under ``--out`` (default
``bench-out/bigcorpus``, which git ignores):

    OUT/collection/    the documents (what the grep arm of scripts/agent_bench.py searches)
    OUT/store/         the semfs store (collection ``docs``)
    OUT/manifest.tsv   one line per document: path, source, format, bytes, text bytes
    OUT/summary.json   the counts per format and product, the text size, the ingest time

Nothing it writes is committed. The question set for this collection is
``scripts/agentbench/bigcorpus.tsv``.

Examples:
    .venv/bin/python scripts/bigcorpus.py                         # collection + store (real model)
    .venv/bin/python scripts/bigcorpus.py -m hash --out /tmp/big  # quick smoke run
    .venv/bin/python scripts/bigcorpus.py --no-store              # the documents only
    .venv/bin/python scripts/bigcorpus.py --products flask,pytest --no-shared -m hash

The collection of BENCHMARKS section 27 (5,245 documents, 47,648 chunks) is the first eight
products with the default page cap (``--products python,postgresql,cmake,django,git,bind9,
flask,pytest``); section 40's, 103,261 chunks (issue 45.5), is all thirteen with every page
(``--max-page-text 100000000``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = next(
    (p / "shared" for p in REPO.parents if (p / "shared" / "corpora").is_dir()),
    REPO.parent / "shared",
)
SHARED_CORPORA = ("fastapi-docs", "mem0-docs", "mintlify-docs")
SEMFS = shutil.which("semfs", path=str(Path(sys.executable).parent)) or shutil.which("semfs")


@dataclass(frozen=True)
class Product:
    name: str  # the folder in the collection
    package: str  # the Debian package that ships it
    root: str  # its HTML folder once installed
    licence: str


PRODUCTS = (
    Product("python", "python3.11-doc", "/usr/share/doc/python3.11/html", "PSF-2.0"),
    Product("postgresql", "postgresql-doc-15", "/usr/share/doc/postgresql-doc-15/html",
            "PostgreSQL"),
    Product("cmake", "cmake-doc", "/usr/share/doc/cmake-data/html", "BSD-3-Clause"),
    Product("django", "python-django-doc", "/usr/share/doc/python-django-doc/html",
            "BSD-3-Clause"),
    Product("git", "git-doc", "/usr/share/doc/git-doc", "GPL-2.0"),
    Product("bind9", "bind9-doc", "/usr/share/doc/bind9-doc/arm", "MPL-2.0"),
    Product("flask", "python-flask-doc", "/usr/share/doc/python-flask-doc/html", "BSD-3-Clause"),
    Product("pytest", "python-pytest-doc", "/usr/share/doc/python-pytest-doc/html", "MIT"),
    # Added to grow the collection past 100k chunks (issue 45.5); the seeded draw per page keeps
    # every page above in its format.
    Product("sqlalchemy", "python-sqlalchemy-doc", "/usr/share/doc/python-sqlalchemy-doc/html",
            "MIT"),
    Product("sympy", "python-sympy-doc", "/usr/share/doc/python-sympy-doc/html", "BSD-3-Clause"),
    Product("celery", "python-celery-doc", "/usr/share/doc/python-celery-doc/html",
            "BSD-3-Clause"),
    Product("sphinx", "sphinx-doc", "/usr/share/doc/sphinx-doc/html", "BSD-2-Clause"),
    # The Node.js API reference: Debian's nodejs-doc, or NodeSource's nodejs, ships this folder.
    Product("nodejs", "nodejs", "/usr/share/doc/nodejs/api", "MIT"),
)  # fmt: skip
# What apt-get installs besides the products: the PDFs' Unicode font, and pdftotext, which the
# grep arm of the agent benchmark may use on the PDFs.
HELPER_PACKAGES = ("fonts-dejavu-core", "poppler-utils")
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")

# Generated pages that are not documentation: indexes, the search page, highlighted sources,
# Node.js's all.html (every other page again on one).
SKIP = re.compile(
    r"(^|/)(_static|_sources|_modules|_images|_downloads)/|(^|/)(genindex[^/]*|search|"
    r"py-modindex|objects|bookindex|all)\.html$"
)
# The share of pages per format, in this order of the seeded draw (the rest stays HTML).
# PPTX and PDF take small and mid-sized pages only (a 300 KB page is no slide deck): a larger
# page drawn for them becomes DOCX.
SHARES = (("md", 0.20), ("pdf", 0.15), ("docx", 0.15), ("pptx", 0.07))
MAX_TEXT = {"pptx": 30_000, "pdf": 150_000}
# Pages over this much text are left out: 157 whole-book pages (API references, changelogs,
# manuals on one page) that hold a third of the text. What stays is above the 20 MB
# and 5,000 documents, and a store a shared 2-core machine builds in an afternoon.
MAX_PAGE_TEXT = 40_000
# Every file carries this date: the same bytes from run to run.
FIXED_DATE = (2026, 1, 1, 0, 0, 0)


def note(message: str) -> None:
    print(f"bigcorpus: {message}", file=sys.stderr, flush=True)


# --- installing ------------------------------------------------------------------------------


def missing_packages(packages: list[str]) -> list[str]:
    out = []
    for package in packages:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package],
            check=False,
            capture_output=True,
            text=True,
        )
        if "install ok installed" not in status.stdout:
            out.append(package)
    return out


def install(packages: list[str], allowed: bool) -> None:
    missing = missing_packages(packages)
    if not missing:
        return
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    if not allowed or shutil.which("apt-get") is None:
        sys.exit(f"bigcorpus: missing packages; install them with: sudo {' '.join(command)}")
    if os.geteuid() != 0:
        command = ["sudo", *command]
    note(f"installing {' '.join(missing)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(command, check=False, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit(f"bigcorpus: `{' '.join(command)}` failed (try `apt-get update` first)")


# --- reading a page --------------------------------------------------------------------------

HEADINGS = {f"h{i}": i for i in range(1, 7)}
# Elements whose text is a block of its own (a paragraph break before and after).
BLOCKS = {
    "p", "div", "section", "article", "main", "body", "ul", "ol", "li", "dl", "dt", "dd",
    "table", "thead", "tbody", "tfoot", "blockquote", "figure", "figcaption", "caption",
    "details", "summary", "aside", "header", "footer", "nav", "center", "address", "hr", "br",
}  # fmt: skip
DROP = {"script", "style", "noscript", "template", "iframe", "object", "svg", "form", "button",
        "input", "select", "textarea", "link", "meta", "img", "head"}  # fmt: skip
# Characters XML (DOCX, PPTX) cannot hold.
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass(frozen=True)
class Block:
    kind: str  # "h" (heading), "p" (paragraph), "code"
    text: str
    level: int = 0


def _clean(text: str) -> str:
    return " ".join(_XML_BAD.sub("", text).replace("\u00b6", "").split())


def read_page(data: bytes) -> tuple[str, list[Block]]:
    """(title, blocks) of an HTML page: its main content as headings, paragraphs (a table
    row is one paragraph, its cells joined by `` | ``) and code blocks."""
    import warnings

    from bs4 import BeautifulSoup, NavigableString, Tag, XMLParsedAsHTMLWarning

    with warnings.catch_warnings():  # Git's pages are XHTML: lxml's HTML parser reads them well
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(data, "lxml")
    title = _clean(soup.title.get_text()) if soup.title else ""
    for tag in soup.find_all(DROP):
        tag.decompose()
    main = soup.find("main") or soup.select_one('[role="main"]') or soup.body or soup
    for tag in main.find_all(["nav", "header", "footer", "aside"]):
        tag.decompose()
    out: list[Block] = []
    words: list[str] = []

    def flush() -> None:
        text = _clean("".join(words))
        words.clear()
        if text:
            out.append(Block("p", text))

    def walk(node: Tag) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                if type(child) is NavigableString:  # not a comment or doctype
                    words.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name
            if name in HEADINGS:
                flush()
                text = _clean(child.get_text(" "))
                if text:
                    out.append(Block("h", text, HEADINGS[name]))
            elif name == "pre":
                flush()
                code = _XML_BAD.sub("", child.get_text()).strip("\n")
                if code.strip():
                    out.append(Block("code", code))
            elif name == "tr":
                flush()
                cells = [_clean(c.get_text(" ")) for c in child.find_all(["td", "th"])]
                row = " | ".join(c for c in cells if c)
                if row:
                    out.append(Block("p", row))
            elif name in BLOCKS:
                flush()
                walk(child)
                flush()
            else:
                walk(child)

    walk(main)
    flush()
    return title, out


def text_of(title: str, blocks: list[Block]) -> str:
    """The page as Markdown: what the .md pages hold, and the text size of every page."""
    lines = []
    if title and not (blocks and blocks[0].kind == "h"):
        lines += [f"# {title}", ""]
    for block in blocks:
        if block.kind == "h":
            lines += ["#" * block.level + " " + block.text, ""]
        elif block.kind == "code":
            lines += ["```", block.text, "```", ""]
        else:
            lines += [block.text, ""]
    return "\n".join(lines).rstrip() + "\n"


# --- writing a page --------------------------------------------------------------------------


def fixed_zip(data: bytes) -> bytes:
    """The same zip with every member dated FIXED_DATE: python-docx and python-pptx stamp the
    time of saving, which would make every rebuild a change."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            member = zipfile.ZipInfo(info.filename, FIXED_DATE)
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = info.external_attr
            target.writestr(member, source.read(info))
    return out.getvalue()


class PdfWriter:
    """Pages as PDF with fpdf2: headings in bold, code in a monospaced font, DejaVu (Unicode)
    when installed, else Helvetica with the text cut to Latin-1."""

    def __init__(self) -> None:
        from fpdf import FPDF

        self.fpdf = FPDF
        self.unicode = (FONT_DIR / "DejaVuSans.ttf").is_file()
        self._chars: dict[str, frozenset[int]] = {}

    def _font(self, pdf: Any, style: str) -> None:
        family, bold, size = {"": ("body", "", 10), "B": ("body", "B", 13),
                              "code": ("mono", "", 8)}[style]  # fmt: skip
        if not self.unicode:
            family = {"body": "Helvetica", "mono": "Courier"}[family]
        pdf.set_font(family, bold, size)

    def _fit(self, text: str) -> str:
        if not self.unicode:
            return text.encode("latin-1", "replace").decode("latin-1")
        if "cmap" not in self._chars:
            from fontTools.ttLib import TTFont

            cmaps = [
                TTFont(FONT_DIR / f).getBestCmap() for f in ("DejaVuSans.ttf", "DejaVuSansMono.ttf")
            ]
            self._chars["cmap"] = frozenset(set(cmaps[0]) & set(cmaps[1]))
        cmap = self._chars["cmap"]
        return "".join(c if ord(c) in cmap or c == "\n" else "?" for c in text)

    def write(self, title: str, blocks: list[Block]) -> bytes:
        from datetime import datetime, timezone

        pdf = self.fpdf()
        pdf.set_creation_date(datetime(*FIXED_DATE, tzinfo=timezone.utc))
        pdf.set_title(self._fit(title))
        pdf.set_producer("scripts/bigcorpus.py")
        if self.unicode:
            pdf.add_font("body", "", str(FONT_DIR / "DejaVuSans.ttf"))
            pdf.add_font("body", "B", str(FONT_DIR / "DejaVuSans-Bold.ttf"))
            pdf.add_font("mono", "", str(FONT_DIR / "DejaVuSansMono.ttf"))
        pdf.set_auto_page_break(True, margin=15)
        pdf.add_page()
        for block in blocks:
            text = self._fit(block.text)
            if block.kind == "h":
                self._font(pdf, "B")
                pdf.multi_cell(0, 7, text, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(1)
            elif block.kind == "code":
                self._font(pdf, "code")
                pdf.multi_cell(0, 4, text, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
            else:
                self._font(pdf, "")
                pdf.multi_cell(0, 5, text, new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
        return bytes(pdf.output())


def write_docx(title: str, blocks: list[Block]) -> bytes:
    import datetime

    import docx
    from docx.shared import Pt

    document = docx.Document()
    props = document.core_properties
    props.title = title
    props.author = props.last_modified_by = "scripts/bigcorpus.py"
    props.created = props.modified = datetime.datetime(*FIXED_DATE)
    props.revision = 1
    for block in blocks:
        if block.kind == "h":
            document.add_heading(block.text, level=min(block.level, 9))
        elif block.kind == "code":
            run = document.add_paragraph().add_run(block.text)
            run.font.name = "Courier New"
            run.font.size = Pt(8)
        else:
            document.add_paragraph(block.text)
    out = io.BytesIO()
    document.save(out)
    return fixed_zip(out.getvalue())


def write_pptx(title: str, blocks: list[Block]) -> bytes:
    """One slide per section (a heading and what follows it); a long section runs over
    several slides (each about 1,200 characters), titled "... (cont.)"."""
    import datetime

    import pptx

    deck = pptx.Presentation()
    props = deck.core_properties
    props.title = title
    props.author = props.last_modified_by = "scripts/bigcorpus.py"
    props.created = props.modified = datetime.datetime(*FIXED_DATE)
    props.revision = 1
    sections: list[tuple[str, list[str]]] = []
    for block in blocks:
        if block.kind == "h" or not sections:
            sections.append((block.text if block.kind == "h" else title, []))
            if block.kind == "h":
                continue
        sections[-1][1].append(block.text)
    layout = deck.slide_layouts[1]  # title and content
    for heading, texts in sections:
        pages: list[list[str]] = [[]]
        size = 0
        for text in texts:
            if size and size + len(text) > 1200:
                pages.append([])
                size = 0
            pages[-1].append(text)
            size += len(text)
        for number, page in enumerate(pages):
            slide = deck.slides.add_slide(layout)
            slide.shapes.title.text = heading if number == 0 else f"{heading} (cont.)"
            slide.placeholders[1].text_frame.text = "\n".join(page)
    out = io.BytesIO()
    deck.save(out)
    return fixed_zip(out.getvalue())


# --- the collection --------------------------------------------------------------------------


def draw(seed: int, path: str, text_bytes: int) -> str:
    """The format of the page at ``path``: a seeded draw from SHARES, then the size rules."""
    digest = hashlib.sha256(f"{seed}:{path}".encode()).digest()
    x = int.from_bytes(digest[:8], "big") / 2**64
    fmt = "html"
    for name, share in SHARES:
        if x < share:
            fmt = name
            break
        x -= share
    if fmt in MAX_TEXT and text_bytes > MAX_TEXT[fmt]:
        fmt = "docx"
    return fmt


def pages(product: Product) -> Iterator[tuple[str, Path]]:
    root = Path(product.root)
    for path in sorted(root.rglob("*.html")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not SKIP.search(rel):
            yield rel, path


def put(path: Path, data: bytes) -> None:
    """Write ``data`` unless the file already holds it (a rebuild keeps the store's files)."""
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)


@dataclass
class Row:
    path: str  # in the collection
    source: str  # where it came from
    fmt: str
    size: int  # the file's bytes
    text: int  # its text's bytes (the Markdown of the page)


def build_product(
    product: Product, dest: Path, seed: int, pdf: PdfWriter, max_text: int
) -> list[Row]:
    rows = []
    todo = list(pages(product))
    started = time.monotonic()
    last = started
    for i, (rel, source) in enumerate(todo, 1):
        data = source.read_bytes()
        title, blocks = read_page(data)
        if not blocks:
            continue
        text = text_of(title, blocks)
        text_bytes = len(text.encode())
        if text_bytes > max_text:
            continue
        fmt = draw(seed, f"{product.name}/{rel}", text_bytes)
        stem = rel[: -len(".html")]
        if fmt == "html":
            out = data
        elif fmt == "md":
            out = text.encode()
        elif fmt == "pdf":
            out = pdf.write(title, blocks)
        elif fmt == "docx":
            out = write_docx(title, blocks)
        else:
            out = write_pptx(title, blocks)
        name = f"{product.name}/{stem}.{fmt}"
        put(dest / name, out)
        rows.append(Row(name, f"{product.package}:{rel}", fmt, len(out), text_bytes))
        if time.monotonic() - last > 10 or i == len(todo):
            last = time.monotonic()
            note(f"{product.name}: {i}/{len(todo)} pages, {last - started:.0f} s")
    return rows


def copy_shared(name: str, dest: Path) -> list[Row]:
    source = SHARED / "corpora" / name
    if not source.is_dir():
        sys.exit(f"bigcorpus: {source} not found (the shared corpora; --no-shared leaves them out)")
    rows = []
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(source).as_posix()
        data = path.read_bytes()
        put(dest / name / rel, data)
        fmt = path.suffix.lstrip(".") or "txt"
        rows.append(Row(f"{name}/{rel}", f"shared/corpora/{name}/{rel}", fmt, len(data),
                        len(data)))  # fmt: skip
    note(f"{name}: {len(rows)} files copied")
    return rows


def prune(dest: Path, keep: set[str]) -> int:
    """Remove files a previous build made that this one does not (another seed or products)."""
    removed = 0
    for path in sorted(dest.rglob("*"), reverse=True):
        rel = path.relative_to(dest).as_posix()
        if path.is_file() and rel not in keep:
            path.unlink()
            removed += 1
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    return removed


def summarise(rows: list[Row]) -> dict[str, object]:
    by_format: dict[str, dict[str, float]] = {}
    for row in rows:
        entry = by_format.setdefault(row.fmt, {"documents": 0, "mb_files": 0.0, "mb_text": 0.0})
        entry["documents"] += 1
        entry["mb_files"] += row.size / 1e6
        entry["mb_text"] += row.text / 1e6
    for entry in by_format.values():
        entry["mb_files"] = round(entry["mb_files"], 2)
        entry["mb_text"] = round(entry["mb_text"], 2)
    converted = sum(1 for r in rows if r.fmt in ("pdf", "docx", "pptx", "html"))
    return {
        "documents": len(rows),
        "mb_text": round(sum(r.text for r in rows) / 1e6, 2),
        "mb_files": round(sum(r.size for r in rows) / 1e6, 2),
        "share_pdf_docx_pptx_html": round(converted / max(len(rows), 1), 3),
        "by_format": dict(sorted(by_format.items())),
        "by_product": dict(sorted(Counter(r.path.split("/", 1)[0] for r in rows).items())),
    }


def ingest(collection: Path, store: Path, model: str | None) -> dict[str, object]:
    if SEMFS is None:
        sys.exit("bigcorpus: the semfs command was not found (run scripts/setup.sh)")
    command = [SEMFS, "ingest", str(collection), "--store", str(store)]
    if model:
        command += ["-m", model]
    note(f"building the store: {' '.join(command)}")
    started = time.monotonic()
    proc = subprocess.run(command, check=False)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"bigcorpus: semfs ingest failed (exit {proc.returncode})")
    status = subprocess.run(
        [SEMFS, "status", "--store", str(store), "--json"],
        check=False,
        capture_output=True,
        text=True,
    )
    info: dict[str, object] = {"seconds": round(seconds, 1), "model": model or "default"}
    if status.returncode == 0:
        with contextlib.suppress(json.JSONDecodeError):
            info["status"] = json.loads(status.stdout)
    return info


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Examples:") :],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench-out" / "bigcorpus",
                    help="where the collection, the store and the manifest go "
                    "[default: bench-out/bigcorpus]")  # fmt: skip
    ap.add_argument("-m", "--model", help="the store's model [default: semfs's]; 'hash' for a "
                    "quick smoke run (not semantic)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=28, help="which page becomes which format")
    ap.add_argument("--products", help="comma-separated product names [default: all: "
                    + ",".join(p.name for p in PRODUCTS) + "]")  # fmt: skip
    ap.add_argument("--max-page-text", type=int, default=MAX_PAGE_TEXT,
                    help="leave out Debian pages with more text than this (bytes) "
                    f"[default: {MAX_PAGE_TEXT}]")  # fmt: skip
    ap.add_argument("--no-shared", action="store_true", help="leave out shared/corpora")
    ap.add_argument("--no-store", action="store_true", help="build the documents only")
    ap.add_argument("--no-install", action="store_true",
                    help="do not run apt-get: fail with the command to run instead")  # fmt: skip
    args = ap.parse_args(argv)

    products = list(PRODUCTS)
    if args.products:
        wanted = [p.strip() for p in args.products.split(",") if p.strip()]
        unknown = set(wanted) - {p.name for p in PRODUCTS}
        if unknown:
            ap.error(f"unknown products: {', '.join(sorted(unknown))}")
        products = [p for p in PRODUCTS if p.name in wanted]
    install([p.package for p in products] + list(HELPER_PACKAGES), not args.no_install)

    out: Path = args.out.resolve()
    collection = out / "collection"
    collection.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    pdf = PdfWriter()
    rows: list[Row] = []
    for product in products:
        rows += build_product(product, collection, args.seed, pdf, args.max_page_text)
    if not args.no_shared:
        for name in SHARED_CORPORA:
            rows += copy_shared(name, collection)
    removed = prune(collection, {r.path for r in rows})
    if removed:
        note(f"removed {removed} files left by an earlier build")
    build_seconds = time.monotonic() - started
    with (out / "manifest.tsv").open("w", encoding="utf-8") as f:
        f.write("path\tsource\tformat\tbytes\ttext_bytes\n")
        for row in rows:
            f.write(f"{row.path}\t{row.source}\t{row.fmt}\t{row.size}\t{row.text}\n")
    summary = summarise(rows)
    summary["seed"] = args.seed
    summary["max_page_text"] = args.max_page_text
    summary["collection_seconds"] = round(build_seconds, 1)
    summary["licences"] = {p.name: p.licence for p in products}
    note(
        f"collection: {summary['documents']} documents, {summary['mb_text']} MB of text "
        f"({summary['mb_files']} MB of files) in {build_seconds:.0f} s at {collection}"
    )
    for fmt, entry in summary["by_format"].items():  # type: ignore[attr-defined]
        note(f"  {fmt:5} {entry['documents']:6} documents, {entry['mb_text']:6.2f} MB of text")
    if not args.no_store:
        summary["store"] = ingest(collection, out / "store", args.model)
        note(f"store: {out / 'store'} built in {summary['store']['seconds']} s")  # type: ignore[index]
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
