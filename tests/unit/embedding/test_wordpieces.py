"""Word pieces counted word by word (issue 45.4): the packaged model's counts, exactly the
tokenizer's, on built edge cases (control characters, every ASCII symbol, added tokens as
written and lowercased, words past WordPiece's 100 characters, text that is not ASCII) and on
the repository's own docs and code."""

from __future__ import annotations

import random
from pathlib import Path

from semfs.ingest.embedding.base import PACKAGED_MODEL, model_location
from semfs.ingest.embedding.onnx import _counter
from semfs.ingest.embedding.wordpieces import word_pieces
from tests.helpers import REPO


def _texts() -> list[str]:
    rng = random.Random(45)
    alphabet = [
        *map(chr, range(128)),
        *["[MASK]", "[mask]", "[SEP]", "x" * 101, "ab" * 50, "Zürich", "\u00a0", "中", "\ufffd"],
    ]
    built = ["".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(3000)]
    own = [
        block
        for path in sorted([*REPO.glob("docs/*.md"), *REPO.glob("ingest/*.py")])
        for block in path.read_text().split("\n\n")
    ]
    return built + own


def test_the_counts_are_the_tokenizers() -> None:
    tok_file = Path(model_location(PACKAGED_MODEL)) / "tokenizer.json"
    tokenizer = _counter(str(tok_file))
    pieces = word_pieces(tokenizer, tok_file)
    assert pieces is not None
    texts = _texts()
    expected = [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert pieces.count(texts) == expected
    assert pieces.count(texts) == expected  # again, every word now from the cache
    assert len(pieces.words) > 1000  # the ASCII texts were counted word by word
