"""Progress of a long ingest, for a person watching it or reading its log afterwards.

Rules a caller may rely on (what users of ``llm embed-multi`` and ``rsync --info=progress2``
expect):

* Two phases, one bar each: "Reading" counts files (read, extracted, chunked and stored with
  their keywords: searchable as they go), "Embedding" counts chunks given their dense vectors.
* On a terminal: a bar (tqdm's) with the count done of the total, the rate and the time
  left, redrawn at least once a second by a ticker thread even while one batch embeds, so the
  rate and ETA never freeze.
* Elsewhere (a log file, CI): one plain line every :data:`LOG_EVERY` seconds with the same
  figures, and a last one when embedding ends; never a carriage return.
* The model's load is said before it starts ("loading model NAME ...") and with its time
  when it is done: it is the first minutes' silence of a cold start on a busy machine.
* Everything goes to the stream given (stderr), so stdout stays the command's result.
"""

from __future__ import annotations

import math
import shutil
import threading
import time
from typing import IO, Any

# Seconds between two progress lines when the output is not a terminal.
LOG_EVERY = 10.0
# Seconds between two redraws of the bar on a terminal, with or without progress.
REDRAW_EVERY = 0.5


def eta_text(seconds: float | None) -> str:
    """``1:02:03``, ``4:05``; ``?`` when unknown."""
    if seconds is None or math.isnan(seconds) or seconds < 0 or seconds > 360_000:
        return "?"
    s = int(seconds + 0.5)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class IngestProgress:
    """``on_load`` for the document embedder, ``phase``/``advance`` for the pipeline's
    ``on_phase``/``on_progress``, ``close`` at the end (also after an error). Thread-safe."""

    def __init__(
        self,
        stream: IO[str],
        tty: bool | None = None,
        label: str = "Embedding",
        log_every: float = LOG_EVERY,
        labels: dict[str, str] | None = None,
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.label = label
        # The label of each phase (a watcher's are both "Syncing").
        self._labels = labels if labels is not None else {"reading": "Reading", "embedding": label}
        self.log_every = log_every
        self.total = 0
        self.done = 0
        self.unit = "chunks"
        self._started = 0.0
        self._last_line = 0.0
        self._bar: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- the model ------------------------------------------------------------------------

    def on_load(self, name: str, seconds: float | None) -> None:
        if seconds is None:
            self._say(f"Loading model {name} ...")
        else:
            self._say(f"Loaded model {name} in {seconds:.1f} s")

    # -- phases ---------------------------------------------------------------------------

    def phase(self, name: str, total: int) -> None:
        """A pass starts: "reading" (``total`` files) or "embedding" (``total`` chunks)."""
        self.label = self._labels.get(name, self.label)
        self.start(total, "files" if name == "reading" else "chunks")

    def start(self, total: int, unit: str = "chunks") -> None:
        with self._lock:
            self.close_locked()
            self.total, self.done, self.unit = total, 0, unit
            self._started = self._last_line = time.monotonic()
            self._stop.clear()
            if not total:
                return
            if self.tty:
                from tqdm import tqdm

                size = shutil.get_terminal_size((100, 24))
                self._bar = tqdm(
                    total=total,
                    desc=self.label,
                    unit=f" {unit}",
                    file=self.stream,
                    # The terminal's size, or 100x24 when it says 0x0 (a pty nobody sized:
                    # tqdm would then hide the bar).
                    ncols=size.columns,
                    nrows=size.lines,
                    mininterval=REDRAW_EVERY,
                    smoothing=0.1,
                    leave=True,
                )
            else:
                self._line()
        ticker = threading.Thread(target=self._tick, name="semfs-progress", daemon=True)
        ticker.start()
        # Kept only once started: a Ctrl-C (or SIGTERM) between the two would leave close()
        # a thread it cannot join. One that ends up not kept stops at _stop like any other.
        self._ticker = ticker

    def advance(self, n: int) -> None:
        with self._lock:
            self.done += n
            if self._bar is not None:
                self._bar.update(n)
            if self.total and self.done >= self.total:  # the last batch: a last line, then quiet
                if self._bar is None and not self.tty:
                    self._line()
                self.close_locked()

    def close(self) -> None:
        with self._lock:
            self.close_locked()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(2)
        self._ticker = None

    def close_locked(self) -> None:
        self._stop.set()
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    # -- output ---------------------------------------------------------------------------

    def figures(self) -> str:
        """``123/456 chunks (27%), 12.3 chunks/s, ETA 0:27``: the same numbers as the bar."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else None
        pct = 100 * self.done / self.total if self.total else 100.0
        return (
            f"{self.done}/{self.total} {self.unit} ({pct:.0f}%), {rate:.1f} {self.unit}/s, "
            f"ETA {eta_text(left)}, {eta_text(elapsed)} elapsed"
        )

    def _line(self) -> None:
        self._last_line = time.monotonic()
        self._say(f"{self.label}: {self.figures()}")

    def _say(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def _tick(self) -> None:
        while not self._stop.wait(REDRAW_EVERY):
            with self._lock:
                if self._stop.is_set():
                    return
                if self._bar is not None:
                    self._bar.refresh()  # elapsed, rate and ETA move even between batches
                elif time.monotonic() - self._last_line >= self.log_every:
                    self._line()
