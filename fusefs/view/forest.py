"""One mount of several collections: each collection's tree a top-level folder.

``semfs mount MNT --collections docs,code`` shows ``MNT/docs/`` and ``MNT/code/``, each the
tree of its own collection (its own store, model and owner). A :class:`Forest` is the
:class:`~semfs.fusefs.view.tree.Tree` the mount's callbacks and the view's folders read: an
immutable snapshot of its collections' trees, one swapped at a time (:meth:`Forest.replaced`)
as that collection's refresher publishes. Everything below a collection's folder is that
collection's tree, its paths prefixed with the collection's name; the root lists the
collections. A node's ``doc`` stays its collection's record (the path its store knows):
:meth:`Forest.part` says which collection a mount path belongs to, so the mount reads the
file from that collection's store.

The folders of the view run on the forest as on one tree: ``MNT/.search/Q/`` searches every
collection, ``MNT/docs/.search/Q/`` (and below) only ``docs``, through :class:`ForestSearch`,
which runs each collection's own searcher and merges their hits as
:func:`semfs.ingest.search.several.merge_hits` does: the first hit is the first of the
nearest collection (the cosines of its nearest chunk and documents, by its own model), or in a
keyword search the one whose best match scores highest by BM25 with the IDF of all the
collections together; the others follow on match strength.
``.similar`` stays inside the document's own collection (its vectors are its model's), and the
root ``.map.md`` names each collection with its size and kind (:meth:`ForestSearch.about`).

Rules a caller may rely on:

* Inode numbers are unique across the mount and stable for its life: a collection's own
  number ``n`` is ``n * (C + 1) + i + 1`` for the ``i``-th of ``C`` collections; the root is 1.
* A hit's path, a link's target and a results file name a document by its mount path
  (``docs/guide/setup.md``), whichever folder it was searched from.
* Looking a path up twice in one snapshot gives the same node (the callbacks compare them).

No FUSE here: tested without a mount (tests/unit/view/test_forest.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from semfs.fusefs.view.searchdir import SearchFunction
from semfs.fusefs.view.similardir import SimilarFunction
from semfs.fusefs.view.tree import DIR, DIR_MODE, ROOT_INO, FileIds, Node, Tree, node_attrs
from semfs.ingest.request import SearchRequest
from semfs.ingest.store.schema import ChunkRecord

if TYPE_CHECKING:
    from semfs.ingest.search import Hit, Standing

# Whether a tree shown now holds a document's version (path, gen): the searches' filter.
Committed = Callable[[str, int], bool]

# Share of a collection's documents that are programs' source above which it is "code",
# below which (one minus it) "prose"; between, both.
CODE_SHARE = 0.7


class Forest(Tree):
    """The trees of several collections, each under a top-level folder named after it.

    ``trees`` maps each collection's name to its tree, in the order the collections were
    named (the root lists them sorted, as any folder). Immutable: :meth:`replaced` makes the
    snapshot with one collection's new tree.
    """

    def __init__(self, trees: Mapping[str, Tree], ids: FileIds) -> None:
        # Not Tree.__init__: a forest has no records of its own, only its trees'.
        self.trees: Mapping[str, Tree] = MappingProxyType(dict(trees))
        self.ids = ids
        self.files = sum(t.files for t in self.trees.values())
        self.total_bytes = sum(t.total_bytes for t in self.trees.values())
        self._index = {name: i for i, name in enumerate(self.trees)}
        self._stride = len(self.trees) + 1
        self._nodes: dict[str, Node] = {}

    def replaced(self, name: str, tree: Tree) -> Forest:
        """This forest with ``tree`` as collection ``name``'s."""
        return Forest({**self.trees, name: tree}, self.ids)

    def part(self, path: str) -> tuple[str, str] | None:
        """The collection a mount path is in and the path inside it (``docs/a/b.md`` ->
        ``("docs", "a/b.md")``, ``docs`` -> ``("docs", "")``); None for the root or a path
        in no collection."""
        name, _, rest = path.partition("/")
        return (name, rest) if name in self._index else None

    # -- the Tree interface ---------------------------------------------------------------

    def lookup(self, path: str) -> Node | None:
        node = self._nodes.get(path)
        if node is not None:
            return node
        if not path:
            node = self._root_node()
        else:
            found = self.part(path)
            if found is None:
                return None
            name, rest = found
            inner = self.trees[name].lookup(rest)
            if inner is None:
                return None
            node = self._wrap(name, inner)
        return self._nodes.setdefault(path, node)

    def _root_node(self) -> Node:
        mtimes = [t.root.attrs["st_mtime"] for t in self.trees.values()]
        attrs = node_attrs(
            ROOT_INO, DIR_MODE, 2 + len(self.trees), 0, max(mtimes, default=0), self.ids
        )
        roots = {name: self.trees[name].root for name in sorted(self.trees)}
        children = _Entries(self, "", roots)
        return Node(DIR, "", ROOT_INO, attrs, children=children)

    def _wrap(self, name: str, inner: Node) -> Node:
        """``inner`` (a node of collection ``name``'s tree) as the forest shows it."""
        path = f"{name}/{inner.path}" if inner.path else name
        ino = inner.ino * self._stride + self._index[name] + 1
        attrs = MappingProxyType({**inner.attrs, "st_ino": ino})
        children = inner.children
        if inner.kind == DIR:
            children = _Entries(self, path, inner.children)
        return replace(inner, path=path, ino=ino, attrs=attrs, children=children)

    def shown(self, path: str) -> str:
        found = self.part(path)
        if found is None:
            return path
        name, rest = found
        return f"{name}/{self.trees[name].shown(rest)}"

    def shows(self, path: str, gen: int) -> bool:
        found = self.part(path)
        return found is not None and self.trees[found[0]].shows(found[1], gen)

    def readable_by_all(self, path: str) -> bool:
        if not path:
            return all(t.readable_by_all("") for t in self.trees.values())
        found = self.part(path)
        return found is None or self.trees[found[0]].readable_by_all(found[1])

    def warm(self) -> None:
        for tree in self.trees.values():
            tree.warm()

    def paths(self) -> Iterator[str]:
        for name, tree in self.trees.items():
            yield from (f"{name}/{p}" for p in tree.paths())

    def __len__(self) -> int:
        return 1 + sum(len(t) for t in self.trees.values())

    @functools.cached_property
    def documents_below(self) -> Mapping[str, int]:
        return _CountsBelow(self)

    def nodes(self) -> Iterable[Node]:
        out = [self.root]
        for name, tree in self.trees.items():
            out += [self._existing(_join(name, n.path)) for n in tree.nodes()]
        return out

    def _existing(self, path: str) -> Node:
        node = self.lookup(path)
        assert node is not None
        return node


def _join(name: str, path: str) -> str:
    return f"{name}/{path}" if path else name


class _Entries(Mapping[str, Node]):
    """A forest folder's entries by name: ``inner``'s (its collection's folder's entries, or
    the collections' roots), looked up in the forest when asked for."""

    __slots__ = ("_forest", "_inner", "_path")

    def __init__(self, forest: Forest, path: str, inner: Mapping[str, Node]) -> None:
        self._forest = forest
        self._path = path
        self._inner = inner

    def __getitem__(self, name: str) -> Node:
        path = f"{self._path}/{name}" if self._path else name
        node = self._forest.lookup(path) if name in self._inner else None
        if node is None:
            raise KeyError(name)
        return node

    def __iter__(self) -> Iterator[str]:
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)

    def __contains__(self, name: object) -> bool:
        return name in self._inner


class _CountsBelow(Mapping[str, int]):
    """Each forest folder's documents at and below it (the root's: every collection's)."""

    def __init__(self, forest: Forest) -> None:
        self._forest = forest

    def __getitem__(self, folder: str) -> int:
        trees = self._forest.trees
        if not folder:
            return sum(t.documents_below.get("", 0) for t in trees.values())
        found = self._forest.part(folder)
        if found is None:
            raise KeyError(folder)
        return trees[found[0]].documents_below[found[1]]

    def __iter__(self) -> Iterator[str]:
        yield ""
        for name, tree in self._forest.trees.items():
            yield from (_join(name, folder) for folder in tree.documents_below)

    def __len__(self) -> int:
        return 1 + sum(len(t.documents_below) for t in self._forest.trees.values())


@dataclass(frozen=True)
class Member:
    """One collection of a forest, as its folders search and describe it: its own searcher
    (store and model), the embedded share while its dense pass runs, its model's name."""

    name: str
    search: SearchFunction
    similar: SimilarFunction
    chunks: Callable[[str, int, list[int]], list[ChunkRecord]]
    meaning: Callable[[str, str | None], str | None] | None = None
    model: Callable[[], str | None] | None = None
    # How well it answers a question on a scale shared with the others (Searcher.standing):
    # who comes first.
    standing: Callable[[SearchRequest], Standing] | None = None


class ForestSearch:
    """The search, ``.similar``, map and meaning functions of a forest's folders: each
    question goes to the collections its folder holds, each searched by its own searcher,
    and comes back with mount paths."""

    def __init__(self, members: Sequence[Member]) -> None:
        self.members = {m.name: m for m in members}

    def _scopes(self, under: str | None) -> list[tuple[Member, str | None]]:
        """The collections a search under ``under`` (a mount path) reaches, each with the
        folder inside it (None: all of it)."""
        if not under:
            return [(m, None) for m in self.members.values()]
        name, _, rest = under.partition("/")
        member = self.members.get(name)
        return [] if member is None else [(member, rest or None)]

    def search(self, request: SearchRequest, committed: Committed | None = None) -> list[Hit]:
        """``request`` over the collections of its folder: the ``k`` best of all, merged as
        :func:`~semfs.ingest.search.several.merge_hits` merges (the first hit of the
        collection that stands best first), each named by its mount path."""
        from semfs.ingest.search.several import merge_hits

        each: dict[str, list[Hit]] = {}
        standing: dict[str, Standing | None] = {}
        scopes = self._scopes(request.under)
        for member, inside in scopes:
            asked = replace(request, under=inside)
            each[member.name] = member.search(asked, committed=_inside(member.name, committed))
            if len(scopes) > 1 and member.standing is not None and each[member.name]:
                standing[member.name] = member.standing(asked)
        return [_prefixed(name, hit) for name, hit in merge_hits(each, request.k, standing)]

    def similar(
        self, path: str, gen: int, request: SearchRequest, committed: Committed | None = None
    ) -> list[Hit]:
        """The documents nearest to ``path`` (a mount path) in its own collection, inside
        ``request.under`` (a mount path): another collection's vectors are another model's."""
        name, _, inner = path.partition("/")
        member = self.members[name]
        under = request.under or ""
        if under and under != name and not under.startswith(name + "/"):
            return []
        inside = under.partition("/")[2] or None
        hits = member.similar(
            inner, gen, replace(request, under=inside), committed=_inside(name, committed)
        )
        return [_prefixed(name, hit) for hit in hits]

    def chunks(self, path: str, gen: int, indexes: list[int]) -> list[ChunkRecord]:
        """A document's chunks by its mount path (the folder maps read titles so)."""
        name, _, inner = path.partition("/")
        return self.members[name].chunks(inner, gen, indexes)

    def meaning(self, mode: str, under: str | None) -> str | None:
        """How much of each collection searched is embedded, while a dense pass runs."""
        scopes = self._scopes(under)
        notes = []
        for member, inside in scopes:
            note = member.meaning(mode, inside) if member.meaning is not None else None
            if note:
                notes.append(f"{member.name}: {note}" if len(self.members) > 1 else note)
        return "; ".join(notes) or None

    def about(self, forest: Forest, folder: str) -> str | None:
        """What the root's map says of a collection's folder: its size, its kind and model."""
        tree = forest.trees.get(folder) if "/" not in folder else None
        if tree is None:
            return None
        member = self.members.get(folder)
        model = member.model() if member is not None and member.model is not None else None
        text = f"collection of {kind_of(tree.paths())}, {_size(tree.total_bytes)}"
        return f"{text}, model {model}" if model else text


def kind_of(paths: Iterable[str]) -> str:
    """What a collection holds, by its documents' names: ``code``, ``prose`` or both."""
    from semfs.ingest.syntax import is_program, language_of

    total = programs = 0
    for path in paths:
        total += 1
        programs += is_program(language_of(path) or "")
    if not total:
        return "nothing yet"
    share = programs / total
    if share >= CODE_SHARE:
        return "code"
    if share <= 1 - CODE_SHARE:
        return "prose"
    return f"code and prose ({share:.0%} code)"


def _size(size: int) -> str:
    """``size`` bytes for people, as `semfs collections list` shows them: ``950 B``,
    ``1.9 MiB``."""
    if size < 1024:
        return f"{size} B"
    scaled, unit = size / 1024, "KiB"
    for larger in ("MiB", "GiB"):
        if scaled < 1024:
            break
        scaled, unit = scaled / 1024, larger
    return f"{scaled:.1f} {unit}"


def _inside(name: str, committed: Committed | None) -> Committed | None:
    """A forest's ``committed`` test asked with collection ``name``'s own paths."""
    if committed is None:
        return None
    return lambda path, gen: committed(f"{name}/{path}", gen)


def _prefixed(name: str, hit: Hit) -> Hit:
    return replace(hit, path=f"{name}/{hit.path}")
