"""The collection as five agent tools: search, read, grep, list, status. No MCP here.

:class:`Toolbox` answers each call with a :class:`ToolOutput` (the text an agent reads, plus
JSON data); :mod:`semfs.fusefs.agent.mcp` serves them. It reads the store the way the mount does: a
:class:`~semfs.fusefs.tree.Tree` kept fresh by a :class:`~semfs.fusefs.refresh.TreeRefresher`,
documents through a :class:`~semfs.fusefs.reader.DocumentReader`, searches with the same
:class:`~semfs.ingest.search.Searcher` and results text as a ``.search`` directory.

Rules a caller may rely on:

* Paths are relative to the collection root (``""`` is the root; a leading ``/`` or ``./``
  is ignored); ``..`` is refused.
* Every text is cut to the output budget (bytes, default 30 KB) at a line boundary, and a
  cut text ends with a line saying so and how to narrow the call.
* Bad input raises :class:`~semfs.ingest.errors.SemfsError` with one line saying what to change.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semfs.fusefs.reader import DocumentReader
from semfs.fusefs.refresh import TreeRefresher
from semfs.fusefs.searchdir import SearchOptions, SearchPath, link_names, render_results
from semfs.fusefs.tree import DIR, FILE, InodeMap, Node, Ownership, Tree
from semfs.ingest import formats
from semfs.ingest.errors import SemfsError, StoreNotFoundError
from semfs.ingest.search import MAX_K, Searcher
from semfs.ingest.store import MODES, Store
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.owner import StoreOwnedError, StoreOwner
from semfs.ingest.store.schema import DocumentRecord

from .grep import (
    DEFAULT_MAX_RESULTS,
    Grep,
    GrepResult,
    PathError,
    document_lines,
    resolve,
)

logger = logging.getLogger(__name__)

DEFAULT_BUDGET = 30_000  # bytes of text per tool result, as Mintlify's MCP filesystem cuts
# Lines one read returns at most (the budget may cut earlier): a screenful of a long file.
READ_LINES = 2000


class ToolInputError(SemfsError):
    """A tool was called with an argument it cannot use."""


@dataclass(frozen=True)
class ToolOutput:
    text: str
    data: dict[str, Any]


def cap(text: str, budget: int, hint: str) -> tuple[str, bool]:
    """``text`` cut to ``budget`` UTF-8 bytes at a line end, with a closing note; and
    whether it was cut."""
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= budget:
        return text, False
    head = raw[:budget]
    cut = head.rfind(b"\n")
    head = head[: cut + 1] if cut > 0 else head
    kept = head.decode("utf-8", "ignore")
    note = f"[output cut at {len(head):,} of {len(raw):,} bytes: {hint}]"
    return kept + ("" if kept.endswith("\n") else "\n") + note + "\n", True


class Toolbox:
    """The tools over one open store. Thread-safe; :meth:`close` stops the refresher."""

    def __init__(
        self,
        store: Store,
        budget: int = DEFAULT_BUDGET,
        poll_interval: float = 1.0,
        searcher: Searcher | None = None,
    ) -> None:
        if budget < 1000:
            raise SemfsError(f"the output budget must be at least 1000 bytes, not {budget}")
        self.store = store
        self.budget = budget
        self.refresher = TreeRefresher(
            store, InodeMap(), Ownership(os.getuid(), os.getgid()), interval=poll_interval
        )
        self._tree = self.refresher.load()
        self._tree_since = time.time()
        self.refresher.publish = self._publish
        self.reader = DocumentReader(store)
        self.grep_engine = Grep(store, self.reader)
        self._searcher = searcher
        self._searcher_lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------

    def _publish(self, tree: Tree) -> None:
        self._tree, self._tree_since = tree, time.time()

    @property
    def tree(self) -> Tree:
        return self._tree

    def start(self) -> None:
        """Follow the store's changes in the background (every ``poll_interval`` seconds)."""
        self.refresher.start()

    def close(self) -> None:
        self.refresher.stop()

    @property
    def searcher(self) -> Searcher:
        with self._searcher_lock:  # the model loads once, on the first search
            if self._searcher is None:
                self._searcher = Searcher(self.store)
            return self._searcher

    # -- tools --------------------------------------------------------------------------------

    def search(self, query: str, path: str = "", k: int = 10, mode: str = "hybrid") -> ToolOutput:
        if mode not in MODES:
            raise ToolInputError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
        if not 1 <= k <= MAX_K:
            raise ToolInputError(f"k must be between 1 and {MAX_K}, not {k}")
        tree = self.tree
        node = resolve(tree, path)
        if node.kind != DIR:
            raise ToolInputError(f"{node.path!r} is a file: search takes a directory as path")

        def committed(doc_path: str, gen: int) -> bool:
            shown = tree.lookup(doc_path)
            return shown is not None and shown.doc is not None and shown.doc.gen == gen

        text = " ".join(query.split())
        hits = tuple(
            self.searcher.search(text, k=k, mode=mode, under=node.path or None, committed=committed)
            if text
            else ()
        )
        options = SearchOptions(mode=mode, k=k)
        sp = SearchPath(node.path, ".search", (), options, text)
        rendered = render_results(sp, text, hits, link_names(hits, k), tools=True).decode(
            "utf-8", "surrogateescape"
        )
        body, _ = cap(rendered, self.budget, "ask for fewer documents (k) or a narrower path")
        return ToolOutput(body, {"results": [h.to_json() for h in hits]})

    def read(
        self, path: str, start_line: int = 1, end_line: int | None = None, pages: str = ""
    ) -> ToolOutput:
        node = resolve(self.tree, path)
        if node.kind != FILE or node.doc is None:
            raise ToolInputError(f"{node.path or '/'!r} is a directory: use list to see it")
        if node.doc.blob:
            view = node.doc.path + formats.VIEW_SUFFIX
            raise ToolInputError(f"{node.path!r} is a binary original: read its text {view!r}")
        if pages:
            start_line, end_line = self._page_lines(node.doc, pages)
        if start_line < 1:
            raise ToolInputError(f"start_line must be 1 or more, not {start_line}")
        if end_line is not None and end_line < start_line:
            raise ToolInputError(f"end_line ({end_line}) is before start_line ({start_line})")
        rec = self.reader.document(node.doc)
        if rec is None:
            raise PathError(f"{node.path!r} was deleted from the collection")
        lines = document_lines(self.reader.read(rec, 0, rec.size))
        total = len(lines)
        if start_line > max(total, 1):
            raise ToolInputError(
                f"{node.path!r} has {total} lines; start_line {start_line} is past its end"
            )
        last = min(total, end_line if end_line is not None else total, start_line - 1 + READ_LINES)
        width = len(str(last))
        out: list[str] = []
        size = 0
        shown_last = start_line - 1
        for number in range(start_line, last + 1):
            line = f"{number:>{width}}\t{lines[number - 1]}\n"
            size += len(line.encode("utf-8", "surrogateescape"))
            if size > self.budget - 200 and out:
                break
            out.append(line)
            shown_last = number
        wanted_last = min(total, end_line) if end_line is not None else total
        if shown_last < wanted_last:
            out.append(
                f"[lines {start_line}-{shown_last} of {total} shown: continue with "
                f"read(path={node.path!r}, start_line={shown_last + 1})]\n"
            )
        data = {
            "path": node.path,
            "start_line": start_line,
            "end_line": shown_last,
            "total_lines": total,
            "more": shown_last < wanted_last,
        }
        return ToolOutput("".join(out), data)

    def _page_lines(self, doc: DocumentRecord, pages: str) -> tuple[int, int]:
        """The lines of a text view holding ``pages`` ("7", "3-5"; slides or chapters alike),
        from its marker headings (``## Page 7``)."""
        if doc.original is None:
            raise ToolInputError(
                f"{doc.path!r} has no pages (only the text views of PDF, PowerPoint and EPUB "
                "files do): use start_line and end_line"
            )
        first_s, _, last_s = pages.strip().partition("-")
        try:
            first, last = int(first_s), int(last_s or first_s)
        except ValueError:
            raise ToolInputError(f"pages must be N or N-M, not {pages!r}") from None
        if not 1 <= first <= last:
            raise ToolInputError(
                f"pages {pages!r}: the first must be 1 or more, and not after the last"
            )
        rec = self.reader.document(doc)
        if rec is None:
            raise PathError(f"{doc.path!r} was deleted from the collection")
        lines = document_lines(self.reader.read(rec, 0, rec.size))
        starts: dict[int, int] = {}
        for number, line in enumerate(lines, 1):
            found = formats.MARKER.match(line)
            if found:
                starts.setdefault(int(found.group(2)), number)
        if first not in starts:
            have = f"{min(starts)}-{max(starts)}" if starts else "none"
            raise ToolInputError(f"{doc.path!r} has no page {first} (it has {have})")
        after = [n for p, n in starts.items() if p > last]
        return starts[first], (min(after) - 1 if after else len(lines))

    def grep(
        self,
        pattern: str,
        path: str = "",
        regex: bool = False,
        ignore_case: bool = False,
        max_results: int = DEFAULT_MAX_RESULTS,
    ) -> ToolOutput:
        res = self.grep_engine.run(self.tree, pattern, path, regex, ignore_case, max_results)
        text = "".join(line + "\n" for line in res.lines)
        text, cut = cap(text, self.budget, "use a narrower path or a more specific pattern")
        # The first `shown` lines of the text are grep's; notes in brackets follow.
        shown = text.count("\n") - (1 if cut else 0)
        notes = _grep_notes(res, max_results)
        if not res.lines:
            notes.insert(0, "no matches")
        if notes and not cut:
            text += "".join(f"[{n}]\n" for n in notes)
        data = {
            "matches": len(res.lines),
            "shown": shown,
            "more": res.limited,
            "pushed_down": res.pushed_down,
            "documents_in_scope": res.documents_in_scope,
            "documents_read": res.documents_read,
            "scan_stopped_at": res.scan_stopped_at,
        }
        return ToolOutput(text, data)

    def list(
        self, path: str = "", recursive: bool = False, pattern: str | None = None
    ) -> ToolOutput:
        node = resolve(self.tree, path)
        if pattern is not None and not pattern:
            raise ToolInputError("pattern is empty: give a glob such as '*.md', or leave it out")
        entries = list(_entries(node, recursive or pattern is not None))
        if pattern is not None:
            key = (lambda n: n.path) if "/" in pattern else (lambda n: n.name)
            entries = [
                n for n in entries if n.kind == FILE and fnmatch.fnmatchcase(key(n), pattern)
            ]
        rows = [
            {"path": n.path, "type": "file" if n.kind == FILE else "directory", "size": _size(n)}
            for n in entries
        ]
        lines = [
            f"{row['size']:>10}  {row['path']}{'/' if row['type'] == 'directory' else ''}"
            for row in rows
        ]
        if not lines:
            lines = ["(no entries)" if pattern is None else f"(no files match {pattern!r})"]
        text, _ = cap(
            "\n".join(lines) + "\n",
            self.budget,
            "list a subdirectory, drop recursive, or give a narrower pattern",
        )
        return ToolOutput(text, {"entries": rows})

    def status(self) -> ToolOutput:
        tree = self.tree
        meta = self.store.read_meta()
        info: dict[str, Any] = {
            "collection": self.store.collection,
            "backend": self.store.backend,
            "location": self.store.location,
            "documents": tree.files,
            "bytes": tree.total_bytes,
            "chunks": self.store.count_chunks(),
            "model": meta.model if meta else None,
            "dimension": meta.dimension if meta else None,
            "generation": meta.generation if meta else None,
            "ingest_running": bool(meta and meta.dirty),
            "tree_as_of": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._tree_since)),
            "refresh_interval_s": self.refresher.interval,
        }
        text = "".join(f"{k}: {v}\n" for k, v in info.items() if v is not None)
        return ToolOutput(text, info)


@contextmanager
def open_toolbox(
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    budget: int = DEFAULT_BUDGET,
) -> Iterator[Toolbox]:
    """A started :class:`Toolbox` on the collection, reached the way the mount reaches it.

    An embedded store another process owns (a mount, another ``semfs mcp``) is used through
    its socket. One this process opens is served on the same socket while the block runs,
    so ``semfs ingest`` and other readers keep working (and the tree follows their writes).
    """
    owner: StoreOwner | None = None
    try:
        owner = StoreOwner.open(store_path, url=url, collection=collection, api_key=api_key)
        store = owner.store
    except StoreOwnedError:  # a mount (or another semfs mcp) owns it: use its socket
        store = open_store(store_path, url=url, collection=collection, api_key=api_key)
    stops: list[Callable[[], None]] = [owner.close if owner is not None else store.close]
    try:
        if not store.exists():
            raise StoreNotFoundError(
                f"no collection {collection!r} at {store.location}: run `semfs ingest DIR` first"
            )
        box = Toolbox(store, budget=budget)
        stops.append(box.close)
        if owner is not None:
            owner.serve(on_change=box.refresher.wake)
            stops.append(owner.stop_serving)
        box.start()
        yield box
    finally:
        for stop in reversed(stops):
            try:
                stop()
            except Exception as exc:
                logger.error("shutting down: %s", exc, exc_info=logger.isEnabledFor(logging.DEBUG))


def _grep_notes(res: GrepResult, max_results: int) -> list[str]:
    notes: list[str] = []
    if res.limited:
        notes.append(
            f"stopped at max_results={max_results}; more lines match: raise max_results, "
            "or narrow path or pattern"
        )
    if res.scan_stopped_at is not None:
        notes.append(
            f"no literal text to filter by, so documents were scanned in order; the scan "
            f"stopped at its budget after {res.documents_read} of {res.documents_in_scope} "
            f"documents, before {res.scan_stopped_at!r}: narrow path, or add literal text "
            "(whole words with ignore_case) to the pattern"
        )
    elif not res.pushed_down and res.documents_read:
        notes.append(f"scanned {res.documents_read} documents (no literal text to filter by)")
    return notes


def _entries(node: Node, recursive: bool) -> Iterator[Node]:
    if node.kind == FILE:
        yield node
        return
    for child in node.children.values():
        if child.kind not in (FILE, DIR):
            continue
        yield child
        if recursive and child.kind == DIR:
            yield from _entries(child, True)


def _size(node: Node) -> int:
    return node.doc.size if node.doc is not None else 0
