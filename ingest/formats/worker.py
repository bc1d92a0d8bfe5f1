"""Extraction in a child process, bounded in time and memory.

A converted format is parsed by native code (PDFium, lxml) on bytes from anywhere: one file
must not stall or sink an ingest or a watch. So extraction runs in one long-lived child
process (``python -m semfs.ingest.formats.worker``) whose address space is capped
(RLIMIT_AS, :data:`MEMORY_BYTES`), and each file gets :data:`TIMEOUT_S` seconds: past that
the child is killed (and started again for the next file), and the file is skipped with the
reason. A child that dies (a crash in native code, the memory cap) costs that file only.

A :class:`WorkerPool` runs up to ``jobs`` such children at once (one per core by default,
:func:`default_jobs`), each with its own bounds: a thread that asks it to extract takes an idle
child, or starts one while fewer than ``jobs`` run, or waits for one. The children's caps are
bounded together too: no more run at once than fit in :func:`total_memory` (half the machine's
memory) at :data:`MEMORY_BYTES` each, whatever ``--jobs`` asks (four 250 MiB DOCX at ``-j 4``
peaked at 5.7 GiB; ``-j 64`` allowed 128 GiB). The process's pool
(:func:`shared`) starts children only as callers need them at once, so a caller that
extracts from one thread runs one child.

The pipe carries JSON and raw bytes, never pickles: a child that a hostile file took over
can send the parent nothing but text.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, Generic, Protocol, TypeVar

from semfs.ingest.formats.base import Extracted, Unsupported, first_line

TIMEOUT_S = 60.0
MEMORY_BYTES = 2 * 1024 * 1024 * 1024
# The extracting thread's stack, and the stack allowed per Python frame (see _main).
STACK_BYTES = 256 * 1024 * 1024
FRAME_BYTES = 13 * 1024
_MODULES = frozenset({"pdf", "html", "docx", "pptx", "odt", "epub"})


class Worker:
    """One child process that extracts files one at a time. Thread-safe (calls queue)."""

    def __init__(self, timeout: float = TIMEOUT_S, memory: int = MEMORY_BYTES) -> None:
        self.timeout = timeout
        self.memory = memory
        self._child: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def extract(self, module: str, path: str, data: bytes) -> Extracted | Unsupported:
        """What ``semfs.ingest.formats.<module>.extract(path, data)`` returns, run in the
        child; a reason when it takes too long, or the child dies."""
        with self._lock:
            child = self._start()
            assert child.stdin is not None and child.stdout is not None
            header = json.dumps({"module": module, "path": path, "size": len(data)})
            try:
                child.stdin.write(header.encode() + b"\n" + data)
                child.stdin.flush()
            except OSError:
                return self._died(child)
            line = read_line(child.stdout, time.monotonic() + self.timeout)
            if line is None:
                self._stop()
                return Unsupported(
                    f"extraction took over {self.timeout:g} s (stopped)", transient=True
                )
            if not line:
                return self._died(child)
            return _decode(json.loads(line))

    def _died(self, child: subprocess.Popen[bytes]) -> Unsupported:
        code = child.wait()
        self._child = None
        how = f"signal {-code}" if code < 0 else f"exit status {code}"
        return Unsupported(
            f"extraction failed ({how}; over the {self.memory >> 20} MiB bound?), not ingested",
            transient=True,
        )

    def _start(self) -> subprocess.Popen[bytes]:
        if self._child is not None and self._child.poll() is None:
            return self._child
        self._child = spawn([__name__, str(self.memory)])
        return self._child

    def _stop(self) -> None:
        child, self._child = self._child, None
        kill(child)

    def close(self) -> None:
        with self._lock:
            child, self._child = self._child, None
            end(child)


def spawn(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m *args``: a child that reads its jobs as lines on stdin and answers each
    with a line on stdout (its stderr dropped: it answers in lines or not at all)."""
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        env=env,
    )


def kill(child: subprocess.Popen[bytes] | None) -> None:
    """Stop ``child`` at once (past its deadline, or it answered nonsense)."""
    if child is not None:
        child.kill()
        child.wait()


def end(child: subprocess.Popen[bytes] | None) -> None:
    """End ``child`` as its loop ends, at EOF on stdin; killed if it has not within 5 s."""
    if child is not None:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            kill(child)


def read_line(stream: IO[bytes], deadline: float) -> bytes | None:
    """One line from ``stream`` (b"" at EOF), or None past ``deadline``."""
    fd = stream.fileno()
    buf = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        piece = os.read(fd, 1 << 16)
        if not piece:
            return b""
        buf += piece
        if buf.endswith(b"\n"):
            return bytes(buf)


def _encode(result: Extracted | Unsupported) -> dict[str, Any]:
    if isinstance(result, Unsupported):
        return {"reason": result.reason}
    return {"text": result.text, "view": result.view, "unit": result.unit, "marks": result.marks}


def _decode(msg: dict[str, Any]) -> Extracted | Unsupported:
    if "reason" in msg:
        return Unsupported(str(msg["reason"]))
    marks = tuple((int(line), str(label)) for line, label in msg["marks"])
    return Extracted(str(msg["text"]), bool(msg["view"]), str(msg["unit"]), marks)


def _serve(memory: int) -> None:
    """The child's loop: a JSON header line and the file's bytes in, one JSON line out."""
    import resource  # the child's only: a POSIX call, and formats import nothing of semfs

    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        request = json.loads(line)
        data = stdin.read(int(request["size"]))
        module = str(request["module"])
        try:
            if module not in _MODULES:
                raise ValueError(f"no extractor {module!r}")
            extractor = importlib.import_module(f"{__package__}.{module}")
            result = extractor.extract(str(request["path"]), data)
        except MemoryError:
            result = Unsupported(f"extraction needs over {memory >> 20} MiB, not ingested")
        except Exception as exc:  # an extractor's bug must cost one file, not the run
            result = Unsupported(f"extraction failed ({first_line(exc)})")
        stdout.write(json.dumps(_encode(result)).encode() + b"\n")
        stdout.flush()


def total_memory() -> int:
    """What the pool's children may take together: half the machine's memory (the rest is the
    ingest's own, the store's pages and everybody else's)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):  # a system without the names: one child's cap x 4
        return 4 * MEMORY_BYTES


def within(jobs: int, memory: int, total: int) -> int:
    """``jobs`` children, or fewer: as many as fit in ``total`` at ``memory`` each (one at
    least)."""
    return max(1, min(jobs, total // max(1, memory)))


def default_jobs() -> int:
    """How many extractions run at once by default: the cores this process may run on
    (``portable.cpu_count``'s rule, written here: this package imports nothing of semfs)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS has no affinity call
        return max(1, os.cpu_count() or 1)


class _Child(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Child)


class ChildPool(Generic[C]):
    """Up to ``jobs`` children, made by ``make`` when every made one is lent, each lent to one
    caller at a time (:meth:`lend`); thread-safe: a caller waits while ``jobs`` are lent. The
    extraction pool below and the first pass's chunking children
    (:mod:`semfs.ingest.chunkworkers`) are this."""

    def __init__(self, make: Callable[[], C], jobs: int) -> None:
        self.jobs = jobs
        self.started = 0  # how many children were made (each one runs until close)
        self._make = make
        self._idle: list[C] = []
        self._free = threading.Condition()
        self._closed = False

    @contextmanager
    def lend(self) -> Iterator[C]:
        """An idle child (made when fewer than ``jobs`` were), back in the pool after the
        block; closed instead when the pool was closed meanwhile."""
        with self._free:
            while not self._idle and self.started >= self.jobs:
                self._free.wait()
            if self._idle:
                child = self._idle.pop()
            else:
                self.started += 1
                child = self._make()
        try:
            yield child
        finally:
            with self._free:
                if self._closed:
                    child.close()
                else:
                    self._idle.append(child)
                    self._free.notify()

    def widen(self, jobs: int) -> None:
        """Let up to ``jobs`` children run (never fewer than now)."""
        with self._free:
            if jobs > self.jobs:
                self.jobs = jobs
                self._free.notify_all()

    def close(self) -> None:
        """Stop the idle children; a child lent out stops when it comes back."""
        with self._free:
            self._closed = True
            idle, self._idle = self._idle, []
        for child in idle:
            child.close()


class WorkerPool(ChildPool[Worker]):
    """Up to ``jobs`` :class:`Worker` children, each bounded alone, and no more than fit in
    ``total`` bytes together (:func:`total_memory` unless given). Thread-safe: each
    :meth:`extract` runs on an idle child (started when fewer than ``jobs`` run), else waits."""

    def __init__(
        self,
        jobs: int | None = None,
        timeout: float = TIMEOUT_S,
        memory: int = MEMORY_BYTES,
        total: int | None = None,
    ) -> None:
        self.total = total if total is not None else total_memory()
        self.timeout = timeout
        self.memory = memory
        wanted = jobs if jobs is not None else default_jobs()
        super().__init__(self._worker, within(wanted, memory, self.total))

    def _worker(self) -> Worker:
        return Worker(self.timeout, self.memory)

    def extract(self, module: str, path: str, data: bytes) -> Extracted | Unsupported:
        """:meth:`Worker.extract` on a child of its own for the length of the call."""
        with self.lend() as worker:
            return worker.extract(module, path, data)

    def widen(self, jobs: int) -> None:
        """Let up to ``jobs`` children run (never fewer than now, nor more than fit in
        ``total``)."""
        super().widen(within(jobs, self.memory, self.total))


_shared: WorkerPool | None = None
_shared_lock = threading.Lock()


def shared(jobs: int | None = None) -> WorkerPool:
    """The process's pool, made on first use and stopped at exit: :func:`default_jobs`
    children at most, or ``jobs`` when that is more (``semfs ingest --jobs``). It starts a
    child only when every running one is busy: as many run as threads extract at once."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = WorkerPool()
            atexit.register(_shared.close)
        if jobs is not None and jobs > _shared.jobs:
            _shared.widen(jobs)
        return _shared


def _main(memory: int) -> None:
    """Serve on a thread with a deep stack: converters walk a page's tree by recursion
    (htmlmd, once per element), and a real page nests past Python's default
    1,000 frames (latex2html's index pages: 755 elements deep). The raised frame limit leaves
    each frame :data:`FRAME_BYTES` of the stack, so a deeper page still ends in RecursionError, a
    skip reason, never a crash of the child."""
    stack = min(STACK_BYTES, memory // 8)  # the stack counts against the memory bound
    threading.stack_size(stack)
    sys.setrecursionlimit(max(1000, stack // FRAME_BYTES))
    thread = threading.Thread(target=_serve, args=(memory,), name="extract")
    thread.start()
    thread.join()


if __name__ == "__main__":
    _main(int(sys.argv[1]))
