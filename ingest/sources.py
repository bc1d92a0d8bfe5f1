"""Walking a source directory: which files to ingest, and a clear reason for each one skipped."""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from semfs.ingest import formats, portable, unsearched
from semfs.ingest.embedding.embedder import DEFAULT_BATCH_SIZE
from semfs.ingest.errors import SourceError
from semfs.ingest.ignores import IgnoreRules
from semfs.ingest.limits import DEFAULT_MAX_BYTES
from semfs.ingest.store.schema import DirectoryRecord, DocumentRecord

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", "CVS", ".jj", ".pijul"})
# Why a file named as no document (an image, a stylesheet) is stored as it is, not searched.
NOT_A_DOCUMENT = "not a document"


@dataclass(frozen=True)
class SourceOptions:
    """How a source folder is read: the options of `semfs ingest` (and of a followed folder)."""

    model: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    batch_size: int = DEFAULT_BATCH_SIZE
    max_bytes: int = DEFAULT_MAX_BYTES
    follow_symlinks: bool = False
    jobs: int | None = None  # files read at once (None: one per core)


@dataclass(frozen=True)
class IngestRequest:
    """One ingest run (:func:`semfs.ingest.pipeline.ingest`): how the source is read
    (``options``) and what the run does. The command line, the watcher, the follower, the MCP
    write tool and the Python API each build one; :meth:`of` takes the fields by name."""

    options: SourceOptions = SourceOptions()
    # Only these files and folders (relative, '/'-separated): a watcher's batch. None: all.
    paths: frozenset[str] | None = None
    keep_failed: bool = False  # a document that fails to read now keeps its stored version
    verify: bool = False  # check unchanged documents against the store, re-ingest damage
    replace_source: bool = False  # mirror this folder instead of the collection's own
    skip_memo: Path | None = None  # where files skipped for their bytes are remembered
    retry_skipped: bool = False  # read them again anyway
    dry_run: bool = False  # read and compare only: the report of what a run would do
    dense: bool = True  # embed in this run (False: the store's owner or the next run does)
    lock_timeout: float | None = None  # how long to wait for another writer (None: no bound)

    @classmethod
    def of(cls, **fields: Any) -> IngestRequest:
        """A request from its fields and :class:`SourceOptions`' by name (``model="hash"``,
        ``include=["*.md"]``, ``dry_run=True``); an unknown name is a TypeError."""
        source = {k: fields.pop(k) for k in list(fields) if k in _SOURCE_FIELDS}
        for name in ("include", "exclude"):
            if name in source:
                source[name] = tuple(source[name])
        if fields.get("paths") is not None:
            fields["paths"] = frozenset(fields["paths"])
        return cls(SourceOptions(**source), **fields)


_SOURCE_FIELDS = frozenset(SourceOptions.__dataclass_fields__)


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the source directory, '/'-separated
    abspath: str
    source: str = ""  # the source directory it was found in (else derived from abspath)

    @property
    def root(self) -> str:
        """The source directory :func:`read_document` opens ``path`` beneath."""
        if self.source:
            return self.source
        return self.abspath[: len(self.abspath) - len(self.path)].rstrip(os.sep) or os.sep


@dataclass(frozen=True)
class Fingerprint:
    """What a file was when its bytes got it skipped: while all of it holds, so does the
    reason (:mod:`semfs.ingest.skipmemo`)."""

    size: int
    mtime_ns: int
    sha256: str
    extractor: str


# remembered(path, fingerprint): the reason a file was skipped, if it is unchanged since.
Remembered = Callable[[str, Fingerprint], "str | None"]


@dataclass(frozen=True)
class Skipped:
    """An entry not ingested, and why. ``transient``: the entry exists but could not be read
    this time (permissions, I/O error), so an ingested version of it is kept, not deleted.
    ``fingerprint``: set when the file's bytes decided it (an extractor refused them), so
    the skip may be remembered; ``memo_reason`` is then the reason to remember."""

    path: str
    reason: str
    transient: bool = False
    fingerprint: Fingerprint | None = field(default=None, compare=False)
    memo_reason: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Original:
    """The source file behind a text view: its path, bytes (stored and served as they are)
    and sha256, what extracted the view, and where the view's pages start (``unit``,
    ``marks``: see :class:`semfs.ingest.formats.Extracted`)."""

    path: str
    data: bytes  # b"" once the pipeline has stored it (``size`` stays)
    size: int
    sha256: str
    extractor: str
    unit: str = ""
    marks: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class Document:
    """A source file read and checked: its exact text and what the store records of it.

    ``path``, ``text``, ``size`` and ``sha256`` are those of what the mount serves at
    ``path``: the file itself, or for a converted format (``original`` set) its text view.
    ``text`` is None when the original is unchanged since the stored view was made: the view
    was not extracted again (size and sha256 are the stored view's)."""

    path: str
    text: str | None
    size: int
    mtime: float
    sha256: str
    mtime_ns: int
    mode: int | None = None  # permission bits (stat.S_IMODE) of the file read
    uid: int | None = None
    gid: int | None = None
    original: Original | None = None
    # Why a file stored as it is (``original.path == path``) is not searched: "not a
    # document", "binary file (contains NUL bytes)", ...; "" for a document.
    unsearched: str = ""


def _matches(path: str, patterns: Sequence[str]) -> bool:
    """rsync-like globs: a pattern with no '/' matches any path component."""
    parts = path.split("/")
    for raw in patterns:
        pat = raw.rstrip("/")
        if fnmatch.fnmatchcase(path, pat):
            return True
        if "/" not in pat and any(fnmatch.fnmatchcase(part, pat) for part in parts):
            return True
        # A directory pattern excludes everything beneath it.
        if any(fnmatch.fnmatchcase("/".join(parts[:i]), pat) for i in range(1, len(parts))):
            return True
    return False


def check_source(source: Path) -> None:
    """Raise :class:`SourceError` (one line) unless ``source`` is a readable directory."""
    if not source.exists():
        raise SourceError(f"source directory {source} does not exist")
    if not source.is_dir():
        raise SourceError(f"source {source} is not a directory")
    if not os.access(source, os.R_OK | os.X_OK):
        raise SourceError(f"source directory {source} is not readable")


def scan(
    source: Path,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    dirs: list[DirectoryRecord] | None = None,
    ignored: list[str] | None = None,
) -> tuple[list[SourceFile], list[Skipped]]:
    """Files under ``source`` to ingest, sorted by path, and the entries skipped with reasons.

    VCS folders are skipped silently. Symlinks to files are listed (:func:`read_document`
    decides whether to follow them); symlinks to directories are not followed (that is how
    loops are avoided) and are reported. A semfs store (a folder holding
    ``shard/edge_config.json``) and a semfs mount inside ``source`` are skipped with a reason:
    ingesting either would feed the collection its own copy. When ``dirs`` is a list, a
    record of every folder walked (``source`` itself as ``""``) is appended to it.

    What the source's ``.gitignore`` and ``.ignore`` files leave out
    (:mod:`semfs.ingest.ignores`) is not listed, nor entered; when ``ignored`` is a list, each
    such path is appended to it (a folder with a trailing ``/``).
    """
    check_source(source)
    files: list[SourceFile] = []
    skipped: list[Skipped] = []
    rules = ignore_rules(source)
    _walk(source, str(source), include, exclude, files, skipped, dirs, rules, ignored)
    files.sort(key=lambda f: f.path)
    return files, skipped


def scan_paths(
    source: Path,
    paths: Iterable[str],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    dirs: list[DirectoryRecord] | None = None,
    ignored: list[str] | None = None,
) -> tuple[list[SourceFile], list[Skipped]]:
    """What :func:`scan` would find at or below each of ``paths`` (relative, '/'-separated).

    Exactly the same rules: an entry that a full scan would not reach (below a VCS folder,
    an excluded or ignored folder or a symlink to a directory) is not found here either.
    Paths that no longer exist yield nothing; folders are recorded in ``dirs`` as
    :func:`scan` does.
    Raises :class:`SourceError` as :func:`scan` does.
    """
    check_source(source)
    files: list[SourceFile] = []
    skipped: list[Skipped] = []
    mounts = semfs_devices()
    rules = ignore_rules(source)
    recorded: set[str] = set()
    for rel in _outermost(paths):
        parts = rel.split("/")
        if not _reachable(source, parts[:-1], exclude, mounts, rules):
            continue
        if dirs is not None:
            # The folders above: a file in a folder the batch does not name still has its
            # folder's record (its mode) when it commits.
            _record_folders(
                source, ["/".join(parts[:i]) for i in range(len(parts))], recorded, dirs
            )
        full = os.path.join(source, *parts)
        try:
            st = os.lstat(full)
        except OSError:
            continue  # gone: a deletion, which the caller sees as "not found"
        name = parts[-1]
        if stat.S_ISDIR(st.st_mode):
            if name in VCS_DIRS or (exclude and _matches(rel, exclude)) or _semfs_dir(full, mounts):
                continue
            if rules.ignored(rel, is_dir=True):
                if ignored is not None:
                    ignored.append(rel + "/")
                continue
            _walk(source, full, include, exclude, files, skipped, dirs, rules, ignored)
        elif stat.S_ISLNK(st.st_mode) and os.path.isdir(full):
            if not (exclude and _matches(rel, exclude)):
                skipped.append(Skipped(rel, "symlink to a directory (not followed)"))
        elif rules.ignored(rel, is_dir=False):
            if ignored is not None:
                ignored.append(rel)
        else:
            _add_file(rel, full, include, exclude, files, skipped, str(source))
    files.sort(key=lambda f: f.path)
    return files, skipped


def ignore_rules(source: Path) -> IgnoreRules:
    """The .gitignore and .ignore rules of ``source``, its folders opened beneath it."""
    return IgnoreRules(source, lambda rel: open_beneath(str(source), rel, directory=True))


def _semfs_dir(full: str, mounts: frozenset[int]) -> bool:
    """A semfs store or mount: a scan skips it (and reports it where it meets it). A folder
    that is gone or changed meanwhile is not one (the walk then says what it met)."""
    if mounts:
        try:
            if os.lstat(full).st_dev in mounts:
                return True
        except OSError:
            return False
    return _is_store(full)


def _is_store(full: str) -> bool:
    """A semfs collection folder: its shard, or (a first ingest serving it before its shard
    is made) its owner's socket token."""
    return os.path.exists(os.path.join(full, "shard", "edge_config.json")) or os.path.exists(
        os.path.join(full, "daemon.token")
    )


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths without those inside another one of them (and without empty ones)."""
    kept: list[str] = []
    for rel in sorted({p.strip("/") for p in paths} - {""}):
        if kept and (rel == kept[-1] or rel.startswith(kept[-1] + "/")):
            continue
        kept.append(rel)
    return kept


def _reachable(
    source: Path,
    dirs: Sequence[str],
    exclude: Sequence[str],
    mounts: frozenset[int],
    rules: IgnoreRules,
) -> bool:
    """Whether a full scan descends into the folder ``dirs`` (its components, from the top)."""
    for i, name in enumerate(dirs):
        rel = "/".join(dirs[: i + 1])
        if name in VCS_DIRS or (exclude and _matches(rel, exclude)):
            return False
        full = os.path.join(source, *dirs[: i + 1])
        if os.path.islink(full) or not os.path.isdir(full) or _semfs_dir(full, mounts):
            return False
        if rules.ignored(rel, is_dir=True):
            return False
    return True


def _walk(
    source: Path,
    top: str,
    include: Sequence[str],
    exclude: Sequence[str],
    files: list[SourceFile],
    skipped: list[Skipped],
    dir_records: list[DirectoryRecord] | None = None,
    rules: IgnoreRules | None = None,
    ignored: list[str] | None = None,
) -> None:
    """Add the files under ``top`` (``source`` or a folder inside it) to ``files``; what
    ``rules`` leave out is not (its paths go to ``ignored``).

    The walk goes through directory fds opened with ``O_NOFOLLOW`` from the source down
    (:func:`_walk_fds`): a folder swapped for a symlink while it runs is not entered, so
    what it lists lies below ``source``.
    """
    mounts = semfs_devices()

    def on_error(path: str, exc: OSError) -> None:
        rel = os.path.relpath(path, source).replace(os.sep, "/")
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            # Listed as a folder, then not one (or gone) when opened: it moved under the walk.
            reason = f"changed during the walk ({exc.strerror}), not ingested this time"
        else:
            reason = f"unreadable directory: {exc.strerror}"
        skipped.append(Skipped(rel, reason, transient=True))

    rel_top = os.path.relpath(top, source)
    try:
        top_fd = open_beneath(str(source), "" if rel_top == "." else rel_top, directory=True)
    except OSError as exc:
        on_error(top, exc)
        return
    try:
        for root, dirs, names, root_fd in _walk_fds(top, top_fd, on_error):
            rel_root = os.path.relpath(root, source)
            rel_root = "" if rel_root == "." else rel_root.replace(os.sep, "/") + "/"
            if dir_records is not None:
                _record_dir(root_fd, rel_root.rstrip("/"), dir_records)
            if rules is not None:
                rules.enter(rel_root.rstrip("/"), root_fd)
            keep_dirs = []
            for d, is_link in sorted(dirs):
                rel = rel_root + d
                if d in VCS_DIRS or (exclude and _matches(rel, exclude)):
                    continue
                # A symlink is matched as git sees it: a file, whatever it points to.
                if rules is not None and rules.ignored(rel, is_dir=not is_link):
                    if ignored is not None:
                        ignored.append(rel + "/")
                    continue
                full = os.path.join(root, d)
                if is_link:
                    skipped.append(Skipped(rel, "symlink to a directory (not followed)"))
                    continue
                if mounts:
                    # By device, from the folder's fd: no path is resolved, so a folder
                    # swapped for a link meanwhile cannot make this raise (issue 29).
                    try:
                        st = os.stat(d, dir_fd=root_fd, follow_symlinks=False)
                    except OSError as exc:
                        on_error(full, exc)
                        continue
                    if st.st_dev in mounts:
                        skipped.append(Skipped(rel, "a semfs mount (not ingested)"))
                        continue
                if _is_store(full):
                    skipped.append(Skipped(rel, "a semfs store (not ingested)"))
                    continue
                keep_dirs.append((d, is_link))
            dirs[:] = keep_dirs
            for name in sorted(names):
                if rules is not None and rules.ignored(rel_root + name, is_dir=False):
                    if ignored is not None:
                        ignored.append(rel_root + name)
                    continue
                _add_file(
                    rel_root + name,
                    os.path.join(root, name),
                    include,
                    exclude,
                    files,
                    skipped,
                    str(source),
                )
    finally:
        os.close(top_fd)


def _walk_fds(
    path: str, fd: int, on_error: Callable[[str, OSError], None]
) -> Iterator[tuple[str, list[tuple[str, bool]], list[str], int]]:
    """Like ``os.fwalk`` from an open folder, top-down: ``(path, dirs, names, fd)``, where
    ``dirs`` holds ``(name, is_symlink)`` (prune it in place) and ``names`` everything else.
    Each folder is opened with ``O_NOFOLLOW`` relative to its parent's fd, so a symlink
    swapped in for a folder after it was listed fails to open instead of being entered;
    errors go to ``on_error(path, exc)`` with the folder's full path."""
    dirs: list[tuple[str, bool]] = []
    names: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        dirs.append((entry.name, False))
                    elif entry.is_symlink() and entry.is_dir():
                        dirs.append((entry.name, True))
                    else:
                        names.append(entry.name)
                except OSError:
                    names.append(entry.name)  # read_document says what is wrong with it
    except OSError as exc:
        on_error(path, exc)
        return
    yield path, dirs, names, fd
    for name, is_link in dirs:
        if is_link:
            continue
        sub = os.path.join(path, name)
        try:
            sub_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            on_error(sub, exc)
            continue
        try:
            yield from _walk_fds(sub, sub_fd, on_error)
        finally:
            os.close(sub_fd)


def _record_folders(
    source: Path, rels: Iterable[str], recorded: set[str], out: list[DirectoryRecord]
) -> None:
    """Record the folders ``rels`` (opened beneath ``source``), each once."""
    for rel in rels:
        if rel in recorded:
            continue
        recorded.add(rel)
        try:
            fd = open_beneath(str(source), rel, directory=True)
        except OSError:
            continue  # gone or changed: its own walk (or the next run) says so
        try:
            _record_dir(fd, rel, out)
        finally:
            os.close(fd)


def _record_dir(dir_fd: int, rel: str, out: list[DirectoryRecord]) -> None:
    try:
        rel.encode("utf-8")
        st = os.fstat(dir_fd)  # the folder walked, not whatever its path names now
    except (UnicodeEncodeError, OSError):
        return  # its files are skipped with the reason; the tree infers what it can
    out.append(DirectoryRecord(rel, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns))


def semfs_devices(table: Path | None = None) -> frozenset[int]:
    """The device numbers (``st_dev``) of every semfs mount; empty where unknown. A folder is
    one when ``stat`` gives that device: no path to resolve, which a moving folder races."""
    found = portable.mounts(table) or []
    return frozenset(
        m.device for m in found if m.fstype == portable.FSTYPE and m.device is not None
    )


def _add_file(
    rel: str,
    full: str,
    include: Sequence[str],
    exclude: Sequence[str],
    files: list[SourceFile],
    skipped: list[Skipped],
    source: str = "",
) -> None:
    if exclude and _matches(rel, exclude):
        return
    if include and not _matches(rel, include):
        return
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        skipped.append(
            Skipped(rel.encode("utf-8", "replace").decode(), "file name is not valid UTF-8")
        )
        return
    files.append(SourceFile(rel, full, source))


def inside(path: str, root: str) -> bool:
    """Whether the resolved ``path`` is ``root`` or below it (both absolute, resolved)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


# Folders on a path are opened one by one, each relative to its parent's fd, never through
# a symlink: a folder swapped for a link between the scan and the read is not followed.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# The file itself: no link followed, and a FIFO swapped in does not block the open.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# Links followed for one file before it counts as a loop (the kernel's own limit).
MAX_LINK_HOPS = 40


class LinkRefused(Exception):
    """A symlink on the way to a file that is not followed; the message is the reason."""


def open_beneath(source: str, rel: str, *, directory: bool = False, follow: str = "none") -> int:
    """An fd of ``rel`` inside ``source``, reached without following a symlink that leads
    out of it, whatever changes meanwhile (what ``openat2(RESOLVE_BENEATH)`` promises).

    Each component is opened with ``O_NOFOLLOW`` relative to the fd of the folder before
    it. A symlink in a folder's place is refused (:class:`LinkRefused`). The last
    component, when it is a symlink, is followed as ``follow`` says: ``"none"`` refuses it,
    ``"inside"`` resolves its target the same way, component by component from the folder
    holding the link, under the link rule below; ``"any"`` lets the kernel follow it from
    that folder (``--follow-symlinks``: the link is trusted, the folders leading to it are
    not). Raises OSError as ``open`` does (ELOOP after :data:`MAX_LINK_HOPS` links). The
    caller closes the fd.

    The link rule (issue 29): the target is stored, and served, under the link's path,
    where readers pass the link's folders and the target's own mode only. So a link is
    followed only to a file at or below the link's own folder (an agent scoped to that
    folder then sees nothing from outside it), through folders that every user may enter
    (so the folders skipped on the way deny no one). Anything else is :class:`LinkRefused`.
    """
    root_fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    stack = [root_fd]
    names: list[str] = []  # the folders of stack[1:], by name
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    hops = 0
    floor = 0  # once a link is followed: the depth of its folder, which nothing leaves
    try:
        while True:
            if not parts:
                if not directory:
                    raise IsADirectoryError(errno.EISDIR, "is a directory", rel)
                return os.dup(stack[-1])
            name = parts.pop(0)
            if name == "..":
                if len(stack) == 1:
                    raise LinkRefused("outside")
                if len(stack) == floor:
                    raise LinkRefused(_LINK_UP)
                os.close(stack.pop())
                names.pop()
                continue
            last = not parts
            flags = _FILE_FLAGS if last and not directory else _DIR_FLAGS
            try:
                fd = os.open(name, flags, dir_fd=stack[-1])
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise
                st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
                if not stat.S_ISLNK(st.st_mode):
                    raise
                if not last or directory or follow == "none":
                    raise LinkRefused("symlink to a directory (not followed)") from None
                if follow == "any":
                    return os.open(name, _FILE_FLAGS & ~os.O_NOFOLLOW, dir_fd=stack[-1])
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel) from None
                floor = floor or len(stack)
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    below = _below(target, source)
                    if below is None:
                        raise LinkRefused("outside") from None
                    steps = [p for p in below.split("/") if p not in ("", ".")]
                    if steps[: floor - 1] != names[: floor - 1]:
                        raise LinkRefused(_LINK_UP) from None
                    while len(stack) > floor:
                        os.close(stack.pop())
                        names.pop()
                    target = "/".join(steps[floor - 1 :])
                parts = [p for p in target.split("/") if p not in ("", ".")]
                continue
            if last:
                return fd
            if floor and os.fstat(fd).st_mode & 0o111 != 0o111:
                os.close(fd)
                raise LinkRefused("symlink through a folder not everyone may enter (not followed)")
            stack.append(fd)
            names.append(name)
    finally:
        for fd in stack:
            os.close(fd)


# The link rule's other refusal (see open_beneath).
_LINK_UP = "symlink to a file outside the link's own folder (not followed; see docs/security.md)"


def _below(target: str, source: str) -> str | None:
    """An absolute link target relative to ``source`` (as given or resolved), else None."""
    for root in {os.path.abspath(source), os.path.realpath(source)}:
        if inside(target, root):
            return target[len(root) :].lstrip("/")
    return None


def read_document(
    f: SourceFile,
    max_bytes: int = DEFAULT_MAX_BYTES,
    root: str | None = None,
    previous: DocumentRecord | None = None,
    remembered: Remembered | None = None,
) -> Document | Skipped:
    """The file's text, or why it cannot be ingested. Never raises for a bad file.

    The file is opened beneath its source folder (:func:`open_beneath`): no symlink in a
    folder's place is followed, and what is read is what ``fstat`` says was opened, so a
    link swapped in during the run cannot pull in a file from elsewhere. ``root`` set (the
    default of ingest): a symlink is followed only to a target inside the source (a link in
    the source must not pull in ``/etc/shadow``); None (``--follow-symlinks``): a symlink
    file is followed anywhere.
    ``previous``: the stored record of the file's text view, if any: when the original's
    bytes and the extractor are the same, the view is not extracted again (``text`` None).
    ``remembered``: the skips of earlier runs; a converted file skipped for its bytes and
    unchanged since is skipped again without being extracted. ``max_bytes`` bounds the file
    and, for a converted one, its text too.
    """
    follow = "inside" if root is not None else "any"
    try:
        fd = open_beneath(f.root, f.path, follow=follow)
    except LinkRefused as exc:
        if str(exc) != "outside":
            return Skipped(f.path, str(exc))
        target = os.path.realpath(f.abspath)
        return Skipped(
            f.path, f"symlink to {target}, outside the source (--follow-symlinks to include)"
        )
    except OSError as exc:
        return _open_failure(f, exc)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return Skipped(f.path, "symlink to a directory (not followed)")
        if not stat.S_ISREG(st.st_mode):
            return Skipped(f.path, "not a regular file")
        if st.st_size > max_bytes:
            return Skipped(
                f.path, f"too large: {st.st_size} bytes, over the {max_bytes}-byte cap (--max-size)"
            )
        try:
            with os.fdopen(os.dup(fd), "rb") as fh:
                data = fh.read(max_bytes + 1)
        except OSError as exc:
            return Skipped(f.path, f"unreadable: {exc.strerror}", transient=True)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return Skipped(f.path, f"too large: over the {max_bytes}-byte cap (--max-size)")
    return _document(f, st, data, previous, max_bytes, remembered)


def _document(
    f: SourceFile,
    st: os.stat_result,
    data: bytes,
    previous: DocumentRecord | None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    remembered: Remembered | None = None,
) -> Document | Skipped:
    """What a file's ``data`` gives: itself as text, or an extracted view and the original."""
    sha256 = hashlib.sha256(data).hexdigest()
    if formats.stored_as_is(f.path):
        return _as_is(f, st, data, sha256, NOT_A_DOCUMENT)
    kept_out = unsearched.reason(f.path, data)  # a lock file, vendored, generated, minified
    if kept_out is not None:
        return _as_is(f, st, data, sha256, kept_out)
    view = formats.view_path(f.path)
    if view is None:
        extracted = formats.extract(f.path, data)
        if isinstance(extracted, formats.Unsupported):
            return _as_is(f, st, data, sha256, extracted.reason)
        return _served(f.path, extracted.text, len(data), sha256, st)
    if os.path.lexists(f.abspath + formats.VIEW_SUFFIX):
        return Skipped(f.path, f"its text view would hide the file {view}: not ingested")
    tag = formats.extractor_tag(f.path) or ""
    if previous is not None and (previous.original_sha256, previous.extractor) == (sha256, tag):
        # The same original, extracted by the same code: the stored view stands.
        original = Original(f.path, data, len(data), sha256, tag)
        return _served(view, None, previous.size, previous.sha256, st, original)
    # A file this extractor refused before is stored as it is again, not extracted again.
    refused = f"{formats.AS_IS}/{tag}"
    # One whose extraction ran out of time or whose worker died is tried once more, at the
    # next run: a crash or a busy machine is not the bytes' fault (issue 46). Its record says
    # so (``retry``), so only a second failure is remembered.
    retry = f"{refused}/retry"
    was = (previous.original_sha256, previous.extractor) if previous is not None else None
    if previous is not None and previous.as_is and was == (sha256, refused):
        return _as_is(f, st, data, sha256, "refused before (--retry-skipped to try)", refused)
    fingerprint = Fingerprint(len(data), st.st_mtime_ns, sha256, tag)
    known = remembered(f.path, fingerprint) if remembered is not None else None
    if known is not None:
        again = f"{known} (unchanged since: not extracted again; --retry-skipped to try)"
        return Skipped(f.path, again, fingerprint=fingerprint, memo_reason=known)
    extracted = formats.extract(f.path, data)
    if isinstance(extracted, formats.Unsupported):
        tried = previous is not None and previous.as_is and was == (sha256, retry)
        if extracted.transient and not tried:
            why = f"{extracted.reason}; tried again at the next ingest (--retry-skipped: now)"
            return _as_is(f, st, data, sha256, why, retry)
        return _as_is(f, st, data, sha256, extracted.reason, refused)
    encoded = extracted.text.encode("utf-8", "surrogatepass")
    if len(encoded) > max_bytes:
        reason = f"its text is {len(encoded)} bytes, over the {max_bytes}-byte cap (--max-size)"
        return Skipped(f.path, reason, fingerprint=fingerprint)
    original = Original(f.path, data, len(data), sha256, tag, extracted.unit, extracted.marks)
    digest = hashlib.sha256(encoded).hexdigest()
    return _served(view, extracted.text, len(encoded), digest, st, original)


def _as_is(
    f: SourceFile,
    st: os.stat_result,
    data: bytes,
    sha256: str,
    reason: str,
    tag: str = formats.AS_IS,
) -> Document:
    """``f`` stored as it is, not searched: its bytes are its own original (no view, no
    chunks), so the mount still serves every file of the source. ``reason`` says why;
    ``tag`` (the record's extractor) names the extractor that refused it, if one did."""
    original = Original(f.path, data, len(data), sha256, tag)
    return replace(_served(f.path, "", len(data), sha256, st, original), unsearched=reason)


def _served(
    path: str,
    text: str | None,
    size: int,
    sha256: str,
    st: os.stat_result,
    original: Original | None = None,
) -> Document:
    return Document(
        path=path,
        text=text,
        size=size,
        mtime=st.st_mtime,
        sha256=sha256,
        mtime_ns=st.st_mtime_ns,
        mode=stat.S_IMODE(st.st_mode),
        uid=st.st_uid,
        gid=st.st_gid,
        original=original,
    )


def _open_failure(f: SourceFile, exc: OSError) -> Skipped:
    """The skip reason for a file that could not be opened (``exc``)."""
    if exc.errno == errno.ELOOP:
        return Skipped(f.path, "symlink loop")
    if exc.errno == errno.ENOENT:
        try:
            if os.path.islink(f.abspath):
                return Skipped(f.path, f"broken symlink (to {os.readlink(f.abspath)})")
        except OSError:
            pass
        return Skipped(f.path, f"cannot stat: {exc.strerror}")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Skipped(f.path, f"unreadable: {exc.strerror}", transient=True)
    return Skipped(f.path, f"cannot stat: {exc.strerror}", transient=True)
