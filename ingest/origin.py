"""Which folder a collection mirrors: recorded at its first ingest, checked at every one.

An ingest makes a collection mirror its source, so ingesting another folder into it would
delete every document the collection holds. The store's meta therefore records the source
folder (:attr:`StoreMeta.source`: its absolute path, and the device and inode of the folder
itself), and :func:`claim_source` decides, before anything is read or written:

* the same path: the same source (even if the folder was re-created: the path is what the
  user names); its device and inode are brought up to date;
* another path to the same folder (same device and inode) while the recorded path no longer
  leads to it: the folder moved; it is followed, with a note, and the new path recorded;
* another path to the same folder while the old path still leads to it (a symlink, a bind
  mount): the same source, nothing recorded;
* any other folder, into a collection that holds documents: :class:`SourceMismatchError`,
  one line naming the collection, its source and what to do (``--replace`` to mirror the
  new folder, ``-c NAME`` for another collection), unless ``replace`` is asked for;
* a store without a record (new, or written before sources were recorded): the source is
  recorded.

One collection mirrors one folder. Several sources per collection (``semfs ingest A B``) were
left out on purpose: document paths are relative to the source, so two sources would need a
top folder each, a watcher each and a rule for when one of them is missing; one collection
per folder, each with its own mount, gives the same with nothing new to learn.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from semfs.ingest.errors import SourceMismatchError
from semfs.ingest.store import DEFAULT_COLLECTION
from semfs.ingest.store.schema import StoreMeta


@dataclass(frozen=True)
class SourceIdentity:
    """A source folder: its absolute path (symlinks kept, as the user named it), and the
    device and inode of the folder it leads to."""

    path: str
    dev: int
    ino: int

    @classmethod
    def of(cls, source: Path) -> SourceIdentity:
        st = os.stat(source)
        return cls(os.path.abspath(source), st.st_dev, st.st_ino)

    def same_folder(self, dev: int | None, ino: int | None) -> bool:
        return (self.dev, self.ino) == (dev, ino)


@dataclass(frozen=True)
class Claim:
    """What :func:`claim_source` decided: the source fields the meta should hold after this
    run, and a note for the user (a folder that moved, a source replaced), if any."""

    source: SourceIdentity
    note: str | None = None
    replaced: bool = False

    def changes(self, meta: StoreMeta | None) -> bool:
        """Whether the meta must be written for the record to be current."""
        return meta is None or (meta.source, meta.source_dev, meta.source_ino) != (
            self.source.path,
            self.source.dev,
            self.source.ino,
        )


def claim_source(
    meta: StoreMeta | None,
    source: Path,
    collection: str,
    *,
    replace: bool = False,
) -> Claim:
    """Whether ``source`` may be ingested into the collection whose meta is ``meta``
    (None: a new collection); raises :class:`SourceMismatchError` when it is another
    folder and ``replace`` is not asked for. ``source`` must exist (check it first)."""
    here = SourceIdentity.of(source)
    old = meta.source if meta is not None else None
    if meta is None or old is None or old == here.path:
        return Claim(here)
    if here.same_folder(meta.source_dev, meta.source_ino):
        if _still_there(old, meta):
            return Claim(SourceIdentity(old, here.dev, here.ino))
        return Claim(here, note=f"the source folder moved from {old} to {here.path}; following it")
    if meta.documents == 0:  # nothing to lose
        return Claim(here, note=f"the collection was empty: now mirroring {here.path}")
    if replace:
        return Claim(here, note=f"replacing the source {old} with {here.path}", replaced=True)
    pick = "" if collection == DEFAULT_COLLECTION else f" -c {collection}"
    command = f"semfs ingest {shlex.quote(here.path)}{pick} --replace"
    raise SourceMismatchError(
        f"collection {collection!r} mirrors {old}, not {here.path}: to mirror {here.path} "
        f"instead (deleting what is not in it), run `{command}`; or use -c NAME for another "
        "collection",
        old,
        here.path,
    )


def _still_there(path: str, meta: StoreMeta) -> bool:
    """Whether the recorded path still leads to the recorded folder."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (meta.source_dev, meta.source_ino)
