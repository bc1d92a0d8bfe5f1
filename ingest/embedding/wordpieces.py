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

Most text that is not ASCII differs from ASCII by a few characters: typographic quotes and
dashes, no-break spaces, accented letters (13 % of the HTML blocks and 21 % of the PDFs of the
large mixed collection, issue 45.4). The normalizer works character by character, and a
punctuation character is a word of one token whatever it is, so each such character has an
ASCII stand-in with the same words and counts (``é`` -> ``e``, a no-break space -> a space, a dash
-> ``,``), found once per character by the tokenizer's own normalizer and pre-tokenizer
(:meth:`WordPieces._learn`); a text whose characters all have one is counted as ASCII.

Rules a caller may rely on:

* :meth:`WordPieces.count` gives what ``tokenizer.encode_batch(texts,
  add_special_tokens=False)`` gives in ids per text, for every text: a text with a character
  that has no ASCII stand-in (``©``, ``→``, Greek letters: they join their neighbours into
  words), or that holds one of the tokenizer's added tokens (``[MASK]``: matched before
  normalizing), is counted by the tokenizer as before (a test compares both on built edge
  cases and the repository's texts; ``scripts/bench_wordpieces.py`` on a whole collection).
* :func:`word_pieces` returns None for a tokenizer whose rules are not these (another
  normalizer or pre-tokenizer, cased, another model): the caller counts with the tokenizer.
* The cache of words is bounded (:data:`MAX_WORDS`; emptied when one call's new words would
  pass it), and so is the table of characters (an entry per distinct character met, at most one per
  Unicode code point).
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
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # what _DROP removes: seldom any
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
        # Characters that are not ASCII, as met: what each becomes in ASCII (``_DROP``'s
        # entries too, so one translate does both), and those that have no such stand-in.
        self._table: dict[int, str | None] = dict(_DROP)
        self._seen: set[str] = set(map(chr, range(128)))
        self._foreign: set[str] = set()

    def count(self, texts: Sequence[str]) -> list[int]:
        counts = [0] * len(texts)
        slow: list[int] = []  # texts for the tokenizer
        pending: list[tuple[int, list[str]]] = []  # texts with words not yet in the cache
        words = self.words
        for i, text in enumerate(texts):
            found = self._words(text)
            if found is None:
                slow.append(i)
                continue
            try:
                counts[i] = sum(map(words.__getitem__, found))
            except KeyError:
                pending.append((i, found))
        if pending:
            # The words met for the first time, counted by the tokenizer in one call for all
            # the texts (a call costs about as much as a few hundred words: one per text
            # was most of the cost of a first document).
            missing = {w for _, found in pending for w in found if w not in words}
            if len(words) + len(missing) > MAX_WORDS:
                words.clear()
                missing = {w for _, found in pending for w in found}
            new = list(missing)
            for word, e in zip(new, self._encode(new, add_special_tokens=False), strict=True):
                words[word] = len(e.ids)
            for i, found in pending:
                counts[i] = sum(map(words.__getitem__, found))
        if slow:
            encodings = self._encode([texts[i] for i in slow], add_special_tokens=False)
            for i, e in zip(slow, encodings, strict=True):
                counts[i] = len(e.ids)
        return counts

    def _words(self, text: str) -> list[str] | None:
        """``text``'s words as the tokenizer splits them (in ASCII stand-ins, see
        :meth:`_learn`), or None when it must count ``text`` itself: a character without a
        stand-in, or an added token (as written, or after normalizing, whichever way the
        tokenizer matches it)."""
        if text.isascii():
            plain = text.translate(_DROP) if _CONTROL.search(text) else text
        elif (stand_in := self._stand_in(text)) is not None:
            plain = stand_in
        else:
            return None
        clean = plain.lower()
        if any(c in text or c in clean for c in self._starts) and (
            any(a in text for a in self.added) or any(a in clean for a in self._lowered)
        ):
            return None
        return _WORD.findall(clean)

    def _stand_in(self, text: str) -> str | None:
        """``text`` in ASCII with the same words and counts (``_DROP`` applied), or None when
        one of its characters has no stand-in (:meth:`_learn`)."""
        chars = set(text)
        new = chars - self._seen
        if new:
            self._learn(new)
        if not self._foreign.isdisjoint(chars):
            return None
        return text.translate(self._table)

    def _learn(self, chars: set[str]) -> None:
        """Find each character's ASCII stand-in, by the tokenizer's own normalizer and
        pre-tokenizer: what it normalizes to when that is ASCII (a space for a no-break space, ""
        for a control character or a combining accent, ``e`` for ``é``: the normalizer works
        character by character); ``,`` for a character that is a word of its own and one
        token (punctuation such as a typographic quote or a dash, a CJK ideograph): it splits its
        neighbours and counts one, as a comma does. Any other (``©``, ``→``, Greek or
        Cyrillic letters: they join their neighbours into words whose pieces only the
        tokenizer knows) has none."""
        for c in chars:
            self._seen.add(c)
            stand_in = self._stand_in_for(c)
            if stand_in is None:
                self._foreign.add(c)
            else:
                self._table[ord(c)] = stand_in or None

    def _stand_in_for(self, c: str) -> str | None:
        # word_pieces made sure these are BertNormalizer and BertPreTokenizer.
        normalizer, pre = self.tokenizer.normalizer, self.tokenizer.pre_tokenizer
        try:
            n: str = normalizer.normalize_str(c)
            if n.isascii():
                return n
            words = [w for w, _ in pre.pre_tokenize_str(f"a{n}a")]
            if words == ["a", n.strip(), "a"] and _pieces(self.tokenizer, c) == 1:
                return ","
        except ValueError:  # a lone surrogate: the tokenizer refuses the text, as before
            pass
        return None


def _pieces(tokenizer: Any, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


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
