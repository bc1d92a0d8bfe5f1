"""The chunker's promises, checked on any result: exact spans, lines, budgets (the prose and
the code chunking tests both hold every chunking result to them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from semfs.ingest.chunking import MAX_CHARS_PER_TOKEN, ChunkSpan

Counter = Callable[[Sequence[str]], list[int]]


def check(text: str, chunks: list[ChunkSpan], counter: Counter, max_tokens: int) -> None:
    """Assert every documented invariant of a chunking result."""
    data = text.encode()
    assert "".join(c.text for c in chunks) == text
    if not text:
        assert chunks == []
        return
    assert chunks[0].start == 0
    assert chunks[-1].end == len(data)
    char = 0
    for i, c in enumerate(chunks):
        assert c.index == i
        assert c.text
        assert data[c.start : c.end].decode() == c.text
        if i + 1 < len(chunks):
            assert c.end == chunks[i + 1].start
        assert c.start_line == text.count("\n", 0, char) + 1
        assert c.end_line == text.count("\n", 0, char + len(c.text) - 1) + 1
        char += len(c.text)
    counts = counter([c.text for c in chunks])
    assert all(n <= max_tokens for n in counts), (max(counts), max_tokens)
    longest = max(len(c.text) for c in chunks)
    assert longest <= max_tokens * MAX_CHARS_PER_TOKEN or longest == 1, longest
