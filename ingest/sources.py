"""Walking a source directory: which files to ingest, and a clear reason for each one skipped."""

from __future__ import annotations

import codecs
import errno
import fnmatch
import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import SourceError

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", "CVS", ".jj", ".pijul"})
DEFAULT_MAX_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the source directory, '/'-separated
    abspath: str


@dataclass(frozen=True)
class Skipped:
    """An entry not ingested, and why. ``transient``: the entry exists but could not be read
    this time (permissions, I/O error), so an ingested version of it is kept, not deleted."""

    path: str
    reason: str
    transient: bool = False


@dataclass(frozen=True)
class Document:
    """A source file read and checked: its exact text and what the store records of it."""

    path: str
    text: str
    size: int
    mtime: float
    sha256: str
    mtime_ns: int


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


def scan(
    source: Path, include: Sequence[str] = (), exclude: Sequence[str] = ()
) -> tuple[list[SourceFile], list[Skipped]]:
    """Files under ``source`` to ingest, sorted by path, and the entries skipped with reasons.

    VCS folders are skipped silently. Symlinks to files are listed (:func:`read_document`
    decides whether to follow them); symlinks to directories are not followed (that is how
    loops are avoided) and are reported.
    """
    if not source.exists():
        raise SourceError(f"source directory {source} does not exist")
    if not source.is_dir():
        raise SourceError(f"source {source} is not a directory")
    if not os.access(source, os.R_OK | os.X_OK):
        raise SourceError(f"source directory {source} is not readable")
    files: list[SourceFile] = []
    skipped: list[Skipped] = []

    def on_error(exc: OSError) -> None:
        rel = os.path.relpath(exc.filename, source) if exc.filename else "?"
        skipped.append(
            Skipped(
                rel.replace(os.sep, "/"), f"unreadable directory: {exc.strerror}", transient=True
            )
        )

    for root, dirs, names in os.walk(source, onerror=on_error):
        rel_root = os.path.relpath(root, source)
        rel_root = "" if rel_root == "." else rel_root.replace(os.sep, "/") + "/"
        keep_dirs = []
        for d in sorted(dirs):
            rel = rel_root + d
            if d in VCS_DIRS or (exclude and _matches(rel, exclude)):
                continue
            full = os.path.join(root, d)
            if os.path.islink(full):
                skipped.append(Skipped(rel, "symlink to a directory (not followed)"))
                continue
            keep_dirs.append(d)
        dirs[:] = keep_dirs
        for name in sorted(names):
            rel = rel_root + name
            if exclude and _matches(rel, exclude):
                continue
            if include and not _matches(rel, include):
                continue
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                skipped.append(
                    Skipped(rel.encode("utf-8", "replace").decode(), "file name is not valid UTF-8")
                )
                continue
            files.append(SourceFile(rel, os.path.join(root, name)))
    files.sort(key=lambda f: f.path)
    return files, skipped


def inside(path: str, root: str) -> bool:
    """Whether the resolved ``path`` is ``root`` or below it (both absolute, resolved)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def read_document(
    f: SourceFile, max_bytes: int = DEFAULT_MAX_BYTES, root: str | None = None
) -> Document | Skipped:
    """The file's text, or why it cannot be ingested. Never raises for a bad file.

    ``root``: the resolved source directory. A symlink whose target resolves outside it is
    skipped (a link in the source must not pull in ``/etc/shadow``); None follows any link.
    """
    try:
        st = os.stat(f.abspath)  # follows symlinks
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Skipped(f.path, "symlink loop")
        if exc.errno == errno.ENOENT and os.path.islink(f.abspath):
            return Skipped(f.path, f"broken symlink (to {os.readlink(f.abspath)})")
        return Skipped(f.path, f"cannot stat: {exc.strerror}", transient=exc.errno != errno.ENOENT)
    if root is not None and os.path.islink(f.abspath):
        target = os.path.realpath(f.abspath)
        if not inside(target, root):
            return Skipped(
                f.path, f"symlink to {target}, outside the source (--follow-symlinks to include)"
            )
    if stat.S_ISDIR(st.st_mode):
        return Skipped(f.path, "symlink to a directory (not followed)")
    if not stat.S_ISREG(st.st_mode):
        return Skipped(f.path, "not a regular file")
    if st.st_size > max_bytes:
        return Skipped(
            f.path, f"too large: {st.st_size} bytes, over the {max_bytes}-byte cap (--max-size)"
        )
    try:
        with open(f.abspath, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        return Skipped(f.path, f"unreadable: {exc.strerror}", transient=exc.errno != errno.ENOENT)
    if len(data) > max_bytes:
        return Skipped(f.path, f"too large: over the {max_bytes}-byte cap (--max-size)")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return Skipped(f.path, "UTF-16 text is not supported (convert it to UTF-8)")
    if b"\0" in data:
        return Skipped(f.path, "binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Skipped(f.path, f"not UTF-8 text (invalid byte at offset {exc.start})")
    return Document(
        path=f.path,
        text=text,
        size=len(data),
        mtime=st.st_mtime,
        mtime_ns=st.st_mtime_ns,
        sha256=hashlib.sha256(data).hexdigest(),
    )
