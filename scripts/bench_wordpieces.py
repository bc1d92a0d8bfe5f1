#!/usr/bin/env python3
"""The chunker's token counts on a whole collection: word by word
(:mod:`semfs.ingest.embedding.wordpieces`) against the model's tokenizer, text for text.

Every document under the folder is read as a first ingest reads it (converted formats
extracted), chunked as the chunking children chunk it (the default model), and every text the
chunker counts is kept; then each text's count by :class:`WordPieces` is compared with the
tokenizer's (``encode_batch``, no special tokens) and the CPU of both is reported, with the
share of texts that are not ASCII and of those counted by their ASCII stand-ins. Exit status 1
when any count differs (the differing texts are printed).

Example:
    nice -n 10 .venv/bin/python scripts/bench_wordpieces.py /var/tmp/big/collection
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from semfs.ingest.embedding.base import PACKAGED_MODEL, model_location
from semfs.ingest.embedding.embedder import load_embedder
from semfs.ingest.embedding.onnx import _counter
from semfs.ingest.embedding.wordpieces import word_pieces
from semfs.ingest.records import chunk_document
from semfs.ingest.sources import Document, read_document, scan


class _Recorder:
    """An embedder's count_tokens and budget for chunk_document, keeping what it counts."""

    def __init__(self) -> None:
        embedder = load_embedder()
        self.max_tokens = embedder.max_tokens
        self._count = embedder.count_tokens
        self.texts: list[str] = []

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        self.texts.extend(texts)
        return self._count(texts)


def counted_texts(folder: Path) -> tuple[list[str], int, int]:
    """Every text the chunker counts in the folder's documents; documents; chunks."""
    recorder = _Recorder()
    files, _ = scan(folder)
    documents = chunks = 0
    for f in files:
        doc = read_document(f, root=str(folder))
        if not isinstance(doc, Document) or not doc.text or doc.unsearched:
            continue
        records, _texts = chunk_document(recorder, doc, 1)  # type: ignore[arg-type]
        documents += 1
        chunks += len(records)
    return recorder.texts, documents, chunks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--out", type=Path, help="Write the JSON report here too.")
    args = p.parse_args(argv)
    texts, documents, chunks = counted_texts(args.folder)
    tok_file = Path(model_location(PACKAGED_MODEL)) / "tokenizer.json"
    tokenizer = _counter(str(tok_file))
    started = time.process_time()
    expected = [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    tokenizer_s = time.process_time() - started
    pieces = word_pieces(tokenizer, tok_file)
    if pieces is None:
        print("bench_wordpieces: this model's counts are not word by word", file=sys.stderr)
        return 1
    started = time.process_time()
    got = pieces.count(texts)
    words_s = time.process_time() - started
    wrong = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    foreign = [t for t in texts if not t.isascii()]
    report = {
        "documents": documents,
        "chunks": chunks,
        "texts": len(texts),
        "characters": sum(map(len, texts)),
        "not_ascii": len(foreign),
        "not_ascii_with_stand_ins": sum(pieces._words(t) is not None for t in foreign),
        "wrong": len(wrong),
        "tokenizer_cpu_s": round(tokenizer_s, 2),
        "word_by_word_cpu_s": round(words_s, 2),
        "characters_without_stand_in": "".join(sorted(pieces._foreign)),
    }
    for i in wrong[:20]:
        print(f"differs: {got[i]} against {expected[i]}: {texts[i][:200]!r}", file=sys.stderr)
    print(json.dumps(report, ensure_ascii=False, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, ensure_ascii=False, indent=1))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
