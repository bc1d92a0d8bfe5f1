"""A document's committed record and its chunk records, built from what the source read and
the chunker cut: what the pipeline writes for each document (beside :mod:`semfs.ingest.chunking`,
which finds the spans; the pipeline decides when and where they are written)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from semfs.ingest.chunking import (
    code_embedding_text,
    document_description,
    document_title,
    embedding_text,
    rechunk,
)
from semfs.ingest.embedding.embedder import Embedder
from semfs.ingest.sources import Document
from semfs.ingest.store import Store
from semfs.ingest.store.bm25 import code_keyword_text
from semfs.ingest.store.schema import ChunkRecord, DocumentRecord, vector_hash
from semfs.ingest.syntax import is_program


def document_record(
    doc: Document,
    chunks: int,
    gen: int,
    offsets: Sequence[int] | None,
    split_lines: bool | None,
) -> DocumentRecord:
    """The committed record of ``doc``: what the source says, plus where its chunks are."""
    original = doc.original
    return DocumentRecord(
        doc.path,
        doc.size,
        doc.mtime,
        doc.sha256,
        chunks,
        gen,
        offsets,
        mtime_ns=doc.mtime_ns,
        split_lines=split_lines,
        mode=doc.mode,
        uid=doc.uid,
        gid=doc.gid,
        original=original.path if original else None,
        original_size=original.size if original else None,
        original_sha256=original.sha256 if original else None,
        extractor=original.extractor if original else None,
    )


def previous_chunks(store: Store, old: DocumentRecord | None) -> list[str]:
    """The chunk texts of ``old`` (the stored version a changed document replaces), in
    order; none when there are none or some are missing (then it is chunked afresh)."""
    if old is None or old.as_is or not old.chunks:
        return []
    texts = store.chunk_texts(old.path, old.gen, range(old.chunks))
    return [texts[i] for i in range(old.chunks)] if len(texts) == old.chunks else []


def keyword_text(rec: ChunkRecord, text: str) -> str:
    """What BM25 indexes of a chunk whose model text is ``text``: a program's source (not a
    configuration file's) with its identifiers' parts as well (:func:`code_keyword_text`)."""
    return code_keyword_text(text) if is_program(rec.syntax) else text


def chunk_document(
    embedder: Embedder, doc: Document, gen: int, previous: Sequence[str] = ()
) -> tuple[list[ChunkRecord], list[str]]:
    """``doc``'s chunk records and what the model sees of each (context line + chunk text).
    ``previous``: the chunk texts of the version it replaces, kept where the text still has
    them (:func:`semfs.ingest.chunking.rechunk`: an edit re-embeds one or two chunks)."""
    assert doc.text is not None  # only unchanged views go unextracted, and are not here
    where = _Places(doc.original.unit, doc.original.marks) if doc.original else None
    # A page (slide, chapter) starts a chunk, so a hit cites one: sections need not.
    cuts = where.lines if where and where.numbered else []
    spans = rechunk(doc.text, doc.path, embedder.count_tokens, embedder.max_tokens, cuts, previous)
    title = document_title(doc.text, doc.path)
    description = document_description(doc.text, doc.path)
    # Code: the path and the definitions around the chunk say what it is about.
    texts = [
        code_embedding_text(s, doc.path) if s.syntax else embedding_text(s, title) for s in spans
    ]
    records = [
        ChunkRecord(
            doc.path,
            gen,
            s.index,
            s.start,
            s.end,
            s.start_line,
            s.end_line,
            s.text,
            s.heading,
            title,
            description,
            where.of(s.start_line, s.end_line) if where else "",
            s.fence,
            s.syntax,
            s.outline,
            s.symbols,
            vhash=vector_hash(text),
        )
        for s, text in zip(spans, texts, strict=True)
    ]
    return records, texts


class _Places:
    """Which page (slide, chapter) a chunk's lines are on, from a view's marks."""

    def __init__(self, unit: str, marks: Sequence[tuple[int, str]]) -> None:
        self.unit = unit
        self.numbered = unit in ("page", "slide", "chapter")
        self.lines = [line for line, _label in marks]
        self.labels = [label for _line, label in marks]

    def of(self, start_line: int, end_line: int) -> str:
        """ "page 7", "pages 7-8"; for sections the one a chunk starts in: "section Setup"."""
        if not self.unit or not self.lines:
            return ""
        first = bisect_right(self.lines, start_line) - 1
        last = bisect_right(self.lines, end_line) - 1
        if last < 0:
            return ""
        first = max(first, 0)
        if self.unit == "section":
            return f"section {self.labels[first]}"
        if first == last:
            return f"{self.unit} {self.labels[first]}"
        return f"{self.unit}s {self.labels[first]}-{self.labels[last]}"
