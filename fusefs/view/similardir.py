"""Documents like one document: ``D/.similar/PATH/`` is a search folder for ``D/PATH``.

``PATH`` is a document below the directory ``D`` (as ``ls`` shows it, folders included), and
the folder holds what a ``.search`` question folder holds: ``00-results.md`` (the nearest
documents under ``D``, ranked, with their lines that share words with the document's title
and description) and links ``01-NAME``, ... to them. The query is the mean of the document's
first chunks' dense vectors, read from the store (:meth:`semfs.ingest.store.Store.
chunk_vectors`): no model runs, so it answers before the model is loaded.

Like ``.search``, the folder is listed nowhere and a real entry of that name wins; the folders
on the way to a document (``.similar/deploy/``) exist and list nothing. Results are cached per
tree (the mount's query cache), so a refresh that changes the collection asks again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from semfs.fusefs.view.parameters import RESULTS_NAME
from semfs.fusefs.view.searchdir import (
    QueryCache,
    QueryResult,
    _LazyChildren,
    results_attrs,
    virtual_ino,
)
from semfs.fusefs.view.tree import (
    DIR,
    DIR_MODE,
    FILE,
    FILE_MODE,
    SYMLINK,
    SYMLINK_MODE,
    Node,
    Tree,
)
from semfs.ingest.request import SearchRequest

if TYPE_CHECKING:
    from semfs.ingest.search import Hit

SIMILAR_NAME = ".similar"
_EMPTY: Mapping[str, Node] = MappingProxyType({})


class SimilarFunction(Protocol):
    """:meth:`semfs.ingest.search.Searcher.similar`, or anything called like it."""

    def __call__(
        self,
        path: str,
        gen: int,
        request: SearchRequest,
        committed: Callable[[str, int], bool] | None = ...,
    ) -> list[Hit]: ...


class SimilarDirectories:
    """Resolves paths below ``.similar`` folders to nodes; thread-safe."""

    def __init__(
        self,
        similar: SimilarFunction,
        defaults: SearchRequest | None = None,
        folder: str = SIMILAR_NAME,
    ) -> None:
        self.similar = similar
        self.folder = folder
        self.k = (defaults or SearchRequest()).k
        self.cache = QueryCache()

    def resolve(self, tree: Tree, rel: str) -> Node | None:
        parts = rel.split("/") if rel else []
        if self.folder not in parts:
            return None
        i = parts.index(self.folder)
        here = "/".join(parts[: i + 1])
        if tree.lookup(here) is not None:
            return None  # a real entry of that name: the source's
        under = "/".join(parts[:i])
        under_node = tree.lookup(under)
        if under_node is None or under_node.kind != DIR:
            return None
        rest = parts[i + 1 :]
        doc: Node | None = None
        taken = 0
        for taken in range(1, len(rest) + 1):
            node = tree.lookup("/".join(p for p in (under, *rest[:taken]) if p))
            if node is None:
                return None
            if node.kind == FILE:
                doc = node
                break
        if doc is None:  # the folder, or a folder on the way to a document: lists nothing
            return self._dir(tree, under, rel, _EMPTY)
        if doc.doc is None or doc.doc.blob:
            return None  # an original's neighbours are its text view's: ask for that one
        entry = rest[taken:]
        if not entry:
            return self._dir(
                tree,
                under,
                rel,
                _LazyChildren(lambda: self._entries(tree, under, rel, doc)),
            )
        if len(entry) == 1:
            query_dir = "/".join(parts[: i + 1 + taken])
            return self._entries(tree, under, query_dir, doc).get(entry[0])
        return None

    def _result(self, tree: Tree, under: str, doc: Node) -> QueryResult:
        rec = doc.doc
        assert rec is not None

        # The documents like this one: its vectors, as a meaning-only search. Named by its
        # path in the mount (a mount of several collections: its collection's name first).
        request = SearchRequest(doc.path, k=self.k, mode="semantic", under=under or None)

        def run() -> QueryResult:
            # The renderer's package loads the Qdrant engine: not at a mount's start.
            from semfs.ingest.search.results import link_names, similar_file

            hits = tuple(self.similar(doc.path, rec.gen, request, committed=tree.shows))
            names = link_names(hits, self.k, tree.shown)
            return QueryResult(
                text=doc.path,
                hits=hits,
                names=names,
                results_name=RESULTS_NAME,
                results_file=similar_file(request, hits, names),
                created=time.time(),
                _positions=MappingProxyType({n: i for i, n in enumerate(names)}),
            )

        return self.cache.get(tree, (under, doc.path, rec.gen), run)

    def _entries(self, tree: Tree, under: str, rel: str, doc: Node) -> Mapping[str, Node]:
        result = self._result(tree, under, doc)
        mtime = round(result.created * 1e9)
        out: dict[str, Node] = {}
        path = f"{rel}/{RESULTS_NAME}"
        ino = virtual_ino(FILE, path)
        data = result.results_file
        out[RESULTS_NAME] = Node(
            FILE, path, ino, results_attrs(tree, under, ino, FILE_MODE, len(data), mtime), data=data
        )
        depth = rel.count("/") + 1
        for name, hit in zip(result.names, result.hits, strict=True):
            path = f"{rel}/{name}"
            target = "../" * depth + tree.shown(hit.path)
            ino = virtual_ino(SYMLINK, path)
            size = len(target.encode("utf-8", "surrogateescape"))
            attrs = results_attrs(tree, under, ino, SYMLINK_MODE, size, mtime)
            out[name] = Node(SYMLINK, path, ino, attrs, target=target)
        return out

    def _dir(self, tree: Tree, under: str, rel: str, children: Mapping[str, Node]) -> Node:
        ino = virtual_ino(DIR, rel)
        return Node(
            DIR, rel, ino, results_attrs(tree, under, ino, DIR_MODE, 0, nlink=2), children=children
        )
