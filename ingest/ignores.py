"""What a source's own rules leave out: ``.gitignore`` and ``.ignore`` files, read as ripgrep
reads them, so ``semfs ingest REPO`` takes the files an agent's ``rg`` would search.

Rules a caller may rely on:

* Patterns are git's (``pathspec``'s ``GitIgnoreSpec``: anchors, ``**``, ``!`` negation,
  a trailing ``/`` for folders only), each file's relative to its own folder.
* ``.gitignore`` files apply only inside a git repository (a ``.git`` folder or file at the
  source or above it), from the repository's root down, and ``.git/info/exclude`` with
  them; ``.ignore`` files apply anywhere, the source's parent folders' too. As in ripgrep:
  the deepest file with a matching pattern decides, the last matching pattern in it wins,
  and any ``.ignore`` match beats any git one.
* A folder that is ignored is not entered: nothing below it can be taken back by a ``!``
  pattern (git's own rule).
* Not read, unlike ripgrep: git's global excludes file (``core.excludesFile``) and
  ``.rgignore``; hidden files are not left out (semfs never did).
* Rule files are read beneath the source's folder descriptors (no symlink followed), each
  at most :data:`MAX_RULES_BYTES`; one that cannot be read counts as empty.
* Above the source, only folders the ingesting user trusts count (:func:`trusted`: owned by
  them or by root, and writable by no one else), and only rule files they or root own: in a
  1777 parent, another user's ``.ignore`` of ``*`` (or ``.git`` with its ``info/exclude``)
  neither hides the source's files nor takes back what its own rules leave out (issue 46.5).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["IGNORE_FILES", "IgnoreRules", "rules_folder"]

IGNORE_FILES = (".gitignore", ".ignore")
# A rule file larger than this is read this far (a generated one is still rules, not data).
MAX_RULES_BYTES = 1 << 20
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass
class _Level:
    """One folder's rules: ``base`` is the folder relative to the source ("" for the source,
    ``../..`` style for a parent folder: then ``prefix`` is the source's path below it)."""

    git: Any = None  # GitIgnoreSpec | None
    ignore: Any = None
    has_git: bool = False


def rules_folder(path: str) -> str | None:
    """The folder whose files a changed ``path`` (relative) may now take or leave, when it
    is a rule file (``a/.gitignore`` -> ``a``; ``.ignore`` -> ``""``), else None."""
    parent, _, name = path.rpartition("/")
    return parent if name in IGNORE_FILES else None


class IgnoreRules:
    """The rules of one source folder, read as the walk reaches each folder (or on first
    need, for a path checked alone). Not thread-safe; one per scan."""

    def __init__(self, source: Path, open_folder: Callable[[str], int]) -> None:
        """``open_folder(rel)``: a descriptor of the source's folder ``rel``, opened beneath
        the source (the caller's rule for reaching a folder; the caller closes nothing)."""
        import pathspec  # only a scan needs it

        self._spec = pathspec.GitIgnoreSpec.from_lines
        self._open_folder = open_folder
        self.source = os.path.abspath(source)
        self._levels: dict[str, _Level] = {}
        # The source's parent folders, nearest first, and the repository's root: the nearest
        # folder (the source included) holding a .git.
        above: list[tuple[str, str, bool]] = []  # (the source's path below it, folder, .git)
        root = self.source if os.path.lexists(os.path.join(self.source, ".git")) else None
        below, folder = "", self.source
        while (up := os.path.dirname(folder)) != folder:
            below = os.path.basename(folder) + ("/" + below if below else "")
            folder = up
            if not trusted(folder):
                continue  # its rule files and its .git are anyone's: none of them count
            has_git = os.path.lexists(os.path.join(folder, ".git"))
            above.append((below, folder, has_git))
            root = root or (folder if has_git else None)
        self.in_git = root is not None
        # Parent folders up to the repository's root read its .gitignore files; above it none.
        git_rules = self.in_git and root != self.source
        self._parents: list[tuple[str, _Level]] = []
        for below, folder, has_git in above:
            level = _Level(ignore=self._read_path(os.path.join(folder, ".ignore"), owned=True))
            level.has_git = has_git
            if git_rules:
                level.git = self._read_path(os.path.join(folder, ".gitignore"), owned=True)
                git_rules = not has_git
            self._parents.append((below, level))
        self._exclude: tuple[str, Any] | None = None  # (the source below the root, rules)
        if root is not None:
            git = os.path.join(root, ".git")
            rules = None
            # Above the source, .git and its info/ must be as trusted as their folder.
            above_source = root != self.source
            if not above_source or (trusted(git) and trusted(os.path.join(git, "info"))):
                rules = self._read_path(os.path.join(git, "info", "exclude"), owned=above_source)
            prefix = os.path.relpath(self.source, root).replace(os.sep, "/")
            self._exclude = ("" if prefix == "." else prefix, rules)

    def _parse(self, data: bytes) -> Any:
        if not data.strip():
            return None
        lines = data[:MAX_RULES_BYTES].decode("utf-8", "replace").splitlines()
        try:
            try:
                return self._spec(lines)
            except (ValueError, TypeError):
                raise
            except Exception:  # the fast backend's own limits (re2.Error)
                # RE2 compiles a file's patterns as one set, and refuses a large one ("failed
                # to compile Set" at ~2,000 `*.extN` lines): every ingest failed, and a watch
                # retried it every 5 s. Python's re, one pattern at a time, has no such bound.
                return self._spec(lines, backend="simple")
        except (ValueError, TypeError):  # a pattern pathspec cannot read: the file is noise
            return None

    def _read_path(self, path: str, owned: bool = False) -> Any:
        """The rules in the file ``path``; ``owned``: only when it is the user's or root's."""
        try:
            fd = os.open(path, _FLAGS)
        except OSError:
            return None
        if owned:
            try:
                mine = os.fstat(fd).st_uid in (os.geteuid(), 0)
            except OSError:
                mine = False
            if not mine:
                os.close(fd)
                return None
        return self._parse(_read_fd(fd))

    def enter(self, rel: str, dir_fd: int) -> None:
        """Read the rules of the folder ``rel`` (relative, "" for the source) from its open
        descriptor, as a walk reaches it."""
        if rel in self._levels:
            return
        level = _Level(has_git=_exists(dir_fd, ".git"))
        level.ignore = self._parse(_read_at(dir_fd, ".ignore"))
        if self.in_git:
            level.git = self._parse(_read_at(dir_fd, ".gitignore"))
        self._levels[rel] = level

    def _level(self, rel: str) -> _Level:
        """The rules of folder ``rel``, read on first need (a path checked without a walk)."""
        if rel not in self._levels:
            try:
                fd = self._open_folder(rel)
            except OSError:
                self._levels[rel] = _Level()
            else:
                try:
                    self.enter(rel, fd)
                finally:
                    os.close(fd)
        return self._levels[rel]

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` (a file or folder of the source, '/'-separated) is left out by the
        rules of its folders (not by its parents being left out: a walk never gets there)."""
        target = rel + "/" if is_dir else rel
        parts = rel.split("/")
        found_ignore: bool | None = None
        found_git: bool | None = None
        saw_git = False
        # The deepest folder first: its rules override its parents'.
        for depth in range(len(parts) - 1, -1, -1):
            folder = "/".join(parts[:depth])
            level = self._level(folder)
            below = target[len(folder) + 1 :] if folder else target
            if found_ignore is None and level.ignore is not None:
                found_ignore = _match(level.ignore, below)
            if not saw_git and found_git is None and level.git is not None:
                found_git = _match(level.git, below)
            saw_git = saw_git or level.has_git
        for prefix, level in self._parents:
            below = f"{prefix}/{target}"
            if found_ignore is None and level.ignore is not None:
                found_ignore = _match(level.ignore, below)
            if not saw_git and found_git is None and level.git is not None:
                found_git = _match(level.git, below)
            saw_git = saw_git or level.has_git
        if found_ignore is not None:
            return found_ignore
        if found_git is not None:
            return found_git
        if self._exclude is not None and self._exclude[1] is not None:
            prefix = self._exclude[0]
            found = _match(self._exclude[1], f"{prefix}/{target}" if prefix else target)
            return bool(found)
        return False


def trusted(folder: str) -> bool:
    """Whether the ingesting user trusts ``folder``'s rule files: it is theirs or root's, and
    no one else may write it (a 1777 folder, sticky or not, is anyone's to add a file to)."""
    try:
        st = os.stat(folder)
    except OSError:
        return False
    return st.st_uid in (os.geteuid(), 0) and not st.st_mode & 0o022


def _match(spec: Any, path: str) -> bool | None:
    """True: a pattern leaves ``path`` out; False: a ``!`` pattern takes it back; None: no
    pattern matches."""
    result = spec.check_file(path)
    include: bool | None = result.include
    return include


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _read_at(dir_fd: int, name: str) -> bytes:
    try:
        fd = os.open(name, _FLAGS, dir_fd=dir_fd)
    except OSError:
        return b""
    return _read_fd(fd)


def _read_fd(fd: int) -> bytes:
    try:
        with os.fdopen(fd, "rb") as fh:
            return fh.read(MAX_RULES_BYTES)
    except OSError:
        return b""
