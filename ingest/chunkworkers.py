"""The first pass's chunking in child processes: tokenizer, chunker, hashes and BM25 off the
writer's core.

A first pass on two cores was bound by its one main thread: it cut each document into chunks
(the model's tokenizer counting every block and merge), hashed each chunk's model text and
made its BM25 vector, then handed the chunks to the store, whose writes and compactions hold
the GIL. Threads could not share that work. Here the reading threads
(:func:`semfs.ingest.parallel.stream`) hand each new document's text to a child process of
their own (``python -m semfs.ingest.chunkworkers``), which returns its chunk records, their
model texts and, once the run's BM25 weights are known, their sparse vectors: the main thread
only writes them.

Rules a caller may rely on:

* What comes back is what :func:`semfs.ingest.records.chunk_document` and the run's
  :class:`~semfs.ingest.store.bm25.Bm25` make in process, field for field (a test compares).
* :meth:`ChunkWorkers.chunk` returns None whenever a child cannot answer (it died, it took
  over :data:`TIMEOUT_S`, it answered nonsense): the caller chunks that document in process,
  as it did before, so a child never costs a document. A dead child is started again for the
  next one.
* The pipe carries JSON lines, never pickles (as :mod:`semfs.ingest.formats.worker`'s): the
  chunker parses source code with native code, and a child a hostile file took over can send
  the parent nothing but text.
* One child per reading thread at most, started on the first document it chunks; each holds
  one document at a time, and the model's tokenizer only (not the model). :meth:`close` ends
  them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from semfs.ingest.formats.worker import ChildPool, end, kill, read_line, spawn
from semfs.ingest.sources import Document, Original
from semfs.ingest.store.schema import ChunkRecord

if TYPE_CHECKING:
    from semfs.ingest.embedding.embedder import Embedder

# A run that reads fewer files than this chunks them in process: a child's start (its
# imports and the tokenizer, about 0.5 s of CPU) would cost more than it saves (a watcher's
# batch, a small folder).
FROM_FILES = 64
# Documents read ahead of the writer per child (the stream's window, 2 per thread without
# children): with 2 a child finished its few documents during one window's write (256 chunks,
# Edge's calls holding the GIL) and waited, so writer and children took turns.
AHEAD = 8
# The longest a child may take over one document before it is stopped and the document is
# chunked in process (the chunker's own budgets bound a hostile file far below this).
TIMEOUT_S = 120.0

# A sparse vector as it travels: its indices and values.
Sparse = tuple[list[int], list[float]]


@dataclass(frozen=True)
class Chunked:
    """A document's chunks as a child made them: the records (of generation ``gen``), what
    the model sees of each, their BM25 vectors (None when the run's weights were not known
    when it was sent) and the words BM25 cut."""

    gen: int
    records: list[ChunkRecord]
    texts: list[str]
    sparse: list[Sparse] | None
    words_cut: int


class ChunkWorkers(ChildPool["_Child"]):
    """Up to ``jobs`` children that chunk documents for the model ``model`` (counting tokens
    as it does; ``max_tokens`` is asked once, when the first child starts) into generation
    ``gen``. Thread-safe: each :meth:`chunk` runs on an idle child, or starts one."""

    def __init__(self, model: str, max_tokens: Callable[[], int], gen: int, jobs: int) -> None:
        super().__init__(_Child, jobs)
        self.model = model
        self.gen = gen
        self._max_tokens = max_tokens
        self._limit: int | None = None
        # The run's BM25 weights: None until known (a new store measures them on its first
        # chunks), then (average length or None for Bm25's default,).
        self.bm25: tuple[float | None] | None = None

    def chunk(self, doc: Document) -> Chunked | None:
        """``doc``'s chunks, made in a child; None when no child could (chunk it here)."""
        with self.lend() as child:
            if self._limit is None:
                self._limit = self._max_tokens()
            bm25 = self.bm25
            job = {
                "path": doc.path,
                "text": doc.text,
                "unit": doc.original.unit if doc.original else None,
                "marks": doc.original.marks if doc.original else (),
                "gen": self.gen,
                "bm25": list(bm25) if bm25 is not None else None,
            }
            answer = child.ask(self.model, self._limit, job)
            return _decode(answer, self.gen) if answer is not None else None


class _Child:
    """One child process, started on first use and again after it died."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None

    def ask(self, model: str, max_tokens: int, job: dict[str, Any]) -> dict[str, Any] | None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            # One thread each: the child's tokenizer must not start a pool per core beside
            # the other children and the writer.
            env = {**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
            proc = self._proc = spawn([__name__, model, str(max_tokens)], env)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(job).encode() + b"\n")
            proc.stdin.flush()
        except OSError:
            self._stop()
            return None
        size = len(job["text"] or "")
        line = read_line(proc.stdout, time.monotonic() + TIMEOUT_S + size / 100_000)
        if not line:  # past the deadline, or the child died
            self._stop()
            return None
        try:
            answer = json.loads(line)
        except ValueError:
            self._stop()
            return None
        return answer if isinstance(answer, dict) and "records" in answer else None

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        kill(proc)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        end(proc)


def _decode(answer: dict[str, Any], gen: int) -> Chunked | None:
    """The child's answer, checked field by field (what the parent writes is only what it
    would have made itself); None when it is not what a child sends."""
    try:
        records = [ChunkRecord.from_payload(p) for p in answer["records"]]
        texts = [str(t) for t in answer["texts"]]
        sparse = answer["sparse"]
        vectors = (
            None
            if sparse is None
            else [([int(i) for i in ix], [float(v) for v in vs]) for ix, vs in sparse]
        )
        if len(texts) != len(records) or (vectors is not None and len(vectors) != len(records)):
            return None
        if any(r.gen != gen for r in records):
            return None
        return Chunked(gen, records, texts, vectors, int(answer["cut"]))
    except (KeyError, TypeError, ValueError, IndexError):
        return None


class _Counter:
    """What :func:`~semfs.ingest.records.chunk_document` asks of an embedder."""

    def __init__(self, count_tokens: Callable[..., list[int]], max_tokens: int) -> None:
        self.count_tokens = count_tokens
        self.max_tokens = max_tokens


def _serve(model: str, max_tokens: int) -> None:
    """The child's loop: a document as one JSON line in, its chunks as one JSON line out."""
    from semfs.ingest.embedding.embedder import load_embedder
    from semfs.ingest.records import chunk_document, keyword_text
    from semfs.ingest.store.bm25 import bm25_for

    counter = _Counter(load_embedder(model).count_tokens, max_tokens)
    models: dict[float | None, Any] = {}
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        job = json.loads(line)
        original = None
        if job["unit"] is not None:
            marks = tuple((int(n), str(label)) for n, label in job["marks"])
            original = Original("", b"", 0, "", "", str(job["unit"]), marks)
        doc = Document(str(job["path"]), str(job["text"]), 0, 0.0, "", 0, original=original)
        records, texts = chunk_document(cast("Embedder", counter), doc, int(job["gen"]))
        sparse, cut = None, 0
        if job["bm25"] is not None:
            avg = job["bm25"][0]
            bm25 = models.get(avg)
            if bm25 is None:
                bm25 = models[avg] = bm25_for(avg)
            before = bm25.words_cut
            sparse = []
            for rec, text in zip(records, texts, strict=True):
                sv = bm25.embed_document(keyword_text(rec, text))
                sparse.append((list(sv.indices), list(sv.values)))
            cut = bm25.words_cut - before
        answer = {
            "records": [r.to_payload() for r in records],
            "texts": texts,
            "sparse": sparse,
            "cut": cut,
        }
        stdout.write(json.dumps(answer).encode() + b"\n")
        stdout.flush()


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
