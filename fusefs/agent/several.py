"""Several collections as one set of agent tools: ``semfs mcp --collections docs,code``.

:class:`SeveralToolbox` answers the same tools as :class:`~semfs.fusefs.agent.toolbox.Toolbox`,
over one Toolbox per collection (each its own store, model and owner: an
:class:`~semfs.ingest.opened.Opened` each), shown as one tree whose top-level folders are the
collections, as one mount of them shows them (``MNT/docs/``, ``MNT/code/``).

Rules a caller may rely on:

* A path's first part names its collection (``docs/guide/keys.md``); ``""`` is the root, whose
  entries are the collections. Each tool also takes ``collection``: then its path is inside that
  collection (``collection="docs", path="guide"`` is ``path="docs/guide"``).
* ``search`` at the root searches every collection, each with its own searcher, and merges the
  hits as ``semfs search -c docs -c code`` does (:func:`~semfs.ingest.search.several.merge_hits`:
  the nearest collection's first hit first, in a keyword search the best match by BM25 with
  the IDF of all of them, the rest on match strength; a collection a token sees only in part
  takes no part in who comes first); each hit's path begins with its
  collection, and ``details`` names it.
  ``grep``, ``list`` and ``status`` at the root cover every collection, in the order given.
* A scope (a token's ``under``) is folders of this tree: ``docs`` is the whole of ``docs``,
  ``code/src`` a folder of ``code``. A collection outside it does not exist for the caller: no
  answer, count, name or error tells it apart from one the server does not serve.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from semfs.fusefs.agent import DEFAULT_BUDGET
from semfs.fusefs.agent.grep import DEFAULT_MAX_RESULTS, GrepResult, normalize_path, resolve
from semfs.fusefs.agent.toolbox import (
    SEARCH_HINT,
    Found,
    Scope,
    Toolbox,
    ToolOutput,
    fit,
    grep_output,
    list_output,
    list_rows,
    open_toolbox,
    tool_request,
)
from semfs.ingest.errors import PathError, SemfsError, ToolInputError
from semfs.ingest.search.several import merge_hits, prefixed
from semfs.ingest.store.address import CollectionAddress


def within(scope: Scope, name: str) -> Scope | None:
    """``scope`` (folders of the tree of several) as collection ``name``'s own folders: ``()``
    for all of it, None when it sees nothing of it."""
    if not scope or name in scope:
        return ()
    inner = tuple(f[len(name) + 1 :] for f in scope if f.startswith(name + "/"))
    return inner or None


class SeveralToolbox:
    """The tools over several collections, each a top-level folder (see the module's rules)."""

    several = True

    def __init__(self, boxes: Mapping[str, Toolbox], budget: int = DEFAULT_BUDGET) -> None:
        if not boxes:
            raise SemfsError("no collection to serve")
        self.boxes = dict(boxes)
        for name, box in self.boxes.items():
            box.prefix = name + "/"
        self.budget = budget

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.boxes)

    @property
    def writable(self) -> bool:
        return all(box.writable for box in self.boxes.values())

    @writable.setter
    def writable(self, value: bool) -> None:
        for box in self.boxes.values():
            box.writable = value

    def close(self) -> None:
        for box in self.boxes.values():
            box.close()

    # -- where a call goes --------------------------------------------------------------------

    def visible(self, scope: Scope) -> dict[str, Scope]:
        """The collections ``scope`` sees, each with its own part of the scope."""
        seen = {name: within(scope, name) for name in self.boxes}
        return {name: inner for name, inner in seen.items() if inner is not None}

    def _target(
        self, path: str, options: dict[str, Any]
    ) -> tuple[str | None, str, dict[str, Scope]]:
        """(the collection a call names or None for the root, the path inside it, the
        collections the caller sees), its ``collection`` and ``scope`` taken from ``options``
        (what is left is the Toolbox's)."""
        collection: str | None = options.pop("collection", None)
        seen = self.visible(options.pop("scope", ()))
        if not seen:  # a token for collections this server does not serve
            raise ToolInputError("this token sees no collection of this server")
        rel = normalize_path(path)
        if collection is not None:
            if collection not in seen:
                raise ToolInputError(
                    f"no collection {collection!r} here: give one of {', '.join(seen)}"
                )
            return collection, rel, seen
        if not rel:
            return None, "", seen
        first, _, rest = rel.partition("/")
        if first not in seen:
            raise PathError(
                f"no such file or directory: {rel!r} (a path begins with its collection: "
                f"{', '.join(seen)})"
            )
        return first, rest, seen

    @staticmethod
    def _named(name: str, rel: str, call: Any) -> Any:
        """``call()``, its errors naming the path as this tree shows it (``docs/guide``)."""
        try:
            return call()
        except SemfsError as exc:
            shown = f"{name}/{rel}" if rel else name
            text = str(exc).replace(repr(rel or "/"), repr(shown)).replace(repr(rel), repr(shown))
            raise type(exc)(text) from None

    # -- tools --------------------------------------------------------------------------------

    # Each tool takes the Toolbox's parameters (``options``: those passed on as they are),
    # ``collection`` (see the module's rules) and ``scope`` (folders of this tree).

    def search(
        self, query: str, path: str = "", details: bool = False, **options: Any
    ) -> ToolOutput:
        """``options``: the request's (``k``, ``mode``, ``more``), ``collection``, ``scope``."""
        name, rel, seen = self._target(path, options)
        request = tool_request(query, **options)
        names = [name] if name is not None else list(seen)
        found: dict[str, Found] = {
            n: self._named(n, rel, lambda n=n: self.boxes[n].find(request, rel, seen[n]))
            for n in names
        }
        # Who comes first: the first hit of the collection that stands best (merge_hits), by
        # each one's own model or keywords; not a collection the caller sees only part of
        # (that would measure the rest).
        standing = {
            n: self.boxes[n].opened.searcher.standing(f.request)
            if len(found) > 1 and f.hits and not seen[n]
            else None
            for n, f in found.items()
        }
        merged = merge_hits({n: f.hits for n, f in found.items()}, request.k, standing)
        shown = prefixed(merged)
        # Where it looked, as this tree names it: each collection (or a token's folders in it).
        places: list[str] = []
        notes: list[str] = []
        for n, f in found.items():
            under = f.request.under
            places += [f"{n}/{d}/" for d in f.folders] or [f"{n}/{under}/" if under else f"{n}/"]
            # While its dense pass is under way: how much of it is embedded.
            note = (
                self.boxes[n].opened.meaning_note(request.mode, under or None)
                if f.counted
                else None
            )
            if note:
                notes.append(f"{n}: {note}" if len(found) > 1 else note)
        text = (
            self.boxes[names[0]]
            .opened.results_text(
                request,
                shown,
                where="in " + ", ".join(places),
                tools=True,
                status="\n".join(notes) or None,
                meaning=False,
            )
            .decode("utf-8", "surrogateescape")
        )
        data = {"results": [{**h.to_json(), "collection": n} for n, h in merged]} if details else {}
        return fit(text, data, self.budget, SEARCH_HINT)

    def read(self, path: str, **options: Any) -> ToolOutput:
        """``options``: Toolbox.read's (``start_line``, ``end_line``, ``pages``),
        ``collection``, ``scope``."""
        name, rel, seen = self._target(path, options)
        if name is None:
            raise ToolInputError("'/' is a directory (its folders are the collections): use list")
        box = self.boxes[name]
        return self._named(name, rel, lambda: box.read(rel, scope=seen[name], **options))

    def grep(
        self, pattern: str, path: str = "", max_results: int = DEFAULT_MAX_RESULTS, **options: Any
    ) -> ToolOutput:
        """``options``: Toolbox.grep's (``regex``, ``ignore_case``), ``collection``, ``scope``."""
        name, rel, seen = self._target(path, options)
        names = [name] if name is not None else list(seen)
        total = GrepResult(lines=[], pushed_down=True)
        for n in names:
            box, inner = self.boxes[n], seen[n]
            left = max_results - total.matched
            # Past the limit: does the next collection hold a match too (then say "more")?
            res: GrepResult = self._named(
                n,
                rel,
                lambda box=box, inner=inner, left=left: box.grep_engine.run(
                    box.scoped_tree(inner),
                    pattern,
                    rel,
                    max_results=max(left, 1),
                    scope=inner,
                    **options,
                ),
            )
            if left <= 0:
                total.limited = total.limited or bool(res.lines)
                break
            if res.lines and total.lines and options.get("context"):
                total.lines.append("--")  # grep -C's separator, between collections too
            total.lines += [line if line == "--" else f"{n}/{line}" for line in res.lines]
            total.matched += res.matched
            total.limited = total.limited or res.limited
            total.pushed_down = total.pushed_down and res.pushed_down
            total.documents_in_scope += res.documents_in_scope
            total.documents_read += res.documents_read
            if res.scan_stopped_at is not None and total.scan_stopped_at is None:
                total.scan_stopped_at = f"{n}/{res.scan_stopped_at}"
        return grep_output(total, max_results, self.budget)

    def list(self, path: str = "", map: bool = False, page: int = 1, **options: Any) -> ToolOutput:
        """``options``: Toolbox.list's (``recursive``, ``pattern``), ``collection``, ``scope``."""
        name, rel, seen = self._target(path, options)
        recursive, pattern = options.pop("recursive", False), options.pop("pattern", None)
        if name is not None:
            box = self.boxes[name]
            if map:
                return self._named(
                    name, rel, lambda: box.list(rel, map=True, page=page, scope=seen[name])
                )
            node = self._named(name, rel, lambda: resolve(box.scoped_tree(seen[name]), rel))
            return list_output(
                list_rows(node, recursive, pattern, prefix=f"{name}/"), pattern, self.budget
            )
        if map:
            return self._map(seen, page)
        rows: list[dict[str, Any]] = []
        for n, inner in seen.items():
            if pattern is None:
                rows.append({"path": n, "type": "directory", "size": 0})
            if recursive or pattern is not None:
                root = self.boxes[n].scoped_tree(inner).root
                rows += list_rows(root, recursive, pattern, prefix=f"{n}/")
        return list_output(rows, pattern, self.budget)

    def _map(self, seen: Mapping[str, Scope], page: int) -> ToolOutput:
        """The root's map: each collection the caller sees, with its documents, size and
        model (a collection's own map: list(path=NAME, map=true))."""
        if page != 1:
            raise ToolInputError(f"the map of '/' has no page {page}")
        lines = ["# The collections (each a folder; list(path=NAME, map=true) maps one)", ""]
        rows = []
        for n, inner in seen.items():
            box = self.boxes[n]
            tree = box.scoped_tree(inner)
            meta = box.store.read_meta()
            model = meta.model if meta else None
            rows.append({"collection": n, "documents": tree.files, "bytes": tree.total_bytes})
            lines.append(
                f"- {n}/: {tree.files} documents, {tree.total_bytes:,} bytes"
                + (f", model {model}" if model else "")
            )
        return fit("\n".join(lines) + "\n", {"path": "", "collections": rows}, self.budget, "")

    def status(self, collection: str | None = None, scope: Scope = ()) -> ToolOutput:
        name, _, seen = self._target("", {"collection": collection, "scope": scope})
        if name is not None:
            return self.boxes[name].status(scope=seen[name], named=scope)
        each = [self.boxes[n].status(scope=inner, named=scope) for n, inner in seen.items()]
        text = "\n".join(out.text for out in each)
        return fit(text, {"collections": [out.data for out in each]}, self.budget, "")

    def write(self, path: str, text: str, **options: Any) -> ToolOutput:
        """``options``: Toolbox.write's ``mode``, ``collection``, ``scope``."""
        name, rel, seen = self._target(path, options)
        if name is None or not rel:
            raise PathError(
                f"{path!r}: write a file inside a collection (COLLECTION/PATH): {', '.join(seen)}"
            )
        box = self.boxes[name]
        return self._named(name, rel, lambda: box.write(rel, text, scope=seen[name], **options))


@contextmanager
def open_toolboxes(
    addresses: Sequence[CollectionAddress], budget: int = DEFAULT_BUDGET
) -> Iterator[SeveralToolbox]:
    """A :class:`SeveralToolbox` of ``addresses``' collections, each opened as
    :func:`~semfs.fusefs.agent.toolbox.open_toolbox` opens one (its own store, model and
    owner), all closed when the block ends."""
    with ExitStack() as stack:
        boxes = {a.collection: stack.enter_context(open_toolbox(a, budget)) for a in addresses}
        yield SeveralToolbox(boxes, budget)
