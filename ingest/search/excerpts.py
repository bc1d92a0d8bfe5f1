"""Excerpts: the few lines of a document that best answer a query, with where they sit.

A search hands over, per document, the chunks of it that ranked (best first); this module
scores their lines against the query and keeps the best few within a character budget.

Rules a caller may rely on:

* An excerpt is whole source lines, verbatim, each with its line number (1-based, as
  ``sed -n 'A,Bp'`` counts; blank lines left out), and the heading path in force at its
  first line; only a line longer than the budget is cut, to its best sentences, and the cut
  is marked with ``…``. The best lines come with the lines just after them (and one
  before): an answer often follows the sentence that restates the question.
* Lines are scored by the query's BM25 terms (the same tokenizer as the index: stemmed,
  stop words dropped), each weighted by its rarity among the lines considered, plus a share
  of the same score for the heading path they sit under, plus a little for the chunk's rank
  within the document (the search engine's own view). The best lines are those holding a
  query term; the lines beside them come along (above), and with no match at all the
  fallback below applies. Blank lines, headings, fences, rules, lone HTML/MDX tags, front
  matter, a diagram's source (a ``mermaid`` fence...), a lone template directive (an include
  ``{* src/app.py *}``, ``{% tag %}``) and a block's marker (``/// note | Title``) are never
  picked: they hold the query's words without saying anything.
* With no line matching any term (a purely semantic hit), the best chunk's first lines of
  prose are the excerpt: a document's best passage, not its front matter.
* Each document stays within its own budget; given a ``total``, the documents' lines also
  compete for it, best (rank-weighted) score first, so the total is spent where the
  answers most likely are rather than in fixed shares. A document marked ``lead_only``
  shows the best passage if that is its, and no other lines.
* Dense (model) scoring of lines is not used: measured on the public question sets it
  found no more answers than the terms did, at ~20-40 ms of model time per line.
* Source code chunked by its syntax (a chunk with ``syntax``) has no headings: each line's
  label is the definition it sits in (``class Uploader > def retry_upload``), an excerpt
  never spans two definitions, and carries the innermost one (``definition``: its line,
  label and signature) for the results file to name. Its ``#`` lines are comments, and
  lines of brackets alone are never picked. A program's line (not a configuration file's:
  :func:`semfs.ingest.syntax.is_program`) has these rules too: its terms include its joined
  identifiers' parts (``maxDelay`` holds ``delay``, as the index has it), and a definition's
  own signature line counts :data:`SIGNATURE_WEIGHT` of its score: the signature is the
  excerpt's label already, the answer is the condition, constant or call inside, and a
  condition (``if``, ``while``, ``case``...) counts :data:`CONDITION_WEIGHT` times its score:
  it is where a thing is decided (:func:`_code_score`); docstring and comment lines
  count :data:`COMMENT_WEIGHT` of theirs (a docstring told by the quotes in each chunk's
  own text, :func:`_quoted`: a chunk may start inside one). A line that scores and names an
  attribute or constant assigned in another line at hand (``@ivar maxDelay: the longest
  wait`` and ``maxDelay = 3600``), or continues such a line, lends that assignment its
  score: a constant's hit shows its value, with its description (:func:`_values_named`,
  :data:`DESCRIPTION_WEIGHT`; a name joined of words or in capitals, not a plain word like
  ``size``). Where the query asks for an amount (how many, how long, a default, a limit), a
  matching program line holding a number other than 0 and 1 (outside strings) counts
  :data:`NUMBER_WEIGHT` times: the answer is a value.
* Deterministic: the same chunks and query give the same excerpts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from semfs.ingest.labels import dedupe_path, heading_label
from semfs.ingest.store.bm25 import Bm25, bm25_model, code_keyword_text
from semfs.ingest.store.schema import ChunkRecord, OutlineEntry
from semfs.ingest.syntax import is_program

# A heading match counts this much of a line match: it says the section is about the query.
HEADING_WEIGHT = 0.5
# Added per rank step a chunk is nearer the document's best chunk: breaks ties toward it.
CHUNK_RANK_WEIGHT = 0.15
# A code line that is its definition's signature counts this share of its score: the label
# names the definition already, the lines inside answer (tuned on the code questions' tuned half).
SIGNATURE_WEIGHT = 0.5
# A code line inside a docstring or a comment counts this share of its score once the lines
# it describes have had theirs (:func:`_values_named`): it restates the question in words;
# the code beside it answers (tuned on the code questions' tuned halves; with
# CONDITION_WEIGHT, 0.3-0.45 held one answer more than 0.6: BENCHMARKS.md section 48).
COMMENT_WEIGHT = 0.45
# A docstring or comment line describing a value at hand (``@ivar maxDelay: ...`` beside
# ``maxDelay = 3600``, :func:`_values_named`) counts this share: enough to be shown beside the
# value it lent its score (above EXCERPT_FLOOR's share of the value's NUMBER_WEIGHT-ed score).
DESCRIPTION_WEIGHT = 0.6
_COMMENT = re.compile(r"\s*(?:#|//|/\*|\*|--|@\w+\b)")
# A program line that is a condition (``if``, ``elif``, ``while``, ``case``...) counts this
# many times its score: where a question asks where or when something is decided, the answer
# is the test, and a condition holding the question's words is that test more often than a
# call or an assignment naming them (tuned on the code questions' tuned halves, 1.3-2.0
# alike; BENCHMARKS.md section 48).
CONDITION_WEIGHT = 1.5
_CONDITION = re.compile(
    r"\s*(?:\}\s*)?(?:if|elif|else\s+if|while|case|switch|select|unless|when)\b"
    r"(?!\s*(?:[=.,)\]:]|:=))"  # a name, not a keyword: ``when = now``, ``select.select(``
)
# A question asking for an amount (how many, how long, a default, a limit): in code its answer
# is a value, so a matching program line holding a number (other than 0 and 1) counts
# :data:`NUMBER_WEIGHT` times its score (tuned on the code questions' tuned half).
NUMBER_WEIGHT = 1.5
_ASKS_AMOUNT = re.compile(
    r"\b(?:how (?:many|much|long|big|large|often)|defaults?|max(?:imum)?|min(?:imum)?|limits?"
    r"|longest|largest|shortest|smallest|size|threshold|timeouts?)\b",
    re.I,
)
_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?![\w.])", re.I)
_QUOTES = re.compile(r'"""|\'\'\'')
# Lines shown after and before each best line (its window); nearby picks merge.
AFTER = 3
BEFORE = 1
# What a section's label (its heading path) costs in a results file, roughly.
LABEL_COST = 40
# Less room than this left for a document (or in all) and no more anchors are tried.
MIN_PICK = 40
# Characters of the best passage (the best line of all and its window): what a results file
# shows first, with its heading line; a longer line is cut to its best sentences, the rest of
# the budget goes to the other lines. Measured on the public sets' tuning halves (BENCHMARKS.md
# section 31): 320-500 held fewer answers (the lines after the best one were cut), 600 as
# many as the whole budget.
LEAD_CHARS = 600
_HEADING = re.compile(r"[ \t]*(#{1,6})[ \t]+(.*?)[ \t#]*$")
_ANCHOR = re.compile(r"\s*\{\s*#[^}]*\}\s*$")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)")
# Fences whose body is a diagram's source (a picture, not text that answers): never picked.
DIAGRAMS = frozenset({"mermaid", "plantuml", "puml", "dot", "graphviz", "d2", "ditaa"})
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+")
# A line of only punctuation: rules, fences, table rules, admonition markers ("/// tip").
_NOISE = re.compile(r"[\s\-*_=|`~#>:./]*(?:(?<=///)\s*\w+)?")
_TAG = re.compile(r"\s*</?[A-Za-z][^<>]*/?>\s*")  # a line that is one HTML/MDX tag
# A line that is one template directive: an include (``{* ../src/app.py hl[3] *}``), a Jinja
# or Liquid tag (``{% include x %}``, ``{{ var }}``), an MDX comment (``{/* ... */}``).
_DIRECTIVE = re.compile(r"\s*\{([*%{#]|/\*).*([*%}#]|\*/)\}\s*")
# A block's opening marker with its title (``/// note | Technical Details``, ``//// tab |
# Python 3.10+``, ``!!! warning "Slow"``): a label for the lines inside, like a heading.
_BLOCK = re.compile(r"\s*(?:/{3,}|!!!|\?{3}\+?)\s*[\w-]+(?:\s*\|.*|\s+\".*\")?\s*")
# A line of code that is only brackets and separators (``});``, ``]``, ``end``): no answer.
_CODE_NOISE = re.compile(r"[\s{}()\[\];,.:]*(?:end)?[\s;]*")


@dataclass(frozen=True)
class Excerpt:
    """Source lines from ``start_line`` to ``end_line`` under ``heading``: ``lines`` holds
    each shown line with its number (blank lines between them are left out)."""

    start_line: int
    end_line: int
    heading: str
    lines: tuple[tuple[int, str], ...]
    # Whether it holds the document's best line (the first anchor picked): a hit cites its page.
    best: bool = False
    # Source code: the innermost definition around the excerpt's lines, else None.
    definition: OutlineEntry | None = None
    # Whether it is (part of) the search's best passage, the window of the best line of all
    # the documents: a results file shows it first (see LEAD_CHARS).
    lead: bool = False

    @property
    def text(self) -> str:
        return "\n".join(text for _, text in self.lines)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "start_line": self.start_line,
            "end_line": self.end_line,
            "heading": self.heading,
            "lines": [{"line": n, "text": t} for n, t in self.lines],
        }
        if self.definition is not None:
            d = self.definition
            out["definition"] = {"line": d.line, "label": d.label, "signature": d.signature}
        if self.lead:
            out["lead"] = True
        return out


@dataclass(frozen=True)
class _Line:
    number: int
    text: str
    heading: str
    chunk_rank: int
    definition: OutlineEntry | None = None
    # The text whose BM25 terms count: a code line's with its identifiers' parts.
    keywords: str = ""
    # A code line in a triple-quoted string (a docstring) or holding its quotes.
    quoted: bool = False

    @property
    def terms_text(self) -> str:
        return self.keywords or self.text


class ExcerptPicker:
    """Scores lines against one query; build one per query (it holds the query's terms)."""

    def __init__(self, query: str, bm25: Bm25 | None = None) -> None:
        self._bm25 = bm25 or bm25_model()
        self._terms = set(self._bm25.embed_query(query).indices)
        self._cache: dict[str, frozenset[int]] = {}
        self.lead_chars = LEAD_CHARS
        # Code only: a value answers (see NUMBER_WEIGHT).
        self._amount = bool(_ASKS_AMOUNT.search(query))

    def tokens(self, text: str) -> frozenset[int]:
        """Every BM25 term of ``text``."""
        got = self._cache.get(text)
        if got is None:
            got = frozenset(self._bm25.embed_query(text).indices)
            self._cache[text] = got
        return got

    def terms(self, text: str) -> set[int]:
        """The query terms ``text`` holds."""
        return set(self.tokens(text) & self._terms)

    def pick(
        self,
        docs: Sequence[Sequence[ChunkRecord]],
        budgets: Sequence[int],
        title: Sequence[str] = (),
        total: int | None = None,
        weights: Sequence[float] = (),
        floor: float = 0.0,
        lead_only: Sequence[bool] = (),
    ) -> list[list[Excerpt]]:
        """Excerpts for each document (its ranked chunks, best first) within its character
        budget. Term weights come from all the documents' lines together.

        With ``total``, the documents' lines also compete for ``total`` characters in all:
        the best lines anywhere first, each document's scores scaled by its ``weights``
        entry (1 where none is given), so a second hit's exact answer beats a first hit's
        tenth-best line. An anchor whose weighted score is below ``floor`` times the best
        one's is not taken: the next line would add little, so the excerpts stop there.
        A document whose ``lead_only`` entry is true shows the best passage if its line is
        the best of all, and no other lines (the search marks the hits whose lines rarely
        answer)."""
        per_doc = [
            _lines(chunks, title[i] if i < len(title) else "") for i, chunks in enumerate(docs)
        ]
        df: dict[int, int] = {}
        n = 0
        for lines in per_doc:
            for line in lines:
                n += 1
                for t in self.tokens(line.terms_text):
                    df[t] = df.get(t, 0) + 1
        idf = {t: math.log(1 + (n + 1) / (c + 0.5)) for t, c in df.items()}
        picks = [_Picks(lines, budget) for lines, budget in zip(per_doc, budgets, strict=True)]
        # (weighted score, document, line): every document's anchors in one queue.
        queue: list[tuple[float, int, int]] = []
        for d, pk in enumerate(picks):
            if not pk.lines or pk.budget <= 0:
                continue
            w = weights[d] if d < len(weights) else 1.0
            scores = [self._score(line, idf) for line in pk.lines]
            if pk.lines[0].keywords:
                scores, described = _values_named(pk.lines, scores)
                if self._amount:  # after the values: a described constant's value counts more
                    scores = [
                        s * NUMBER_WEIGHT if s > 0.0 and _holds_number(line.text) else s
                        for s, line in zip(scores, pk.lines, strict=True)
                    ]
                scores = _comments_after(pk.lines, scores, described)
            pk.scores = scores
            best = [i for i in range(len(scores)) if scores[i] > 0.0]
            if not best:
                # Nothing lexical: the best chunk's first lines of prose, after every match.
                # The best chunk may hold no prose at all (only a heading, a fence): then the
                # best-ranked chunk that does.
                first = min(
                    range(len(pk.lines)),
                    key=lambda i: (pk.lines[i].chunk_rank, pk.lines[i].number),
                )
                best = [first]
            queue += [(scores[i] * w, d, i) for i in best]
        queue.sort(key=lambda e: (-e[0], e[1], _anchor_line(picks, e)))
        left = total
        bar = floor * queue[0][0] if queue else 0.0
        lead = True  # the first anchor taken is the best passage's
        for score, d, a in queue:
            if score < bar:
                break
            pk = picks[d]
            if pk.full or (left is not None and left < MIN_PICK):
                continue
            if not lead and d < len(lead_only) and lead_only[d]:
                continue
            left_doc = pk.budget - pk.used
            room = left_doc if left is None else min(left_doc, left)
            spent = pk.add(a, min(room, self.lead_chars) if lead else room, self, lead)
            lead = lead and not spent
            if left is not None:
                left -= spent
        return [pk.excerpts() for pk in picks]

    def _score(self, line: _Line, idf: dict[int, float]) -> float:
        own = sum(idf.get(t, 0.0) for t in self.terms(line.terms_text))
        if own == 0.0:
            return 0.0
        head = sum(idf.get(t, 0.0) for t in self.terms(line.heading))
        score = own + HEADING_WEIGHT * head + CHUNK_RANK_WEIGHT / (1 + line.chunk_rank)
        return _code_score(line, score) if line.keywords else score


def _code_score(line: _Line, score: float) -> float:
    """A code line's score: a definition's signature line counts less than the lines inside
    it (the signature is the excerpt's label; see the module rules), a condition more."""
    if line.definition is not None and line.number == line.definition.line:
        return score * SIGNATURE_WEIGHT
    if _CONDITION.match(line.text):
        return score * CONDITION_WEIGHT
    return score


def _holds_number(text: str) -> bool:
    """Whether a code line holds a number literal other than 0 and 1 (``maxDelay = 3600``,
    ``1 << 20``, ``1e6``): not a counter's start or step."""
    code = _STRING.sub("", text)  # "SIP/2.0" is a name, not an amount
    return any(float(m) not in (0.0, 1.0) for m in _NUMBER.findall(code))


# An assignment: ``NAME =``, ``self.NAME =``, ``NAME: type =`` (not ``==``); Go's ``NAME = ``
# in a const block, ``const NAME =`` and ``NAME :=`` alike.
_ASSIGNED = re.compile(
    r"\s*(?:(?:const|var|let|final|static|public|private|protected)\s+)*(?:self\.|this\.)?"
    r"([A-Za-z_]\w*)\s*(?::[^=\n]*)?:?=(?!=)"
)
_NAMES = re.compile(r"[A-Za-z_]\w*")
# A name joined of words or in capitals (``maxDelay``, ``max_delay``, ``MAX``): a plain word
# (``size``, ``reactor``) is prose's too, and a sentence using it does not describe the value.
_JOINED = re.compile(r"[a-z][A-Z]|\w_[A-Za-z]|^[A-Z][A-Z0-9_]+$")


def _values_named(lines: Sequence[_Line], scores: list[float]) -> tuple[list[float], set[int]]:
    """Code lines' scores where each assignment (``maxDelay = 3600``) scores at least as well
    as the best line naming what it assigns (its docstring's ``@ivar maxDelay: ...``, a
    comment) or continuing such a line (the entry's next, deeper-indented lines: ``Default
    is 16384.``): the value is the answer the description points to. Only joined names
    lend (see :data:`_JOINED`). With the lines that describe a value at hand (they lent)."""
    assigned: dict[str, int] = {}
    for i, line in enumerate(lines):
        m = _ASSIGNED.match(line.text)
        if m and _JOINED.search(m.group(1).lstrip("_")):
            assigned.setdefault(m.group(1), i)
    if not assigned:
        return scores, set()
    out = list(scores)
    lent: set[int] = set()
    entry: tuple[set[int], int, int] = (set(), -1, 0)  # (its names' lines, indent, last line)
    for i in sorted(range(len(lines)), key=lambda i: lines[i].number):
        line = lines[i]
        indent = len(line.text) - len(line.text.lstrip())
        targets, top, last = entry
        if not (targets and line.number == last + 1 and indent > top):
            named = {assigned[n] for n in _NAMES.findall(line.text) if n in assigned} - {i}
            entry = (named, indent, line.number)
        else:
            entry = (targets, top, line.number)  # a continuation lends to the entry's names
        for j in entry[0]:
            out[j] = max(out[j], scores[i])
        if entry[0] and scores[i] > 0.0:
            lent.add(i)
    return out, lent


def _comments_after(
    lines: Sequence[_Line], scores: list[float], described: set[int]
) -> list[float]:
    """Code lines' scores with docstring and comment lines weighted by :data:`COMMENT_WEIGHT`,
    or :data:`DESCRIPTION_WEIGHT` where they describe a value at hand (``described``)."""
    return [
        s * (DESCRIPTION_WEIGHT if i in described else COMMENT_WEIGHT)
        if line.quoted or _COMMENT.match(line.text)
        else s
        for i, (s, line) in enumerate(zip(scores, lines, strict=True))
    ]


def _anchor_line(picks: list[_Picks], entry: tuple[float, int, int]) -> int:
    return picks[entry[1]].lines[entry[2]].number


class _Picks:
    """The lines chosen so far from one document, within its budget."""

    def __init__(self, lines: list[_Line], budget: int) -> None:
        self.lines = lines
        self.budget = budget
        self.scores: list[float] = []
        self.order = sorted(range(len(lines)), key=lambda i: lines[i].number)  # document order
        self.where = {i: p for p, i in enumerate(self.order)}
        self.chosen: dict[int, str] = {}
        self.lead: set[int] = set()  # the best passage's lines, when it is in this document
        self.used = 0

    @property
    def full(self) -> bool:
        return self.used >= self.budget - MIN_PICK

    def add(self, a: int, room: int, picker: ExcerptPicker, lead: bool = False) -> int:
        """Adds anchor ``a`` and its window within ``room`` characters; the cost. With
        ``lead``, the lines added are the best passage."""
        lines = self.lines
        if a in self.chosen:
            return 0
        spent = 0
        for i in _window(a, self.order, self.where, lines):
            if i in self.chosen:
                continue
            text = lines[i].text
            # A line costs its text and number; the first one of a section also a label.
            labelled = any(lines[j].heading == lines[i].heading for j in self.chosen)
            cost = len(text) + 8 + (0 if labelled else LABEL_COST)
            if spent + cost > room:
                if i != a or self.chosen:
                    continue  # a neighbour or a later anchor that does not fit
                text = _cut(text, room, picker)
                cost = room
            self.chosen[i] = text
            if lead:
                self.lead.add(i)
            spent += cost
        self.used += spent
        return spent

    def excerpts(self) -> list[Excerpt]:
        """The chosen lines as excerpts in document order; the best passage's lines apart from
        the others (a results file shows it first, whole)."""
        keep = sorted(self.chosen, key=self.where.__getitem__)
        found = [
            replace(e, lead=True)
            for e in _excerpts([(self.lines[i], self.chosen[i]) for i in keep if i in self.lead])
        ]
        found += _excerpts([(self.lines[i], self.chosen[i]) for i in keep if i not in self.lead])
        found.sort(key=lambda e: e.start_line)
        if not self.chosen:
            return found
        first = self.lines[next(iter(self.chosen))].number  # the first anchor: the best line
        return [replace(e, best=True) if e.start_line <= first <= e.end_line else e for e in found]


def _window(a: int, order: list[int], where: dict[int, int], lines: list[_Line]) -> list[int]:
    """The anchor, then the lines just after it, then the one before: an answer often
    follows the line that restates the question. Only lines near it in the file."""
    p = where[a]
    out = [a]
    for step in (*range(1, AFTER + 1), *(-b for b in range(1, BEFORE + 1))):
        q = p + step
        if 0 <= q < len(order) and abs(lines[order[q]].number - lines[a].number) <= 3 * abs(step):
            out.append(order[q])
    return out


def _excerpts(picked: list[tuple[_Line, str]]) -> list[Excerpt]:
    """Picked lines (document order) grouped into excerpts: a group continues while lines
    are at most two apart (a blank line between paragraphs) under the same heading."""
    out: list[Excerpt] = []
    group: list[tuple[_Line, str]] = []
    for line, text in picked:
        if group and (line.number > group[-1][0].number + 2 or line.heading != group[0][0].heading):
            out.append(_join(group))
            group = []
        group.append((line, text))
    if group:
        out.append(_join(group))
    return out


def _join(group: list[tuple[_Line, str]]) -> Excerpt:
    return Excerpt(
        group[0][0].number,
        group[-1][0].number,
        group[0][0].heading,
        tuple((line.number, text) for line, text in group),
        definition=group[0][0].definition,
    )


def _cut(text: str, budget: int, picker: ExcerptPicker) -> str:
    """A long line cut to its best-matching sentences, in order, marked with ``…``."""
    sentences = _SENTENCE.split(text)
    hits = [len(picker.terms(s)) for s in sentences]
    best = max(range(len(sentences)), key=lambda i: (hits[i], -i))
    # Matching sentences first, then the best one's neighbours: context, not filler.
    ranked = sorted(range(len(sentences)), key=lambda i: (-hits[i], abs(i - best), i))
    keep: list[int] = []
    used = 0
    for i in ranked:
        cost = len(sentences[i]) + 2
        if keep and used + cost > budget:
            continue
        keep.append(i)
        used += cost
    keep.sort()
    parts: list[str] = []
    for j, i in enumerate(keep):
        if (j == 0 and i > 0) or (j > 0 and i != keep[j - 1] + 1):
            parts.append("…")
        parts.append(sentences[i])
    if keep and keep[-1] < len(sentences) - 1:
        parts.append("…")
    cut = " ".join(parts)
    return cut if len(cut) <= budget else cut[: max(budget - 1, 1)].rstrip() + "…"


def _lines(chunks: Sequence[ChunkRecord], title: str) -> list[_Line]:
    """The pickable lines of ``chunks`` with their heading paths; each source line once.

    A line cut by a chunk boundary is joined again when both chunks are at hand; a piece
    whose other part is not is marked with ``…`` where it was cut."""
    if chunks and all(c.syntax for c in chunks):
        return _code_lines(chunks)
    pieces: dict[int, list[tuple[int, str]]] = {}
    heads: dict[int, tuple[str, int]] = {}
    for rank, chunk in enumerate(chunks):
        stack = _inherited(chunk.heading, title)
        fence = chunk.fence  # a chunk cut from a long code block starts inside it
        diagram = False  # inside a diagram's fence: its lines are not picked
        # Front matter is the list entry's title and description already.
        front = chunk.index == 0 and chunk.text.lstrip("\ufeff").startswith("---")
        raw_lines = chunk.text.split("\n")
        if raw_lines and raw_lines[-1] == "":
            raw_lines.pop()  # the text ended with a newline: no partial last line
        for offset, raw in enumerate(raw_lines):
            number = chunk.start_line + offset
            text = raw.rstrip()
            if front:
                front = offset == 0 or text not in ("---", "...")
                continue
            if fence:
                if text.strip().startswith(fence):
                    fence, diagram = "", False
                    continue
                if diagram:
                    continue
            elif m := _FENCE.match(text):
                fence, diagram = m.group(1), m.group(2).lower() in DIAGRAMS
                continue
            elif (h := _HEADING.match(text)) and h.group(2):
                level = len(h.group(1))
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, heading_label(_ANCHOR.sub("", h.group(2)))))
                continue
            last = offset == len(raw_lines) - 1 and not chunk.text.endswith("\n")
            pieces.setdefault(number, []).append((chunk.index, raw + ("" if last else "\n")))
            if number not in heads or rank < heads[number][1]:
                heads[number] = (" > ".join(dedupe_path([t for _, t in stack if t])), rank)
    out: list[_Line] = []
    for number in sorted(pieces, key=lambda n: (heads[n][1], n)):
        parts = sorted(pieces[number])
        joined = "".join(p for _, p in parts)
        whole = joined.endswith("\n")
        text = joined.rstrip()
        if any(p.fullmatch(text) for p in (_NOISE, _TAG, _DIRECTIVE, _BLOCK)):
            continue
        out.append(_Line(number, text if whole else text + "…", heads[number][0], heads[number][1]))
    return out


def _code_lines(chunks: Sequence[ChunkRecord]) -> list[_Line]:
    """The pickable lines of source code chunks, each labelled by the innermost definition
    around it (from every chunk's outline: a long definition's signature may be in another)."""
    entries = sorted(
        {e for c in chunks for e in c.outline}, key=lambda e: (e.start_line, -e.end_line)
    )
    program = all(is_program(c.syntax) for c in chunks)  # not a configuration file
    pieces: dict[int, list[tuple[int, str]]] = {}
    ranks: dict[int, int] = {}
    quoted: dict[int, bool] = {}
    for rank, chunk in enumerate(chunks):
        raw_lines = chunk.text.split("\n")
        if raw_lines and raw_lines[-1] == "":
            raw_lines.pop()
        for offset, inside in enumerate(_quoted(raw_lines)):
            quoted.setdefault(chunk.start_line + offset, inside)  # the best chunk's reading
        for offset, raw in enumerate(raw_lines):
            number = chunk.start_line + offset
            last = offset == len(raw_lines) - 1 and not chunk.text.endswith("\n")
            pieces.setdefault(number, []).append((chunk.index, raw + ("" if last else "\n")))
            ranks[number] = min(ranks.get(number, rank), rank)
    out: list[_Line] = []
    for number in sorted(pieces, key=lambda n: (ranks[n], n)):
        joined = "".join(p for _, p in sorted(pieces[number]))
        text = joined.rstrip()
        if not text.strip() or _CODE_NOISE.fullmatch(text):
            continue
        where = None
        for e in entries:  # sorted by start: the last that holds the line is the innermost
            if e.start_line > number:
                break
            if e.end_line >= number:
                where = e
        heading = where.label if where is not None else ""
        shown = text if joined.endswith("\n") else text + "…"
        keywords = code_keyword_text(text) if program else ""
        out.append(_Line(number, shown, heading, ranks[number], where, keywords, quoted[number]))
    return out


# What a string opened by a triple quote follows on its line: an assignment's ``=``, a call's
# ``(`` or ``,``, a bracket, ``return``... (not a sentence's end: ``prose."""`` closes one).
_OPENS_AFTER = re.compile(r"(?:[=(,\[{:%+]|\breturn|\byield)\s*$")
_STRING_PREFIX = re.compile(r"[rbuf]{1,2}", re.I)


def _quoted(raw_lines: Sequence[str]) -> list[bool]:
    """Which of one chunk's lines are in a triple-quoted string (a docstring) or hold its
    quotes, read from the chunk's own text: counting quotes over whatever lines a search
    fetched would flip at a chunk cut inside a long docstring, and take every docstring after
    it for code and the code for docstrings. A chunk begins inside a string when its first
    triple quote closes one (:func:`_closes`)."""
    out: list[bool] = []
    inside: bool | None = None  # unknown until the chunk's first triple quote
    for offset, raw in enumerate(raw_lines):
        marks = len(_QUOTES.findall(raw))
        if marks and inside is None:
            inside = _closes(raw_lines, offset)
            out = [inside] * offset  # the lines before it were the string's, or code
        out.append(bool(inside) or marks > 0)
        if marks % 2:
            inside = not inside
    return out


def _closes(raw_lines: Sequence[str], offset: int) -> bool:
    """Whether the first triple quote of a chunk, on line ``offset``, closes a string begun
    before the chunk: it does after a sentence on its line (``the end.`` then the quotes),
    or alone on its line or before a method or an operator (``.strip()``, ``% x``) after a
    line that opens nothing (a sentence, not a signature's ``:`` or a ``#`` comment). Quotes
    beginning a line of words (a docstring's summary) open one, as do quotes on a chunk's
    first line (chunks start at statements)."""
    raw = raw_lines[offset]
    first = _QUOTES.search(raw)
    assert first is not None
    lead = raw[: first.start()].strip()
    if lead and not _STRING_PREFIX.fullmatch(lead):
        return not _OPENS_AFTER.search(lead)
    after = raw[first.end() :].strip()
    if after and after[0] not in ".)]},;%+":
        return False
    before = [r.strip() for r in raw_lines[:offset] if r.strip()]
    return bool(before) and not (_OPENS_AFTER.search(before[-1]) or before[-1].startswith("#"))


def definition_excerpts(
    chunks: Sequence[ChunkRecord], names: Sequence[str], budget: int
) -> list[Excerpt]:
    """The definitions of ``names`` in ``chunks`` (a lookup by name): each from its signature
    on, as many of its lines as ``budget`` characters hold (at least the signature), in
    document order. A definition is one whose label's last part holds a name's last part
    as a word (``def retry_upload`` for ``Uploader.retry_upload``)."""
    words = [re.compile(rf"(?<![\w$]){re.escape(n.rpartition('.')[2])}(?![\w$])") for n in names]
    lines = {line.number: line for line in _code_lines(chunks)}
    found: list[Excerpt] = []
    seen: set[OutlineEntry] = set()
    left = budget
    for chunk in sorted(chunks, key=lambda c: c.index):
        for entry in chunk.outline:
            last = entry.label.rpartition(" > ")[2]
            if entry in seen or not chunk.start_line <= entry.line <= chunk.end_line:
                continue
            if not any(w.search(last) for w in words):
                continue
            seen.add(entry)
            shown: list[tuple[int, str]] = []
            for number in range(entry.line, entry.end_line + 1):
                line = lines.get(number)
                if line is None:
                    if number > chunk.end_line:
                        break  # the rest is in a chunk that was not fetched
                    continue
                cost = len(line.text) + 8
                if shown and cost > left:
                    break
                shown.append((number, line.text))
                left -= cost
            if shown:
                found.append(
                    Excerpt(shown[0][0], shown[-1][0], entry.label, tuple(shown), not found, entry)
                )
            if left < MIN_PICK:
                return found
    return found


def _inherited(heading: str, title: str) -> list[tuple[int, str]]:
    """The heading path a chunk starts under, with levels guessed: from 1 when its first
    entry is the document's title (an ``#`` heading), else from 2 (the title is elsewhere,
    e.g. in front matter, and sections start at ``##``)."""
    parts = [p for p in heading.split(" > ") if p] if heading else []
    first = 1 if parts and parts[0] == title else 2
    return [(first + i, p) for i, p in enumerate(parts)]
