"""The collection as agent tools: search, read, grep, list, status, and write. No MCP here.

:class:`Toolbox` answers each call with a :class:`ToolOutput` (the text an agent reads, plus
JSON data); :mod:`semfs.fusefs.agent.mcp` serves them. It reads the store the way the mount does: a
:class:`~semfs.fusefs.view.tree.Tree` kept fresh by a
:class:`~semfs.fusefs.view.refresh.TreeRefresher`,
documents through a :class:`~semfs.fusefs.view.reader.DocumentReader`, searches with the same
:class:`~semfs.ingest.search.Searcher` and results text as a ``.search`` directory.

Rules a caller may rely on:

* Paths are relative to the collection root (``""`` is the root; a leading ``/`` or ``./``
  is ignored); ``..`` is refused.
* ``search``'s text is the mount's results file for the same query, with no data unless
  ``details`` asks (an empty ``data``: the server sends no structured content).
* A result's text and its data (structured content, as JSON) together stay within the output
  budget (bytes, default 30 KB): when they do not fit, the smaller one is kept whole if it fits
  in half, and the other is cut to the rest: the data's longest list, with ``data["cut"]``
  saying so; the text at a line end (a line longer than that is cut inside), ending with a
  line saying so and how to narrow the call.
* Every tool takes a ``scope`` (folders, ``()``: everything): what lies outside it is pruned
  from the tree before the tool looks, so no answer, count or error tells it apart from a
  path that does not exist.
* ``write`` adds a text file to the collection's source folder and indexes it before it
  returns (:mod:`semfs.fusefs.agent.writing`); whether a caller may is the server's call.
* Bad input raises :class:`~semfs.ingest.errors.SemfsError` with one line saying what to change.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from semfs.fusefs.agent import DEFAULT_BUDGET
from semfs.fusefs.agent.grep import (
    DEFAULT_MAX_RESULTS,
    Grep,
    GrepResult,
    document_lines,
    normalize_path,
    resolve,
    walk,
)
from semfs.fusefs.agent.writing import SourceWriter
from semfs.fusefs.view.foldermap import FolderMaps
from semfs.fusefs.view.reader import ChunksMissingError, DocumentReader
from semfs.fusefs.view.refresh import TreeRefresher
from semfs.fusefs.view.tree import DIR, FILE, InodeMap, Node, Tree
from semfs.ingest import formats
from semfs.ingest.errors import (
    PathError,
    SemfsError,
    StoreNotFoundError,
    ToolInputError,
)
from semfs.ingest.focus import uses_of
from semfs.ingest.opened import Opened, open_resident
from semfs.ingest.request import DEFAULT_MODE, SearchRequest
from semfs.ingest.search import Hit, Searcher
from semfs.ingest.store import DEFAULT_K, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.schema import DocumentRecord

logger = logging.getLogger(__name__)

# Scoped trees (the tree pruned to a token's folders) kept at once, one per folder set in use;
# each is rebuilt when the collection changes, and costs what its part of the tree costs.
SCOPED_TREES = 16
# Lines one read returns at most (the budget may cut earlier): a screenful of a long file.
READ_LINES = 2000


Scope = tuple[str, ...]  # collection-relative folders a caller may see; () is everything


@dataclass(frozen=True)
class ToolOutput:
    text: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Found:
    """A search tool's hits in one collection: the ``request`` as run (``under`` the folder
    searched), its ``hits``, the scope's ``folders`` searched when the path holds several (else
    empty: the request's folder), and whether the embedded share of it may be ``counted`` (not
    for a token's several folders: it sees only its own)."""

    request: SearchRequest
    hits: tuple[Hit, ...]
    folders: tuple[str, ...]
    counted: bool


SEARCH_HINT = "ask for fewer documents (k) or a narrower path"


def _json_size(data: dict[str, Any]) -> int:
    return len(json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogateescape"))


def fit(text: str, data: dict[str, Any], budget: int, hint: str) -> ToolOutput:
    """``text`` and ``data`` within ``budget`` bytes together (see the module's rules)."""
    text_size = len(text.encode("utf-8", "surrogateescape"))
    if text_size + _json_size(data) <= budget:
        return ToolOutput(text, data)
    # The smaller part is kept whole when it fits in half; the other gets the rest.
    half = budget // 2
    data = _fit_data(data, budget - text_size if text_size <= half else half, hint)
    body, _ = cap(text, budget - _json_size(data), hint)
    return ToolOutput(body, data)


def _fit_data(data: dict[str, Any], limit: int, hint: str) -> dict[str, Any]:
    if _json_size(data) <= limit:
        return data
    lists = [k for k, v in data.items() if isinstance(v, list) and v]
    if not lists:
        return data
    key = max(lists, key=lambda k: _json_size({k: data[k]}))
    items = data[key]
    # Bisect for the longest prefix that fits, the note included.
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        trial = {**data, key: items[:mid], "cut": _cut_note(key, mid, len(items), hint)}
        if _json_size(trial) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return {**data, key: items[:lo], "cut": _cut_note(key, lo, len(items), hint)}


def _cut_note(key: str, kept: int, total: int, hint: str) -> str:
    return f"{key}: {kept} of {total} kept within the output budget; {hint}"


def cap(text: str, budget: int, hint: str) -> tuple[str, bool]:
    """``text`` cut to ``budget`` UTF-8 bytes at a line end, with a closing note; and
    whether it was cut."""
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= budget:
        return text, False
    note = f"[output cut at {budget:,} of {len(raw):,} bytes: {hint}]"
    head = raw[: max(0, budget - len(note) - 2)]  # room for the note itself
    cut = head.rfind(b"\n")
    head = head[: cut + 1] if cut > 0 else head
    kept = head.decode("utf-8", "ignore")
    note = f"[output cut at {len(head):,} of {len(raw):,} bytes: {hint}]"
    return kept + ("" if kept.endswith("\n") else "\n") + note + "\n", True


class Toolbox:
    """The tools over one open store. Thread-safe; :meth:`close` stops the refresher."""

    several = False  # one collection (semfs.fusefs.agent.several serves several)

    def __init__(
        self,
        opened: Opened,
        budget: int = DEFAULT_BUDGET,
        poll_interval: float = 1.0,
    ) -> None:
        if budget < 1000:
            raise SemfsError(f"the output budget must be at least 1000 bytes, not {budget}")
        self.opened = opened
        self.store = store = opened.store
        self.budget = budget
        self.refresher = TreeRefresher.as_mounted(store, interval=poll_interval)
        self._tree = self.refresher.load()
        self._tree_since = time.time()
        self.refresher.publish = self._publish
        self.reader = DocumentReader(store)
        self.grep_engine = Grep(store, self.reader)
        self.maps = FolderMaps(store.get_chunks, tools=True)
        self._scoped_trees: dict[Scope, tuple[Tree, Tree]] = {}
        self._scoped_lock = threading.Lock()
        self.writer = SourceWriter(store)
        # What the paths it names begin with: "" alone, "docs/" on a server of several
        # collections (semfs.fusefs.agent.several), where a path's first part is its collection.
        self.prefix = ""
        # Whether the server's own user may write (semfs mcp --writable); scoped tokens
        # carry their own right (semfs token create --write).
        self.writable = False

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
        return self.opened.searcher()

    @property
    def names(self) -> tuple[str, ...]:
        """The collection's name (a server of several has several)."""
        return (self.opened.name,)

    # -- scopes -------------------------------------------------------------------------------

    def scoped_tree(self, scope: Scope = ()) -> Tree:
        """The tree as ``scope`` may see it: only the documents under its folders (and the
        folders leading to them). The whole tree for ``()``; cached per scope and tree."""
        tree = self.tree
        if not scope:
            return tree
        with self._scoped_lock:
            cached = self._scoped_trees.get(scope)
            if cached is not None and cached[0] is tree:
                return cached[1]
        records: list[DocumentRecord] = []
        for folder in scope:
            node = tree.lookup(folder)
            if node is not None:
                records.extend(n.doc for n in walk(node) if n.doc is not None)
        pruned = Tree.build(records, InodeMap(), tree.ids)
        with self._scoped_lock:
            self._scoped_trees.pop(scope, None)
            self._scoped_trees[scope] = (tree, pruned)
            while len(self._scoped_trees) > SCOPED_TREES:
                self._scoped_trees.pop(next(iter(self._scoped_trees)))
        return pruned

    # -- tools --------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        path: str = "",
        k: int = DEFAULT_K,
        mode: str = DEFAULT_MODE,
        more: bool = False,
        details: bool = False,
        scope: Scope = (),
    ) -> ToolOutput:
        found = self.find(tool_request(query, k=k, mode=mode, more=more), path, scope)
        folders = found.folders
        where = ("in " + ", ".join(f"{f}/" for f in folders)) if folders else None
        # While an ingest's dense pass is under way, how much of what was searched is
        # embedded (not for a token's several folders at the root: it sees only its own).
        rendered = self.opened.results_text(
            found.request, found.hits, where=where, tools=True, meaning=found.counted
        ).decode("utf-8", "surrogateescape")
        # The text is the mount's results file; no structured content unless asked: clients
        # that get both pass the model one (Claude Code and VS Code the structured content
        # alone, so the answering lines never reached it) or both (the bytes twice).
        return self._fit(
            rendered,
            # Each hit names its collection, as `semfs search --json` has it (one or several).
            {"results": [{**h.to_json(), "collection": self.opened.name} for h in found.hits]}
            if details
            else {},
            SEARCH_HINT,
        )

    def find(self, request: SearchRequest, path: str = "", scope: Scope = ()) -> Found:
        """The search tool's hits for ``request`` under ``path``, before they are rendered
        (see :class:`Found`)."""
        tree = self.scoped_tree(scope)
        node = resolve(tree, path)
        if node.kind != DIR:
            raise ToolInputError(f"{node.path!r} is a file: search takes a directory as path")
        request = dataclasses.replace(request, under=node.path)
        hits = self._search(request, scope, tree) if request.text else ()
        # Where it looked: for a scope at its root, the scope's folders.
        folders: tuple[str, ...] = ()
        if scope and not any(node.path == f or node.path.startswith(f + "/") for f in scope):
            folders = tuple(f for f in scope if not node.path or f.startswith(node.path + "/"))
        return Found(request, hits, folders, bool(request.text and (node.path or not scope)))

    def _search(self, request: SearchRequest, scope: Scope, tree: Tree) -> tuple[Hit, ...]:
        """The ``request.k`` best hits under ``request.under`` within ``scope``, as ``tree``
        shows them: one search per scope folder below ``under`` when it holds several, merged
        by score."""
        under = request.under or ""
        inside = [f for f in scope if under == f or under.startswith(f + "/")]
        if not scope or inside:
            wheres = [under]
        else:
            wheres = [f for f in scope if not under or f.startswith(under + "/")]
        found: list[Hit] = []
        for where in wheres:
            found += self.searcher.search(
                dataclasses.replace(request, under=where), committed=tree.shows
            )
        if len(wheres) > 1:
            found.sort(key=lambda h: (-h.score, h.path))
        return tuple(dataclasses.replace(h, rank=i) for i, h in enumerate(found[: request.k], 1))

    def read(
        self,
        path: str,
        start_line: int = 1,
        end_line: int | None = None,
        pages: str = "",
        scope: Scope = (),
    ) -> ToolOutput:
        tree = self.scoped_tree(scope)
        node = resolve(tree, path)
        if node.kind != FILE or node.doc is None:
            raise ToolInputError(f"{node.path or '/'!r} is a directory: use list to see it")
        if node.doc.blob:
            view = node.doc.path + formats.VIEW_SUFFIX
            if tree.lookup(view) is None:  # an image, a binary: stored as it is, no text
                raise ToolInputError(f"{node.path!r} is not text (stored as it is, not searched)")
            raise ToolInputError(f"{node.path!r} is a binary original: read its text {view!r}")
        uses_of(self.store).documents([node.doc.path])  # embedded first (semfs.ingest.focus)
        if pages:
            start_line, end_line = self._page_lines(node.doc, pages)
        if start_line < 1:
            raise ToolInputError(f"start_line must be 1 or more, not {start_line}")
        if end_line is not None and end_line < start_line:
            raise ToolInputError(f"end_line ({end_line}) is before start_line ({start_line})")
        lines = document_lines(self._whole(node.doc))
        total = len(lines)
        shown = self.prefix + node.path
        if start_line > max(total, 1):
            raise ToolInputError(
                f"{node.path!r} has {total} lines; start_line {start_line} is past its end"
            )
        last = min(total, end_line if end_line is not None else total, start_line - 1 + READ_LINES)
        width = len(str(last))
        # Room for the data and the closing note: what is left is the lines'.
        room = self.budget - 600
        out: list[str] = []
        size = 0
        shown_last = start_line - 1
        long_line: int | None = None
        for number in range(start_line, last + 1):
            line = f"{number:>{width}}\t{lines[number - 1]}\n"
            line_size = len(line.encode("utf-8", "surrogateescape"))
            if size + line_size > room:
                if not out:  # one line longer than the budget: its start, cut
                    head = line.encode("utf-8", "surrogateescape")[:room]
                    out.append(head.decode("utf-8", "ignore") + "\n")
                    long_line, shown_last = number, number
                break
            size += line_size
            out.append(line)
            shown_last = number
        wanted_last = min(total, end_line) if end_line is not None else total
        if long_line is not None:
            full = len(lines[long_line - 1].encode("utf-8", "surrogateescape"))
            out.append(
                f"[line {long_line} cut at {room:,} of {full:,} bytes: grep a pattern to see "
                "the part of it you need"
                + (
                    f"; the next line: read(path={shown!r}, start_line={long_line + 1})]\n"
                    if long_line < wanted_last
                    else "]\n"
                )
            )
        elif shown_last < wanted_last:
            out.append(
                f"[lines {start_line}-{shown_last} of {total} shown: continue with "
                f"read(path={shown!r}, start_line={shown_last + 1})]\n"
            )
        data = {
            "path": shown,
            "start_line": start_line,
            "end_line": shown_last,
            "total_lines": total,
            "more": shown_last < wanted_last,
            "line_cut": long_line,
        }
        return self._fit("".join(out), data, "read fewer lines (end_line)")

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
        lines = document_lines(self._whole(doc))
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
        scope: Scope = (),
        context: int = 0,
    ) -> ToolOutput:
        res = self.grep_engine.run(
            self.scoped_tree(scope), pattern, path, regex, ignore_case, max_results, scope, context
        )
        return grep_output(res, max_results, self.budget)

    def _whole(self, doc: DocumentRecord) -> bytes:
        """The text of ``doc``'s document as committed now (the newer version when it was
        re-ingested meanwhile): one line when it was deleted, or kept changing."""
        try:
            found = self.reader.whole(doc)
        except ChunksMissingError:
            raise SemfsError(
                f"{doc.path!r} was re-ingested again and again while it was read: "
                "ask again once the ingest is done"
            ) from None
        if found is None:
            raise PathError(f"{doc.path!r} was deleted from the collection")
        return found[1]

    def list(
        self,
        path: str = "",
        recursive: bool = False,
        pattern: str | None = None,
        map: bool = False,
        page: int = 1,
        scope: Scope = (),
    ) -> ToolOutput:
        tree = self.scoped_tree(scope)
        node = resolve(tree, path)
        if map:
            return self._map(tree, node, page)
        return list_output(list_rows(node, recursive, pattern), pattern, self.budget)

    def write(self, path: str, text: str, mode: str = "append", scope: Scope = ()) -> ToolOutput:
        """Write ``text`` to the file ``path`` of the source (``append`` or ``replace``),
        index it, and show the new tree: a search finds it when this returns."""
        rel = normalize_path(path)
        if scope and not any(rel == f or rel.startswith(f + "/") for f in scope):
            raise PathError(
                f"{rel!r} is outside the folders this token may write: {', '.join(scope)}"
            )
        done = self.writer.write(rel, text, mode)
        self.refresher.check()
        verb = "appended" if mode == "append" else "wrote"
        where = self.prefix + done.path
        line = f"{verb} {done.bytes_written} bytes to {where} (now {done.size} bytes); "
        line += "searchable now" if done.indexed else f"not indexed: {done.reason}"
        data = {
            "path": where,
            "mode": done.mode,
            "bytes_written": done.bytes_written,
            "size": done.size,
            "indexed": done.indexed,
        }
        if done.reason:
            data["reason"] = done.reason
        return ToolOutput(line + "\n", data)

    def _map(self, tree: Tree, node: Node, page: int) -> ToolOutput:
        """The folder map of ``node`` (a mount's ``DIR/.map.md``), page ``page``."""
        if node.kind != DIR:
            raise ToolInputError(f"{node.path!r} is a file: map takes a directory as path")
        if page < 1:
            raise ToolInputError(f"page must be 1 or more, not {page}")
        text = self.maps.text(tree, node.path, page)
        if text is None:
            raise ToolInputError(f"the map of {node.path or '/'!r} has no page {page}")
        return self._fit(text, {"path": node.path, "page": page}, "")

    def status(self, scope: Scope = (), named: Scope | None = None) -> ToolOutput:
        """The collection's figures as ``scope`` sees them; ``named``: the scope as its caller
        names it (default ``scope``; on a server of several, a token may see all of this
        collection and still be scoped)."""
        named = scope if named is None else named
        tree = self.scoped_tree(scope)
        meta = self.store.read_meta()
        info: dict[str, Any] = {
            "collection": self.store.collection,
            "backend": self.store.backend,
            "location": self.store.location,
            "documents": tree.files,
            "bytes": tree.total_bytes,
            # A scope counts its own documents' chunks (the store counts them all).
            "chunks": (
                sum(n.doc.chunks for n in walk(tree.root) if n.doc is not None)
                if scope
                else self.store.count_chunks()
            ),
            "model": meta.model if meta else None,
            "dimension": meta.dimension if meta else None,
            "generation": meta.generation if meta else None,
            "ingest_running": _writing(self.store),
            "tree_as_of": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._tree_since)),
            "refresh_interval_s": self.refresher.interval,
        }
        if meta is not None and meta.dense_pending and not scope:
            embedded, total = self.store.embedding_counts()
            info["embedded_chunks"] = f"{embedded} of {total}"
        if named:
            info["scope"] = list(named)
            del info["location"]  # where the store lives is the server's business
        text = "".join(f"{k}: {v}\n" for k, v in info.items() if v is not None)
        return self._fit(text, info, "")

    def _fit(self, text: str, data: dict[str, Any], hint: str) -> ToolOutput:
        return fit(text, data, self.budget, hint)


def _writing(store: Store) -> bool:
    """Whether an ingest writes the collection now, in either pass: a process holds its write
    lock (the keyword pass) or its embed lock (the dense pass, this server's own included).
    Before, a meta left dirty said so: false while a run embedded, true after a kill -9."""
    from semfs.ingest.store.writelock import EMBED_LOCK, WRITE_LOCK, CollectionLock

    for name in (WRITE_LOCK, EMBED_LOCK):
        lock = CollectionLock(store.lock_path(name), name)
        if not lock.try_acquire():
            return True
        lock.release()
    return False


@contextmanager
def open_toolbox(address: CollectionAddress, budget: int = DEFAULT_BUDGET) -> Iterator[Toolbox]:
    """A started :class:`Toolbox` on the collection, reached the way the mount reaches it.

    An embedded store another process owns (a mount, another ``semfs mcp``) is used through
    its socket. One this process opens is served on the same socket while the block runs,
    so ``semfs ingest`` and other readers keep working (and the tree follows their writes).
    """
    # A mount (or another semfs mcp) that owns the store is used through its socket.
    opened = open_resident(address)
    resident, store = opened.resident, opened.store
    assert resident is not None
    stops: list[Callable[[], None]] = [opened.close]
    try:
        if not store.exists():
            raise StoreNotFoundError(
                f"no collection {address.collection!r} at {store.location}: "
                "run `semfs ingest DIR` first"
            )
        box = Toolbox(opened, budget=budget)
        stops.append(box.close)
        # The dense vectors an ingest left to do, and those of each write (ours or another
        # process's through our socket), when we own the store.
        resident.embed()
        box.writer.on_indexed = resident.changed
        # A `semfs search` beside us runs on our searcher, with our model.
        resident.serve(on_change=box.refresher.wake, searcher=opened.searcher)
        stops.append(resident.stop_serving)
        box.start()
        yield box
    finally:
        for stop in reversed(stops):
            try:
                stop()
            except Exception as exc:
                logger.error("shutting down: %s", exc, exc_info=logger.isEnabledFor(logging.DEBUG))


def tool_request(query: str, **options: Any) -> SearchRequest:
    """The search tool's request (``k``, ``mode``, ``more``); bad input in one line."""
    try:
        return SearchRequest(query, **options)
    except SemfsError as exc:
        raise ToolInputError(str(exc)) from None


def grep_output(res: GrepResult, max_results: int, budget: int) -> ToolOutput:
    """The grep tool's answer: grep's lines, then notes (the limit, a scan), within ``budget``."""
    text = "".join(line + "\n" for line in res.lines)
    hint = "use a narrower path or a more specific pattern"
    data = {
        "matches": res.matched,
        "shown": 0,
        "more": res.limited,
        "pushed_down": res.pushed_down,
        "documents_in_scope": res.documents_in_scope,
        "documents_read": res.documents_read,
        "scan_stopped_at": res.scan_stopped_at,
    }
    text, cut = cap(text, budget - _json_size(data) - 20, hint)
    # The first `shown` lines of the text are grep's; notes in brackets follow.
    data["shown"] = text.count("\n") - (1 if cut else 0)
    notes = _grep_notes(res, max_results)
    if not res.lines:
        notes.insert(0, "no matches")
    if notes and not cut:
        text += "".join(f"[{n}]\n" for n in notes)
    return fit(text, data, budget, hint)


def list_rows(
    node: Node, recursive: bool, pattern: str | None, prefix: str = ""
) -> list[dict[str, Any]]:
    """The list tool's rows below ``node`` (path, type, size), each path after ``prefix`` (a
    collection's folder, on a server of several); ``pattern`` matches names, or with a "/"
    whole paths (the prefix included)."""
    if pattern is not None and not pattern:
        raise ToolInputError("pattern is empty: give a glob such as '*.md', or leave it out")
    entries = list(_entries(node, recursive or pattern is not None))
    if pattern is not None:
        key = (lambda n: prefix + n.path) if "/" in pattern else (lambda n: n.name)
        entries = [n for n in entries if n.kind == FILE and fnmatch.fnmatchcase(key(n), pattern)]
    return [
        {
            "path": prefix + n.path,
            "type": "file" if n.kind == FILE else "directory",
            "size": _size(n),
        }
        for n in entries
    ]


def list_output(rows: list[dict[str, Any]], pattern: str | None, budget: int) -> ToolOutput:
    """The list tool's answer: one line per row (size, path; a directory ends in "/")."""
    lines = [
        f"{row['size']:>10}  {row['path']}{'/' if row['type'] == 'directory' else ''}"
        for row in rows
    ]
    if not lines:
        lines = ["(no entries)" if pattern is None else f"(no files match {pattern!r})"]
    return fit(
        "\n".join(lines) + "\n",
        {"entries": rows},
        budget,
        "list a subdirectory, drop recursive, or give a narrower pattern",
    )


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
