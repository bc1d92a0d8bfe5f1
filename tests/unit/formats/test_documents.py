"""Converted documents (PDF, Word, PowerPoint, HTML, EPUB, ODT) from bytes to store: the
extractors on real files made at test time, the bounded worker, the skip reasons, and the
pipeline's incremental protocol for a view and its stored original. The mount is
tests/mount/test_documents_mount.py."""

from __future__ import annotations

import hashlib
import io
import os
import re
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from semfs.ingest import formats, sources
from semfs.ingest.formats import worker
from semfs.ingest.request import SearchRequest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.check import check_store
from semfs.ingest.store.schema import BLOB_PART
from tests.helpers.docfixtures import (
    BAD_REASONS,
    FACTS,
    HTML_FURNITURE,
    INDEXED_ANSWER,
    docx_with,
    lying_zip,
    make_all,
    make_bad,
    make_epub,
    make_indexed_pdf,
    make_pdf,
)
from tests.helpers.mounting import ingest_hash


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("documents")
    make_all(folder)
    return folder


def _place_of(extracted: formats.Extracted, sentence: str) -> str:
    """The unit (as the pipeline names it) of the line where ``sentence`` starts."""
    lines = extracted.text.split("\n")
    first_words = " ".join(sentence.split()[:4])
    at = next(i for i, line in enumerate(lines, 1) if first_words in _flat(line))
    label = [lab for line, lab in extracted.marks if line <= at][-1]
    return f"{extracted.unit} {label}"


@pytest.mark.parametrize(("name", "sentence", "where"), FACTS)
def test_each_format_gives_its_text_and_the_place_of_each_sentence(
    documents: Path, name: str, sentence: str, where: str
) -> None:
    extracted = formats.extract(name, (documents / name).read_bytes())  # in the worker
    assert isinstance(extracted, formats.Extracted), extracted
    assert extracted.view
    assert _flat(sentence) in _flat(extracted.text)
    assert _place_of(extracted, sentence) == where


def test_a_pdf_keeps_two_columns_apart_and_a_table_row_together(documents: Path) -> None:
    text = formats.extract("report.pdf", (documents / "report.pdf").read_bytes())
    assert isinstance(text, formats.Extracted)
    flat = _flat(text.text)
    # Each column reads whole before the next (pdfminer.six interleaves their lines).
    assert flat.index("Each blade is tagged.") < flat.index("Access. Visitors")
    assert "Gasket Borealis Seals 4" in flat
    # The marker headings are what grep -n and sed -n find.
    assert [m.group(0) for m in formats.MARKER.finditer(text.text)] == [
        f"## Page {n}" for n in range(1, 5)
    ]


def test_html_keeps_the_main_content_only(documents: Path) -> None:
    text = formats.extract("guide.html", (documents / "guide.html").read_bytes())
    assert isinstance(text, formats.Extracted)
    for furniture in HTML_FURNITURE:
        assert furniture not in text.text
    assert "## Backups" in text.text and "- Nightly full copy" in text.text


def test_bad_files_get_a_reason_and_the_rest_is_ingested(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    make_bad(src)
    make_pdf(src / "good.pdf")
    report = ingest_hash(src, store_dir)
    # Each is stored as it is (a mount serves it), not searched, and the report says why.
    assert report.skipped == []
    reasons = {s.path: s.reason for s in report.unsearched}
    assert set(reasons) == set(BAD_REASONS)
    for name, reason in BAD_REASONS.items():
        assert reason in reasons[name], reasons[name]
        assert "\n" not in reasons[name]
    assert report.added == sorted([*BAD_REASONS, "good.pdf.md"])
    with open_store(CollectionAddress(store=store_dir)) as store:
        for name in BAD_REASONS:
            rec = store.get_document(name)
            assert rec is not None and rec.as_is and rec.chunks == 0, name
            whole = rec.original_record()
            assert whole is not None and whole.path == name and whole.blob
            parts = store.read_blob(name, rec.gen, range(len(whole.offsets or ())))
            data = b"".join(parts[i] for i in sorted(parts))
            assert data == (src / name).read_bytes(), name
    again = ingest_hash(src, store_dir)
    assert again.unchanged == report.added and not again.added and not again.deleted


def test_a_file_over_max_size_is_skipped_before_it_is_read(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    make_pdf(src / "big.pdf")
    report = ingest_hash(src, store_dir, max_bytes=1000)
    assert [s.path for s in report.skipped] == ["big.pdf"]
    assert "--max-size" in report.skipped[0].reason


def test_the_worker_stops_a_file_that_takes_too_long_and_goes_on(documents: Path) -> None:
    data = (documents / "report.pdf").read_bytes()
    slow = worker.Worker(timeout=1e-4)  # less than the child needs to load PDFium
    try:
        got = slow.extract("pdf", "report.pdf", data)
        assert got == formats.Unsupported("extraction took over 0.0001 s (stopped)")
        slow.timeout = 60
        again = slow.extract("pdf", "report.pdf", data)  # a new child takes the next file
        assert isinstance(again, formats.Extracted)
    finally:
        slow.close()


def test_the_worker_bounds_memory_and_survives_its_child(documents: Path) -> None:
    # 400k paragraphs (4.8 MB) take ~300 MB to parse and convert: over the bound.
    page = b"<html><body>" + b"<p>word</p>" * 400_000 + b"</body></html>"
    small = worker.Worker(memory=128 * 1024 * 1024)
    try:
        got = small.extract("html", "huge.html", page)
        assert isinstance(got, formats.Unsupported)
        assert "MiB" in got.reason, got.reason
        small.memory = worker.MEMORY_BYTES
        small._stop()  # the next child gets the normal bound
        ok = small.extract("docx", "handbook.docx", (documents / "handbook.docx").read_bytes())
        assert isinstance(ok, formats.Extracted)
    finally:
        small.close()


def test_the_worker_runs_only_the_extractors_of_the_table() -> None:
    w = worker.Worker()
    try:
        got = w.extract("os", "x.pdf", b"")
        assert got == formats.Unsupported("extraction failed (ValueError: no extractor 'os')")
    finally:
        w.close()


def _blob_versions(store_dir: Path) -> set[tuple[str, int]]:
    with open_store(CollectionAddress(store=store_dir)) as store:
        docs = {d.path for d in store.list_documents()}
        return {(p, g) for p, g in store.chunk_versions() if p not in docs}


def test_a_view_and_its_original_are_ingested_incrementally(
    tmp_path: Path, store_dir: Path, documents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "report.pdf").write_bytes((documents / "report.pdf").read_bytes())
    first = ingest_hash(src, store_dir)
    assert first.added == ["report.pdf.md"]
    with open_store(CollectionAddress(store=store_dir)) as store:
        rec = store.get_document("report.pdf.md")
        assert rec is not None and rec.original == "report.pdf"
        data = (src / "report.pdf").read_bytes()
        assert rec.original_size == len(data)
        assert rec.original_sha256 == hashlib.sha256(data).hexdigest()
        parts = store.read_blob("report.pdf", rec.gen, [0])
        assert parts == {0: data[:BLOB_PART]}
        chunks = store.get_chunks(rec.path, rec.gen, list(range(rec.chunks)))
        assert {c.place for c in chunks} >= {"page 1", "page 4"}
    assert _blob_versions(store_dir) == {("report.pdf", rec.gen)}

    calls: list[str] = []
    real = formats.extract
    monkeypatch.setattr(sources.formats, "extract", lambda p, d: calls.append(p) or real(p, d))
    again = ingest_hash(src, store_dir)
    assert again.unchanged == ["report.pdf.md"] and calls == []  # not extracted again

    os.utime(src / "report.pdf", ns=(10**18, 10**18))  # touched only: the record follows
    ingest_hash(src, store_dir)
    with open_store(CollectionAddress(store=store_dir)) as store:
        touched = store.get_document("report.pdf.md")
        assert touched is not None and touched.mtime_ns == 10**18 and touched.gen == rec.gen

    (src / "report.pdf").write_bytes(data.replace(b"Plant operations", b"Plant operationz"))
    changed = ingest_hash(src, store_dir)
    assert changed.updated == ["report.pdf.md"] and calls == ["report.pdf"]
    with open_store(CollectionAddress(store=store_dir)) as store:
        new = store.get_document("report.pdf.md")
        assert new is not None and new.gen > rec.gen
    assert _blob_versions(store_dir) == {("report.pdf", new.gen)}  # the old parts are gone

    (src / "report.pdf").unlink()
    gone = ingest_hash(src, store_dir)
    assert gone.deleted == ["report.pdf.md"]
    assert _blob_versions(store_dir) == set()


def test_check_finds_a_damaged_original(tmp_path: Path, store_dir: Path, documents: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "report.pdf").write_bytes((documents / "report.pdf").read_bytes())
    ingest_hash(src, store_dir)
    with open_store(CollectionAddress(store=store_dir)) as store:
        assert check_store(store).ok
        rec = store.get_document("report.pdf.md")
        assert rec is not None
        store.put_blob("report.pdf", rec.gen, b"%PDF-1.4 not the bytes that were ingested")
        problems = [str(p) for p in check_store(store).problems]
    assert problems and re.search(r"report\.pdf\.md: its stored original report\.pdf", problems[0])
    # ingest --verify repairs it: the original is stored again.
    repaired = ingest_hash(src, store_dir, verify=True)
    assert repaired.repaired == ["report.pdf.md"]
    with open_store(CollectionAddress(store=store_dir)) as store:
        assert check_store(store).ok


def test_a_view_never_hides_a_real_file(tmp_path: Path, store_dir: Path, documents: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "report.pdf").write_bytes((documents / "report.pdf").read_bytes())
    (src / "report.pdf.md").write_text("# My own notes on the report\n")
    report = ingest_hash(src, store_dir)
    assert report.added == ["report.pdf.md"]
    assert [(s.path, s.reason) for s in report.skipped] == [
        ("report.pdf", "its text view would hide the file report.pdf.md: not ingested")
    ]
    with open_store(CollectionAddress(store=store_dir)) as store:
        rec = store.get_document("report.pdf.md")
        assert rec is not None and rec.original is None


def test_a_run_over_some_paths_updates_and_deletes_a_view_by_its_original(
    tmp_path: Path, store_dir: Path, documents: Path
) -> None:
    # What a watcher does: the event names report.pdf, whose record is report.pdf.md.
    src = tmp_path / "src"
    src.mkdir()
    data = (documents / "report.pdf").read_bytes()
    (src / "report.pdf").write_bytes(data)
    ingest_hash(src, store_dir)
    (src / "report.pdf").write_bytes(data.replace(b"Plant operations", b"Plant operationz"))
    changed = ingest_hash(src, store_dir, paths=["report.pdf"])
    assert (changed.added, changed.updated) == ([], ["report.pdf.md"])
    (src / "report.pdf").unlink()
    gone = ingest_hash(src, store_dir, paths=["report.pdf"])
    assert gone.deleted == ["report.pdf.md"]
    with open_store(CollectionAddress(store=store_dir)) as store:
        assert store.list_documents() == []
        meta = store.read_meta()
        assert meta is not None and (meta.documents, meta.chunks) == (0, 0)
    assert _blob_versions(store_dir) == set()


# --- issue 29: bounded extraction, remembered skips, the small extractor fixes -------------------


def test_a_docx_keeps_the_text_after_an_entity_reference() -> None:
    # Entities stay unresolved (no XXE): before, the run's text stopped at the reference.
    data = docx_with(
        "before &co; after the entity", doctype='<!DOCTYPE w:document [<!ENTITY co "ACME">]>'
    )
    got = formats.extract("a.docx", data)
    assert isinstance(got, formats.Extracted), got
    assert _flat(got.text) == "before after the entity"


def test_one_bad_spine_entry_keeps_the_rest_of_the_epub(tmp_path: Path) -> None:
    make_epub(tmp_path / "whole.epub")
    whole = zipfile.ZipFile(tmp_path / "whole.epub")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in whole.infolist():
            if info.filename != "OEBPS/text/ch2.xhtml":  # listed in the spine, missing
                z.writestr(info, whole.read(info))
    got = formats.extract("novel.epub", out.getvalue())
    assert isinstance(got, formats.Extracted), got
    kept = [s for name, s, where in FACTS if name == "novel.epub" and where != "chapter 2"]
    assert len(kept) == 2 and all(_flat(s) in _flat(got.text) for s in kept)
    assert [label for _, label in got.marks] == ["1", "2"]


def test_a_zip_member_inflating_past_its_declared_size_is_refused() -> None:
    # 64 MiB of zeros that say they are 1000 bytes: inflated 64 KiB at a time, refused at once.
    data = lying_zip("word/document.xml", 64 << 20)
    got = formats.extract("lies.docx", data)
    assert isinstance(got, formats.Unsupported)
    assert "inflates past the 1000 bytes it declares" in got.reason, got.reason


def test_a_lying_member_is_inflated_a_step_at_a_time() -> None:
    """What the refusal costs: the member is inflated 64 KiB at a time, so the checker never
    holds more than a step (here under 1 MiB at its peak against the 64 MiB the member
    inflates to; before, inflating it in one call also ended in the refusal above, so that
    test alone could not tell)."""
    from semfs.ingest.formats.base import Unsupported, open_zip

    data = lying_zip("word/document.xml", 64 << 20)
    tracemalloc.start()
    try:
        got = open_zip(data, "lies.docx")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(got, Unsupported) and "inflates past" in got.reason
    assert peak < 1 << 20, f"{peak >> 10} KiB at the peak"


def test_a_zip_that_amplifies_too_much_is_refused() -> None:
    # The DOCX: a small file whose document.xml declares 20 MB (over 100 times).
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"<w:t>word</w:t>" * ((20 << 20) // 15))
    got = formats.extract("amplified.docx", buf.getvalue())
    assert isinstance(got, formats.Unsupported)
    assert "over 100 times its size (a zip bomb?)" in got.reason, got.reason


def test_max_size_bounds_a_converted_documents_text(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    data = docx_with("word " * 40_000)  # 200 KB of text in a ~40 KB file
    (src / "long.docx").write_bytes(data)
    report = ingest_hash(src, store_dir, max_bytes=len(data) + 1000)
    (skip,) = report.skipped
    assert skip.path == "long.docx" and "over the" in skip.reason and "--max-size" in skip.reason
    assert ingest_hash(src, store_dir, max_bytes=1 << 20).added == ["long.docx.md"]


def _counting_extractions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths formats.extract is called with from now on (it still extracts)."""
    calls: list[str] = []
    real = formats.extract

    def counting(path: str, data: bytes, **kw: bool) -> formats.Extracted | formats.Unsupported:
        calls.append(path)
        return real(path, data, **kw)

    monkeypatch.setattr(formats, "extract", counting)
    return calls


def test_a_file_skipped_for_its_bytes_is_not_extracted_again_while_unchanged(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A converted file its extractor refuses is stored as it is (issue 30), its record naming
    # the extractor that refused it: while its bytes stay the same it is not extracted again.
    src = tmp_path / "src"
    make_bad(src)
    memo = tmp_path / "skipped.json"
    first = ingest_hash(src, store_dir, skip_memo=memo)
    assert {s.path for s in first.unsearched} == set(BAD_REASONS) and not first.skipped
    calls = _counting_extractions(monkeypatch)
    again = ingest_hash(src, store_dir, skip_memo=memo)
    assert sorted(again.unchanged) == sorted(BAD_REASONS) and calls == []
    # A changed mtime with the same bytes is no change; --retry-skipped extracts again.
    os.utime(src / "bomb.docx", ns=(1, 1))
    touched = ingest_hash(src, store_dir, skip_memo=memo)
    assert calls == [] and "bomb.docx" in touched.unchanged
    retried = ingest_hash(src, store_dir, skip_memo=memo, retry_skipped=True)
    assert sorted(calls) == sorted(BAD_REASONS)
    assert sorted(retried.unchanged) == sorted(BAD_REASONS) and not retried.skipped


def test_a_document_whose_text_is_over_max_size_is_not_extracted_again_while_unchanged(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The skip memory's own case: a DOCX whose text is over --max-size is skipped (not stored
    as it is, so no record says "refused before"), and only the memory spares the next run its
    extraction (before, disabling the memory failed no test: the refused files above reach
    "refused before" through their records)."""
    src = tmp_path / "src"
    src.mkdir()
    data = docx_with("word " * 40_000)  # 200 KB of text in a ~40 KB file
    (src / "long.docx").write_bytes(data)
    memo = tmp_path / "skipped.json"
    cap = len(data) + 1000
    (first,) = ingest_hash(src, store_dir, max_bytes=cap, skip_memo=memo).skipped
    assert "--max-size" in first.reason
    calls = _counting_extractions(monkeypatch)
    (again,) = ingest_hash(src, store_dir, max_bytes=cap, skip_memo=memo).skipped
    assert calls == [] and "not extracted again" in again.reason, again.reason
    retried = ingest_hash(src, store_dir, max_bytes=cap, skip_memo=memo, retry_skipped=True)
    assert calls == ["long.docx"] and [s.path for s in retried.skipped] == ["long.docx"]


def test_a_pdf_hit_cites_the_page_of_its_answering_lines(tmp_path: Path, store_dir: Path) -> None:
    """The index page scores best as a whole; the lines shown are on page 2, and so is the
    cite. The view's title is the file name (no metadata title), not a "# " line of the text."""
    from semfs.ingest.search import Searcher

    src = tmp_path / "src"
    src.mkdir()
    make_indexed_pdf(src / "manual.pdf")
    ingest_hash(src, store_dir)
    with open_store(CollectionAddress(store=store_dir)) as store:
        rec = store.get_document("manual.pdf.md")
        assert rec is not None
        texts = store.chunk_texts(rec.path, rec.gen, range(rec.chunks))
        view = "".join(texts[i] for i in sorted(texts))
        [hit] = Searcher(store).search(
            SearchRequest(
                "flux capacitor recalibrated ninety days night shift", k=1, mode="keyword"
            )
        )
    assert view.startswith("# manual\n")
    assert "\\# This file was automatically generated" in view
    assert hit.title == "manual"
    index_page = view.split("\n").index("## Page 3") + 1
    assert hit.start_line >= index_page, "the index page must score best, or this shows nothing"
    answer = [e for e in hit.excerpts if any(INDEXED_ANSWER in t for _, t in e.lines)]
    assert answer and answer[0].heading.endswith("Page 2")
    assert hit.place == "page 2"
    assert hit.to_json()["page"] == 2


def test_deeply_nested_html_is_read_not_skipped() -> None:
    """latex2html's index pages nest 755 elements deep (gnuplot-doc's node649.html); the
    converter recurses per element, past Python's default 1,000 frames, and libxml2 stops at
    256 levels unless told otherwise."""
    page = b"<html><body><h1>Index</h1>" + b"<div><p>entry deep</p>" * 1200 + b"</body></html>"
    got = formats.extract("node649.html", page)
    assert isinstance(got, formats.Extracted), got
    assert got.text.count("entry deep") == 1200
    # Deeper than libxml2 reads (the rest of the page would be cut off): a reason, and the
    # worker lives on.
    worse = formats.extract("worse.html", b"<div>" * 25_000 + b"x")
    assert isinstance(worse, formats.Unsupported) and "nest over 2,048 deep" in worse.reason
    assert isinstance(formats.extract("node649.html", page), formats.Extracted)


def test_html_headings_drop_their_anchors(tmp_path: Path) -> None:
    page = (
        b'<html><body><main><h1><a href="#what-is-rustdoc">What is rustdoc?</a></h1>'
        b'<p>Rustdoc builds documentation.</p><h2 id="use">Use it'
        b'<a class="headerlink" href="#use">\xc2\xb6</a></h2><p>Run it.</p></main></body></html>'
    )
    got = formats.extract("rustdoc.html", page)
    assert isinstance(got, formats.Extracted)
    assert got.text.startswith("# What is rustdoc?\n"), got.text
    assert "\n## Use it\n" in got.text and "](#" not in got.text
    assert [label for _, label in got.marks] == ["What is rustdoc?", "Use it"]


# --- issue 39.5: small converted files whose work grew past their size --------------------------


def test_a_docx_looks_its_styles_up_once_not_once_a_paragraph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # python-docx scans every style of the document for each paragraph's style: a 40 KB DOCX of
    # 2,000 short paragraphs took 3.2 s (a minute with 10,000 and a template's 160 styles).
    import docx
    from docx.oxml.styles import CT_Styles

    document = docx.Document()
    document.add_heading("Notes", 1)
    document.add_paragraph("a point", style="List Bullet")
    for i in range(2000):
        document.add_paragraph(f"Line {i} of the notes.")
    buf = io.BytesIO()
    document.save(buf)
    scans = []
    real = CT_Styles.default_for
    monkeypatch.setattr(CT_Styles, "default_for", lambda self, t: scans.append(t) or real(self, t))
    got = formats.extract("notes.docx", buf.getvalue(), isolated=False)  # here: the spy sees it
    assert isinstance(got, formats.Extracted)
    assert got.text.startswith("# Notes\n\n- a point\n\nLine 0 of the notes.\n\n")
    assert len(scans) <= 1, len(scans)


def test_a_docx_paragraph_without_a_style_has_the_default_style() -> None:
    # python-docx's rule, read off the styles part's elements (issue 45.4): the last style
    # marked default is the default.
    import docx
    from docx.oxml.ns import qn

    document = docx.Document()
    document.add_paragraph("Plain words")  # no pStyle: the default's
    document.add_paragraph("Listed words").style = document.styles["List Number"]
    for style in document.styles.element.iterchildren(qn("w:style")):
        style.attrib.pop(qn("w:default"), None)
    document.styles["Heading 2"].element.set(qn("w:default"), "1")
    buf = io.BytesIO()
    document.save(buf)
    got = formats.extract("styled.docx", buf.getvalue(), isolated=False)
    assert isinstance(got, formats.Extracted)
    assert got.text == "## Plain words\n\n- Listed words\n", got.text


def test_an_epub_reads_a_chapter_its_spine_repeats_once(tmp_path: Path) -> None:
    make_epub(tmp_path / "novel.epub")
    book = zipfile.ZipFile(tmp_path / "novel.epub")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in book.infolist():
            data = book.read(info)
            if info.filename.endswith(".opf"):  # the spine names chapter 1 a thousand times
                data = data.replace(b'<itemref idref="c1"/>', b'<itemref idref="c1"/>' * 1000)
            z.writestr(info, data)
    assert len(out.getvalue()) < 3000
    got = formats.extract("novel.epub", out.getvalue())
    whole = formats.extract("novel.epub", (tmp_path / "novel.epub").read_bytes())
    assert isinstance(got, formats.Extracted) and got == whole


def test_a_pdf_whose_page_tree_repeats_a_page_is_refused_by_its_size() -> None:
    # 1,001 bytes: a page-tree node of 10 kids, each the same node, 4 levels: 10,000 pages,
    # 259 KB of text and 10,000 chunks to embed.
    data = _repeated_pages_pdf(depth=4, fan=10)
    assert len(data) < 1100
    got = formats.extract("tiny.pdf", data)
    assert isinstance(got, formats.Unsupported), got
    assert got.reason.startswith("PDF of 10000 pages in ") and "more pages than" in got.reason
    small = formats.extract("tiny.pdf", _repeated_pages_pdf(depth=2, fan=5))  # 25 pages: fine
    assert isinstance(small, formats.Extracted) and len(small.marks) == 25


def _repeated_pages_pdf(depth: int, fan: int) -> bytes:
    """A PDF whose page tree lists one page ``fan ** depth`` times (each level: ``fan`` times
    the same node of the level below)."""
    font = "<< /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >>"
    text = "BT /F1 12 Tf 72 720 Td (Hello page) Tj ET"
    objs = {
        1: "<< /Type /Catalog /Pages 4 0 R >>",
        2: f"<< /Length {len(text)} >>\nstream\n{text}\nendstream",
        3: f"<< /Type /Page /Parent 4 0 R /MediaBox [0 0 612 792] /Contents 2 0 R "
        f"/Resources {font} >>",
    }
    for level in range(depth):
        kid = 3 if level == depth - 1 else 5 + level
        kids = " ".join([f"{kid} 0 R"] * fan)
        objs[4 + level] = f"<< /Type /Pages /Kids [{kids}] /Count {fan ** (depth - level)} >>"
    out, offsets = "%PDF-1.4\n", {}
    for k in sorted(objs):
        offsets[k] = len(out)
        out += f"{k} 0 obj\n{objs[k]}\nendobj\n"
    xref, n = len(out), max(objs)
    out += f"xref\n0 {n + 1}\n0000000000 65535 f \n"
    out += "".join(f"{offsets[k]:010d} 00000 n \n" for k in range(1, n + 1))
    out += f"trailer\n<< /Size {n + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return out.encode()
