"""Word pieces counted word by word (issue 45.4): the packaged model's counts, exactly the
tokenizer's, on built edge cases (control characters, every ASCII symbol, added tokens as
written and lowercased, words past WordPiece's 100 characters, text that is not ASCII:
typographic punctuation, Unicode spaces, accents, combining marks, CJK, symbols, other
scripts) and on the repository's own docs and code."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from semfs.ingest.embedding import wordpieces
from semfs.ingest.embedding.base import PACKAGED_MODEL, model_location
from semfs.ingest.embedding.onnx import _counter
from semfs.ingest.embedding.wordpieces import WordPieces, word_pieces
from tests.helpers import REPO

# Characters that are not ASCII, as documentation holds them: punctuation, spaces, letters
# with accents (precomposed and combining), ligatures, CJK, symbols, other scripts, controls.
# fmt: off
FOREIGN = [
    "’", "‘", "“", "”", "—", "–", "…", "¶", "‣", "•", "«", "»", "¿", "¡", "§", "·", "„", "‹",
    "\u00a0", "\u2009", "\u202f", "\u3000", "\u2028", "\u0085", "\u200b", "\u200d", "\ufeff",
    "é", "É", "ö", "Ł", "ß", "ñ", "İ", "ı", "ſ", "K", "Å", "e\u0301", "\u0301", "\u0325",
    "ﬁ", "²", "中", "日本語", "한", "©", "→", "∞", "±", "€", "─", "│", "π", "Σ", "ς", "Ж",
    "\u0903", "\ufffd", "\U0001f600", "\ue000", "\u037e", "Zürich", "naïve", "[MASK]",
]
# fmt: on


def _tokenizer() -> tuple[Any, Path]:
    tok_file = Path(model_location(PACKAGED_MODEL)) / "tokenizer.json"
    return _counter(str(tok_file)), tok_file


def _pieces() -> tuple[Any, WordPieces]:
    tokenizer, tok_file = _tokenizer()
    pieces = word_pieces(tokenizer, tok_file)
    assert pieces is not None
    return tokenizer, pieces


def _expected(tokenizer: Any, texts: list[str]) -> list[int]:
    return [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def _texts() -> list[str]:
    rng = random.Random(45)
    alphabet = [
        *map(chr, range(128)),
        *["[MASK]", "[mask]", "[SEP]", "x" * 101, "ab" * 50, "Zürich", "\u00a0", "中", "\ufffd"],
    ]
    built = ["".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(3000)]
    # Mostly ASCII words with a few foreign characters among them, as prose has them.
    words = ["the", "Config", "x" * 99, "don", "t", " ", "  ", "\n", "-", ".", "(", ")", "a1"]
    mixed = ["".join(rng.choices(words * 3 + FOREIGN, k=rng.randint(1, 60))) for _ in range(3000)]
    own = [
        block
        for path in sorted([*REPO.glob("docs/*.md"), *REPO.glob("ingest/*.py")])
        for block in path.read_text().split("\n\n")
    ]
    return built + mixed + own


def test_the_counts_are_the_tokenizers() -> None:
    tokenizer, pieces = _pieces()
    texts = _texts()
    expected = _expected(tokenizer, texts)
    assert pieces.count(texts) == expected
    assert pieces.count(texts) == expected  # again, every word now from the cache
    assert len(pieces.words) > 1000  # the ASCII texts were counted word by word


def test_typographic_text_is_counted_word_by_word() -> None:
    """Quotes, dashes, no-break spaces and accents have ASCII stand-ins: such a text's words
    go to the cache (it was not given to the tokenizer whole), with the tokenizer's count."""
    tokenizer, pieces = _pieces()
    text = "“Don’t panic” — Zoë said\u00a0…  the café’s crème brûlée ¶"
    assert pieces.count([text]) == _expected(tokenizer, [text])
    assert {"zoe", "cafe", "creme", "brulee", "panic"} <= pieces.words.keys()
    # A symbol joins its neighbours into a word only the tokenizer can split: counted whole.
    other = "see → Zuwachs ©2024"
    assert pieces.count([other]) == _expected(tokenizer, [other])
    assert "zuwachs" not in pieces.words


@pytest.mark.parametrize("char", FOREIGN)
def test_each_character_alone_and_between_words(char: str) -> None:
    tokenizer, pieces = _pieces()
    texts = [char, f"a{char}b", f"word{char}{char}word x", f"{char} Ab{char}", char * 3]
    assert pieces.count(texts) == _expected(tokenizer, texts)


def test_the_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_WORDS the cache is emptied, and the counts stay exact."""
    monkeypatch.setattr(wordpieces, "MAX_WORDS", 40)
    tokenizer, pieces = _pieces()
    texts = [f"w{i} x{i % 7} y{i % 13} and" for i in range(200)]
    for i in range(0, len(texts), 5):
        batch = texts[i : i + 5]
        assert pieces.count(batch) == _expected(tokenizer, batch)
        assert len(pieces.words) <= 40
