"""Who may open what: the daemon's own permission check of a new open, on top of the kernel's.

The mount always uses ``default_permissions``, so the kernel checks each open against the
attributes it holds. Those can be older than the version an open is served: while handles
of a version read through the page cache, ``getattr`` keeps showing that version's
attributes (see :mod:`semfs.fusefs.mount.kernelcache`), and a tree can lag the store by a refresh.
A re-ingest that makes a file private (0600, new text) would then let every user open the
new text through the old, readable mode. So every open of a document is checked again here,
against the version it will serve and the folders of the tree shown now.

Rules a caller may rely on:

* :func:`may_read` answers as the kernel's ``generic_permission`` would for the caller of the
  running request: uid 0 may read anything; else the file's user, group (the caller's primary and
  supplementary groups) or other bits of the file must grant read, and every folder above it
  search (x). A document without a recorded mode is 0444, owned by the mounting user.
* Supplementary groups are read (``portable.process_groups``) only when the answer depends
  on them; a caller whose groups cannot be read counts with its primary group alone.

No FUSE import here: the caller passes who asks (``fusefs.bindings.request_caller``).
"""

from __future__ import annotations

from collections.abc import Callable

from semfs.fusefs.view.tree import DIR, FileIds, Tree
from semfs.ingest import portable
from semfs.ingest.store.schema import DocumentRecord

# (uid, gid, pid) of the process whose request is running.
Caller = tuple[int, int, int]
R_OK, X_OK = 4, 1


def caller_groups(pid: int, uid: int = -1, gid: int = -1) -> frozenset[int]:
    """The supplementary groups of process ``pid`` (user ``uid``, group ``gid``: what macOS
    answers from); empty when unknown."""
    return portable.process_groups(pid, uid, gid)


def grants(
    mode: int,
    uid: int,
    gid: int,
    caller: Caller,
    want: int,
    groups: Callable[[], frozenset[int]],
) -> bool:
    """Whether ``mode`` (permission bits), owned by ``uid``:``gid``, grants ``want`` (R_OK,
    X_OK) to ``caller``. Like the kernel: the first class that matches decides."""
    if caller[0] == uid:
        return (mode >> 6) & want == want
    if caller[1] == gid or gid in groups():
        return (mode >> 3) & want == want
    return mode & want == want


def may_read(tree: Tree, doc: DocumentRecord, caller: Caller | None) -> bool:
    """Whether ``caller`` may open ``doc`` (the version to serve) for reading, given the
    folders above it in ``tree``. None (no request context, as in tests): yes."""
    if caller is None or caller[0] == 0:
        return True
    known: frozenset[int] | None = None

    def groups() -> frozenset[int]:
        nonlocal known
        if known is None:
            known = caller_groups(caller[2], caller[0], caller[1]) if caller[2] > 0 else frozenset()
        return known

    ids: FileIds = tree.ids
    mode = 0o444 if doc.mode is None else doc.mode
    uid = ids.uid if doc.uid is None else doc.uid
    gid = ids.gid if doc.gid is None else doc.gid
    if not grants(mode, uid, gid, caller, R_OK, groups):
        return False
    folder = doc.path
    while folder:
        folder = folder.rpartition("/")[0]
        node = tree.lookup(folder)
        if node is None or node.kind != DIR:
            return False  # its folder is gone from the tree shown now
        attrs = node.attrs
        if not grants(attrs["st_mode"], attrs["st_uid"], attrs["st_gid"], caller, X_OK, groups):
            return False
    return True


__all__ = ["Caller", "caller_groups", "grants", "may_read"]
