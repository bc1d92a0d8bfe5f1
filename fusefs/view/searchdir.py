"""Search as directories: ``<any dir>/.search/<question>/`` lists the documents that answer it.

The paths below any directory ``D`` of the tree (the folder name ``.search`` is the default;
``semfs mount --search-dir NAME`` changes it)::

    D/.search/                      README.md (the syntax), then recent queries run here,
                                    most recent first
    D/.search/@keyword/@k=3/        parameter folders: options for the queries below them
    D/.search/[@PARAM/...]QUESTION/ a query directory: its name is the query text
        00-results.md               the best answering lines, a ranked list (path, match
                                    strength, title), then more lines that answer
        01-NAME -> ../../PATH       one relative symlink per document, best first

Parameters, chained in any order (a later one wins), are the table of
:mod:`semfs.fusefs.view.parameters`: ``@keyword``, ``@k=N``, ``@min=X``, ``@more``, ...

Rules a caller may rely on:

* The search folder answers a lookup in every directory and is listed in none, so ``ls -a``,
  ``find``, ``grep -r``, ``du`` and ``diff -r`` see exactly the source tree. A real entry of
  the same name in the source wins (choose another ``--search-dir`` then).
* A search under ``D`` returns only documents inside ``D``.
* A name starting with ``.`` is never a query (shells and file managers probe ``.DS_Store``,
  ``._x``, ``.git``): not found. A name starting with ``@`` is a parameter; an invalid one
  (unknown, or a bad value) is not found, and logged once with why (a warning). To search
  for text starting with either, start the name with a space (query text is stripped).
* Every search and parameter folder holds ``README.md``, the syntax (so a query named
  ``README.md`` is that file). The results file is ``00-results.md`` whatever ``k``.
* A search folder lists the recent queries of the user listing it only (:class:`RecentQueries`
  by uid): in a folder shared with ``allow_other``, nobody sees what another user asked.
* A query is one path component, so it cannot hold ``/`` and is at most 255 bytes (NAME_MAX:
  the kernel answers ENAMETOOLONG beyond that before the mount sees the name). Type ``/`` as
  U+2215 DIVISION SLASH or U+FF0F FULLWIDTH SOLIDUS: both are searched as ``/``. Whitespace
  and control characters count as spaces; bytes that are not UTF-8 are replaced.
* Symlink names are the rank (zero-padded to the width of ``k``), a dash and the document's
  file name, cut to fit 255 bytes; targets are relative, so they resolve inside the mount
  wherever it is.

This module never imports FUSE: it turns paths into :class:`semfs.fusefs.view.tree.Node` objects for
:class:`semfs.fusefs.mount.ops.SemfsOperations` and is tested without a mount.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from semfs.ingest.errors import SemfsError
from semfs.ingest.request import SearchRequest
from semfs.ingest.store import MAX_K

# semfs.ingest.search (its results renderer included) imports the Qdrant engine: not needed
# to parse a command line or start a mount, so the renderer is imported where a search runs.
if TYPE_CHECKING:
    from semfs.ingest.search import Hit

from semfs.fusefs.view.parameters import (
    PARAMETER_PREFIX,
    RESULTS_NAME,
    parameter_lines,
    parameter_problem,
    with_parameter,
)
from semfs.fusefs.view.tree import (
    DIR,
    DIR_MODE,
    FILE,
    FILE_MODE,
    NAME_MAX,
    SYMLINK,
    SYMLINK_MODE,
    Node,
    Tree,
    name_too_long,
    node_attrs,
)

logger = logging.getLogger(__name__)

DEFAULT_NAME = ".search"
# Query results kept. An entry holds k passages (~1 kB each) as hits, plus the results file
# (~1.2 kB, ~4 kB with @more, more with @full): ~8 kB at k=5 (the default k is 3), so 256 take
# ~2 MB (~50 MB at k=100 with @full).
DEFAULT_CACHE_ENTRIES = 256
# Queries remembered for listing search folders: a few dozen bytes each.
DEFAULT_RECENT_ENTRIES = 100
# The syntax, listed in every search and parameter folder (a query of that name is shadowed).
README_NAME = "README.md"
# Bad parameter folder names logged, each once: a shell's completion asks again and again.
LOGGED_BAD_PARAMETERS = 256
# Virtual nodes take inode numbers from a hash of their path, in a range the tree's counter
# never reaches: every query ever typed would otherwise grow the mount's InodeMap forever.
_VIRTUAL_INO_BIT = 1 << 62
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Look-alikes of "/" a name can hold: "example.com\u2215docs" is a query for "example.com/docs".
_SLASHES = str.maketrans({"\u2215": "/", "\uff0f": "/"})
# Every entry of a query directory is a rank or zeros, then a dash.
_ENTRY = re.compile(r"[0-9]{2,}-")


class SearchFunction(Protocol):
    """:meth:`semfs.ingest.search.Searcher.search`, or anything called like it."""

    def __call__(
        self, request: SearchRequest, committed: Callable[[str, int], bool] | None = ...
    ) -> list[Hit]: ...


def check_folder_name(name: str) -> str:
    """The search folder name, or SemfsError: one path component, not ``.`` or ``..``."""
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\0" in name
        or name.startswith(PARAMETER_PREFIX)
        or name_too_long(name)
    ):
        raise SemfsError(
            f"invalid search folder name {name!r}: use one file name (not '.' or '..', no '/', "
            f"not starting with {PARAMETER_PREFIX!r}, at most {NAME_MAX} bytes)"
        )
    return name


def query_text(name: str) -> str:
    """The text searched for a query directory name: valid UTF-8, the look-alikes of ``/``
    (U+2215, U+FF0F) as ``/``, whitespace and control characters as single spaces, stripped."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return " ".join(_CONTROL.sub(" ", text.translate(_SLASHES)).split())


@dataclass(frozen=True)
class SearchPath:
    """A path below a search folder, parsed. ``under`` is the directory searched ("" for the
    root); ``params`` the parameter folders as written; ``options`` the request they make of
    the mount's defaults (its query and folder not set: see :meth:`request`); ``query`` the
    query directory's name (None for the search folder or a parameter folder); ``entry`` a
    name inside it."""

    under: str
    folder: str
    params: tuple[str, ...]
    options: SearchRequest
    query: str | None = None
    entry: str | None = None

    def request(self) -> SearchRequest:
        """The search this query directory runs: its options, its text, below its folder."""
        text = query_text(self.query) if self.query is not None else ""
        return replace(self.options, query=text, under=self.under or None)

    def _join(self, *parts: str) -> str:
        return "/".join(p for p in (self.under, self.folder, *parts) if p)

    @property
    def dir_path(self) -> str:
        """The path of the directory named (or holding ``entry``)."""
        return self._join(*self.params, *((self.query,) if self.query is not None else ()))

    @property
    def depth(self) -> int:
        """Components in :attr:`dir_path`: how many ``..`` lead from it to the mount root."""
        return self.dir_path.count("/") + 1


@dataclass(frozen=True)
class QueryResult:
    """One search's outcome, immutable: the hits, their link names (rank order) and the
    rendered results file."""

    text: str
    hits: tuple[Hit, ...]
    names: tuple[str, ...]
    results_name: str
    results_file: bytes
    created: float
    _positions: Mapping[str, int] = field(repr=False, compare=False, default_factory=dict)

    def position(self, name: str) -> int | None:
        """The index in :attr:`hits` of the link called ``name``, or None."""
        return self._positions.get(name)


def results_name(k: int) -> str:
    """``00-results.md`` whatever ``k`` (the README and the guide name it so): it sorts
    before every link, ``001-`` included, as ``-`` sorts before digits."""
    return RESULTS_NAME


def search_readme(folder: str, defaults: SearchRequest) -> bytes:
    """The ``README.md`` of every search folder: the syntax (the parameters with this mount's
    defaults), and why a folder is not found."""
    text = f"""\
# {folder}: search by naming a question

    ls  "{folder}/how do I rotate an api key/"
    cat "{folder}/how do I rotate an api key/{RESULTS_NAME}"

A question folder holds {RESULTS_NAME} (the ranked documents, then the lines that answer)
and links 01-NAME, 02-NAME, ... to the documents, best first. Only documents inside the
folder that holds this {folder} are searched. There is no need to mkdir a question: it
exists as soon as it is named (mkdir -p works; plain mkdir says "File exists").

Options are folders before the question, in any order (a later one wins):

{parameter_lines(defaults)}

    e.g. cat "{folder}/@keyword/@k=3/ERR_TOO_MANY_REDIRECTS/{RESULTS_NAME}"

A folder that is none of these does not exist (No such file or directory): @k=500 (k is
1-{MAX_K}), @min=x (not a number), @bogus (no such option). The mount's log names the folder
and why.

A question is one file name, at most 255 bytes: write "/" as "\u2215" (U+2215). Names
starting with "." are not questions; to search text starting with "." or "@", start the
name with a space. This folder lists the questions asked here lately, newest first, and
this file (a question named {README_NAME} is this file).
"""
    return text.encode()


def results_attrs(
    tree: Tree,
    under: str,
    ino: int,
    mode: int,
    size: int,
    mtime: int | None = None,
    nlink: int = 1,
) -> Mapping[str, int]:
    """The attributes of a node that quotes documents (a search or ``.similar`` folder, its
    results file and links): the mounting user's, and readable by that user alone where some
    document under ``under`` is not readable by every user. The one rule for both folders."""
    when = tree.root.attrs["st_mtime"] if mtime is None else mtime
    if not tree.readable_by_all(under):
        mode &= ~0o077
    return node_attrs(ino, mode, nlink, size, when, tree.ids)


class QueryCache:
    """Query results of one tree, computed once per key even under concurrent lookups.

    Holds at most ``max_entries`` results (least recently used dropped first; default 256,
    ~2.5 MB at the default k, see ``DEFAULT_CACHE_ENTRIES``). Results are
    kept only for the tree last asked about: a lookup with another tree (a refresh after
    `semfs ingest`) drops them all. Callers asking for a key being computed wait for that
    computation; a failed one is not kept, so the next lookup tries again.
    """

    def __init__(self, max_entries: int = DEFAULT_CACHE_ENTRIES) -> None:
        self.max_entries = max_entries
        self.computed = 0
        self._tree: Tree | None = None
        self._entries: OrderedDict[Any, Future[QueryResult]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, tree: Tree, key: Any, compute: Callable[[], QueryResult]) -> QueryResult:
        with self._lock:
            if tree is not self._tree:
                self._tree = tree
                self._entries.clear()
            future = self._entries.get(key)
            first = future is None  # this caller computes it; the others wait for its result
            if future is None:
                future = Future()
                self._entries[key] = future
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
        if first:
            try:
                future.set_result(compute())
                self.computed += 1
            except Exception as exc:
                with self._lock:
                    if self._entries.get(key) is future:
                        del self._entries[key]
                future.set_exception(exc)
        return future.result()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every result (the collection's vectors changed: a dense pass progressed)."""
        with self._lock:
            self._entries.clear()


class RecentQueries:
    """The last ``max_entries`` distinct query directories used, most recent first, by the
    folder they were used in (the folder searched and parameter folders as written) and by who
    used them: a user lists only their own recent queries (``who``: a uid; None, one shared
    list)."""

    def __init__(self, max_entries: int = DEFAULT_RECENT_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[int | None, str, tuple[str, ...], str], None] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def add(self, under: str, params: tuple[str, ...], name: str, who: int | None = None) -> None:
        key = (who, under, params, name)
        with self._lock:
            self._entries[key] = None
            self._entries.move_to_end(key, last=False)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=True)

    def names(self, under: str, params: tuple[str, ...], who: int | None = None) -> list[str]:
        with self._lock:
            return [n for w, s, p, n in self._entries if w == who and s == under and p == params]


class _LazyChildren(Mapping[str, Node]):
    """A directory's entries, built on first use: a query directory's ``getattr`` then costs
    no search, its ``readdir`` one (cached)."""

    def __init__(self, build: Callable[[], Mapping[str, Node]]) -> None:
        self._build = build
        self._built: Mapping[str, Node] | None = None

    def _get(self) -> Mapping[str, Node]:
        if self._built is None:
            self._built = self._build()
        return self._built

    def __getitem__(self, name: str) -> Node:
        return self._get()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def virtual_ino(kind: str, path: str) -> int:
    digest = hashlib.blake2b(f"{kind}\0{path}".encode("utf-8", "surrogateescape"), digest_size=8)
    return _VIRTUAL_INO_BIT | (int.from_bytes(digest.digest(), "little") & (_VIRTUAL_INO_BIT - 1))


class SearchDirectories:
    """Resolves paths below search folders to nodes; thread-safe.

    ``search`` runs a query (normally :meth:`semfs.ingest.search.Searcher.search`); it is called
    with ``committed`` set from the tree, so results name exactly the documents the tree
    shows. Each distinct (under, options, query text) is searched once per tree
    (:class:`QueryCache`); :class:`RecentQueries` remembers what to list in search folders.
    """

    def __init__(
        self,
        search: SearchFunction,
        folder: str = DEFAULT_NAME,
        defaults: SearchRequest | None = None,
        cache_entries: int = DEFAULT_CACHE_ENTRIES,
        recent_entries: int = DEFAULT_RECENT_ENTRIES,
    ) -> None:
        self.search = search
        self.folder = check_folder_name(folder)
        self.defaults = defaults or SearchRequest()
        self.cache = QueryCache(cache_entries)
        self.recent = RecentQueries(recent_entries)
        # A line for every results file, asked when a search runs (a watched mount's
        # "index as of HH:MM:SS, N changes pending"); None adds nothing.
        self.status_line: Callable[[], str | None] | None = None
        # The line a results file gets while some chunks have no dense vector yet, by mode
        # and folder (Searcher.meaning_note); None adds nothing.
        self.meaning: Callable[[str, str | None], str | None] | None = None
        # The uid of the user whose request is running (the mount asks libfuse): recent
        # queries are kept per user, so a shared folder does not list others' questions.
        self.caller: Callable[[], int | None] = lambda: None
        self.readme = search_readme(self.folder, self.defaults)
        self._bad_logged: OrderedDict[str, None] = OrderedDict()
        self._bad_lock = threading.Lock()

    # -- paths ----------------------------------------------------------------------------

    def parse(self, tree: Tree, rel: str) -> SearchPath | None:
        """The search path ``rel`` names, or None when it names none (not found)."""
        parts = rel.split("/") if rel else []
        for i, part in enumerate(parts):
            if part != self.folder:
                continue
            under = "/".join(parts[:i])
            if tree.lookup("/".join(parts[: i + 1])) is not None:
                continue  # a real entry of that name: the source's, not ours
            under_node = tree.lookup(under)
            if under_node is None or under_node.kind != DIR:
                return None
            return self._parse_below(under, parts[i + 1 :])
        return None

    def _parse_below(self, under: str, rest: list[str]) -> SearchPath | None:
        options = self.defaults
        params: list[str] = []
        while rest and rest[0].startswith(PARAMETER_PREFIX):
            changed = with_parameter(options, rest[0])
            if changed is None:
                self._log_bad_parameter(rest[0])
                return None
            options = changed
            params.append(rest.pop(0))
        sp = SearchPath(under, self.folder, tuple(params), options)
        if not rest:
            return sp
        if len(rest) > 2 or not rest[0] or rest[0].startswith("."):
            return None
        if len(rest) == 2 and not _ENTRY.match(rest[1]):
            return None  # no entry is named so: answer without searching
        return replace(sp, query=rest[0], entry=rest[1] if len(rest) == 2 else None)

    def _log_bad_parameter(self, name: str) -> None:
        """One log line per bad parameter folder name: the kernel only hears ENOENT."""
        with self._bad_lock:
            if name in self._bad_logged:
                return
            self._bad_logged[name] = None
            while len(self._bad_logged) > LOGGED_BAD_PARAMETERS:
                self._bad_logged.popitem(last=False)
        logger.warning(
            "%s/%s: not found: %s (see %s/%s)",
            self.folder,
            name,
            parameter_problem(name),
            self.folder,
            README_NAME,
        )

    # -- searching ------------------------------------------------------------------------

    def results(self, tree: Tree, sp: SearchPath) -> QueryResult:
        """The result of the query directory ``sp`` names, from the cache or searched now.

        Raises whatever the search raises (a store failure): the caller reports it.
        """
        assert sp.query is not None
        request = sp.request()
        result = self.cache.get(tree, request, lambda: self._run(tree, request))
        self.recent.add(sp.under, sp.params, sp.query, self.caller())
        return result

    def _run(self, tree: Tree, request: SearchRequest) -> QueryResult:
        from semfs.ingest.search.results import link_names, results_file, with_status_line

        started = time.perf_counter()
        hits = tuple(self.search(request, committed=tree.shows)) if request.text else ()
        names = link_names(hits, request.k, tree.shown)
        logger.debug(
            "search %r (%s): %d documents in %.1f ms",
            request.text,
            request.describe(),
            len(hits),
            (time.perf_counter() - started) * 1000,
        )
        return QueryResult(
            text=request.text,
            hits=hits,
            names=names,
            results_name=results_name(request.k),
            results_file=with_status_line(
                results_file(request, hits, names),
                self._status(request.mode, request.under),
            ),
            created=time.time(),
            _positions=MappingProxyType({n: i for i, n in enumerate(names)}),
        )

    def _status(self, mode: str, under: str | None) -> str | None:
        """The lines under a results file's title: freshness, and how much is embedded."""
        lines = [
            self.status_line() if self.status_line is not None else None,
            self.meaning(mode, under) if self.meaning is not None else None,
        ]
        return "\n".join(line for line in lines if line) or None

    # -- nodes ----------------------------------------------------------------------------

    def resolve(self, tree: Tree, rel: str) -> Node | None:
        """The node at ``rel`` below a search folder, or None. An entry of a query directory
        runs its search (cached); the query directory itself only when listed."""
        sp = self.parse(tree, rel)
        if sp is None:
            return None
        if sp.query is None:
            return self._folder_node(tree, sp)
        if sp.query == README_NAME:
            return self._readme_node(tree, sp) if sp.entry is None else None
        if sp.entry is None:
            return self._query_node(tree, sp)
        return self._entry_node(tree, sp, self.results(tree, sp), sp.entry)

    def _dir_node(
        self, tree: Tree, sp: SearchPath, path: str, children: Mapping[str, Node]
    ) -> Node:
        ino = virtual_ino(DIR, path)
        attrs = results_attrs(tree, sp.under, ino, DIR_MODE, 0, nlink=2)
        return Node(DIR, path, ino, attrs, children=children)

    def _folder_node(self, tree: Tree, sp: SearchPath) -> Node:
        """A search or parameter folder: lists the queries recently used in it."""

        who = self.caller()  # the lister: listings are built in its request

        def build() -> Mapping[str, Node]:
            names = self.recent.names(sp.under, sp.params, who)
            queries = {n: self._query_node(tree, replace(sp, query=n)) for n in names}
            return {README_NAME: self._readme_node(tree, sp), **queries}

        return self._dir_node(tree, sp, sp.dir_path, _LazyChildren(build))

    def _readme_node(self, tree: Tree, sp: SearchPath) -> Node:
        path = sp._join(*sp.params, README_NAME)
        ino = virtual_ino(FILE, path)
        data = self.readme
        return Node(
            FILE, path, ino, results_attrs(tree, sp.under, ino, FILE_MODE, len(data)), data=data
        )

    def _query_node(self, tree: Tree, sp: SearchPath) -> Node:
        def build() -> Mapping[str, Node]:
            result = self.results(tree, sp)
            names = (result.results_name, *result.names)
            return {n: node for n in names if (node := self._entry_node(tree, sp, result, n))}

        return self._dir_node(tree, sp, sp.dir_path, _LazyChildren(build))

    def _entry_node(
        self, tree: Tree, sp: SearchPath, result: QueryResult, name: str
    ) -> Node | None:
        path = f"{sp.dir_path}/{name}"
        mtime = round(result.created * 1e9)
        if name == result.results_name:
            ino = virtual_ino(FILE, path)
            data = result.results_file
            return Node(
                FILE,
                path,
                ino,
                results_attrs(tree, sp.under, ino, FILE_MODE, len(data), mtime),
                data=data,
            )
        index = result.position(name)
        if index is None:
            return None
        target = "../" * sp.depth + tree.shown(result.hits[index].path)
        ino = virtual_ino(SYMLINK, path)
        size = len(target.encode("utf-8", "surrogateescape"))
        return Node(
            SYMLINK,
            path,
            ino,
            results_attrs(tree, sp.under, ino, SYMLINK_MODE, size, mtime),
            target=target,
        )
