"""Tests for semfs.ingest.chunking: losslessness, offsets, budgets, structure-aware boundaries."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from semfs.ingest.chunking import (
    CONTEXT_CHARS,
    MAX_CHARS_PER_TOKEN,
    ChunkSpan,
    chunk_text,
    document_title,
    embedding_text,
)
from semfs.ingest.embedding.embedder import load_embedder
from tests.helpers import shared_path
from tests.helpers.spans import check

Counter = Callable[[Sequence[str]], list[int]]


def words(texts: Sequence[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def quarters(texts: Sequence[str]) -> list[int]:
    return [(len(t) + 3) // 4 for t in texts]


def floor_quarters(texts: Sequence[str]) -> list[int]:
    # Not additive (3 chars -> 0 but 6 chars -> 1): exercises the re-measuring pass.
    return [len(t) // 4 for t in texts]


class CountingCounter:
    """Wraps a counter and records how many times (and with how many texts) it is called."""

    def __init__(self, inner: Counter) -> None:
        self.inner = inner
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> list[int]:
        self.calls += 1
        return self.inner(texts)


def random_markdown(rng: random.Random) -> str:
    vocab = ["lorem", "ipsum", "dolor", "émoji🎉", "日本語", "e\u0301", "x" * 30, "`code`", "#tag"]
    parts: list[str] = []
    if rng.random() < 0.3:
        parts.append(f'---\ntitle: "Doc {rng.randint(0, 9)}"\ndescription: x\n---\n\n')
    for _ in range(rng.randint(0, 25)):
        roll = rng.random()
        if roll < 0.2:
            parts.append("#" * rng.randint(1, 6) + " " + rng.choice(vocab) + "\n")
        elif roll < 0.3:
            fence = rng.choice(["```", "~~~"])
            body = "\n".join(
                rng.choice(["# not heading", "", "x = 1", "  y"]) for _ in range(rng.randint(0, 30))
            )
            parts.append(f"{fence}python\n{body}\n{fence}\n")
        elif roll < 0.4:
            parts.append("\n" * rng.randint(1, 3))
        elif roll < 0.45:
            parts.append(" ".join(rng.choice(vocab) for _ in range(rng.randint(50, 400))) + "\n")
        else:
            line_count = rng.randint(1, 6)
            lines = (
                " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 12)))
                for _ in range(line_count)
            )
            parts.append("\n".join(lines) + "\n\n")
    text = "".join(parts)
    if rng.random() < 0.3:
        text = text.replace("\n", "\r\n")
    if rng.random() < 0.3:
        text = text.rstrip("\n")
    return text


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("path", ["doc.md", "doc.mdx", "notes.txt", "mod.py"])
def test_random_documents_are_lossless(seed: int, path: str) -> None:
    rng = random.Random(seed)
    text = random_markdown(rng)
    for counter, budget in ((words, rng.randint(1, 80)), (quarters, rng.randint(1, 120))):
        calls = CountingCounter(counter)
        chunks = chunk_text(text, path, calls, budget)
        check(text, chunks, counter, budget)
        assert calls.calls <= 12


@pytest.mark.parametrize(
    "text",
    [
        "a",
        "\n",
        "no trailing newline",
        "line one\nline two",
        "a\r\nb\r\n\r\nc\r\n",
        "\r\n\r\n",
        "🎉" * 500,
        "日本語のテキスト。" * 300,
        "e\u0301" * 400,
        "👩\u200d👩\u200d👧" * 200,
        "word " * 5000,
        "x" * 10_000,
        "\n\n\n# Title\n\n\n",
        "# only a heading",
    ],
)
@pytest.mark.parametrize("counter", [words, quarters, floor_quarters])
def test_edge_inputs_are_lossless(text: str, counter: Counter) -> None:
    for path in ("a.md", "a.py", "a.txt"):
        for budget in (1, 7, 64):
            check(text, chunk_text(text, path, counter, budget), counter, budget)


def test_empty_and_whitespace() -> None:
    assert chunk_text("", "a.md", words, 10) == []
    chunks = chunk_text(" \n\n\t\n  ", "a.md", words, 10)
    assert len(chunks) == 1
    assert chunks[0].start_line == 1
    assert chunks[0].end_line == 4


def test_invalid_budget_and_counter() -> None:
    with pytest.raises(ValueError):
        chunk_text("abc", "a.md", words, 0)
    with pytest.raises(ValueError):
        chunk_text("abc\n\ndef", "a.md", lambda texts: [1], 10)


def test_hard_split_keeps_characters_whole() -> None:
    text = ("é" + "\u0301" + "🎉" + "中") * 2000
    chunks = chunk_text(text, "a.txt", quarters, 10)
    check(text, chunks, quarters, 10)
    assert len(chunks) > 10
    for c in chunks:
        assert c.text[0] != "\u0301"


def test_budget_is_filled_reasonably() -> None:
    text = "word " * 10_000
    chunks = chunk_text(text, "a.txt", words, 100)
    check(text, chunks, words, 100)
    assert all(n >= 75 for n in words([c.text for c in chunks[:-1]]))


def test_one_long_word_is_cut_by_size_not_tokens() -> None:
    # Issue 39.3: the model's tokenizer reads a word past 100 characters as one [UNK], so a
    # 512 KiB word counted one token and was one chunk, and BM25 took minutes on it.
    word = "y" * (512 * 1024)
    text = f"# Log\n\nA line before.\n{word}\nA line after.\n"
    calls = CountingCounter(words)  # the word counts one token, as [UNK] does
    chunks = chunk_text(text, "big.log", calls, 224)
    check(text, chunks, words, 224)
    assert max(len(c.text) for c in chunks) <= 224 * MAX_CHARS_PER_TOKEN
    assert len(chunks) <= 2 * len(text) // (224 * MAX_CHARS_PER_TOKEN) + 2  # and filled well
    assert calls.calls <= 12


def test_non_additive_counter_is_verified() -> None:
    text = "ab\n" * 3000
    chunks = chunk_text(text, "a.txt", floor_quarters, 30)
    check(text, chunks, floor_quarters, 30)


def test_long_fenced_block_splits_only_when_it_must() -> None:
    fence = "```python\n" + "".join(f"x{i} = {i}\n\n" for i in range(40)) + "```\n"
    text = f"# Code\n\nIntro text.\n\n{fence}\nAfter the fence.\n"
    # Fits: the fence is never cut, even at its internal blank lines.
    chunks = chunk_text(text, "a.md", words, 200)
    check(text, chunks, words, 200)
    assert any(fence in c.text for c in chunks)
    # Too big: cut at line boundaries, still lossless and within budget.
    chunks = chunk_text(text, "a.md", words, 20)
    check(text, chunks, words, 20)
    assert all(c.text.endswith("\n") for c in chunks)


def test_headings_start_chunks_and_paths() -> None:
    section = "Sentence with several words in it.\n\n" * 4
    text = (
        "# Guide\n\n" + "Intro words. " * 6 + "\n\n"
        f"## Install\n\n{section}"
        f"### From source\n\n{section}"
        "```sh\n# not a heading\n```\n\n"
        f"## Usage ##\n\n{section}"
    )
    chunks = chunk_text(text, "guide.md", words, 40)
    check(text, chunks, words, 40)
    by_start = {c.text.split("\n", 1)[0]: c.heading for c in chunks}
    assert by_start["## Install"] == "Guide > Install"
    assert by_start["### From source"] == "Guide > Install > From source"
    assert by_start["## Usage ##"] == "Guide > Usage"
    assert chunks[0].heading == "Guide"
    assert all("not a heading" not in c.heading for c in chunks)
    # Small sections group together instead of starting a chunk each.
    small = "# A\n\none\n\n## B\n\ntwo\n\n## C\n\nthree\n"
    grouped = chunk_text(small, "s.md", words, 100)
    assert len(grouped) == 1
    assert grouped[0].heading == "A"


def test_heading_never_ends_a_chunk() -> None:
    rng = random.Random(7)
    for _ in range(50):
        parts = []
        for _ in range(rng.randint(1, 30)):
            if rng.random() < 0.4:
                parts.append("#" * rng.randint(1, 3) + " Title words\n\n")
            parts.append("some short words\n" * rng.randint(1, 4) + "\n")
        text = "".join(parts)
        budget = rng.randint(8, 40)
        chunks = chunk_text(text, "r.md", words, budget)
        check(text, chunks, words, budget)
        for c in chunks[:-1]:
            assert not c.text.rstrip().splitlines()[-1].startswith("#"), c.text


def test_heading_path_after_fence_and_mdx_indent() -> None:
    text = (
        "<Steps>\n    ## Setup\n\n    Do things.\n</Steps>\n\n"
        + "filler words here\n\n" * 30
        + "    ```js\n    # nope\n    ```\n\nEnd.\n"
    )
    chunks = chunk_text(text, "p.mdx", words, 12)
    check(text, chunks, words, 12)
    assert chunks[-1].heading == "Setup"
    assert all(c.heading in ("", "Setup") for c in chunks)
    assert chunk_text(text, "p.md", words, 12)[-1].heading == ""


def test_front_matter_stays_with_following_text() -> None:
    text = '---\ntitle: "T"\ndescription: a b c d e f\n\nextra: 1\n---\n\n# Heading\n\nBody.\n'
    chunks = chunk_text(text, "f.mdx", words, 40)
    assert len(chunks) == 1
    chunks = chunk_text(text, "f.mdx", words, 14)
    check(text, chunks, words, 14)
    assert chunks[0].text.startswith("---\n") and "extra: 1\n---\n" in chunks[0].text


def test_code_splits_at_definitions() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(6))
    text = (
        "import os\nimport sys\n\n\n"
        f"def first():\n{body}\n\n"
        f"@decorator\ndef second():\n{body}\n\n"
        f"class Third:\n{body}\n    def method(self):\n{body}"
    )
    # 60 tokens hold two definitions: only the preference for definitions cuts between them.
    chunks = chunk_text(text, "m.py", words, 60)
    check(text, chunks, words, 60)
    starts = [c.text.lstrip("\n").split("\n", 1)[0] for c in chunks]
    # Each chunk starts at a definition (its decorator first); the imports stay with the first.
    assert starts == ["import os", "@decorator", "class Third:"]
    assert chunks[0].text.startswith("import os\nimport sys\n\n\ndef first():\n")
    # Labelled by the definition around each chunk's first line (semfs.ingest.syntax).
    assert [c.heading for c in chunks] == ["", "def second", "class Third"]
    # A language without a grammar splits the same way, by the line patterns, unlabelled.
    rb = text.replace("@decorator\n", "# decorator\n")
    rb_chunks = chunk_text(rb, "m.rb", words, 60)
    check(rb, rb_chunks, words, 60)
    assert [c.text.lstrip("\n").split("\n", 1)[0] for c in rb_chunks] == [
        "import os",
        "# decorator",
        "class Third:",
    ]
    assert all(c.heading == "" and not c.syntax for c in rb_chunks)
    js = "".join(f"export function f{i}(a) {{\n  return a + {i};\n}}\n\n" for i in range(30))
    js_chunks = chunk_text(js, "m.ts", words, 30)
    check(js, js_chunks, words, 30)
    assert all(c.text.startswith("export function") for c in js_chunks)


def test_byte_offsets_with_multibyte_text() -> None:
    text = "# Título 🎉\n\n" + "日本語 テキスト ü\n\n" * 200 + "fin"
    chunks = chunk_text(text, "u.md", words, 10)
    check(text, chunks, words, 10)
    assert chunks[-1].end == len(text.encode()) > len(text)


def test_large_input_is_lossless() -> None:
    rng = random.Random(1)
    vocab = ["alpha", "beta", "gamma", "délta", "日本", "🎉", "z" * 20]
    paragraphs: list[str] = []
    size = 0
    while size < 5_000_000:
        para = "\n".join(
            " ".join(rng.choice(vocab) for _ in range(rng.randint(2, 14)))
            for _ in range(rng.randint(1, 6))
        )
        paragraphs.append(para)
        size += len(para) + 2
    text = "\n\n".join(paragraphs)
    calls = CountingCounter(words)
    chunks = chunk_text(text, "big.txt", calls, 200)
    assert calls.calls <= 4
    assert "".join(c.text for c in chunks) == text
    assert chunks[-1].end == len(text.encode())
    assert max(words([c.text for c in chunks])) <= 200
    single_line = text.replace("\n", " ")
    chunks = chunk_text(single_line, "big.txt", words, 200)
    assert "".join(c.text for c in chunks) == single_line


def test_document_title() -> None:
    assert document_title('---\ntitle: "Quick start"\n---\n# Other\n', "a.mdx") == "Quick start"
    assert document_title("---\ntitle: 'It''s'\n---\n", "a.mdx") == "It's"
    assert document_title("---\ntitle: Plain\ndesc: x\n---\n", "a.md") == "Plain"
    assert document_title("---\ndesc: x\n---\n\n# Heading ##\n", "dir/a.md") == "Heading"
    assert document_title("```\n# not\n```\n## Sub\n# Real\n", "a.md") == "Real"
    assert document_title("text\ntitle: nope\n", "docs/guide.md") == "guide"
    assert document_title("#!/bin/sh\n# comment\n", "run.sh") == "run"
    assert document_title("# comment\nkey: 1\n", "conf.yaml") == "conf"
    assert document_title("", "x/archive.tar.gz") == "archive.tar"


def test_embedding_text() -> None:
    chunk = ChunkSpan(0, 0, 5, 1, 1, "hello", "Install > From source")
    assert embedding_text(chunk, "Guide") == "Guide > Install > From source\nhello"
    plain = ChunkSpan(0, 0, 5, 1, 1, "hello", "")
    assert embedding_text(plain, "Guide") == "Guide\nhello"
    assert embedding_text(ChunkSpan(0, 0, 5, 1, 1, "hello", "Guide > X"), "Guide") == (
        "Guide > X\nhello"
    )
    assert embedding_text(plain, "Multi\nline") == "Multi line\nhello"
    assert embedding_text(plain, "") == "hello"
    deep = ChunkSpan(0, 0, 5, 1, 1, "hello", " > ".join(["A rather long heading"] * 8))
    context, body = embedding_text(deep, "Guide").split("\n", 1)
    assert body == "hello"
    assert len(context) <= CONTEXT_CHARS
    assert context.startswith("Guide > … > ")
    assert context.endswith("> A rather long heading")


def test_heading_anchor_and_closing_hashes_are_stripped() -> None:
    text = "# Title { #title }\n\nIntro.\n\n## Sub `x` ##\n\nBody.\n"
    chunks = chunk_text(text, "a.md", words, 8)
    assert [c.heading for c in chunks] == ["Title", "Title > Sub `x`"]
    assert document_title(text, "a.md") == "Title"


@pytest.mark.model
def test_real_tokenizer_on_corpus_page() -> None:
    corpora = shared_path("corpora", "mintlify-docs")
    pages = sorted(corpora.rglob("*.mdx"), key=lambda p: p.stat().st_size)
    if not pages:
        pytest.skip("no .mdx pages in the corpus")
    count = load_embedder().count_tokens  # the packaged model's own tokenizer.json

    for page in (pages[len(pages) // 2], pages[-1]):
        text = page.read_text(encoding="utf-8")
        chunks = chunk_text(text, str(page), count, 224)
        check(text, chunks, count, 224)
        assert len(chunks) > 1
        title = document_title(text, str(page))
        assert title
        assert all(count([embedding_text(c, title)])[0] <= 256 for c in chunks[:5])


def test_tiny_pages_share_chunks_past_the_first_ones() -> None:
    # Issue 39.5: each page (slide, chapter) started a chunk of its own, so a 1 KB PDF that
    # listed one page 10,000 times gave 10,000 chunks: the chunks were bounded by pages, not
    # by text. A document of a few units keeps one chunk each.
    def view(pages: int) -> tuple[str, list[int]]:
        parts = [f"## Page {n}\n\nHello page.\n" for n in range(1, pages + 1)]
        cuts, line = [], 1
        for part in parts:
            cuts.append(line)
            line += part.count("\n") + 1
        return "\n".join(parts), cuts

    text, cuts = view(10)
    assert len(chunk_text(text, "a.pdf.md", words, 224, cuts)) == 10
    text, cuts = view(10_000)
    chunks = chunk_text(text, "a.pdf.md", words, 224, cuts)
    check(text, chunks, words, 224)
    tokens = sum(words([text]))
    # The first 16 pages a chunk each, then chunks of an eighth of the budget or more.
    assert len(chunks) <= 16 + tokens * 8 // 224 + 1, len(chunks)
    assert all(c.text.startswith("## Page ") for c in chunks)  # still cut at pages


def test_a_merge_is_measured_when_joints_may_add_tokens() -> None:
    """Merges are trusted unmeasured only with a token to spare per joint: a tokenizer that
    adds one token per joint (here: one per line break between lines) still gets chunks
    within the budget, in the prose and the code path alike."""

    def joint_counting(texts: Sequence[str]) -> list[int]:
        return [len(t.split()) + max(t.rstrip("\n").count("\n"), 0) for t in texts]

    code = "".join(f"def f{i}():\n    return {i} + {i}\n\n" for i in range(60))
    prose = "".join(f"Line {i} of some text here.\n" for i in range(200))
    for text, path in ((code, "m.py"), (prose, "notes.txt")):
        chunks = chunk_text(text, path, joint_counting, 40)
        assert "".join(c.text for c in chunks) == text
        assert max(joint_counting([c.text])[0] for c in chunks) <= 40, path
