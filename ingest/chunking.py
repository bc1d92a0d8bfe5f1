"""Lossless chunking of documents for embedding.

Approach:

1. Scan the document line by line and cut it into atomic *blocks* (exact spans). Boundaries come
   after a run of blank lines and, for Markdown/MDX, before ATX headings and fence openings that
   follow other content. Nothing inside a fenced code block or YAML front matter is a boundary,
   and a heading stays glued to what follows it (consecutive headings, blank lines, the first
   paragraph), so a chunk never ends on a bare heading. Code files split only at blank lines;
   a block whose first real line is a column-0 definition is marked as a preferred chunk start.
   Other files split at blank lines.
2. Count every block with ONE batched ``count_tokens`` call.
3. Blocks over budget are refined: at every line, then at whitespace near proportionally chosen
   positions, then hard at character positions (never before a combining mark). Each refinement
   round is one batched call and only over-budget pieces are re-split.
4. Merge consecutive pieces greedily while the summed count fits. A heading (or, in code, a
   definition) starts a new chunk once the current one holds >= 1/4 of the budget, unless the
   current chunk is only front matter.
5. Size counts too: a piece longer than ``max_tokens * MAX_CHARS_PER_TOKEN`` characters is
   measured as at least one token per :data:`MAX_CHARS_PER_TOKEN` characters (over budget), so
   no chunk is longer than that however few tokens its tokenizer sees (a long word, base64,
   is one ``[UNK]``).
6. Token counts are not always additive (word pieces across a hard cut, rounding counters), so
   every merged chunk is measured again in one batched call; any chunk over budget is halved
   (by characters, at piece boundaries) and re-measured until all fit.
7. Byte offsets, line numbers and heading paths are computed in one incremental pass.

Everything is linear in the document size apart from the tokenizer itself.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath

from semfs.ingest import syntax
from semfs.ingest.labels import dedupe_path, heading_label
from semfs.ingest.store.schema import OutlineEntry

__all__ = [
    "ChunkSpan",
    "TokenCounter",
    "chunk_text",
    "document_description",
    "document_title",
    "embedding_text",
    "model_text",
    "rechunk",
]
DESCRIPTION_CHARS = 160
# Lines that are not prose: markup, includes, images, tables, list bullets alone, admonitions.
_NOT_PROSE = re.compile(r"[ \t]*(?:[<{!|>]|import\s|export\s|:::|///|\[\^|[-*+][ \t]*$)")

TokenCounter = Callable[[Sequence[str]], list[int]]
"""Returns the token count (without special tokens) of each given text, in order."""

# A page, slide or chapter (``cuts``) starts a chunk of its own for the first FREE_UNIT_CHUNKS
# chunks of a document, then only once the chunk before holds 1/UNIT_SHARE of the budget: tiny
# units share a chunk ("pages 7-9"), so the chunks of a document are bounded by its text, not
# by its page count (a 1 KB PDF listed one page 10,000 times: 10,000 chunks; issue 39.5).
FREE_UNIT_CHUNKS = 16
UNIT_SHARE = 8
# A chunk's characters per token of its budget, at most. The model's WordPiece tokenizer reads
# any word past 100 characters as one [UNK], so a 512 KiB word (or a base64 blob) counts one
# token and would be one chunk, and what works on a chunk after it (BM25, the excerpts) grows
# with its size, some of it faster than linearly. Real text runs 3-5 characters a token (at
# most 8 in a chunk of the shared corpora), so this bound cuts only such runs: 224 tokens,
# 3,584 characters (14 KiB of UTF-8 at most).
MAX_CHARS_PER_TOKEN = 16
# Source code: a definition starts a new chunk once the current one holds this share of the
# budget (or it would not fit there); below it, the chunk so far is a short neighbour and the
# definition joins it. A larger share packs chunks fuller: fewer chunks (twisted/internet,
# real tokenizer: 0.25 -> 3,651 chunks, 0.5 -> 3,132, 0.75 -> 2,956; the prose path 2,791),
# each costing BM25, a vector and a point.
SHORT_SHARE = 0.25

MARKDOWN_EXTS = frozenset({".md", ".mdx", ".markdown"})
# fmt: off
CODE_EXTS = frozenset({
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx", ".jsx", ".go", ".rs",
    ".java", ".kt", ".kts", ".scala", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cs",
    ".rb", ".php", ".swift", ".m", ".mm", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".lua", ".pl",
    ".pm", ".r", ".jl", ".ex", ".exs", ".erl", ".hs", ".ml", ".clj", ".dart", ".vue", ".svelte",
    ".sql", ".zig", ".nim",
})
# fmt: on
# Files where a leading "# " is a comment, not a title.
_HASH_COMMENT_EXTS = frozenset({".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".env"})

_HEADING_MD = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_HEADING_MDX = re.compile(r"[ \t]*(#{1,6})(?:[ \t]+(.*))?$")  # MDX nests headings in components
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_ANCHOR = re.compile(r"[ \t]*\{[ \t]*#[^}]*\}[ \t]*$")  # "## Title { #anchor }" (Pandoc/MkDocs)
CONTEXT_CHARS = 120
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)$")
_DEF = re.compile(
    r"(?:async\s+def|def|class|function|func|fn|pub|export|impl|struct|enum|trait|interface|type"
    r"|module|package|sub|public|private|protected|internal|static|abstract|final|const|let|var"
    r"|typedef|template|object|macro_rules!|proc|defmodule|defp?)\b"
)
_PREAMBLE = re.compile(r"(?:@|#|//|/\*|\s*\*|--)")  # decorators and comments before a definition
_BREAK = re.compile(r"\s(?=\S)")  # a cut right after this keeps whitespace with the left piece
_LINE = re.compile(r"[^\n]*\n|[^\n]+")


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """One chunk: an exact span of the document.

    ``text == document.encode()[start:end].decode()``; chunks of a document are contiguous and
    cover it completely. Lines are 1-based and count ``\\n`` only. ``heading`` is the Markdown
    heading path (" > "-joined) in force at the chunk's first non-blank character, including a
    heading that starts exactly there; "" when there is none (always "" for non-Markdown files).
    """

    index: int
    start: int
    end: int
    start_line: int
    end_line: int
    text: str
    heading: str
    # The fence ("```", "~~~~") a chunk starts inside, else "": a chunk cut from a long code
    # block starts mid-fence, and its "# comment" lines are code, not headings.
    fence: str = ""
    # Source code chunked by its syntax: the language, the definitions the chunk overlaps and
    # the names of those whose signature it holds (see semfs.ingest.store.schema.ChunkRecord);
    # ``heading`` is then the label path of the definitions around its first line.
    syntax: str = ""
    outline: tuple[OutlineEntry, ...] = ()
    symbols: tuple[str, ...] = ()


def chunk_text(
    text: str,
    path: str,
    count_tokens: TokenCounter,
    max_tokens: int,
    cuts: Sequence[int] = (),
) -> list[ChunkSpan]:
    """Split ``text`` into lossless chunks of at most ``max_tokens`` tokens and
    ``max_tokens * MAX_CHARS_PER_TOKEN`` characters each.

    The split style follows ``path``'s extension (Markdown/MDX, code, anything else); source
    code that a grammar reads (:mod:`semfs.ingest.syntax`) is cut at its definitions, see
    :func:`_chunk_code`. Callers may
    rely on: ``"".join(c.text for c in chunks) == text``; byte offsets and line numbers as
    documented on :class:`ChunkSpan`; ``count_tokens([c.text])[0] <= max_tokens`` and
    ``len(c.text) <= max_tokens * MAX_CHARS_PER_TOKEN`` for every chunk, except a single
    character that alone exceeds the budget (it cannot be split further).
    ``count_tokens`` is called a handful of times per document with batches, never per piece.
    Empty text gives ``[]``; whitespace-only text gives one chunk unless it exceeds the budget.
    ``cuts``: 1-based lines where a chunk starts, when a block starts there (a text view's
    page headings: a chunk then never spans two pages, and a hit names one), past the first
    :data:`FREE_UNIT_CHUNKS` chunks only when the chunk before holds ``1/UNIT_SHARE`` of the
    budget (tiny pages share a chunk: their number is bounded by the text, not the pages).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    if not text:
        return []
    ext = PurePath(path).suffix.lower()
    count_tokens = _sized(count_tokens, max_tokens)
    if ext not in MARKDOWN_EXTS and (found := syntax.outline(text, path)) is not None:
        return _chunk_code(text, found, count_tokens, max_tokens)
    kind = "md" if ext in MARKDOWN_EXTS else "code" if ext in CODE_EXTS else "text"
    lines = _split_lines(text)
    starts, strong, heads, front, fenced = _scan(lines, kind, ext == ".mdx")
    bounds = [*starts, len(lines)]
    blocks = ["".join(lines[a:b]) for a, b in itertools.pairwise(bounds)]
    pieces, counts, origin = _refine(blocks, count_tokens, max_tokens)

    cut_lines = set(cuts)
    cut_blocks = {i for i, start in enumerate(starts) if start + 1 in cut_lines}
    ranges: list[tuple[int, int]] = []
    first, total = 0, 0
    for k, c in enumerate(counts):
        if k > first:
            block = origin[k]
            fresh = (
                block != origin[k - 1]
                and strong[block]
                and total * 4 >= max_tokens
                and not (front and origin[k - 1] == 0)
            )
            forced = (
                block != origin[k - 1]
                and block in cut_blocks
                and (len(ranges) < FREE_UNIT_CHUNKS or total * UNIT_SHARE >= max_tokens)
            )
            if fresh or forced or total + c > max_tokens:
                ranges.append((first, k))
                first, total = k, 0
        total += c
    ranges.append((first, len(pieces)))
    ranges = _verify(pieces, ranges, count_tokens, max_tokens, counts)
    return _spans(
        [pieces[a] if b - a == 1 else "".join(pieces[a:b]) for a, b in ranges], heads, fenced
    )


def rechunk(
    text: str,
    path: str,
    count_tokens: TokenCounter,
    max_tokens: int,
    cuts: Sequence[int] = (),
    previous: Sequence[str] = (),
) -> list[ChunkSpan]:
    """:func:`chunk_text` of a new version of a document whose chunks were ``previous`` (their
    texts, in order): the old chunks that still open the new text and those that still close
    it are kept as they are, and only the text between them is chunked anew. A one-line edit
    then changes one or two chunks: chunking the whole text again moves every later boundary
    of a text of even lines (a log), as the greedy merge fills each chunk to the budget.

    Callers may rely on what :func:`chunk_text` promises (exact, contiguous spans within the
    budget), and on this: with no ``previous`` it is :func:`chunk_text` itself, so a first
    ingest chunks as before. The old last chunk is never kept at the start, nor the old first
    at the end (each was closed by the document's end, not by its text), so text appended to
    a log joins its last chunk instead of adding one chunk per append.
    """
    if not previous or not text:
        return chunk_text(text, path, count_tokens, max_tokens, cuts)
    start, head = 0, 0
    while head < len(previous) - 1 and text.startswith(previous[head], start) and previous[head]:
        start += len(previous[head])
        head += 1
    end, tail = len(text), len(previous)
    while tail - 1 >= max(head, 1) and previous[tail - 1]:
        piece = previous[tail - 1]
        if end - len(piece) < start or not text.endswith(piece, start, end):
            break
        end -= len(piece)
        tail -= 1
    # A small kept chunk beside the change joins it: repeated edits in one place do not
    # leave a trail of small chunks (the text chunked anew fills up to the budget again).
    edges = [i for i in (head - 1, tail) if 0 <= i < len(previous) and (i < head or i >= tail)]
    for i, count in zip(edges, _measure(count_tokens, [previous[i] for i in edges]), strict=True):
        if count * 2 >= max_tokens:
            continue
        if i == head - 1:
            head -= 1
            start -= len(previous[i])
        else:
            tail += 1
            end += len(previous[i])
    if head == 0 and tail == len(previous):
        return chunk_text(text, path, count_tokens, max_tokens, cuts)  # nothing kept
    middle = text[start:end]
    first_line = text.count("\n", 0, start) + 1
    shifted = [c - first_line + 1 for c in cuts if c > first_line]
    fresh = [s.text for s in chunk_text(middle, path, count_tokens, max_tokens, shifted)]
    chunks = [*previous[:head], *fresh, *previous[tail:]]
    ext = PurePath(path).suffix.lower()
    kind = "md" if ext in MARKDOWN_EXTS else "code" if ext in CODE_EXTS else "text"
    _starts, _strong, heads, _front, fenced = _scan(_split_lines(text), kind, ext == ".mdx")
    return _spans(chunks, heads, fenced)


def _spans(
    chunks: Sequence[str], heads: list[tuple[int, int, str]], fenced: list[tuple[int, int, str]]
) -> list[ChunkSpan]:
    """The spans of consecutive ``chunks`` of a text whose headings and fences are ``heads``
    and ``fenced`` (see :func:`_scan`): offsets, lines, heading paths in one pass."""
    spans: list[ChunkSpan] = []
    byte, line_no, char, h = 0, 1, 0, 0
    stack: list[tuple[int, str]] = []
    f = 0
    for index, chunk in enumerate(chunks):
        while f < len(fenced) and fenced[f][1] < char:
            f += 1
        inside = fenced[f][2] if f < len(fenced) and fenced[f][0] <= char else ""
        # A heading after leading blank lines still titles the chunk.
        lead = char + len(chunk) - len(chunk.lstrip())
        while h < len(heads) and heads[h][0] <= lead:
            _, level, title = heads[h]
            h += 1
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
        newlines = chunk.count("\n")
        size = len(chunk.encode())
        end_line = line_no + newlines - (1 if chunk.endswith("\n") else 0)
        heading = " > ".join(dedupe_path([t for _, t in stack if t]))
        spans.append(ChunkSpan(index, byte, byte + size, line_no, end_line, chunk, heading, inside))
        byte, line_no, char = byte + size, line_no + newlines, char + len(chunk)
    return spans


def embedding_text(chunk: ChunkSpan, title: str) -> str:
    """Return one context line (title and heading path) followed by the chunk text.

    The context line has no newline and at most ``CONTEXT_CHARS`` characters: the heading path is
    not repeated when it starts with the title, and outer headings are elided ("…") before the
    line is cut. The chunk text follows unchanged; with no title and no heading it is returned
    as is.
    """
    return model_text(chunk.text, chunk.heading, title)


def model_text(text: str, heading: str, title: str) -> str:
    """:func:`embedding_text` of a chunk's ``text`` under ``heading`` in a document titled
    ``title`` (what a stored chunk record holds): what the model embeds for it."""
    parts = [p for p in (" ".join(x.split()) for x in heading.split(" > ")) if p]
    title = " ".join(title.split())
    if title and (not parts or parts[0] != title):
        parts.insert(0, title)
    first, inner = parts[:1], parts[1:]
    context = " > ".join(parts)
    while len(context) > CONTEXT_CHARS and len(inner) > 1:
        inner = inner[1:]
        context = " > ".join([*first, "…", *inner])
    context = context[:CONTEXT_CHARS]
    return f"{context}\n{text}" if context else text


def code_embedding_text(chunk: ChunkSpan, path: str) -> str:
    """What the models see of a chunk of source code: one context line, the file's path and
    the chunk's label path (``net/http/transport.go > func (persistConn) shouldRetryRequest``),
    with the label's names split into words where they are joined (``should retry request``:
    BM25 keeps ``shouldRetryRequest`` as one term that no question's word matches), at most
    ``CONTEXT_CHARS``; then the chunk text unchanged."""
    return code_model_text(chunk.text, chunk.heading, path)


def code_model_text(text: str, heading: str, path: str) -> str:
    """:func:`code_embedding_text` of a code chunk's ``text`` under the label ``heading`` in
    the file ``path`` (what a stored chunk record holds): what the model embeds for it."""
    parts = [path, *(p for p in heading.split(" > ") if p)]
    present = set(re.findall(r"[a-z0-9]+", heading.lower()))
    words = [w for w in _split_names(heading) if w not in present]
    context = " > ".join(parts)
    if words:
        context += " (" + " ".join(words) + ")"
    context = " ".join(context.split())[:CONTEXT_CHARS]
    return f"{context}\n{text}"


# Joined names: snake_case, camelCase, PascalCase with an inner capital (HTTPServer).
_NAME = re.compile(
    r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[A-Za-z][a-z0-9]+[A-Z][A-Za-z0-9]*"
    r"|[A-Z]{2,}[a-z][A-Za-z0-9]*"
)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _split_names(label: str) -> list[str]:
    """The words of the joined names in ``label`` (``retry_upload``, ``shouldRetryRequest``),
    lower case, once each."""
    out: list[str] = []
    for name in _NAME.findall(label):
        for word in _CAMEL.findall(name.replace("_", " ")):
            low = word.lower()
            if low not in out:
                out.append(low)
    return out


def document_title(text: str, path: str) -> str:
    """Return a human title for a document.

    The ``title:`` of YAML front matter (``---`` ... ``---`` at the top), else the first level-1
    ``# `` heading outside code fences (not for code or ``#``-comment config files), else the file
    name without its extension.
    """
    ext = PurePath(path).suffix.lower()
    lines = _split_lines(text)
    end = _front_matter_end(lines)
    for line in lines[1 : end - 1] if end else ():
        m = re.match(r"title[ \t]*:[ \t]*(.*?)\s*$", line)
        if m and m.group(1) and m.group(1)[0] not in "|>":
            value = m.group(1)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1].replace("''", "'") if value[0] == "'" else value[1:-1]
            if value.strip():
                return value.strip()
    if ext not in CODE_EXTS and ext not in _HASH_COMMENT_EXTS:
        fence = ""
        heading = _HEADING_MDX if ext == ".mdx" else _HEADING_MD
        for line in lines[end:]:
            stripped = line.rstrip("\r\n")
            if fence:
                fence = "" if _closes(stripped, fence) else fence
            elif opened := _fence_open(stripped):
                fence = opened
            elif (
                (m := heading.match(stripped))
                and len(m.group(1)) == 1
                and (title := _heading_text(m.group(2) or ""))
            ):
                return title
    return PurePath(path).stem


def document_description(text: str, path: str) -> str:
    """Return a one-line description of a document, at most ``DESCRIPTION_CHARS`` characters.

    The ``description:`` of YAML front matter, else the first paragraph of prose (not a
    heading, fence, table, HTML/MDX markup or include), else "". Whitespace is collapsed; a
    longer text is cut at a word and ends with "…".
    """
    ext = PurePath(path).suffix.lower()
    lines = _split_lines(text)
    end = _front_matter_end(lines)
    for line in lines[1 : end - 1] if end else ():
        m = re.match(r"description[ \t]*:[ \t]*(.*?)\s*$", line)
        if m and m.group(1) and m.group(1)[0] not in "|>":
            value = m.group(1)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            if value.strip():
                return _one_line(value)
    if ext in CODE_EXTS:
        return ""
    fence = ""
    heading = _HEADING_MDX if ext == ".mdx" else _HEADING_MD
    para: list[str] = []
    for line in lines[end:]:
        stripped = line.rstrip("\r\n")
        if fence:
            fence = "" if _closes(stripped, fence) else fence
            continue
        if opened := _fence_open(stripped):
            fence = opened
        elif stripped.strip() and not heading.match(stripped) and not _NOT_PROSE.match(stripped):
            para.append(stripped)
            continue
        if para:
            break
    return _one_line(" ".join(para))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= DESCRIPTION_CHARS:
        return text
    return text[: DESCRIPTION_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _split_lines(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _front_matter_end(lines: list[str]) -> int:
    """Index of the first line after a closed front matter block at the top, else 0."""
    if not lines or lines[0].lstrip("\ufeff").rstrip() != "---":
        return 0
    for j in range(1, len(lines)):
        if lines[j].rstrip() in ("---", "..."):
            return j + 1
    return 0


def _fence_open(line: str) -> str:
    m = _FENCE.match(line)
    if not m or (m.group(1)[0] == "`" and "`" in m.group(2)):
        return ""
    return m.group(1)


def _closes(line: str, fence: str) -> bool:
    m = _FENCE.match(line)
    return bool(
        m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip()
    )


def _heading_text(raw: str) -> str:
    return heading_label(_ANCHOR.sub("", _CLOSING_HASHES.sub("", raw.strip())))


def _is_definition(lines: list[str], i: int) -> bool:
    for line in lines[i : i + 8]:
        if _DEF.match(line):
            return True
        if not _PREAMBLE.match(line):
            return False
    return False


def _scan(
    lines: list[str], kind: str, mdx: bool
) -> tuple[list[int], list[bool], list[tuple[int, int, str]], bool, list[tuple[int, int, str]]]:
    """Return block start line indexes, per-block "preferred chunk start" flags, headings as
    (char offset, level, text), whether block 0 is front matter, and the fenced code blocks
    as (offset of the line after the opening fence, offset of the closing line, fence)."""
    md = kind == "md"
    heading_re = _HEADING_MDX if mdx else _HEADING_MD
    first = _front_matter_end(lines) if md else 0
    starts, strong = [0], [False]
    heads: list[tuple[int, int, str]] = []
    content = first > 0  # the current block holds more than headings and blank lines
    prev_blank, fence = False, ""
    fenced: list[tuple[int, int, str]] = []
    opened_at = 0
    pos = sum(len(line) for line in lines[:first])
    for i in range(first, len(lines)):
        line = lines[i]
        offset, pos = pos, pos + len(line)
        if fence:
            if _closes(line.rstrip("\r\n"), fence):
                fenced.append((opened_at, offset, fence))
                fence = ""
            continue
        if not line.strip():
            prev_blank = True
            continue
        stripped = line.rstrip("\r\n")
        head = heading_re.match(stripped) if md else None
        opened = _fence_open(stripped) if md else ""
        if content and (prev_blank or head or opened):
            starts.append(i)
            strong.append(bool(head) or (kind == "code" and _is_definition(lines, i)))
            content = False
        prev_blank = False
        if head:
            heads.append((offset, len(head.group(1)), _heading_text(head.group(2) or "")))
        else:
            content = True
        fence, opened_at = opened, pos
    if fence:  # never closed: a fence runs to the end of the document
        fenced.append((opened_at, pos, fence))
    return starts, strong, heads, first > 0, fenced


def _sized(count_tokens: TokenCounter, max_tokens: int) -> TokenCounter:
    """``count_tokens``, counting a text longer than a chunk may be (``max_tokens *``
    :data:`MAX_CHARS_PER_TOKEN` characters) at least one token per :data:`MAX_CHARS_PER_TOKEN`
    characters, so over budget: every budget below then bounds a chunk's size as well as its
    tokens. Texts within the size keep their own count (a chunk that fits is cut as before)."""
    limit = max_tokens * MAX_CHARS_PER_TOKEN

    def count(texts: Sequence[str]) -> list[int]:
        counts = count_tokens(texts)
        if len(counts) != len(texts):  # _measure says what is wrong
            return list(counts)
        return [
            n if len(t) <= limit else max(n, -(-len(t) // MAX_CHARS_PER_TOKEN))
            for n, t in zip(counts, texts, strict=True)
        ]

    return count


def _measure(count_tokens: TokenCounter, texts: list[str]) -> list[int]:
    if not texts:
        return []
    counts = list(count_tokens(texts))
    if len(counts) != len(texts):
        raise ValueError(f"count_tokens returned {len(counts)} counts for {len(texts)} texts")
    return counts


def _split(text: str, count: int, max_tokens: int) -> list[str]:
    """Split an over-budget text (len >= 2) into >= 2 exact pieces: lines, else at whitespace
    near proportional positions, else hard at characters."""
    if text.find("\n", 0, len(text) - 1) >= 0:
        return _LINE.findall(text)
    # Pieces of ~1/8 budget: small enough for the greedy merge to fill chunks to >= 7/8.
    size = max(1, len(text) * max_tokens // (8 * count))
    pieces: list[str] = []
    i, n = 0, len(text)
    soft = _BREAK.search(text.strip()) is not None
    exhausted = False  # no break after the target: stop re-scanning the tail (keeps it linear)
    while n - i > size:
        if soft:
            m = None if exhausted else _BREAK.search(text, i + size)
            if m is None:
                exhausted, m = True, _BREAK.search(text, i + 1)
            if m is None:
                break
            cut = m.end()
        else:
            cut = i + size
            while cut > i + 1 and (
                unicodedata.category(text[cut])[0] == "M"
                or "\u200d" in text[cut - 1 : cut + 1]
                or text[cut - 1 : cut + 1] == "\r\n"
            ):
                cut -= 1
        pieces.append(text[i:cut])
        i = cut
    pieces.append(text[i:])
    return pieces


def _refine(
    blocks: list[str], count_tokens: TokenCounter, max_tokens: int
) -> tuple[list[str], list[int], list[int]]:
    """Split over-budget blocks until every piece fits (or is a single character).

    Returns the pieces, their counts and the index of the block each piece came from."""
    texts, counts = blocks, _measure(count_tokens, blocks)
    origin = list(range(len(blocks)))
    while True:
        parts = {
            k: _split(t, c, max_tokens)
            for k, (t, c) in enumerate(zip(texts, counts, strict=True))
            if c > max_tokens and len(t) > 1
        }
        if not parts:
            return texts, counts, origin
        fresh = iter(_measure(count_tokens, [p for ps in parts.values() for p in ps]))
        new_texts: list[str] = []
        new_counts: list[int] = []
        new_origin: list[int] = []
        for k, text in enumerate(texts):
            for piece in parts.get(k, (text,)):
                new_texts.append(piece)
                new_counts.append(next(fresh) if k in parts else counts[k])
                new_origin.append(origin[k])
        texts, counts, origin = new_texts, new_counts, new_origin


def _verify(
    pieces: list[str],
    ranges: list[tuple[int, int]],
    count_tokens: TokenCounter,
    max_tokens: int,
    counts: Sequence[int] = (),
) -> list[tuple[int, int]]:
    """Measure merged chunks and halve (at piece boundaries) any that exceed the budget.

    Given ``counts``, a merge of pieces ending in whitespace whose counts, plus one per joint,
    fit is not measured: WordPiece (and the stand-in) count such a join as its parts' sum, a
    tokenizer merging across a joint one more per joint at most. Measuring costs most."""

    def fits(a: int, b: int) -> bool:
        joints = all(p[-1:].isspace() for p in pieces[a : b - 1])
        size = sum(len(p) for p in pieces[a:b]) <= max_tokens * MAX_CHARS_PER_TOKEN
        return bool(counts) and joints and size and sum(counts[a:b]) + b - a - 1 <= max_tokens

    todo = [(a, b) for a, b in ranges if b - a > 1 and not fits(a, b)]
    while todo:
        measured = _measure(count_tokens, ["".join(pieces[a:b]) for a, b in todo])
        bad = {r for r, c in zip(todo, measured, strict=True) if c > max_tokens}
        if not bad:
            break
        out: list[tuple[int, int]] = []
        todo = []
        for a, b in ranges:
            if (a, b) not in bad:
                out.append((a, b))
                continue
            half, acc, mid = sum(len(p) for p in pieces[a:b]) / 2, 0, a + 1
            while mid < b - 1 and acc + len(pieces[mid - 1]) < half:
                acc += len(pieces[mid - 1])
                mid += 1
            for r in ((a, mid), (mid, b)):
                out.append(r)
                if r[1] - r[0] > 1:
                    todo.append(r)
        ranges = out
    return ranges


def _chunk_code(
    text: str, found: syntax.Outline, count_tokens: TokenCounter, max_tokens: int
) -> list[ChunkSpan]:
    """Chunks of source code that follow its definitions.

    Blocks start at each definition (its comments and decorators first), after its end, at
    each statement of a body or of the top level, and after blank lines. A definition that
    fits a chunk is never cut: it starts a new chunk when the current one holds a quarter of
    the budget or it would not fit there, else it joins it (short neighbours share a chunk).
    One too long for a chunk is cut between its statements (then lines, as prose is), and
    the definitions inside it are placed by the same rule. The invariants of
    :func:`chunk_text` hold; each chunk's ``heading`` is the label path of the definitions
    around its first non-blank line, and ``outline``/``symbols`` say what it overlaps.
    """
    lines = _split_lines(text)
    n = len(lines)
    blank = [not line.strip() for line in lines]
    nonblank_after = [n] * (n + 1)
    for r in range(n - 1, -1, -1):
        nonblank_after[r] = r if not blank[r] else nonblank_after[r + 1]
    defs = found.definitions
    bounds = {0}
    for d in defs:
        if d.cut and d.start < n:
            bounds.add(d.start)
            bounds.add(nonblank_after[min(d.end + 1, n)])
    bounds.update(r for r in found.statements if r < n)
    bounds.update(r for r in range(1, n) if blank[r - 1] and not blank[r])
    bounds.discard(n)
    starts = sorted(bounds)
    block_of = {row: i for i, row in enumerate(starts)}
    blocks = ["".join(lines[a:b]) for a, b in itertools.pairwise([*starts, n])]
    pieces, counts, origin = _refine(blocks, count_tokens, max_tokens)
    first_piece: dict[int, int] = {}
    for k, block in enumerate(origin):
        first_piece.setdefault(block, k)
    # The outermost definition starting at each piece, and the pieces it covers.
    starting: dict[int, tuple[int, int]] = {}
    for d in defs:
        if not d.cut or d.start >= n:
            continue
        a = first_piece[block_of[d.start]]
        after = nonblank_after[min(d.end + 1, n)]
        b = first_piece[block_of[after]] if after < n else len(pieces)
        if a not in starting or b > starting[a][1]:
            starting[a] = (a, b)
    prefix = [0, *itertools.accumulate(counts)]
    ranges: list[tuple[int, int]] = []
    first, total, k = 0, 0, 0
    while k < len(pieces):
        span = starting.get(k)
        if span is not None:
            size = prefix[span[1]] - prefix[k]
            if k > first and (total >= max_tokens * SHORT_SHARE or total + size > max_tokens):
                ranges.append((first, k))
                first, total = k, 0
            if total + size <= max_tokens:  # it fits: whole, its inner definitions with it
                total += size
                k = span[1]
                continue
        if k > first and total + counts[k] > max_tokens:
            ranges.append((first, k))
            first, total = k, 0
        total += counts[k]
        k += 1
    ranges.append((first, len(pieces)))
    ranges = _verify(pieces, ranges, count_tokens, max_tokens, counts)
    return _code_spans(pieces, ranges, lines, found)


def _code_spans(
    pieces: list[str], ranges: list[tuple[int, int]], lines: list[str], found: syntax.Outline
) -> list[ChunkSpan]:
    """The spans of ``ranges`` with their labels, outlines and symbols (one sweep over the
    definitions, which are sorted by their first line)."""
    defs = found.definitions
    language = found.language
    spans: list[ChunkSpan] = []
    byte, line_no = 0, 1
    nxt = 0  # the next definition not yet open
    open_defs: list[int] = []  # definitions open at the current chunk's first line
    entries: dict[int, OutlineEntry] = {}

    def entry(i: int) -> OutlineEntry:
        if i not in entries:
            d = defs[i]
            # A bounded slice first: a one-line file's line is the whole file.
            signature = lines[d.line][:1000].rstrip() if d.line < len(lines) else ""
            entries[i] = OutlineEntry(
                d.start + 1, d.end + 1, d.line + 1, " > ".join(found.path(i)), signature[:200]
            )
        return entries[i]

    for index, (a, b) in enumerate(ranges):
        chunk = pieces[a] if b - a == 1 else "".join(pieces[a:b])
        newlines = chunk.count("\n")
        size = len(chunk.encode())
        end_line = line_no + newlines - (1 if chunk.endswith("\n") else 0)
        stripped = len(chunk) - len(chunk.lstrip())
        lead = line_no - 1 + chunk.count("\n", 0, stripped)  # 0-based first non-blank line
        # By bytes, not lines: a chunk of a one-line file overlaps its own definitions, not
        # every one on the line (that was quadratic: 70,000 entries in each of 700 chunks).
        inside: list[int] = []
        while nxt < len(defs) and defs[nxt].first_byte < byte + size:
            open_defs.append(nxt)
            nxt += 1
        open_defs = [i for i in open_defs if defs[i].end_byte > byte]
        overlapping = sorted(open_defs, key=lambda i: (defs[i].start, defs[i].depth))
        # The definitions around the first line, outer to inner; of several on that line
        # (a one-line file), the first at each depth.
        label: int | None = None
        for i in overlapping:
            if defs[i].start <= lead <= defs[i].end and (label is None or label in defs[i].parents):
                label = i
        heading = entry(label).label if label is not None else ""  # its path, made once
        inside = [i for i in overlapping if byte <= defs[i].name_byte < byte + size]
        symbols = tuple(dict.fromkeys(name for i in inside for name in defs[i].names))
        spans.append(
            ChunkSpan(
                index,
                byte,
                byte + size,
                line_no,
                end_line,
                chunk,
                heading,
                "",
                language,
                tuple(entry(i) for i in overlapping),
                symbols,
            )
        )
        byte, line_no = byte + size, line_no + newlines
    return spans
