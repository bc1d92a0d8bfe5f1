"""Work on a stream of items in a few threads, a bounded number at a time.

:func:`stream` is what an ingest reads its files with: each file is opened, hashed and
decoded in a thread, and a converted one waits there for its extraction in a bounded worker
process (:class:`semfs.ingest.formats.worker.WorkerPool`), so ``jobs`` threads keep ``jobs``
worker processes busy while the caller chunks and stores what came back::

    from semfs.ingest.parallel import stream

    for f, doc in stream(files, lambda f: read_document(f, ...), jobs=4):
        ...  # in the order of ``files``; at most ``window`` read ahead of this loop

Rules a caller may rely on:

* Each item's result comes once, with its item, in the order of ``items`` (``ordered``, the
  default) or as each is done (``ordered=False``: a slow file holds nothing back).
* At most ``window`` items (default ``2 * jobs``) are taken from ``items`` and not yet handed
  to the caller: memory stays bounded whatever the number of items, and ``items`` may be a
  generator that is consumed as the caller goes.
* ``jobs <= 1`` runs ``work`` in the caller's thread, one item at a time, no thread started.
* An exception raised by ``work`` is raised to the caller when that item's turn comes.
  Leaving the loop early (``break``, an exception, Ctrl-C) drops the items not yet started;
  each thread finishes the item it holds, then ends: they are daemon threads, so they never
  hold up an exit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_STOP = object()


def stream(
    items: Iterable[T],
    work: Callable[[T], R],
    jobs: int = 1,
    window: int | None = None,
    ordered: bool = True,
) -> Iterator[tuple[T, R]]:
    """``(item, work(item))`` for each of ``items``, ``work`` run in ``jobs`` threads."""
    if jobs <= 1:
        for item in items:
            yield item, work(item)
        return
    window = max(window if window is not None else 2 * jobs, 1)
    todo: queue.Queue[Any] = queue.Queue()
    done: queue.Queue[tuple[int, Any, Any, BaseException | None]] = queue.Queue()

    def run() -> None:
        while True:
            job = todo.get()
            if job is _STOP:
                return
            n, item = job
            try:
                done.put((n, item, work(item), None))
            except BaseException as exc:  # the caller raises it, in its place
                done.put((n, item, None, exc))

    threads = [
        threading.Thread(target=run, name=f"semfs-read-{i}", daemon=True)
        for i in range(min(jobs, window))
    ]
    for thread in threads:
        thread.start()
    source = iter(items)
    sent = given = 0
    held: dict[int, tuple[Any, Any, BaseException | None]] = {}  # done early, waiting its turn
    try:
        while True:
            while sent - given < window:
                nxt: Any = next(source, _STOP)
                if nxt is _STOP:
                    break
                todo.put((sent, nxt))
                sent += 1
            if given == sent:
                return
            n, item, result, error = done.get()
            if ordered:
                held[n] = (item, result, error)
                while given in held:
                    item, result, error = held.pop(given)
                    given += 1
                    if error is not None:
                        raise error
                    yield item, result
            else:
                given += 1
                if error is not None:
                    raise error
                yield item, result
    finally:
        while True:  # items not started yet are dropped
            try:
                todo.get_nowait()
            except queue.Empty:
                break
        for _thread in threads:
            todo.put(_STOP)
