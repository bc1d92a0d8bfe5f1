"""`semfs ingest` that pauses while it embeds, until told to go on: what other processes see
of an ingest under way, without a race against its speed.

    python -m tests.helpers.pausedingest GATE semfs ingest SRC --store S -m hash

runs the real command (its own command line, as `ps` and the store's owner note show it), on
the hash stand-in whose ``encode`` stops once :data:`PAUSE_AFTER` chunks are embedded: it
creates ``GATE/paused``, then waits for ``GATE/go`` (up to :data:`WAIT` seconds, then fails).
By then the ingest has committed what it wrote; what remains waits.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from semfs.ingest.embedding import embedder as embedding
from semfs.ingest.embedding.embedder import HashEmbedder

PAUSE_AFTER = 256  # an encode window: the documents of the first one are committed
WAIT = 300.0


class PausingEmbedder(HashEmbedder):
    def __init__(self, gate: Path) -> None:
        super().__init__()
        self.gate = gate
        self.embedded = 0

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        if self.embedded >= PAUSE_AFTER and not (self.gate / "go").exists():
            (self.gate / "paused").touch()
            deadline = time.monotonic() + WAIT
            while not (self.gate / "go").exists():
                if time.monotonic() > deadline:
                    raise SystemExit(f"pausedingest: no {self.gate / 'go'} within {WAIT:g} s")
                time.sleep(0.05)
        self.embedded += len(texts)
        return super().encode(texts, batch_size)


def main(argv: list[str]) -> None:
    gate, command = Path(argv[0]), argv[1:]
    paused = PausingEmbedder(gate)
    embedding.load_embedder = lambda name="hash", threads=None: paused  # type: ignore[assignment]
    sys.argv = command  # what the store's owner note records: `semfs ingest SRC ...`
    from semfs.fusefs.cli import main as semfs

    semfs()


if __name__ == "__main__":
    main(sys.argv[1:])
