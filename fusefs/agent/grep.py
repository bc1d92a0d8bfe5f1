"""``grep -rn`` over a collection without reading every document: the filter runs in Qdrant.

A pattern's required literal text is pushed down as a chunk filter (exact substrings, or
whole words on the full-text index for a case-insensitive pattern); only the documents with
a matching chunk are read, whole, and matched line by line here.

Rules a caller may rely on:

* The lines are what GNU ``grep -rn`` prints over the mount, run in the mount's root in a
  UTF-8 locale, in the same order: ``PATH:LINE:TEXT`` with ``PATH`` relative to the collection
  root, files in the mount's directory order (names sorted, depth first). A fixed string is
  ``grep -rnF``; ``regex=True`` is ``grep -rnE``; ``ignore_case`` adds ``-i``. When ``path``
  names a single file its name is printed too (grep needs ``-H`` for that).
* Regular expressions are POSIX extended syntax with GNU's ``\\w \\W \\s \\S \\b \\B \\< \\>``
  and the bracket classes ``[[:digit:]]`` and friends (ASCII only); they are read as Python's
  ``re`` reads them, so constructs outside ERE take Python's meaning, and run in linear time
  on RE2 where RE2 can say the same, else with a deadline (:mod:`semfs.fusefs.agent.patterns`):
  no pattern runs unbounded.
* Nothing is missed by the prefilter: a line that matches lies inside one chunk (and that
  chunk passes the filter) unless a chunk boundary cuts the line, and every document with
  such a boundary is always read (its record's ``split_lines``; for records older than that
  flag, :meth:`semfs.ingest.store.Store.split_line_paths`).
* A regular expression without a literal part, or a case-insensitive pattern without a
  whole word, cannot be pushed down: the documents are then read in order until the match
  limit or a byte budget, and the result says the scan was cut and where.
* Known difference: with ``ignore_case``, a pattern word matches Qdrant's lowercase of the
  text's words; Unicode's odd case pairs (the long s, the Kelvin sign, dotted I) that
  Python's ``re`` folds together are found only in documents the filter lets through.

This module never imports FUSE or MCP, and is tested without either.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from semfs.fusefs.agent.patterns import FALLBACK_SECONDS, LineMatcher, line_matcher
from semfs.fusefs.view.reader import ChunksMissingError, DocumentReader
from semfs.fusefs.view.tree import DIR, FILE, Node, Tree
from semfs.ingest.errors import PathError, PatternError, SemfsError, not_text
from semfs.ingest.store import StoreReader

if sys.version_info >= (3, 11):
    import re._constants as sre_constants
    import re._parser as sre_parse
else:  # pragma: no cover - Python 3.10
    import sre_constants
    import sre_parse

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESULTS = 100
MAX_RESULTS = 10_000
# Lines of context around a match (grep -C) a call may ask for: enough to read a paragraph.
MAX_CONTEXT = 20
# Bytes a scan (no push-down possible) reads before it stops and says so: about a second
# of reading on the embedded store.
DEFAULT_SCAN_BYTES = 64 * 1024 * 1024
# Filters with many conditions cost the engine more than they save: the longest few do.
MAX_SUBSTRINGS = 3
MAX_WORDS = 4
# Qdrant's word tokenizer (also qdrant-client's model of it): runs of letters and digits.
_WORD = re.compile(r"[^\W_]+")
# POSIX bracket classes, ASCII only (GNU grep's follow the locale).
_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "space": r" \t\n\r\f\v",
    "blank": r" \t",
    "punct": r"!-/:-@\[-`{-~",
    "xdigit": "0-9A-Fa-f",
    "cntrl": r"\x00-\x1f\x7f",
    "print": r" -~",
    "graph": r"!-~",
}


@dataclass(frozen=True)
class Plan:
    """What the engine is asked to filter by; empty means no push-down (a scan)."""

    substrings: tuple[str, ...] = ()
    words: tuple[str, ...] = ()

    @property
    def pushed_down(self) -> bool:
        return bool(self.substrings or self.words)


@dataclass
class GrepResult:
    # grep's output lines: matches (PATH:N:TEXT), and with context the lines around them
    # (PATH-N-TEXT) and "--" between groups, as GNU grep -C prints them.
    lines: list[str]
    # Matching lines among them (max_results counts these).
    matched: int = 0
    # True when the match limit stopped the search with documents left to read.
    limited: bool = False
    pushed_down: bool = False
    documents_in_scope: int = 0
    documents_read: int = 0
    bytes_read: int = 0
    # Set when a scan stopped at its byte budget: the first file it did not read.
    scan_stopped_at: str | None = None
    plan: Plan = field(default_factory=Plan)


def normalize_path(path: str) -> str:
    """A collection-relative path: ``"/a/./b/"`` -> ``"a/b"``; ``..`` is refused."""
    parts = [p for p in path.strip().split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathError(f"{path!r} is outside the collection: use paths relative to its root")
    return "/".join(parts)


def resolve(tree: Tree, path: str) -> Node:
    """The node at ``path`` (``""`` is the root), or :class:`PathError`."""
    rel = normalize_path(path)
    node = tree.lookup(rel)
    if node is None:
        raise PathError(f"no such file or directory in the collection: {rel!r}")
    return node


def walk(node: Node) -> Iterator[Node]:
    """Files under ``node`` (or ``node`` itself) in ``grep -r``'s order over the mount."""
    if node.kind == FILE:
        yield node
        return
    for child in node.children.values():
        if child.kind == DIR:
            yield from walk(child)
        elif child.kind == FILE:
            yield child


def ere_to_python(pattern: str) -> str:
    """A POSIX extended regular expression (with GNU extensions) as a Python one."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            out.append({"<": r"\b(?=\w)", ">": r"\b(?<=\w)"}.get(nxt, c + nxt))
            i += 2
        elif c == "[":
            i = _bracket(pattern, i, out)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _bracket(pattern: str, i: int, out: list[str]) -> int:
    """Translate the bracket expression starting at ``pattern[i]``; return the index after it."""
    n = len(pattern)
    j = i + 1
    body: list[str] = []
    if j < n and pattern[j] == "^":
        body.append("^")
        j += 1
    first = True
    while j < n and (pattern[j] != "]" or first):
        c = pattern[j]
        first = False
        if c == "[" and j + 1 < n and pattern[j + 1] == ":":
            end = pattern.find(":]", j + 2)
            name = pattern[j + 2 : end] if end >= 0 else ""
            if name not in _CLASSES:
                raise PatternError(f"unknown character class [:{name}:] in {pattern!r}")
            body.append(_CLASSES[name])
            j = end + 2
            continue
        # Backslash is literal inside an ERE bracket; these are special only to Python.
        body.append("\\" + c if c in "\\[&~|" or (c == "]") else c)
        j += 1
    if j >= n:
        raise PatternError(f"unmatched [ in {pattern!r}")
    out.append("[" + "".join(body) + "]")
    return j + 1


def compile_pattern(pattern: str, regex: bool, ignore_case: bool) -> re.Pattern[str]:
    if "\n" in pattern:
        raise PatternError("a pattern cannot contain a newline: grep matches one line at a time")
    bad = not_text("the pattern", pattern)
    if bad is not None:
        raise bad
    source = ere_to_python(pattern) if regex else re.escape(pattern)
    try:
        return re.compile(source, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise PatternError(f"bad regular expression {pattern!r}: {exc}") from exc


def required_literals(compiled: re.Pattern[str]) -> tuple[list[str], bool]:
    """Strings every match contains (maximal runs of literal characters), and whether the
    pattern ignores case (``-i`` or an inline ``(?i)``)."""
    parsed: Any = sre_parse.parse(compiled.pattern, compiled.flags & ~re.IGNORECASE)
    ignore_case = bool((compiled.flags | parsed.state.flags) & re.IGNORECASE)
    runs: list[str] = []
    current: list[str] = []

    def cut() -> None:
        if current:
            runs.append("".join(current))
            current.clear()

    def visit(items: Sequence[tuple[Any, Any]]) -> None:
        for op, arg in items:
            if op is sre_constants.LITERAL:
                current.append(chr(arg))
            elif op is sre_constants.SUBPATTERN and not arg[1] and not arg[2]:
                visit(arg[3])  # a plain group: its items are part of this sequence
            elif op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT) and arg[0] >= 1:
                cut()  # the first repetition is required, but not next to what follows
                visit(arg[2])
                cut()
            else:
                cut()  # alternation, classes, anchors, optional parts: nothing certain

    visit(parsed)
    cut()
    return runs, ignore_case


def whole_words(text: str) -> list[str]:
    """The words of ``text`` bounded on both sides inside it: in any line that contains
    ``text``, they are whole words of Qdrant's tokenizer too (the edge ones may be parts)."""
    # A word whose lowercase changes length (dotted I) is tokenized differently by Qdrant.
    return [
        m.group().lower()
        for m in _WORD.finditer(text)
        if m.start() > 0 and m.end() < len(text) and len(m.group().lower()) == len(m.group())
    ]


def plan(compiled: re.Pattern[str]) -> Plan:
    """What to filter chunks by so that every matching line's chunk passes."""
    runs, ignore_case = required_literals(compiled)
    runs = sorted({r for r in runs if r}, key=len, reverse=True)
    words = sorted({w for r in runs for w in whole_words(r)}, key=len, reverse=True)
    if ignore_case:
        return Plan(words=tuple(words[:MAX_WORDS]))
    return Plan(substrings=tuple(runs[:MAX_SUBSTRINGS]), words=tuple(words[:MAX_WORDS]))


def document_lines(data: bytes) -> list[str]:
    """A document's lines as grep splits them: at ``\\n``; no empty line after a final one."""
    text = data.decode("utf-8", "surrogateescape")
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


class Grep:
    """Runs greps against one store. Thread-safe (the reader and store are).

    Caches the documents whose lines cross a chunk boundary for the last tree seen: one
    scroll of chunk line numbers (no text) per collection change.
    """

    def __init__(
        self,
        store: StoreReader,
        reader: DocumentReader,
        scan_bytes: int = DEFAULT_SCAN_BYTES,
        regex_seconds: float = FALLBACK_SECONDS,
    ) -> None:
        self.store = store
        self.reader = reader
        self.scan_bytes = scan_bytes
        self.regex_seconds = regex_seconds
        self._split: tuple[Tree, frozenset[str]] | None = None

    def split_paths(self, tree: Tree) -> frozenset[str]:
        """Documents with a line cut by a chunk boundary: from the tree's records, or, when
        some record predates that flag, from one scroll of the chunks' line numbers."""
        cached = self._split
        if cached is not None and cached[0] is tree:
            return cached[1]
        docs = [n.doc for n in walk(tree.root) if n.doc is not None]
        if all(d.split_lines is not None for d in docs):
            paths = frozenset(d.path for d in docs if d.split_lines)
        else:
            paths = frozenset(self.store.split_line_paths())
        self._split = (tree, paths)
        return paths

    def candidates(
        self, tree: Tree, node: Node, p: Plan, scope: Sequence[str] = ()
    ) -> frozenset[str] | None:
        """Paths that may hold a match, or None when the engine cannot filter.

        The engine looks only below ``node`` (one file, a folder, or at the root the
        ``scope`` folders, when the tree is a scope's): its time says nothing of the rest.
        """
        if not p.pushed_down:
            return None
        under: str | Sequence[str] | None = None
        paths = None
        if node.kind == FILE:
            paths = [node.path]
        elif node.path:
            under = node.path
        elif scope:
            under = tuple(scope)
        try:
            hits = self.store.chunk_paths_matching(p.substrings, p.words, under, paths)
        except NotImplementedError:
            return None
        return frozenset(hits) | self.split_paths(tree)

    def run(
        self,
        tree: Tree,
        pattern: str,
        path: str = "",
        regex: bool = False,
        ignore_case: bool = False,
        max_results: int = DEFAULT_MAX_RESULTS,
        scope: Sequence[str] = (),
        context: int = 0,
    ) -> GrepResult:
        """Grep below ``path`` of ``tree``; ``scope``: the folders ``tree`` was cut to (a
        scoped token's), so that the engine's filter is cut to them too; ``context``: lines
        shown before and after each match, as ``grep -C`` (``-m max_results`` with it prints
        the last match's trailing lines too)."""
        if not 1 <= max_results <= MAX_RESULTS:
            raise PatternError(
                f"max_results must be between 1 and {MAX_RESULTS}, not {max_results}"
            )
        if not 0 <= context <= MAX_CONTEXT:
            raise PatternError(f"context must be between 0 and {MAX_CONTEXT}, not {context}")
        node = resolve(tree, path)
        try:
            compiled = compile_pattern(pattern, regex, ignore_case)
            p = plan(compiled)
            matcher = line_matcher(compiled, regex, self.regex_seconds)
        except RecursionError:
            raise PatternError(
                f"the pattern nests too deeply ({pattern.count('(')} groups): simplify it"
            ) from None
        wanted = self.candidates(tree, node, p, scope)
        result = GrepResult([], pushed_down=wanted is not None, plan=p)
        for doc_node in walk(node):
            result.documents_in_scope += 1
            if result.limited or result.scan_stopped_at is not None:
                continue  # keep counting the scope only
            if wanted is not None and doc_node.path not in wanted:
                continue
            if wanted is None and result.bytes_read >= self.scan_bytes:
                result.scan_stopped_at = doc_node.path
                continue
            self._match(doc_node, matcher, result, max_results, context)
        return result

    def _match(
        self,
        node: Node,
        matcher: LineMatcher,
        result: GrepResult,
        max_results: int,
        context: int = 0,
    ) -> None:
        shown = node.doc
        assert shown is not None
        try:
            found = self.reader.whole(shown)
        except ChunksMissingError:
            raise SemfsError(
                f"{node.path} was re-ingested again and again while grep read it: "
                "ask again once the ingest is done"
            ) from None
        if found is None:  # deleted since the tree was built
            return
        data = found[1]
        result.documents_read += 1
        result.bytes_read += len(data)
        search = matcher.search
        lines = document_lines(data)
        hits: list[int] = []
        for number, line in enumerate(lines, 1):
            if search(line):
                if result.matched + len(hits) == max_results:
                    result.limited = True
                    break
                hits.append(number)
        result.matched += len(hits)
        if not context:
            result.lines += [f"{node.path}:{n}:{lines[n - 1]}" for n in hits]
            return
        # grep -C: each match with `context` lines on each side; overlapping or touching
        # windows are one group, and "--" goes between groups (between files too).
        hit = set(hits)
        shown_to = 0  # the last line number shown of this file
        for n in hits:
            start, end = max(n - context, 1), min(n + context, len(lines))
            if shown_to and start <= shown_to + 1:
                start = shown_to + 1  # joins the group before
            elif result.lines:
                result.lines.append("--")
            for k in range(start, end + 1):
                mark = ":" if k in hit else "-"
                result.lines.append(f"{node.path}{mark}{k}{mark}{lines[k - 1]}")
            shown_to = max(shown_to, end)
