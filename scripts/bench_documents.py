#!/usr/bin/env python3
"""Converted documents, measured: extraction speed per format, the PDF libraries compared,
a mixed folder's ingest time, and search quality on 20 questions about the fixture documents.

1. **Units a second per format** (pages, slides, chapters, sections): a document of each
   format with ``--units`` units is made with the test fixtures' tools (fpdf2, python-docx,
   python-pptx, zipfile) and extracted ``--reps`` times through the bounded worker (one child
   process: what an ingest uses), median reported; also in-process, to show the worker's cost.
2. **PDF libraries** on the same files, in this run: pypdfium2 (the one used) against
   pdfminer.six and pypdf (installed for this comparison only), pages a second and the
   characters each gets; the real PDFs given with ``--pdf`` (e.g. the manuals Debian ships
   in /usr/share/doc) plus the generated one. Install sizes from the installed packages.
3. **A mixed folder**: ``--copies`` copies of every fixture document plus the Markdown of
   a shared corpus, ingested with the real model (``semfs ingest``), then again unchanged
   (nothing is extracted again), with the extraction share of the first run.
4. **20 questions** (scripts/benchmarks/documents-questions.tsv) about the fixture documents
   inside the mem0-docs corpus (its 251 pages as distractors), asked through a real mount by
   scripts/answers.py: hit@1, hit@3, answer-in-results, and place@1 (the best hit's header
   in 00-results.md names the expected page, slide, chapter or section).

Example:
    .venv/bin/python scripts/bench_documents.py --work /var/tmp/bdocs \\
        --pdf /usr/share/doc/libtasn1-doc/libtasn1.pdf --markdown out.md
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata as md
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

import answers  # noqa: E402
import docfixtures  # noqa: E402

from semfs.ingest import formats  # noqa: E402
from semfs.ingest.formats import worker  # noqa: E402

QUESTIONS = REPO / "scripts" / "benchmarks" / "documents-questions.tsv"
SEMFS = str(Path(sys.executable).with_name("semfs"))
PARA = (
    "The quarterly figures were reviewed by the operations board, which noted that the "
    "maintenance backlog shrank while the spare parts budget stayed flat. "
)


# -- 1. documents of N units -----------------------------------------------------------------


def big_pdf(n: int) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for i in range(n):
        pdf.add_page()
        pdf.multi_cell(0, 5, f"Section {i}. " + PARA * 12)
    return bytes(pdf.output())


def big_docx(n: int) -> bytes:
    import docx

    d = docx.Document()
    for i in range(n):
        d.add_heading(f"Section {i}", level=1)
        for _ in range(4):
            d.add_paragraph(PARA * 3)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def big_pptx(n: int) -> bytes:
    import pptx

    deck = pptx.Presentation()
    for i in range(n):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {i}"
        slide.placeholders[1].text_frame.text = PARA * 2
        slide.notes_slide.notes_text_frame.text = PARA
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def big_html(n: int) -> bytes:
    body = "".join(f"<h2>Section {i}</h2>" + f"<p>{PARA * 3}</p>" * 4 for i in range(n))
    return f"<html><body><nav>menu</nav><main>{body}</main></body></html>".encode()


def big_epub(n: int) -> bytes:
    out = io.BytesIO()
    items = "".join(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i in range(n))  # fmt: skip
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(n))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr(
            "META-INF/container.xml",
            '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="content.opf"/></rootfiles></container>',
        )
        z.writestr(
            "content.opf",
            f'<package xmlns="http://www.idpf.org/2007/opf"><manifest>{items}</manifest>'
            f"<spine>{spine}</spine></package>",
        )
        for i in range(n):
            z.writestr(f"c{i}.xhtml", f"<html><body><h1>Chapter {i}</h1>"
                       + f"<p>{PARA * 3}</p>" * 4 + "</body></html>")  # fmt: skip
    return out.getvalue()


def big_odt(n: int) -> bytes:
    body = "".join(
        f'<text:h text:outline-level="1">Section {i}</text:h>' + f"<text:p>{PARA * 3}</text:p>" * 4
        for i in range(n)
    )
    content = (
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body>'
        f"<office:text>{body}</office:text></office:body></office:document-content>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("content.xml", content)
    return out.getvalue()


MAKERS: dict[str, tuple[str, str, Callable[[int], bytes]]] = {
    "PDF": ("big.pdf", "pages", big_pdf),
    "Word": ("big.docx", "sections", big_docx),
    "PowerPoint": ("big.pptx", "slides", big_pptx),
    "HTML": ("big.html", "sections", big_html),
    "EPUB": ("big.epub", "chapters", big_epub),
    "ODT": ("big.odt", "sections", big_odt),
}


def timed(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def per_format(units: int, reps: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    rows = []
    w = worker.Worker()
    try:
        for label, (name, unit, make) in MAKERS.items():
            data = make(units)
            got = w.extract(formats.format_of(name) or "", name, data)  # warm: modules loaded
            assert isinstance(got, formats.Extracted), got
            marks = len(got.marks)
            module = formats.format_of(name) or ""
            in_worker = timed(functools.partial(w.extract, module, name, data), reps)
            here = timed(functools.partial(formats.extract, name, data, isolated=False), reps)
            rows.append({"format": label, "unit": unit, "units": marks, "bytes": len(data),
                         "worker_s": in_worker, "inprocess_s": here})  # fmt: skip
            log(f"  {label}: {marks} {unit}, {marks / in_worker:.0f}/s in the worker")
    finally:
        w.close()
    return rows


# -- 2. PDF libraries ------------------------------------------------------------------------


def pdf_pages(lib: str, data: bytes) -> list[str]:
    if lib == "pypdfium2":
        import pypdfium2 as pdfium

        doc = pdfium.PdfDocument(data)
        out = []
        for i in range(len(doc)):
            page = doc[i]
            tp = page.get_textpage()
            out.append(tp.get_text_bounded())
            tp.close()
            page.close()
        doc.close()
        return out
    if lib == "pdfminer.six":
        from pdfminer.high_level import extract_pages
        from pdfminer.layout import LTTextContainer

        return [
            "".join(e.get_text() for e in page if isinstance(e, LTTextContainer))
            for page in extract_pages(io.BytesIO(data))
        ]
    import pypdf

    return [p.extract_text() for p in pypdf.PdfReader(io.BytesIO(data)).pages]


def _dist_size(name: str) -> int:
    """Bytes installed by distribution ``name`` and the ones it requires (not shared ones)."""
    try:
        files = md.distribution(name).files or []
    except md.PackageNotFoundError:
        return 0
    return sum(f.size or 0 for f in files)


def pdf_libraries(paths: list[Path], reps: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    gen = big_pdf(30)
    docs = [(p.name, p.read_bytes()) for p in paths] + [("generated (30 pages)", gen)]
    rows = []
    for lib in ("pypdfium2", "pdfminer.six", "pypdf"):
        try:
            pdf_pages(lib, gen[:0] or gen)
        except ImportError:
            log(f"  {lib}: not installed (pip install {lib}), left out")
            continue
        for name, data in docs:
            pages = pdf_pages(lib, data)
            secs = timed(functools.partial(pdf_pages, lib, data), reps)
            rows.append({"library": lib, "file": name, "pages": len(pages),
                         "pages_per_s": len(pages) / secs,
                         "chars": sum(len(p) for p in pages)})  # fmt: skip
            log(f"  {lib} {name}: {len(pages) / secs:.1f} pages/s")
    return rows


def two_columns(lib: str) -> str:
    """Whether ``lib`` reads the fixture's two-column page column by column."""
    tmp = Path(tempfile.mkdtemp())
    try:
        docfixtures.make_pdf(tmp / "r.pdf")
        text = " ".join(pdf_pages(lib, (tmp / "r.pdf").read_bytes())[1].split())
        whole = text.find("Each blade is tagged.") < text.find("Access. Visitors")
        table = "Gasket Borealis Seals 4" in " ".join(
            pdf_pages(lib, (tmp / "r.pdf").read_bytes())[2].split()
        )
        columns = "apart" if whole else "interleaved"
        return f"columns {columns}, table row {'whole' if table else 'broken'}"
    except ImportError:
        return "not installed"
    finally:
        shutil.rmtree(tmp)


# -- 3. a mixed folder -----------------------------------------------------------------------


def run_semfs(*args: str) -> str:
    proc = subprocess.run([SEMFS, *args], capture_output=True, text=True, check=True)
    return proc.stdout + proc.stderr


def _ingest_seconds(src: Path, store: Path) -> tuple[float, dict[str, Any]]:
    shutil.rmtree(store, ignore_errors=True)
    started = time.perf_counter()
    out = run_semfs("ingest", str(src), "--store", str(store), "--json")
    return time.perf_counter() - started, json.loads(out[out.index("{") :])


def mixed_ingest(
    work: Path, copies: int, corpus: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    """The mixed folder's ingest, its unchanged re-run, and the baseline in the same run: the
    same folder with every converted file replaced by its text view as a .md file (the same
    chunks to embed: the difference is extraction and storing the originals)."""
    src, plain = work / "mixed-src", work / "mixed-plain"
    for d in (src, plain):
        shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(corpus, src / "docs")
    for i in range(copies):
        docfixtures.make_all(src / f"attachments-{i}")
    shutil.copytree(src, plain)
    w = worker.Worker()
    try:
        started = time.perf_counter()
        for f in sorted(plain.rglob("*")):
            module = formats.format_of(f.name)
            if module:
                got = w.extract(module, f.name, f.read_bytes())
                assert isinstance(got, formats.Extracted)
                f.with_name(f.name + ".md").write_text(got.text)
                f.unlink()
        extract_s = time.perf_counter() - started
    finally:
        w.close()
    converted = sum(1 for f in src.rglob("*") if formats.view_path(f.name))
    files = sum(1 for f in src.rglob("*") if f.is_file())
    base_s, base = _ingest_seconds(plain, work / "plain-store")
    first_s, report = _ingest_seconds(src, work / "mixed-store")
    started = time.perf_counter()
    run_semfs("ingest", str(src), "--store", str(work / "mixed-store"))
    again_s = time.perf_counter() - started
    log(f"  mixed: {files} files ({converted} converted): {first_s:.1f} s, plain {base_s:.1f} s")
    return {"files": files, "converted": converted, "chunks": report["chunks_embedded"],
            "plain_chunks": base["chunks_embedded"], "first_s": first_s, "plain_s": base_s,
            "again_s": again_s, "extract_s": extract_s,
            "skipped": len(report["skipped"])}  # fmt: skip


# -- 4. questions ----------------------------------------------------------------------------


_HEADER = re.compile(r"^## 1\. (\S+)(?: \(([^)]*)\))?$", re.M)


def questions(work: Path, corpus: Path, log: Callable[[str], None]) -> dict[str, Any]:
    data = work / "qdata"
    src = data / "corpora" / "documents"
    if not src.exists():
        shutil.copytree(corpus, src)
        docfixtures.make_all(src / "attachments")
    (data / "datasets" / "doc-questions").mkdir(parents=True, exist_ok=True)
    shutil.copy(QUESTIONS, data / "datasets" / "doc-questions" / "documents.tsv")
    places = {}
    for line in QUESTIONS.read_text().splitlines()[1:]:
        f = line.split("\t")
        places[f[0]] = f[5]
    (report,) = answers.run(["documents"], work / "qwork", "mount", data, log)
    outcomes = answers_outcomes(work, data)
    return {"report": report, "outcomes": outcomes, "places": places}


def answers_outcomes(work: Path, data: Path) -> list[dict[str, Any]]:
    """Each question's first hit and the place its results header names (a second pass on
    the same store, in-process: the ranking is the mount's, as scripts/answers.py checks)."""
    qs = answers.read_questions(data / "datasets" / "doc-questions" / "documents.tsv")
    got = answers.ask_in_process(work / "qwork" / "documents" / "store", qs)
    assert isinstance(got, list)  # without budgets: one outcome per question
    out = []
    for o in got:
        m = _HEADER.search(o.results)
        out.append({"question": o.question.text, "first": o.ranked[0] if o.ranked else "",
                    "place": (m.group(2) or "") if m else "", "rank": o.rank,
                    "answered": o.answered})  # fmt: skip
    return out


def place_matches(expected: str, header_place: str) -> bool:
    """Whether the results header's place (``page 2``, ``pages 2-3``, ``section X``) is
    the expected one."""
    if expected.startswith("section "):
        return header_place == expected
    unit, _, n = expected.partition(" ")
    found = re.match(rf"{unit}s? (\d+)(?:-(\d+))?$", header_place)
    if not found:
        return False
    lo, hi = int(found.group(1)), int(found.group(2) or found.group(1))
    return lo <= int(n) <= hi


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument(
        "--pdf", type=Path, action="append", default=[], help="A real PDF to compare on."
    )
    p.add_argument("--units", type=int, default=50)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--copies", type=int, default=10)
    p.add_argument(
        "--mixed-corpus", type=Path, default=REPO / "tests" / "corpus" / "mintlify-sample"
    )
    p.add_argument("--corpus", type=Path, default=answers.SHARED / "corpora" / "mem0-docs")
    p.add_argument("--skip", action="append", default=[], help="formats, pdf, mixed, questions")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "load": os.getloadavg()}  # fmt: skip
    if "formats" not in args.skip:
        out["formats"] = per_format(args.units, args.reps, log)
    if "pdf" not in args.skip:
        out["pdf"] = pdf_libraries(args.pdf, args.reps, log)
        out["pdf_layout"] = {
            lib: two_columns(lib) for lib in ("pypdfium2", "pdfminer.six", "pypdf")
        }
        dists = ("pypdfium2", "pypdfium2_raw", "pdfminer.six", "pypdf", "python-docx",
                 "python-pptx", "lxml", "beautifulsoup4", "markdownify", "soupsieve",
                 "XlsxWriter", "pillow")  # fmt: skip
        out["sizes"] = {n: _dist_size(n) for n in dists}
    if "mixed" not in args.skip:
        out["mixed"] = mixed_ingest(args.work, args.copies, args.mixed_corpus, log)
    if "questions" not in args.skip:
        q = questions(args.work, args.corpus, log)
        rep = q["report"]
        outcomes = q["outcomes"]
        placed = 0
        for o in outcomes:
            expected = q["places"][o["question"]]
            ok = o["rank"] == 1 and place_matches(expected, str(o["place"]))
            placed += ok
            o["expected_place"] = expected
        out["questions"] = {"overall": rep.overall, "place_at_1": placed / len(outcomes),
                            "outcomes": outcomes, "chunks": rep.chunks}  # fmt: skip
    text = json.dumps(out, indent=2, default=lambda o: o.__dict__)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
