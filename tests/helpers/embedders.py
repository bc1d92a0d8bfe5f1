"""Stand-in embedders for tests that check what the model is asked to embed."""

from __future__ import annotations

from collections.abc import Sequence

from semfs.ingest.embedding.embedder import HashEmbedder


class CountingEmbedder(HashEmbedder):
    """The hash stand-in, counting every text the model is asked to embed."""

    name = "hash"

    def __init__(self) -> None:
        super().__init__(384)
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        self.texts.extend(texts)
        return super().encode(texts, batch_size)
