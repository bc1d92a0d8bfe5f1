"""The directory tree a mount shows: an immutable snapshot built from the document records.

A :class:`Tree` is built from :meth:`semfs.ingest.store.Store.list_documents` alone (one scroll,
no chunks read), so mounting and refreshing stay cheap. Directories are inferred from the
document paths. A text view's record (a PDF's ``report.pdf.md``) shows two files: the view,
and the original at its own path, served from its stored bytes
(:meth:`DocumentRecord.original_record`); a tree built with ``views=False`` shows the
originals only, as the source folder has them. A refresh builds a whole new tree and swaps
it in with one assignment, so a callback sees either the old tree or the new one, never a
mix.

Inode numbers come from an :class:`InodeMap` that outlives the trees: a path keeps its
number across refreshes for the life of the mount.

A mount's first tree comes from the store's manifest (:meth:`Tree.from_manifest`), indexed
on its sorted path column: a folder's entries are found by bisection when it is first looked
up or listed, and a document's record is made when its file is, so the first ``ls`` of a
100k-document mount does not wait for 100k records, a dict of them and an inode entry each.
"""

from __future__ import annotations

import functools
import logging
import stat
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from semfs.ingest.limits import NAME_MAX
from semfs.ingest.store.schema import DirectoryRecord, DocumentRecord

if TYPE_CHECKING:
    from semfs.ingest.store.manifest import Manifest

logger = logging.getLogger(__name__)

# Node kinds. A kind decides which callbacks a node answers (read for files, readdir for
# directories, readlink for symlinks); virtual kinds can be added beside these.
FILE = "file"
DIR = "dir"
SYMLINK = "symlink"

ROOT_INO = 1
FILE_MODE = stat.S_IFREG | 0o444
DIR_MODE = stat.S_IFDIR | 0o555
SYMLINK_MODE = stat.S_IFLNK | 0o777

# Of a recorded source mode, what the mount serves: read and execute, never write or set-id.
SERVED_BITS = 0o555
_EMPTY: Mapping[str, Node] = MappingProxyType({})


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """One entry of a tree. ``path`` is relative, '/'-separated; the root's is ``""``.

    ``attrs`` is the stat dict ``getattr`` returns (times in ns); callers must not mutate it.
    """

    kind: str
    path: str
    ino: int
    attrs: Mapping[str, int]
    doc: DocumentRecord | None = None  # FILE: the committed version shown
    children: Mapping[str, Node] = field(default_factory=lambda: _EMPTY)  # DIR: name -> node
    target: str = ""  # SYMLINK: what readlink returns
    data: bytes | None = None  # FILE without a doc: a virtual file's bytes (search results)

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]


class InodeMap:
    """(kind, path) -> inode number, stable for the life of the mount. Thread-safe.

    Grows by one small entry per distinct (kind, path) ever shown and never shrinks, so a
    document that disappears and comes back keeps its number; a path that changes kind
    (file -> directory) gets a new one. 100k paths cost about 15 MB.
    """

    def __init__(self) -> None:
        self._inos: dict[tuple[str, str], int] = {(DIR, ""): ROOT_INO}
        self._next = ROOT_INO + 1
        self._lock = threading.Lock()
        # Blocks numbered without an entry per path (see reserve): (first number, sorted
        # files, sorted folders). Each holds lists a tree holds anyway, never copies.
        self._blocks: list[tuple[int, Sequence[str], Sequence[str]]] = []

    def get(self, kind: str, path: str) -> int:
        key = (kind, path)
        ino = self._inos.get(key)
        if ino is not None:
            return ino
        reserved = self._reserved(kind, path)
        if reserved is not None:
            return reserved  # no entry: the block answers for it as long as the map lives
        with self._lock:
            ino = self._inos.setdefault(key, self._next)
            if ino == self._next:
                self._next += 1
            return ino

    def assign(self, keys: Iterable[tuple[str, str]]) -> None:
        """Number the new ``keys`` in order, under one lock (a tree's build at 10k files)."""
        with self._lock:
            inos, at = self._inos, self._next
            for key in keys:
                if key not in inos and self._reserved(*key) is None:
                    inos[key] = at
                    at += 1
            self._next = at

    def numbered(self, kind: str, path: str, reserved: int) -> int:
        """The number of a path of a block :meth:`reserve` gave ``reserved`` to (its own, if
        it had one before), without looking for it in the blocks again."""
        return self._inos.get((kind, path), reserved)

    def reserve(self, files: Sequence[str], folders: Sequence[str]) -> int:
        """Number ``files`` then ``folders`` (each sorted, no repeats) as one block, each path
        by its position, found by bisection when asked for (no entry per path: 100k cost
        ~15 MB), so a tree made lazily numbers its nodes the same whatever order they are
        looked up in. Paths numbered already keep their numbers."""
        with self._lock:
            first = self._next
            self._blocks.append((first, files, folders))
            self._next += len(files) + len(folders)
            return first

    def _reserved(self, kind: str, path: str) -> int | None:
        for first, files, folders in self._blocks:
            if kind == FILE:
                at = _position(files, path)
            elif kind == DIR:
                at = _position(folders, path)
                at = None if at is None else len(files) + at
            else:
                return None
            if at is not None:
                return first + at
        return None

    def __len__(self) -> int:
        return len(self._inos) + sum(len(f) + len(d) for _, f, d in self._blocks)


def _position(items: Sequence[str], item: str) -> int | None:
    """Where ``item`` is in the sorted ``items``, or None."""
    at = bisect_left(items, item)
    return at if at < len(items) and items[at] == item else None


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def valid_path(path: str) -> bool:
    """A relative path with no empty, '.' or '..' component (anything else cannot be shown)."""
    if not path or "\0" in path:
        return False
    # Three scans in C instead of a split (a tree's build checks every path).
    framed = f"/{path}/"
    return "//" not in framed and "/./" not in framed and "/../" not in framed


@dataclass(frozen=True)
class FileIds:
    """The uid and gid a file is shown with (the mounting user's, where none is recorded), and
    the fallback time for empty dirs. ("Owner" in semfs is the process that owns a store.)"""

    uid: int
    gid: int
    mounted_at: float = field(default_factory=time.time)


class Tree:
    """An immutable snapshot of the collection as directories and files.

    Lookups are one dict access by relative path. Build with :meth:`build`, which indexes
    the paths only: a node is made when first looked up or listed (a mount's first ``ls``
    at 10k files would otherwise wait for 10k nodes it does not show). Inode numbers are
    taken at build, so they do not depend on the order of lookups. Thread-safe: two callers
    making the same node keep the first one stored.
    """

    def __init__(
        self,
        docs: Mapping[str, DocumentRecord],
        dirs: Mapping[str, list[str]],
        inodes: InodeMap,
        ids: FileIds,
        newest: Mapping[str, float],
        recorded: Mapping[str, DirectoryRecord],
        guarded: frozenset[str] | Callable[[], frozenset[str]] = frozenset(),
        originals: Mapping[str, str] | None = None,
        total_bytes: int | None = None,
        blobs: frozenset[str] = frozenset(),
    ) -> None:
        self._docs = docs
        self._dirs = dirs  # folder -> its children's paths
        self._inodes = inodes
        self._newest = newest  # folder -> its newest document's mtime
        self._recorded = recorded  # folder -> its record, when it has one
        self._nodes: dict[str, Node] = {}
        self.files = len(docs)
        if total_bytes is None:
            total_bytes = sum(r.size for r in docs.values())
        self.total_bytes = total_bytes
        self.ids = ids
        # Directories with something below them that other users may not read (or what
        # finds them, run on first use).
        self._guarded_of = guarded
        # Hidden text view -> its original (views=False): what a search hit points to.
        self._originals: Mapping[str, str] = originals or {}
        self._blobs = blobs  # the originals' records (their bytes are blob parts)

    def warm(self) -> None:
        """Make now what this tree would make on first use, in bulk: the records of a tree
        from a manifest (:meth:`from_manifest`). Raises ValueError as a lookup would."""
        docs = self._docs
        if isinstance(docs, _SortedDocs):
            docs.warm()

    @functools.cached_property
    def _guarded(self) -> frozenset[str]:
        guarded = self._guarded_of
        return guarded if isinstance(guarded, frozenset) else guarded()

    def shown(self, path: str) -> str:
        """Where this tree shows the document ``path`` (a store path): itself, or for a text
        view the tree hides, its original."""
        return self._originals.get(path, path)

    def shows(self, path: str, gen: int) -> bool:
        """Whether this tree shows version ``gen`` of the document ``path`` (a text view it
        hides counts as its original, same gen): the ``committed`` test of a search over it,
        so results name exactly the documents the tree shows."""
        node = self.lookup(self.shown(path))
        return node is not None and node.doc is not None and node.doc.gen == gen

    def readable_by_all(self, path: str) -> bool:
        """Whether any user may read everything at and below the directory ``path``
        (what a search there could show them): every file o+r, every folder o+rx."""
        return path not in self._guarded

    @property
    def root(self) -> Node:
        root = self.lookup("")
        assert root is not None
        return root

    def lookup(self, path: str) -> Node | None:
        """The node at a relative path (``""`` is the root), or None."""
        node = self._nodes.get(path)
        if node is not None:
            return node
        docs = self._docs
        if type(docs) is _SortedDocs:  # one bisection finds the record and its number
            at = docs.position(path)
            rec = None if at is None else docs.record(at)
            ino = 0 if at is None else self._inodes.numbered(FILE, path, docs.first + at)
        else:
            rec = docs.get(path)
            ino = 0 if rec is None else self._inodes.get(FILE, path)
        if rec is not None:
            node = Node(FILE, path, ino, _file_attrs(ino, rec, self.ids), doc=rec)
        elif path in self._dirs:
            node = self._folder(path)
        else:
            return None
        return self._nodes.setdefault(path, node)

    def _folder(self, path: str) -> Node:
        ino = self._inodes.get(DIR, path)
        dirs = self._dirs
        if isinstance(dirs, _SortedFolders):  # its files are found when it is listed
            subdirs = len(dirs.subfolders(path))
        else:
            subdirs = sum(1 for c in dirs[path] if c in dirs)
        folder = self._recorded.get(path)
        if folder is not None:
            attrs = node_attrs(
                ino,
                stat.S_IFDIR | (folder.mode & SERVED_BITS),
                2 + subdirs,
                0,
                folder.mtime_ns,
                FileIds(folder.uid, folder.gid),
            )
        else:
            mtime = self._newest.get(path, self.ids.mounted_at)
            attrs = _dir_attrs(ino, subdirs, mtime, self.ids)
        return Node(DIR, path, ino, attrs, children=_Children(self, path))

    def __len__(self) -> int:
        return len(self._docs) + len(self._dirs)

    @functools.cached_property
    def documents_below(self) -> Mapping[str, int]:
        """Each folder's number of documents at and below it (the root's is ""), made once
        per tree, on first use (a folder map asks): a converted file and its text view count
        once. One step per document and folder above it."""
        originals = set(self._originals.values())  # shown without their views
        direct: dict[str, int] = {}
        for path in self._docs:
            if path in self._blobs and path not in originals:
                continue  # its view is shown and counted
            parent = path.rpartition("/")[0]
            direct[parent] = direct.get(parent, 0) + 1
        below = dict.fromkeys(self._dirs, 0)
        for folder, n in direct.items():
            up = folder
            while True:
                below[up] = below.get(up, 0) + n
                if not up:
                    break
                up = up.rpartition("/")[0]
        return MappingProxyType(below)

    def paths(self) -> Iterable[str]:
        """Every document's path (a converted file's original and text view both), in order."""
        return iter(self._docs)

    def nodes(self) -> Iterable[Node]:
        """Every node, the root included (for comparing two snapshots)."""
        return [self._existing(p) for p in (*self._docs, *self._dirs)]

    def _existing(self, path: str) -> Node:
        node = self.lookup(path)
        assert node is not None
        return node

    @classmethod
    def build(
        cls,
        records: Iterable[DocumentRecord],
        inodes: InodeMap,
        ids: FileIds,
        folders: Iterable[DirectoryRecord] = (),
        views: bool = True,
    ) -> Tree:
        """The tree of ``records``, plus the recorded ``folders`` (empty ones included).

        A file or folder with a recorded mode is served with that mode minus write (and
        minus set-id bits) and its recorded uid and gid; without one, 0444/0555 and ``ids``.
        A text view's original is shown beside it; ``views=False`` hides the views.
        """
        hidden: dict[str, str] = {}
        blobs: set[str] = set()
        docs = _usable(_with_originals(records, views, hidden, blobs))
        dirs: dict[str, list[str]] = {"": []}
        # Each folder's newest document mtime: per direct parent first (one step a document),
        # then up each folder's ancestors (one step a folder, not one per document and depth).
        newest: dict[str, float] = {}
        for path, rec in docs.items():
            parent = path.rpartition("/")[0]
            mtime = newest.get(parent)
            if mtime is None or rec.mtime > mtime:
                newest[parent] = rec.mtime
        for direct, mtime in list(newest.items()):
            dirs.setdefault(direct, [])
            up = direct
            while up:
                up = up.rpartition("/")[0]
                dirs.setdefault(up, [])
                above = newest.get(up)
                if above is None or mtime > above:
                    newest[up] = mtime
        recorded: dict[str, DirectoryRecord] = {}
        for rec_dir in folders:
            if rec_dir.path and (not valid_path(rec_dir.path) or rec_dir.path in docs):
                continue  # a file of that name wins: it is what a reader came for
            recorded[rec_dir.path] = rec_dir
            parts = rec_dir.path.split("/") if rec_dir.path else []
            for depth in range(len(parts) + 1):
                dirs.setdefault("/".join(parts[:depth]), [])
        for path in docs:
            dirs[path.rpartition("/")[0]].append(path)
        # Deepest first: the order an eager build numbered them in (files, then folders).
        folder_order = sorted(dirs, key=lambda p: p.count("/") + bool(p), reverse=True)
        for path in folder_order:
            if path:
                dirs[path.rpartition("/")[0]].append(path)
        inodes.assign([(FILE, p) for p in docs] + [(DIR, p) for p in folder_order])
        guarded = _guarded(docs, recorded)
        blobs_shown = frozenset(blobs)
        return cls(docs, dirs, inodes, ids, newest, recorded, guarded, hidden, None, blobs_shown)

    @classmethod
    def from_manifest(
        cls, manifest: Manifest, inodes: InodeMap, ids: FileIds, views: bool = True
    ) -> Tree:
        """The tree :meth:`build` makes of the manifest's records and folders, the same node
        for node, but indexed on the manifest's sorted path column: no record, dict entry or
        inode entry per document until its file or folder is looked up or listed. Numbers
        come from one block reserved in ``inodes`` (by position, so they do not depend on
        the order of lookups either). A manifest with anything the index does not cover (a
        text view's original, an unusable or clashing path) is built by :meth:`build`."""
        columns = manifest.columns
        folders = None if columns is None else _plain_folders(columns)
        if columns is None or folders is None:
            return cls.build(manifest.documents, inodes, ids, manifest.directories, views)
        paths = columns.paths
        recorded: dict[str, DirectoryRecord] = {}
        for rec_dir in manifest.directories:
            path = rec_dir.path
            if path and (not valid_path(path) or _position(paths, path) is not None):
                return cls.build(manifest.documents, inodes, ids, manifest.directories, views)
            recorded[path] = rec_dir
            _add_with_ancestors(folders, path)
        in_order = sorted(folders)
        first = inodes.reserve(paths, in_order)

        def guarded() -> frozenset[str]:  # on first use: a search or a folder map asks
            modes = columns.column("mode")
            private = [paths[i] for i, m in enumerate(modes) if m is not None and not m & 0o004]
            return _guarded_folders(private, recorded)

        return cls(
            _SortedDocs(paths, columns.record, columns.records, first),
            _SortedFolders(paths, in_order, folders),
            inodes,
            ids,
            _NewestBelow(paths, lambda: columns.column("mtime")),
            recorded,
            guarded,
            total_bytes=sum(columns.column("size")),
        )


def _with_originals(
    records: Iterable[DocumentRecord], views: bool, hidden: dict[str, str], blobs: set[str]
) -> Iterator[DocumentRecord]:
    """``records`` and the record of each text view's original; without ``views`` the
    originals only (``hidden`` gets view -> original for each view left out, ``blobs`` the
    originals' paths)."""
    for rec in records:
        if rec.original is None:
            yield rec
            continue
        original = rec.original_record()
        if original is not None:
            blobs.add(original.path)
            yield original
        if rec.as_is:  # a file stored as it is: itself, no view
            continue
        if views:
            yield rec
        elif original is not None:
            hidden[rec.path] = original.path


class _Children(Mapping[str, Node]):
    """A folder's entries by name, sorted, made on first use (see :class:`Tree`)."""

    __slots__ = ("_made", "_path", "_tree")

    def __init__(self, tree: Tree, path: str) -> None:
        self._tree: Tree | None = tree
        self._path = path  # the folder's
        self._made: Mapping[str, Node] | None = None

    def _entries(self) -> Mapping[str, Node]:
        made = self._made
        if made is None:
            tree = self._tree
            assert tree is not None
            nodes = (tree._existing(p) for p in tree._dirs[self._path])
            made = MappingProxyType(dict(sorted((n.name, n) for n in nodes)))
            self._made, self._tree = made, None  # the tree is only needed until then
        return made

    def __getitem__(self, name: str) -> Node:
        return self._entries()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        tree = self._tree
        return len(self._entries() if tree is None else tree._dirs[self._path])

    def __contains__(self, name: object) -> bool:
        return name in self._entries()

    def __repr__(self) -> str:
        return f"_Children({dict(self._entries())!r})"


def _guarded(
    docs: Mapping[str, DocumentRecord], recorded: Mapping[str, DirectoryRecord]
) -> frozenset[str]:
    """The folders with a file below them that is not o+r, or a folder that is not o+rx
    (themselves included): what :meth:`Tree.readable_by_all` answers, without the nodes."""
    private = [p for p, r in docs.items() if r.mode is not None and not r.mode & 0o004]
    return _guarded_folders(private, recorded)


def _guarded_folders(
    private: Iterable[str], recorded: Mapping[str, DirectoryRecord]
) -> frozenset[str]:
    """What :func:`_guarded` answers, given the paths of the files that are not o+r."""
    hidden = [p.rpartition("/")[0] for p in private]
    hidden += [p for p, f in recorded.items() if f.mode & 0o005 != 0o005]
    guarded: set[str] = set()
    for start in hidden:
        path = start
        while path not in guarded:  # a guarded folder's ancestors are guarded already
            guarded.add(path)
            if not path:
                break
            path = path.rpartition("/")[0]
    return frozenset(guarded)


def _usable(records: Iterable[DocumentRecord]) -> dict[str, DocumentRecord]:
    """The records a tree can show, by path; a bad or clashing path is logged and left out."""
    docs: dict[str, DocumentRecord] = {}
    for rec in records:
        if valid_path(rec.path):
            docs[rec.path] = rec
        else:
            logger.warning("not showing document with unusable path %r", rec.path)
    # Each document's folder, then each folder's ancestors once (not once per document).
    dir_paths = {path.rpartition("/")[0] for path in docs}
    for start in list(dir_paths):
        folder = start
        while folder:
            folder = folder.rpartition("/")[0]
            if folder in dir_paths:
                break  # its ancestors are in already, or will be when it is walked
            dir_paths.add(folder)
    for clash in sorted(dir_paths & docs.keys()):
        # Cannot come from one source directory; a directory wins over a file of its name.
        logger.warning("not showing document %r: a directory has the same path", clash)
        del docs[clash]
    return dict(sorted(docs.items()))


@functools.lru_cache(maxsize=64)
def _file_ids(uid: int, gid: int) -> FileIds:
    # One per uid and gid, not one per file: a tree of 10k files builds this 10k times.
    return FileIds(uid, gid)


def _file_attrs(ino: int, rec: DocumentRecord, ids: FileIds) -> Mapping[str, int]:
    if rec.mode is None:
        return node_attrs(ino, FILE_MODE, 1, rec.size, rec.st_mtime_ns, ids)
    who = _file_ids(
        ids.uid if rec.uid is None else rec.uid, ids.gid if rec.gid is None else rec.gid
    )
    mode = stat.S_IFREG | (rec.mode & SERVED_BITS)
    return node_attrs(ino, mode, 1, rec.size, rec.st_mtime_ns, who)


def document_attrs(ino: int, rec: DocumentRecord, ids: FileIds) -> Mapping[str, int]:
    """The stat a file node of ``rec`` (any version of a document) shows."""
    return _file_attrs(ino, rec, ids)


def _dir_attrs(ino: int, subdirs: int, mtime_s: float, ids: FileIds) -> Mapping[str, int]:
    return node_attrs(ino, DIR_MODE, 2 + subdirs, 0, _ns(mtime_s), ids)


def name_too_long(name: str) -> bool:
    """Whether a file name exceeds NAME_MAX bytes (what statfs promises, and Linux's limit)."""
    return len(name.encode("utf-8", "surrogateescape")) > NAME_MAX


def node_attrs(
    ino: int, mode: int, nlink: int, size: int, mtime_ns: int, ids: FileIds
) -> Mapping[str, int]:
    """The stat fields of any node, real or virtual (search results): one shape for all."""
    attrs: dict[str, Any] = {
        "st_ino": ino,
        "st_mode": mode,
        "st_nlink": nlink,
        "st_size": size,
        "st_blocks": (size + 511) // 512,
        "st_uid": ids.uid,
        "st_gid": ids.gid,
        "st_mtime": mtime_ns,
        "st_ctime": mtime_ns,
        "st_atime": mtime_ns,
    }
    return MappingProxyType(attrs)


# -- the index of a manifest's sorted path column (Tree.from_manifest) -----------------------


def _plain_folders(columns: Any) -> set[str] | None:
    """The folders of a manifest's documents (their ancestors included), when its sorted path
    column is all a tree shows, one file per path: no text view's original to add, every path
    usable, strictly increasing, none also a folder. Else None: :meth:`Tree.build` decides.
    A few passes in C over the paths, and one set comprehension."""
    paths: list[str] = columns.paths
    originals = columns.column("original")
    if originals.count(None) != len(originals):
        return None
    if not all(map(str.__lt__, paths, islice(paths, 1, None))):
        return None
    # valid_path for every path at once: each one framed "/…/", joined by NULs (which no
    # usable path holds: a NUL inside one makes the count differ).
    framed = "/" + "/\0/".join(paths) + "/"
    if paths and (
        framed.count("\0") != len(paths) - 1
        or "//" in framed
        or "/./" in framed
        or "/../" in framed
    ):
        return None
    folders = {path.rpartition("/")[0] for path in paths}
    for start in list(folders):
        _add_with_ancestors(folders, start)
    folders.add("")
    if not folders.isdisjoint(paths):
        return None  # a directory wins over a file of its name: build() logs which
    return folders


def _add_with_ancestors(folders: set[str], path: str) -> None:
    folders.add(path)
    while path:
        path = path.rpartition("/")[0]
        if path in folders:
            break  # its ancestors are in already, or will be when it is walked
        folders.add(path)


def _range(items: Sequence[str], folder: str) -> tuple[int, int]:
    """Where the sorted ``items`` below ``folder`` are: those starting ``folder/`` sort
    between ``folder/`` and ``folder0`` ('0' follows '/'); for the root, all of them."""
    if not folder:
        return 0, len(items)
    return bisect_left(items, folder + "/"), bisect_left(items, folder + "0")


def _direct(items: Sequence[str], folder: str) -> list[str]:
    """The sorted ``items`` directly in ``folder``: one step each, and one bisection past
    each subfolder's items (a root of 1,000 folders of 100 files: 1,000 steps, not 100k)."""
    lo, hi = _range(items, folder)
    cut = len(folder) + 1 if folder else 0
    out = []
    while lo < hi:
        item = items[lo]
        slash = item.find("/", cut)
        if slash >= 0:
            lo = bisect_left(items, item[:slash] + "0", lo + 1, hi)
        else:
            if item:  # the root itself, among the folders
                out.append(item)
            lo += 1
    return out


class _SortedDocs(Mapping[str, DocumentRecord]):
    """Path -> record over a sorted path column, the record made when asked for."""

    __slots__ = ("_paths", "first", "record", "warm")

    def __init__(
        self,
        paths: Sequence[str],
        record: Callable[[int], DocumentRecord],
        warm: Callable[[], object],
        first: int,
    ) -> None:
        self._paths = paths
        self.record = record  # by position
        self.warm = warm  # makes every record now
        self.first = first  # the inode number of the first path (InodeMap.reserve)

    def position(self, path: str) -> int | None:
        return _position(self._paths, path)

    def __getitem__(self, path: str) -> DocumentRecord:
        at = _position(self._paths, path)
        if at is None:
            raise KeyError(path)
        return self.record(at)

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and _position(self._paths, path) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


class _SortedFolders(Mapping[str, list[str]]):
    """Folder -> its entries' paths (files, then folders), found when asked for."""

    __slots__ = ("_folders", "_in_order", "_paths")

    def __init__(self, paths: Sequence[str], in_order: list[str], folders: set[str]) -> None:
        self._paths = paths
        self._in_order = in_order  # sorted
        self._folders = folders

    def __getitem__(self, folder: str) -> list[str]:
        if folder not in self._folders:
            raise KeyError(folder)
        return _direct(self._paths, folder) + self.subfolders(folder)

    def subfolders(self, folder: str) -> list[str]:
        return _direct(self._in_order, folder)

    def __contains__(self, folder: object) -> bool:
        return folder in self._folders

    def __iter__(self) -> Iterator[str]:
        return iter(self._in_order)

    def __len__(self) -> int:
        return len(self._in_order)


class _NewestBelow(Mapping[str, float]):
    """Folder -> the newest mtime of the documents at and below it (one max over the slice
    of the mtime column below it, in C); a folder with none is not in it."""

    __slots__ = ("_mtimes", "_paths")

    def __init__(self, paths: Sequence[str], mtimes: Callable[[], Sequence[float]]) -> None:
        self._paths = paths
        self._mtimes = mtimes  # the column, asked for only by a folder without a record

    def __getitem__(self, folder: str) -> float:
        lo, hi = _range(self._paths, folder)
        if lo >= hi:
            raise KeyError(folder)
        return max(self._mtimes()[lo:hi])

    def __iter__(self) -> Iterator[str]:
        raise NotImplementedError("a folder's newest mtime is asked for, never listed")

    def __len__(self) -> int:
        raise NotImplementedError("a folder's newest mtime is asked for, never counted")
