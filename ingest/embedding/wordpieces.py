"""A BERT model's token counts for ASCII text, word by word from a cache: the chunker's
counts at a fraction of the tokenizer's cost, and exactly the tokenizer's.

Chunking measures every block of a document in the model's tokens, and the tokenizer was
the first pass's largest cost (about 500 µs of CPU per chunk on the shared corpora, issue
45.4): it normalizes, splits and matches word pieces afresh for every text, and makes each
piece's string and offsets, where only their number is wanted. A BERT tokenizer
(``BertNormalizer`` with lowercase, ``BertPreTokenizer``, ``WordPiece``) counts a text as the
sum of its words' counts, and a word's count depends on the word alone. For ASCII text its
rules are short: control characters go, tabs and line ends are spaces, letters are
lowercased, and the words are the runs of letters and digits and each other visible
character alone (every ASCII symbol is punctuation to it). So a word is counted once, by the
tokenizer itself, and then looked up.

Rules a caller may rely on:

* :meth:`WordPieces.count` gives what ``tokenizer.encode_batch(texts,
  add_special_tokens=False)`` gives in ids per text, for every text: a text that is not ASCII,
  or holds one of the tokenizer's added tokens (``[MASK]``: matched before normalizing), is
  counted by the tokenizer as before (a test compares both on the shared corpora and on
  built edge cases).
* :func:`word_pieces` returns None for a tokenizer whose rules are not these (another
  normalizer or pre-tokenizer, cased, another model): the caller counts with the tokenizer.
* The cache of words is bounded (:data:`MAX_WORDS`; emptied when full).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Distinct words remembered (a documentation collection has tens of thousands).
MAX_WORDS = 200_000
# BertNormalizer's clean_text on ASCII: control characters are removed (not made spaces),
# tabs and line ends become spaces.
_DROP = dict.fromkeys([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])
# BertPreTokenizer on what is left: runs of letters and digits, and each other non-space
# character alone.
_WORD = re.compile(r"[a-z0-9]+|[^ \t\n\ra-z0-9]")
_BERT = (
    {
        "type": "BertNormalizer",
        "clean_text": True,
        "handle_chinese_chars": True,
        "strip_accents": None,
        "lowercase": True,
    },
    {"type": "BertPreTokenizer"},
)


class WordPieces:
    """Counts in word pieces for ``tokenizer`` (a ``tokenizers.Tokenizer`` without truncation
    or padding) whose added tokens are ``added``."""

    def __init__(self, tokenizer: Any, added: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.added = tuple(added)
        self._lowered = tuple(a.lower() for a in added)
        # A text holding none of these characters holds no added token (the usual "[").
        self._starts = tuple({a[:1] for a in (*self.added, *self._lowered) if a})
        self.words: dict[str, int] = {}
        # encode_batch_fast (tokenizers 0.20 on) leaves out the offsets: the same ids.
        self._encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)

    def count(self, texts: Sequence[str]) -> list[int]:
        counts: list[int | None] = []
        slow: list[int] = []
        for i, text in enumerate(texts):
            n = self._ascii(text) if text.isascii() else None
            if n is not None:
                counts.append(n)
            else:
                counts.append(None)
                slow.append(i)
        if slow:
            encodings = self._encode([texts[i] for i in slow], add_special_tokens=False)
            for i, e in zip(slow, encodings, strict=True):
                counts[i] = len(e.ids)
        return [int(c or 0) for c in counts]

    def _ascii(self, text: str) -> int | None:
        """``text``'s count, or None when it holds an added token (as written, or after
        normalizing, whichever way the tokenizer matches it)."""
        clean = text.translate(_DROP).lower()
        if any(c in text or c in clean for c in self._starts) and (
            any(a in text for a in self.added) or any(a in clean for a in self._lowered)
        ):
            return None
        found = _WORD.findall(clean)
        try:
            return sum(map(self.words.__getitem__, found))
        except KeyError:  # words met for the first time: the tokenizer counts each once
            if len(self.words) >= MAX_WORDS:
                self.words.clear()
            new = list(set(found) - self.words.keys())
            for word, e in zip(new, self._encode(new, add_special_tokens=False), strict=True):
                self.words[word] = len(e.ids)
            return sum(map(self.words.__getitem__, found))


def word_pieces(tokenizer: Any, tok_file: Path) -> WordPieces | None:
    """A :class:`WordPieces` for the tokenizer saved in ``tok_file`` when it is an uncased
    BERT WordPiece tokenizer; None otherwise."""
    try:
        config = json.loads(tok_file.read_text())
        model = config["model"]
        if (config.get("normalizer"), config.get("pre_tokenizer")) != _BERT:
            return None
        if model.get("type") != "WordPiece" or model.get("continuing_subword_prefix") != "##":
            return None
        added = [str(a["content"]) for a in config.get("added_tokens") or ()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return WordPieces(tokenizer, added)
