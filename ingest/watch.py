"""Following a source folder: file-system events become small, atomic ingest batches.

:class:`SourceWatcher` keeps a collection mirroring a folder for as long as it runs
(``semfs ingest DIR --watch`` in the foreground, or inside a ``semfs mount --watch`` daemon).

Rules a caller may rely on:

* **One pipeline.** A batch is :func:`semfs.ingest.pipeline.ingest` restricted to the paths that
  changed (``paths=``): the same include/exclude and bad-input rules, the same atomic
  per-document commit, nothing re-embedded whose content did not change, and a kill -9 in
  a batch is cleaned up by the next run exactly as after an interrupted ingest.
* **Keywords first.** A batch stores its documents' text and keywords and commits them (a
  1.3 MB log is keyword-searchable a few seconds after its close); their dense vectors come
  from the owner's dense pass (``on_batch`` tells it:
  :meth:`semfs.ingest.resident.ResidentStore.changed`), so the next batch never waits for the model.
* **A full mirror pass** runs at start, after the kernel dropped events (inotify
  ``IN_Q_OVERFLOW``) and when the source folder comes back after disappearing.
* **Events, not scans.** Changes come from watchdog (inotify on Linux, FSEvents on macOS).
  Only when those cannot be used (e.g. the inotify watch limit) does it poll, and it says
  so in the log with the fix. Nothing runs while nothing changes.
* **Debounced.** A batch starts once no event came for ``quiet`` seconds, or ``max_delay``
  after its first event; a `git checkout` of a thousand files is one batch. An editor's
  save through a temporary file and a rename ends as one change of the real file. While
  the source's git repository is mid-operation (its ``index.lock``, ``rebase-merge/``,
  ``rebase-apply/`` or ``sequencer/`` exists), a batch waits for :data:`GIT_QUIET` without
  events and ``max_delay`` does not apply: a rebase is one batch of its result. The wait is
  bounded (:data:`GIT_MAX_HOLD` after the batch's first event), the state says why a batch
  waits (``waiting``, in `semfs status`), and only a repository in a folder the user trusts
  counts above the source (:func:`semfs.ingest.ignores.trusted`): another user's ``.git``
  with an ``index.lock`` in a shared parent holds nothing (issue 46.6).
* **Faults keep the last good index.** A source folder that disappears or becomes
  unreadable changes nothing in the collection; the watcher waits for it and catches up.
  A file that fails to read keeps its previous version, its reason in the state. A batch
  the store refuses (disk full, server down) is retried.
* **Held while written.** A path :meth:`SourceWatcher.hold` holds (a writable mount's file
  open for writing) waits, its changes kept, until its last :meth:`SourceWatcher.release`;
  then it is one change like any other. A batch that meets it in a folder (or a full pass)
  leaves it as it was indexed.
* The state (:class:`semfs.ingest.syncstate.SyncState`) is saved after every batch and whenever
  changes start to wait.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semfs.ingest import portable
from semfs.ingest.embedding.embedder import Embedder
from semfs.ingest.errors import SourceError
from semfs.ingest.sources import VCS_DIRS, IngestRequest, SourceOptions, _matches
from semfs.ingest.store import Store
from semfs.ingest.syncstate import LastBatch, SyncState

# The pipeline imports Qdrant Edge and the chunker: loaded with the first batch, so that a
# mount that imports this module starts as fast as one that does not.
if TYPE_CHECKING:
    from semfs.ingest.report import IngestReport

logger = logging.getLogger(__name__)

# A batch starts after this long without events (s): long enough that an editor's
# write-temp-then-rename and a checkout's file-after-file land in one batch.
QUIET = 0.2
# ... but no later than this after its first event (s), so a file written continuously
# still gets indexed.
MAX_DELAY = 2.0
# While the source's git repository is mid-operation (a checkout, a rebase, a cherry-pick
# series: see _GIT_BUSY), a batch waits for this long without events instead, and never
# starts for MAX_DELAY alone: a rebase of twenty commits is one batch of its end result, not
# twenty re-embeds of the states between (s).
GIT_QUIET = 1.0
# ... but a batch waits for git no longer than this after its first event (s): a lock file
# left behind, or written to on purpose, must not keep the index stale.
GIT_MAX_HOLD = 30.0
# What git keeps in its folder while an operation is under way.
_GIT_BUSY = ("index.lock", "rebase-merge", "rebase-apply", "sequencer")
# While the source folder is missing or unreadable, look for it this often (s): one stat.
RECHECK = 1.0
# After the store refused a batch, wait this long before retrying it (s).
RETRY = 5.0
# The polling fallback's interval (s): a full stat walk each time, so not too often.
POLL_INTERVAL = 2.0
# The state file is saved at most this often (s) while changes keep coming, so `semfs status`
# shows the changes waiting as a mount's results files do (it said 1 while 26 waited).
SAVE_EVERY = 1.0
WATCHES_SYSCTL = "fs.inotify.max_user_watches"
INSTANCES_SYSCTL = "fs.inotify.max_user_instances"

OnBatch = Callable[["IngestReport", SyncState], None]


def _sysctl(name: str) -> str:
    return portable.sysctl(name)


def limit_message(exc: OSError, source: Path) -> str:
    """What to tell the user when the kernel refuses a watch, with the fix."""
    if exc.errno == errno.ENOSPC:
        return (
            f"cannot watch {source}: the inotify watch limit is reached ({WATCHES_SYSCTL} = "
            f"{_sysctl(WATCHES_SYSCTL)}, one watch per folder). Raise it: sudo sysctl "
            f"{WATCHES_SYSCTL}=524288 (and put that line in /etc/sysctl.d/ to keep it)"
        )
    if exc.errno == errno.EMFILE:
        return (
            f"cannot watch {source}: the inotify instance limit is reached ({INSTANCES_SYSCTL}"
            f" = {_sysctl(INSTANCES_SYSCTL)}). Raise it: sudo sysctl {INSTANCES_SYSCTL}=1024"
        )
    return f"cannot watch {source} for changes: {exc.strerror or exc}"


def git_dir(source: Path) -> str | None:
    """The git folder of the repository holding ``source`` (``.git``, or where a worktree's
    ``.git`` file points), or None outside one. Above the source, a folder the user does not
    trust (another user's, or one others may write) holds no repository of theirs."""
    from semfs.ingest.ignores import trusted

    folder = os.path.abspath(source)
    while True:
        dot = os.path.join(folder, ".git")
        if folder != os.path.abspath(source) and not trusted(folder):
            dot = ""  # anyone's .git: skipped, as its rule files are
        if os.path.isdir(dot):
            return dot
        if os.path.isfile(dot):
            try:
                with open(dot, encoding="utf-8") as fh:
                    line = fh.readline().strip()
            except (OSError, UnicodeDecodeError):
                return None
            if line.startswith("gitdir:"):
                return os.path.join(folder, line.removeprefix("gitdir:").strip())
            return None
        up = os.path.dirname(folder)
        if up == folder:
            return None
        folder = up


def inotify_watch_count() -> int | None:
    """Watches held by this process's inotify descriptors, or None (see ``portable``)."""
    return portable.watch_count()


class _OverflowAlarm(logging.Handler):
    """Hears watchdog say the kernel queue overflowed: watchdog rebuilds its watches but
    tells its handlers nothing else, and the events in between are lost."""

    def __init__(self, on_overflow: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self.on_overflow = on_overflow

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self.on_overflow()


def _benign(record: logging.LogRecord) -> bool:
    """False for watchdog's own race when an emitter stops (its folder went away): the
    error says nothing about our events, and the watcher reports the folder itself."""
    return "called when the thread is inactive" not in str(record.msg)


class SourceWatcher:
    """Follows ``source`` into ``store`` in a background thread (:meth:`start`/:meth:`stop`).

    ``on_batch(report, state)`` runs after each committed batch (a mount wakes its tree
    refresher there); ``state_file`` is where the state is saved (None: not saved).
    """

    def __init__(
        self,
        source: Path,
        store: Store,
        options: SourceOptions | None = None,
        *,
        embedder: Embedder | None = None,
        state_file: Path | None = None,
        on_batch: OnBatch | None = None,
        quiet: float = QUIET,
        max_delay: float = MAX_DELAY,
        on_phase: Callable[[str, int], None] | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        self.source = source.absolute()
        self.store = store
        self.options = options = options or SourceOptions()
        self.embedder = embedder
        self.exclude = options.exclude
        self.state_file = state_file
        self.on_batch = on_batch
        self.quiet = quiet
        self.max_delay = max_delay
        # Each batch's files to read, then each one done (a progress display).
        self.on_phase = on_phase
        self.on_progress = on_progress
        self.state = SyncState(str(self.source))
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._held: dict[str, int] = {}  # path -> writers that hold it (see hold)
        self._in_batch = 0
        self._first_event = 0.0
        self._last_event = 0.0
        self._need_full = True  # the mirror pass at start
        self._need_check = False
        self._stopping = False
        self._observer: Any = None
        self._thread: threading.Thread | None = None
        self._alarm = _OverflowAlarm(self._on_overflow)
        self._git = git_dir(self.source)
        self._saved_at = 0.0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching, then run the first mirror pass and the batches in a thread."""
        logging.getLogger("watchdog").addHandler(self._alarm)
        logging.getLogger("watchdog.observers.inotify").addFilter(_benign)
        self._thread = threading.Thread(target=self._run, name="semfs-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the batch under way (its documents are committed one by one)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        self._stop_observer()
        logging.getLogger("watchdog").removeHandler(self._alarm)
        self.state.stopped = True
        self._save()

    def run(self) -> None:
        """Follow in the foreground until interrupted (Ctrl-C), then stop cleanly."""
        self.start()
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(3600)
        finally:
            self.stop()

    def __enter__(self) -> SourceWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- events ---------------------------------------------------------------------------

    def _start_observer(self) -> None:
        """Watch the source (recursively) and its parent (to see the source itself go and
        come back); fall back to polling, loudly, when the kernel refuses."""
        from watchdog.events import (
            DirAttribEvent,
            DirCreatedEvent,
            DirDeletedEvent,
            DirMovedEvent,
            FileAttribEvent,
            FileClosedEvent,
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
            FileSystemEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                watcher._on_event(event)

        # Opened and closed-without-writing are left out: ingest's own reads make those. A
        # folder's chmod/chown (attrib) is in: the mount serves folder modes and owners.
        kinds: list[type[FileSystemEvent]] = [
            DirAttribEvent,
            FileCreatedEvent,
            FileModifiedEvent,
            FileClosedEvent,
            FileAttribEvent,
            FileDeletedEvent,
            FileMovedEvent,
            DirCreatedEvent,
            DirDeletedEvent,
            DirMovedEvent,
        ]
        handler = Handler()
        parent = self.source.parent
        observer = Observer()
        try:
            observer.schedule(handler, str(self.source), recursive=True, event_filter=kinds)
            if parent != self.source:
                observer.schedule(handler, str(parent), recursive=False, event_filter=kinds)
            observer.start()
            kind = type(observer).__name__.removesuffix("Observer").lower()
            problem = self._missing_watches()
        except OSError as exc:
            with contextlib.suppress(Exception):
                observer.stop()
            problem = limit_message(exc, self.source)
        if problem is not None:
            self._stop_observer_obj(observer)
            logger.error("%s; polling every %g s instead", problem, POLL_INTERVAL)
            observer = PollingObserver(timeout=POLL_INTERVAL)
            observer.schedule(handler, str(self.source), recursive=True, event_filter=kinds)
            observer.start()
            kind = f"polling every {POLL_INTERVAL:g} s ({problem})"
        else:
            logger.info("watching %s (%s)", self.source, kind)
        self._observer = observer
        self.state.watcher = kind

    def _missing_watches(self) -> str | None:
        """Why some folders went unwatched, or None. watchdog watches sub-folders quietly
        on a best-effort basis, so count the kernel's watches against the folders."""
        have = inotify_watch_count()
        if have is None or not have:
            return None  # not inotify: nothing to count
        want = 2 if self.source.parent != self.source else 1
        for _root, dirs, _files in os.walk(self.source):
            want += sum(1 for d in dirs if not os.path.islink(os.path.join(_root, d)))
        if have >= want:
            return None
        return limit_message(OSError(errno.ENOSPC, "watch limit"), self.source) + (
            f" ({have} of {want} folders watched)"
        )

    @staticmethod
    def _stop_observer_obj(observer: Any) -> None:
        with contextlib.suppress(Exception):
            observer.stop()
            observer.join(5)

    def _stop_observer(self) -> None:
        if self._observer is not None:
            self._stop_observer_obj(self._observer)
            self._observer = None

    def _relative(self, path: str | bytes) -> str | None:
        """``path`` relative to the source, '/'-separated; '' for the source itself; None
        outside it."""
        text = os.fsdecode(path)
        if not text:
            return None
        rel = os.path.relpath(text, self.source)
        if rel == ".":
            return ""
        if rel == ".." or rel.startswith(".." + os.sep):
            return None
        return rel.replace(os.sep, "/")

    def _wanted(self, rel: str) -> bool:
        """Cheap pre-filter: changes a scan would never look at (VCS, excluded) wait for
        nothing. The batch itself applies every rule again."""
        if any(part in VCS_DIRS for part in rel.split("/")):
            return False
        return not (self.exclude and _matches(rel, self.exclude))

    def _on_event(self, event: Any) -> None:
        if event.event_type in ("opened", "closed_no_write") or (
            event.is_directory and event.event_type == "modified"
        ):
            return
        paths = [event.src_path]
        if getattr(event, "dest_path", ""):
            paths.append(event.dest_path)
        now = time.monotonic()
        with self._cond:
            queued = False
            for path in paths:
                rel = self._relative(path)
                if rel is None:
                    continue  # the parent's other entries
                if rel == "":
                    self._need_check = True  # the source itself went, came or was touched
                    if event.event_type == "attrib":  # its mode or owner: its record too
                        self._need_full = True
                elif self._wanted(rel):
                    self._pending.add(rel)
                else:
                    continue
                queued = True
            if not queued:
                return
            if self._last_event == 0.0:
                self._first_event = now
            self._last_event = now
            before = self.state.pending
            self.state.pending = len(self._pending) + self._in_batch
            due = self.state.pending != before and (
                before == 0 or now - self._saved_at >= SAVE_EVERY
            )
            self._cond.notify_all()
        if due:
            self._save()  # status shows changes waiting, without a write per event

    def hold(self, rel: str) -> None:
        """Keep ``rel``'s changes back until as many :meth:`release` calls (it is being
        written: indexing it now would index half of it)."""
        with self._cond:
            self._held[rel] = self._held.get(rel, 0) + 1

    def held_paths(self) -> list[str]:
        """The paths held now (being written): what an ingest beside us leaves as it is."""
        with self._cond:
            return list(self._held)

    def release(self, rel: str) -> None:
        """One writer of ``rel`` is done; the last one lets its change through at once."""
        now = time.monotonic()
        with self._cond:
            count = self._held.get(rel, 0) - 1
            if count > 0:
                self._held[rel] = count
                return
            self._held.pop(rel, None)
            if not self._wanted(rel):
                return
            self._pending.add(rel)
            if self._last_event == 0.0:
                self._first_event = now
            self._last_event = now
            self.state.pending = len(self._pending) + self._in_batch
            due = now - self._saved_at >= SAVE_EVERY
            self._cond.notify_all()
        if due:
            self._save()

    def _ready(self) -> bool:
        """Whether a pending change is not held (called under the condition's lock)."""
        if not self._held:
            return bool(self._pending)
        return any(p not in self._held for p in self._pending)

    def _on_overflow(self) -> None:
        logger.warning("the kernel dropped file events for %s: a full pass follows", self.source)
        with self._cond:
            self._need_full = True
            self._cond.notify_all()

    # -- batches --------------------------------------------------------------------------

    def _source_problem(self) -> str | None:
        try:
            if not self.source.is_dir():
                return "source folder missing"
        except OSError as exc:
            return f"source folder unusable: {exc.strerror}"
        if not os.access(self.source, os.R_OK | os.X_OK):
            return "source folder unreadable"
        return None

    def _take(self) -> tuple[bool, set[str]] | None:
        """Wait for work; (full pass?, paths) or None when stopping."""
        with self._cond:
            while not (self._stopping or self._need_full or self._need_check or self._ready()):
                self._cond.wait()
            # Debounce: let a burst finish (or the first event grow old enough).
            while not self._stopping and not self._need_full and self._ready():
                now = time.monotonic()
                due = min(self._last_event + self.quiet, self._first_event + self.max_delay)
                busy = self._git_busy()
                if busy:  # a checkout or rebase under way: its end result, for a while
                    due = min(
                        self._last_event + max(self.quiet, GIT_QUIET),
                        self._first_event + max(self.max_delay, GIT_MAX_HOLD),
                    )
                self._waiting(
                    f"for git to finish ({busy} exists), at most {GIT_MAX_HOLD:g} s"
                    if busy and now < due
                    else None
                )
                if now >= due:
                    break
                self._cond.wait(due - now)
            self._waiting(None)
            if self._stopping:
                return None
            full, self._need_full, self._need_check = self._need_full, False, False
            if self._held and not full:
                paths = {p for p in self._pending if p not in self._held}
                self._pending -= paths
            else:
                paths, self._pending = self._pending, set()
            self._last_event = 0.0
            self._in_batch = len(paths)
            return full, paths

    def _git_busy(self) -> str | None:
        """What shows git is changing the source's working tree now (its path), else None
        (a few lstat calls)."""
        if self._git is None:
            return None
        for name in _GIT_BUSY:
            path = os.path.join(self._git, name)
            if os.path.lexists(path):
                return path
        return None

    def _waiting(self, why: str | None) -> None:
        """Say in the state why the pending batch waits (None: it does not); saved when it
        changes, so `semfs status` tells (called under the condition's lock)."""
        if self.state.waiting != why:
            self.state.waiting = why
            self._save()

    def _requeue(self, paths: set[str], full: bool) -> None:
        with self._cond:
            self._pending |= paths
            self._need_full = self._need_full or full
            self._in_batch = 0
            self.state.pending = len(self._pending)

    def _run(self) -> None:
        while True:
            work = self._take()
            if work is None:
                return
            full, paths = work
            problem = self._source_problem()
            if problem is not None:
                self._wait_for_source(problem, paths)
                continue
            if self.state.source_problem is not None or self._observer is None:
                if self.state.source_problem is not None:
                    logger.warning("%s is back: catching up", self.source)
                    self.state.source_problem = None
                    full = True
                self._stop_observer()
                self._start_observer()
            if full:
                self._batch(None)
            elif paths:
                self._batch(paths)

    def _wait_for_source(self, problem: str, paths: set[str]) -> None:
        """Keep the index as it is; look for the folder every RECHECK s until it is back."""
        if self.state.source_problem is None:
            since = time.strftime("%H:%M:%S")
            self.state.source_problem = f"{problem} since {since}"
            logger.warning(
                "%s: %s; the index keeps its last good state until it is back",
                self.source,
                problem,
            )
            self._stop_observer()  # its watches went with the folder
        self._requeue(paths, True)
        self._save()
        with self._cond:
            self._cond.wait_for(lambda: self._stopping, RECHECK)

    def _batch(self, paths: set[str] | None) -> bool:
        """One ingest run (all of the source when ``paths`` is None); True when it committed."""
        from semfs.ingest.pipeline import ingest

        full = paths is None
        request = IngestRequest(
            self.options,
            paths=None if paths is None else frozenset(paths),
            keep_failed=True,
            dense=False,  # the owner's dense pass embeds: the next batch never waits
        )
        try:
            report = ingest(
                self.source,
                self.store,
                request,
                embedder=self.embedder,
                held=self._held.__contains__,
                on_phase=self.on_phase,
                on_progress=self.on_progress,
            )
        except SourceError as exc:  # the folder went away between the check and the scan
            logger.debug("batch stopped: %s", exc)
            self._requeue(paths or set(), True)
            return False
        except Exception as exc:
            self.state.error = f"{type(exc).__name__}: {exc}"
            logger.error(
                "cannot sync %d changes of %s: %s; retrying in %g s",
                len(paths) if paths is not None else -1,
                self.source,
                self.state.error,
                RETRY,
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )
            self._requeue(paths or set(), full)
            self._save()
            with self._cond:
                self._cond.wait_for(lambda: self._stopping, RETRY)
            return False
        self._committed(report, paths)
        return True

    def _committed(self, report: IngestReport, paths: set[str] | None) -> None:
        from semfs.ingest.pipeline import in_paths

        state = self.state
        failed = {s.path: s.reason for s in report.skipped}
        if paths is None:
            new_failures = {p: r for p, r in failed.items() if state.failed.get(p) != r}
            state.failed = failed
        else:
            only = {p.strip("/") for p in paths}
            new_failures = {p: r for p, r in failed.items() if state.failed.get(p) != r}
            state.failed = {p: r for p, r in state.failed.items() if not in_paths(p, only)}
            state.failed.update(failed)
        for path, reason in sorted(new_failures.items()):
            logger.warning("cannot ingest %s: %s", path, reason)
        changed = len(report.added) + len(report.updated) + len(report.deleted)
        with self._cond:
            self._in_batch = 0
            state.pending = len(self._pending)
        state.error = None
        state.synced_at = time.time()
        state.batches += 1
        state.last_batch = LastBatch(
            paths=0 if paths is None else len(paths),
            full=paths is None,
            added=len(report.added),
            updated=len(report.updated),
            deleted=len(report.deleted),
            seconds=round(report.seconds, 3),
        )
        self._save()
        if changed or paths is None:
            logger.info(
                "synced %s: added %d, updated %d, deleted %d in %.2f s",
                "all of the source" if paths is None else f"{len(paths)} changed paths",
                len(report.added),
                len(report.updated),
                len(report.deleted),
                report.seconds,
            )
        if self.on_batch is not None:
            self.on_batch(report, state)

    def _save(self) -> None:
        self._saved_at = time.monotonic()
        if self.state_file is None:
            return
        try:
            self.state.save(self.state_file)
        except OSError as exc:
            logger.debug("cannot save the watch state to %s: %s", self.state_file, exc)
