"""`semfs ingest` that pauses while it embeds, until told to go on: what other processes see
of an ingest under way, without a race against its speed.

    python -m tests.helpers.pausedingest GATE semfs ingest SRC --store S -m hash

runs the real command (its own command line, as `ps` and the store's owner note show it), on
the hash stand-in whose ``encode`` stops once :data:`PAUSE_AFTER` chunks are embedded: it
creates ``GATE/paused``, then waits for ``GATE/go`` (up to :data:`WAIT` seconds, then fails).
By then the ingest has committed what it wrote; what remains waits.

    python -m tests.helpers.pausedingest GATE --at WORD semfs ingest SRC ...

pauses in the keyword pass instead: when the chunker first meets a text holding ``WORD``
(put it in the file, sorted after the ones that must be in, at which to stop). The documents
of every window written before are committed; the rest of the run waits.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from semfs.ingest.embedding import embedder as embedding
from semfs.ingest.embedding.embedder import HashEmbedder
from tests.helpers import REPO

PAUSE_AFTER = 256  # an encode window: the documents of the first one are committed
WAIT = 300.0


class PausingEmbedder(HashEmbedder):
    def __init__(self, gate: Path, word: str | None = None) -> None:
        super().__init__()
        self.gate = gate
        self.word = word  # pause in the keyword pass, at the first text holding it
        self.embedded = 0

    def _pause(self) -> None:
        if (self.gate / "go").exists():
            return
        (self.gate / "paused").touch()
        deadline = time.monotonic() + WAIT
        while not (self.gate / "go").exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"pausedingest: no {self.gate / 'go'} within {WAIT:g} s")
            time.sleep(0.05)

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        if self.word is None and self.embedded >= PAUSE_AFTER:
            self._pause()
        self.embedded += len(texts)
        return super().encode(texts, batch_size)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self.word is not None and any(self.word in t for t in texts):
            self._pause()
        return super().count_tokens(texts)


def spawn(
    gate: Path, command: Sequence[str], at: str | None = None, capture: bool = False
) -> subprocess.Popen[bytes]:
    """Start ``command`` (``semfs ingest ...``) paused at ``gate`` (in the keyword pass at the
    word ``at``, if given), as the usage above; its output piped (stderr with stdout) when
    ``capture``, else dropped. The caller creates ``gate`` and stops the process."""
    pause = ["--at", at] if at is not None else []
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.pausedingest", str(gate), *pause, *command],
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT if capture else subprocess.DEVNULL,
    )


def main(argv: list[str]) -> None:
    gate, command = Path(argv[0]), argv[1:]
    word = None
    if command[:1] == ["--at"]:
        word, command = command[1], command[2:]
    paused = PausingEmbedder(gate, word)
    embedding.load_embedder = lambda name="hash", threads=None: paused  # type: ignore[assignment]
    sys.argv = command  # what the store's owner note records: `semfs ingest SRC ...`
    from semfs.fusefs.cli import main as semfs

    semfs()


if __name__ == "__main__":
    main(sys.argv[1:])
