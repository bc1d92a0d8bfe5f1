"""The directory tree a mount shows: an immutable snapshot built from the document records.

A :class:`Tree` is built from :meth:`ingest.store.Store.list_documents` alone (one scroll,
no chunks read), so mounting and refreshing stay cheap. Directories are inferred from the
document paths. A refresh builds a whole new tree and swaps it in with one assignment, so a
callback sees either the old tree or the new one, never a mix.

Inode numbers come from an :class:`InodeMap` that outlives the trees: a path keeps its
number across refreshes for the life of the mount.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ingest.schema import DirectoryRecord, DocumentRecord

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
NAME_MAX = 255  # bytes in one file name: statfs promises it, lookups and search names keep it
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

    def get(self, kind: str, path: str) -> int:
        key = (kind, path)
        ino = self._inos.get(key)
        if ino is not None:
            return ino
        with self._lock:
            ino = self._inos.setdefault(key, self._next)
            if ino == self._next:
                self._next += 1
            return ino

    def __len__(self) -> int:
        return len(self._inos)


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def valid_path(path: str) -> bool:
    """A relative path with no empty, '.' or '..' component (anything else cannot be shown)."""
    if not path or "\0" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


@dataclass(frozen=True)
class Ownership:
    """Who the files belong to (the mounting user) and the fallback time for empty dirs."""

    uid: int
    gid: int
    mounted_at: float = field(default_factory=time.time)


class Tree:
    """An immutable snapshot of the collection as directories and files.

    Lookups are one dict access by relative path. Build with :meth:`build`.
    """

    def __init__(
        self,
        nodes: Mapping[str, Node],
        files: int,
        total_bytes: int,
        owner: Ownership | None = None,
        guarded: frozenset[str] = frozenset(),
    ) -> None:
        self._nodes = nodes
        self.files = files
        self.total_bytes = total_bytes
        self.owner = owner or Ownership(os.getuid(), os.getgid())
        # Directories with something below them that other users may not read.
        self._guarded = guarded

    def readable_by_all(self, path: str) -> bool:
        """Whether any user may read everything at and below the directory ``path``
        (what a search there could show them): every file o+r, every folder o+rx."""
        return path not in self._guarded

    @property
    def root(self) -> Node:
        return self._nodes[""]

    def lookup(self, path: str) -> Node | None:
        """The node at a relative path (``""`` is the root), or None."""
        return self._nodes.get(path)

    def __len__(self) -> int:
        return len(self._nodes)

    def nodes(self) -> Iterable[Node]:
        """Every node, the root included (for comparing two snapshots)."""
        return self._nodes.values()

    @classmethod
    def build(
        cls,
        records: Iterable[DocumentRecord],
        inodes: InodeMap,
        owner: Ownership,
        folders: Iterable[DirectoryRecord] = (),
    ) -> Tree:
        """The tree of ``records``, plus the recorded ``folders`` (empty ones included).

        A file or folder with a recorded mode is served with that mode minus write (and
        minus set-id bits) and its recorded owner; without one, 0444/0555 and ``owner``.
        """
        docs = _usable(records)
        dirs: dict[str, dict[str, Node]] = {"": {}}
        # Each folder's newest document mtime: per direct parent first (one step a document),
        # then up each folder's ancestors (one step a folder, not one per document and depth).
        newest: dict[str, float] = {}
        for path, rec in docs.items():
            parent = path.rpartition("/")[0]
            mtime = newest.get(parent)
            if mtime is None or rec.mtime > mtime:
                newest[parent] = rec.mtime
        for direct, mtime in list(newest.items()):
            dirs.setdefault(direct, {})
            up = direct
            while up:
                up = up.rpartition("/")[0]
                dirs.setdefault(up, {})
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
                dirs.setdefault("/".join(parts[:depth]), {})
        nodes: dict[str, Node] = {}
        guarded: set[str] = set()
        for path, rec in docs.items():
            ino = inodes.get(FILE, path)
            node = Node(FILE, path, ino, _file_attrs(ino, rec, owner), doc=rec)
            nodes[path] = node
            dirs[path.rpartition("/")[0]][node.name] = node
        # Deepest first, so every directory's subdirectories exist before it does.
        for path in sorted(dirs, key=lambda p: p.count("/") + bool(p), reverse=True):
            children = dirs[path]
            subdirs = sum(1 for c in children.values() if c.kind == DIR)
            ino = inodes.get(DIR, path)
            folder = recorded.get(path)
            if folder is not None:
                attrs = node_attrs(
                    ino,
                    stat.S_IFDIR | (folder.mode & SERVED_BITS),
                    2 + subdirs,
                    0,
                    folder.mtime_ns,
                    Ownership(folder.uid, folder.gid),
                )
            else:
                attrs = _dir_attrs(ino, subdirs, newest.get(path, owner.mounted_at), owner)
            kids = MappingProxyType(dict(sorted(children.items())))
            node = Node(DIR, path, ino, attrs, children=kids)
            nodes[path] = node
            if attrs["st_mode"] & 0o005 != 0o005 or any(
                c.path in guarded or (c.kind == FILE and not c.attrs["st_mode"] & 0o004)
                for c in children.values()
            ):
                guarded.add(path)
            if path:
                dirs[path.rpartition("/")[0]][node.name] = node
        return cls(
            MappingProxyType(nodes),
            len(docs),
            sum(r.size for r in docs.values()),
            owner,
            frozenset(guarded),
        )


def _usable(records: Iterable[DocumentRecord]) -> dict[str, DocumentRecord]:
    """The records a tree can show, by path; a bad or clashing path is logged and left out."""
    docs: dict[str, DocumentRecord] = {}
    for rec in records:
        if valid_path(rec.path):
            docs[rec.path] = rec
        else:
            logger.warning("not showing document with unusable path %r", rec.path)
    dir_paths: set[str] = set()
    for path in docs:
        parent = path
        while parent:
            parent = parent.rpartition("/")[0]
            dir_paths.add(parent)
    for clash in sorted(dir_paths & docs.keys()):
        # Cannot come from one source directory; a directory wins over a file of its name.
        logger.warning("not showing document %r: a directory has the same path", clash)
        del docs[clash]
    return dict(sorted(docs.items()))


@functools.lru_cache(maxsize=64)
def _file_owner(uid: int, gid: int) -> Ownership:
    # One per owner, not one per file: a tree of 10k files builds this 10k times.
    return Ownership(uid, gid)


def _file_attrs(ino: int, rec: DocumentRecord, owner: Ownership) -> Mapping[str, int]:
    if rec.mode is None:
        return node_attrs(ino, FILE_MODE, 1, rec.size, rec.st_mtime_ns, owner)
    who = _file_owner(
        owner.uid if rec.uid is None else rec.uid, owner.gid if rec.gid is None else rec.gid
    )
    mode = stat.S_IFREG | (rec.mode & SERVED_BITS)
    return node_attrs(ino, mode, 1, rec.size, rec.st_mtime_ns, who)


def _dir_attrs(ino: int, subdirs: int, mtime_s: float, owner: Ownership) -> Mapping[str, int]:
    return node_attrs(ino, DIR_MODE, 2 + subdirs, 0, _ns(mtime_s), owner)


def name_too_long(name: str) -> bool:
    """Whether a file name exceeds NAME_MAX bytes (what statfs promises, and Linux's limit)."""
    return len(name.encode("utf-8", "surrogateescape")) > NAME_MAX


def node_attrs(
    ino: int, mode: int, nlink: int, size: int, mtime_ns: int, owner: Ownership
) -> Mapping[str, int]:
    """The stat fields of any node, real or virtual (search results): one shape for all."""
    attrs: dict[str, Any] = {
        "st_ino": ino,
        "st_mode": mode,
        "st_nlink": nlink,
        "st_size": size,
        "st_blocks": (size + 511) // 512,
        "st_uid": owner.uid,
        "st_gid": owner.gid,
        "st_mtime": mtime_ns,
        "st_ctime": mtime_ns,
        "st_atime": mtime_ns,
    }
    return MappingProxyType(attrs)
