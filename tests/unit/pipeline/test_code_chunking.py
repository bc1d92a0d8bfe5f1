"""Source code chunked by its syntax (semfs.ingest.syntax + chunking): one small file per
covered language, its chunks' boundaries, labels, outlines and exact spans."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from semfs.ingest import syntax
from semfs.ingest.chunking import CONTEXT_CHARS, ChunkSpan, chunk_text, code_embedding_text
from tests.helpers.spans import check

FILES = Path(__file__).parent / "code"


def words(texts: Sequence[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def exact(text: str, chunks: list[ChunkSpan], budget: int) -> None:
    """The invariants of chunk_text (contiguous exact byte spans covering the file, lines
    counted right, every chunk within the budget)."""
    check(text, chunks, words, budget)


# file, budget (words), then each chunk's (first line, label), then (label, signature line)
# of definitions the chunks' outlines must hold, and names a lookup by name must find.
CASES = {
    "a.py": (
        30,
        [
            (1, ""),
            (9, "class Uploader"),
            (12, "class Uploader > def retry_upload"),
            (17, "class Uploader > def abort"),
        ],
        [("def upload", 4), ("class Uploader > def retry_upload", 13)],
        ["upload", "Uploader", "retry_upload", "Uploader.retry_upload", "Uploader.abort"],
    ),
    "a.js": (
        30,
        [
            (1, ""),
            (3, "function upload"),
            (8, "class Uploader"),
            (14, "class Uploader > abort()"),
            (19, "checksum()"),
        ],
        [("class Uploader > retryUpload()", 10)],
        ["upload", "Uploader.retryUpload", "checksum"],
    ),
    "a.ts": (
        30,
        [
            (1, "interface Part"),
            (7, "class Uploader"),
            (10, "class Uploader > retryUpload()"),
            (14, "class Uploader > abort()"),
            (19, "type Status"),
        ],
        [("class Uploader", 7)],
        ["Part", "Uploader.retryUpload", "Status"],
    ),
    "a.go": (
        30,
        [(1, ""), (11, "func (Uploader) RetryUpload"), (16, "func NewUploader")],
        [("type Uploader", 6)],
        ["Uploader", "RetryUpload", "Uploader.RetryUpload", "NewUploader"],
    ),
    "a.rs": (
        30,
        [(1, ""), (10, "impl Uploader"), (16, "impl Uploader > fn abort"), (21, "fn main")],
        [("struct Uploader", 5), ("impl Uploader > fn retry_upload", 12)],
        ["Uploader", "Uploader.retry_upload", "main"],
    ),
    "A.java": (
        30,
        [
            (1, ""),
            (5, "class Uploader"),
            (9, "class Uploader > retryUpload()"),
            (15, "class Uploader > Uploader()"),
        ],
        [("class Uploader > retryUpload()", 11)],
        ["Uploader", "retryUpload", "Uploader.retryUpload"],
    ),
    "a.c": (
        30,
        [(1, ""), (10, "struct uploader"), (16, "#define MAX_ATTEMPTS")],
        # A GNU-style definition: its name's line is its signature.
        [("retry_upload()", 5)],
        ["retry_upload", "uploader", "MAX_ATTEMPTS"],
    ),
    "a.cpp": (
        30,
        [(1, ""), (3, "namespace uploads"), (14, "namespace uploads > Uploader::RetryUpload()")],
        [("namespace uploads > class Uploader", 5)],
        ["Uploader", "RetryUpload", "Uploader.RetryUpload", "uploads.Uploader.Abort"],
    ),
    "a.sh": (
        40,
        [(1, ""), (10, "abort()")],
        [("retry_upload()", 5)],
        ["retry_upload", "abort"],
    ),
    "a.yaml": (
        30,
        [(1, "uploads"), (9, "logging")],
        [("uploads > server", 5)],
        [],
    ),
    "a.toml": (30, [(1, ""), (8, "[server]")], [("[retry]", 4)], []),
    "a.json": (30, [(1, ""), (6, "server")], [("uploads", 2)], []),
}


def test_every_suffix_has_a_case() -> None:
    grammars = {g.module for g in syntax.LANGUAGES.values()}
    covered = {syntax.LANGUAGES[syntax.language_of(name) or ""].module for name in CASES}
    assert covered == grammars


@pytest.mark.parametrize("name", sorted(CASES))
def test_chunks_follow_definitions(name: str) -> None:
    budget, expected, outlined, symbols = CASES[name]
    text = (FILES / name).read_text()
    chunks = chunk_text(text, name, words, budget)
    exact(text, chunks, budget)
    assert [(c.start_line, c.heading) for c in chunks] == expected
    language = syntax.outline(text, name)
    assert language is not None
    assert {c.syntax for c in chunks} == {language.language}
    entries = {(e.label, e.line): e for c in chunks for e in c.outline}
    for label, line in outlined:
        entry = entries[(label, line)]
        assert entry.signature == text.split("\n")[line - 1].rstrip()
        assert entry.start_line <= entry.line <= entry.end_line
    found = {n for c in chunks for n in c.symbols}
    assert set(symbols) <= found


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_definition_that_fits_is_never_cut(name: str) -> None:
    text = (FILES / name).read_text()
    language = syntax.outline(text, name)
    assert language is not None
    for budget in (12, 20, 30, 60):
        chunks = chunk_text(text, name, words, budget)
        exact(text, chunks, budget)
        starts = {c.start_line - 1 for c in chunks}
        lines = text.split("\n")
        for d in language.definitions:
            size = sum(len(line.split()) for line in lines[d.start : d.end + 1])
            if d.cut and size <= budget // 2:
                # No chunk starts strictly inside it (a merge may only add what follows).
                assert not any(d.start < s <= d.end for s in starts), (name, budget, d)


def test_long_body_is_cut_between_statements() -> None:
    body = "".join(f"    step_{i} = compute({i}, retries=3, backoff=True)\n" for i in range(40))
    text = f"def long_function(part):\n    '''One long body.'''\n{body}    return part\n"
    chunks = chunk_text(text, "long.py", words, 40)
    exact(text, chunks, 40)
    assert len(chunks) > 3
    assert all(c.heading == "def long_function" for c in chunks)
    # Every cut is at a statement's line start, never inside a line.
    assert all(c.text.endswith("\n") for c in chunks)
    assert chunks[0].symbols == ("long_function",)
    assert all(c.symbols == () for c in chunks[1:])
    # Each piece carries the definition it is part of, with its signature.
    assert all(c.outline[0].signature == "def long_function(part):" for c in chunks)


def test_short_neighbours_share_a_chunk() -> None:
    text = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(12))
    chunks = chunk_text(text, "small.py", words, 40)
    exact(text, chunks, 40)
    assert 1 < len(chunks) < 12
    for c in chunks:
        assert c.text.startswith("def f")
        assert c.symbols == tuple(f"f{i}" for i in range(12) if f"def f{i}(" in c.text)


def test_script_by_its_shebang() -> None:
    text = "#!/usr/bin/env python3\nimport sys\n\n\ndef main():\n    return 0\n"
    assert syntax.language_of("bin/tool", text.split("\n", maxsplit=1)[0]) == ".py"
    assert syntax.language_of("bin/tool", "#!/bin/bash -e") == ".sh"
    assert syntax.language_of("bin/tool", "plain text") is None
    assert syntax.language_of("notes.txt", "#!/bin/sh") is None
    chunks = chunk_text(text, "bin/tool", words, 4)
    assert chunks[-1].heading == "def main" and chunks[-1].syntax == "python"


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("name", ["x.py", "x.js", "x.go", "x.c", "x.yaml", "x.json"])
def test_any_text_is_lossless(seed: int, name: str) -> None:
    """Broken code, mixed line ends, multibyte text: still exact spans (tree-sitter parses
    anything, with error nodes)."""
    rng = random.Random(seed)
    pool = [
        "def f(:\n",
        "class {\n",
        "  }\n",
        "func (x *T) M() {\r\n",
        "émoji🎉 日本語\n",
        "\n\n",
        "key: [1, 2\n",
        '{"a": {"b": ',
        "    return x\n",
        "#!/bin/sh\n",
        "/* open comment\n",
        "x" * 300 + "\n",
    ]
    text = "".join(rng.choice(pool) for _ in range(rng.randint(1, 80)))
    for budget in (3, 17, 64):
        chunks = chunk_text(text, name, words, budget)
        exact(text, chunks, max(budget, *words([c.text for c in chunks])))
        assert all(words([c.text])[0] <= budget or len(c.text.split()) == 1 for c in chunks)


def test_no_parser_is_loaded_until_code_is_chunked() -> None:
    """The pipeline, the search and the view import no tree-sitter: a mount (even one that
    follows a folder) pays for the parser only when a code file is ingested."""
    code = (
        "import sys\n"
        "import semfs.ingest.pipeline, semfs.ingest.search, semfs.fusefs.view.searchdir\n"
        "assert not [m for m in sys.modules if m.startswith('tree_sitter')], 'imported'\n"
        "from semfs.ingest.chunking import chunk_text\n"
        "chunk_text('notes\\n', 'a.md', lambda ts: [1 for _ in ts], 8)\n"
        "assert 'tree_sitter' not in sys.modules\n"
        "chunk_text('def f():\\n    pass\\n', 'a.py', lambda ts: [1 for _ in ts], 8)\n"
        "assert 'tree_sitter' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_models_see_the_path_and_the_label() -> None:
    """A code chunk is embedded (dense and BM25) after one line of context: its file's path
    and its label, joined names split into words; the stored text stays the exact span."""
    text = (FILES / "a.ts").read_text()
    chunks = chunk_text(text, "src/a.ts", words, 30)
    retry = next(c for c in chunks if c.heading == "class Uploader > retryUpload()")
    seen = code_embedding_text(retry, "src/uploads/a.ts")
    context, _, rest = seen.partition("\n")
    assert context == "src/uploads/a.ts > class Uploader > retryUpload() (retry upload)"
    assert rest == retry.text
    python = chunk_text((FILES / "a.py").read_text(), "a.py", words, 30)
    first = code_embedding_text(python[0], "pkg/a.py")
    assert first.split("\n", 1)[0] == "pkg/a.py"  # before any definition: the path alone
    snake = next(c for c in python if c.heading.endswith("retry_upload"))
    # retry_upload's words are BM25's already (it splits at "_"): nothing to add.
    line = code_embedding_text(snake, "a.py").split("\n", 1)[0]
    assert line == "a.py > class Uploader > def retry_upload"
    long = replace(snake, heading=" > ".join(["class VeryLongOuterClassName"] * 9))
    assert len(code_embedding_text(long, "a.py").split("\n", 1)[0]) <= CONTEXT_CHARS


def test_where_a_definition_begins_its_line_and_its_preamble_starts() -> None:
    """Whether a definition begins its line, and the byte its comments above start at, are
    read from its node's column (no table of the file's lines): tabs, a form feed and CR
    line ends are indentation, as bytes.lstrip() has it; a definition after other code on
    its line is labelled but no place to cut."""
    text = (
        "class A:\r\n"
        "\t# about f\r\n"
        "\t# more\r\n"
        "\tdef f(self):\r\n"
        "\t\treturn 1\r\n"
        "\r\n"
        "\x0c# g's comment\n"
        "\x0cdef g():\n"
        "    pass\n"
        "x = 1; y = lambda: 0\n"
        "if x: \t\n"
        "  \t  # h, indented\n"
        "  \t  def h(): pass\n"
    )
    found = syntax.outline(text, "a.py")
    assert found is not None
    data = text.encode()
    by_name = {d.names[0]: d for d in found.definitions}
    assert set(by_name) == {"A", "f", "g", "h"}
    f, g, h = by_name["f"], by_name["g"], by_name["h"]
    assert (f.start, f.line, f.cut) == (1, 3, True)
    assert f.first_byte == data.index(b"\t# about f")  # its comments' line, from its start
    assert (g.start, g.line, g.cut) == (6, 7, True)
    assert g.first_byte == data.index(b"\x0c# g's")
    assert (h.start, h.line, h.cut) == (11, 12, True)
    assert h.first_byte == data.index(b"  \t  # h")
    # A statement that does not begin its line is no place to cut: `y = ...` after `x = 1;`.
    assert 9 in found.statements and 10 in found.statements
    one_line = syntax.outline("x = 1; def_ = 2\nclass B: pass; y = 1\n", "b.py")
    assert one_line is not None
    assert [(d.label, d.cut) for d in one_line.definitions] == [("class B", True)]
    # Past 64 bytes of a line the indentation is matched, not sliced: the same answers.
    pad = " " * 80
    deep = syntax.outline(f"def outer():\n{pad}def deep(): pass\n{pad}y = 1; z = 2\n", "c.py")
    assert deep is not None
    assert [(d.label, d.start, d.cut) for d in deep.definitions] == [
        ("def outer", 0, True),
        ("def deep", 1, True),
    ]
    assert deep.statements == {0, 1, 2}  # not `z = 2`, after `y = 1;` on its line
    late = syntax.outline(f"x = 1;{pad}class L: pass\n", "d.py")
    assert late is not None
    assert [(d.label, d.cut) for d in late.definitions] == [("class L", False)]
