"""Starting a mount: the start-up checks, daemonizing, the ready signal.

``semfs mount`` checks the mountpoint, then (unless ``--foreground``) forks. The child
opens the store, builds the first tree and runs the FUSE loop in the foreground of its own
session (:class:`semfs.fusefs.mount.daemon.MountDaemon`); the parent waits on a pipe until
the child's ``init()`` says the kernel is connected (exit 0) or reports why it could not
start (one line, exit 1), like sshfs. Nothing here starts a thread: the daemon's threads
start in ``init()``, after the fork.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import signal
import stat
import sys
import time
from dataclasses import replace
from pathlib import Path

from semfs.fusefs.mount.bindings import can_invalidate, library_path
from semfs.fusefs.mount.daemon import MountConfig, MountDaemon, fuse_options
from semfs.fusefs.mount.unmount import is_stale
from semfs.ingest import portable
from semfs.ingest.errors import MountError, SemfsError, engine_damage
from semfs.ingest.store.backends import capabilities

logger = logging.getLogger(__name__)

# How long the parent waits for the child to mount, beyond the store's connect timeout.
START_GRACE = 60.0


def check_mountpoint(path: Path, allow_nonempty: bool = False) -> None:
    """Refuse, with one clear line, a mountpoint that cannot take a mount now."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise MountError(f"mountpoint {path} does not exist: create it first (mkdir -p)") from None
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            raise MountError(
                f"{path} is a stale mount (Transport endpoint is not connected): "
                f"run `semfs umount {path}` (or {portable.unmount_hint(path)}) first"
            ) from None
        raise MountError(f"cannot use mountpoint {path}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise MountError(f"mountpoint {path} is not a directory")
    if is_stale(path):  # stat came from the kernel's cache
        raise MountError(
            f"{path} is a stale mount (Transport endpoint is not connected): "
            f"run `semfs umount {path}` (or {portable.unmount_hint(path)}) first"
        )
    if os.path.ismount(path):
        raise MountError(f"{path} is already a mount point: `semfs umount {path}` first")
    if not allow_nonempty and any(os.scandir(path)):
        raise MountError(
            f"mountpoint {path} is not empty (use -o nonempty to mount over its contents)"
        )


class _PipeReady:
    """The child's side of the start-up pipe: one line, ``ok`` or ``error: ...``, then EOF.

    On ``ok`` the child also lets go of the terminal: stdin from /dev/null, stdout and
    stderr (where libfuse writes) to the log file, else /dev/null.
    """

    def __init__(self, fd: int, log_file: Path | None) -> None:
        self.fd = fd
        self.log_file = log_file

    def __call__(self, error: str | None) -> None:
        line = "ok" if error is None else "error: " + " ".join(error.split())
        try:
            os.write(self.fd, line.encode("utf-8", "replace") + b"\n")
        finally:
            os.close(self.fd)
        if error is None:
            self._detach_stdio()

    def _detach_stdio(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_RDWR)
        out = devnull
        if self.log_file is not None:
            with contextlib.suppress(OSError):
                out = os.open(self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)


def _absolute(cfg: MountConfig) -> MountConfig:
    """The config with every path absolute: the daemon runs from /, like any daemon."""
    cfg.mountpoint = cfg.mountpoint.absolute()
    if capabilities(cfg.address).in_store_folder:
        cfg.address = replace(cfg.address, store=cfg.address.store_dir.absolute())
        # A mount of several collections: each at the same place.
        cfg.collections = tuple(cfg.address.named(a.collection) for a in cfg.collections)
    if cfg.log_file is not None:
        cfg.log_file = cfg.log_file.absolute()
    if cfg.watch is not None:
        cfg.watch = cfg.watch.absolute()
    return cfg


def mount(cfg: MountConfig) -> None:
    """Mount as configured: return once the mount answers (background) or is unmounted (-f)."""
    cfg = _absolute(cfg)
    check_mountpoint(cfg.mountpoint, allow_nonempty=bool(cfg.options.get("nonempty")))
    options = fuse_options(cfg)  # option errors now, not in the child
    for line in portable.limits(options, library_path(), can_invalidate()):
        logger.warning("%s", line)  # what this system's mount cannot do, one line each
    if cfg.watch is not None:
        from semfs.ingest.sources import check_source  # a plain mount reads no folder

        check_source(cfg.watch)
    if cfg.foreground:
        MountDaemon(cfg).run()
        return
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; tests see it through the mount
        os.close(read_fd)
        os._exit(_child(cfg, write_fd))
    os.close(write_fd)
    _await_child(pid, read_fd, cfg.address.timeout + START_GRACE)


def _child(cfg: MountConfig, write_fd: int) -> int:
    ready = _PipeReady(write_fd, cfg.log_file)
    daemon = MountDaemon(cfg, ready)
    try:
        os.setsid()  # out of the shell's process group: its Ctrl-C is not for us
        os.chdir("/")
        daemon.run()
        return 0
    except BaseException as exc:
        damage = engine_damage(exc)  # a damaged store says so, and how out, in one line
        if isinstance(exc, SemfsError):
            message = str(exc)
        else:
            message = damage or f"{type(exc).__name__}: {exc}"
        # The parent prints the message; the log (when it is a file) keeps it too.
        level = logging.ERROR if cfg.log_file is not None else logging.DEBUG
        logger.log(level, "%s", message, exc_info=logger.isEnabledFor(logging.DEBUG))
        with contextlib.suppress(OSError):
            daemon.report(message)
        return 1
    finally:
        logging.shutdown()


def _await_child(pid: int, fd: int, timeout: float) -> None:
    """Wait for the child's start-up line; raise MountError with its reason on failure."""
    deadline = time.monotonic() + timeout
    data = b""
    try:
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
                raise MountError(f"the mount did not come up within {timeout:.0f} s; stopped it")
            if not select.select([fd], [], [], remaining)[0]:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        raise
    finally:
        os.close(fd)
    line = data.decode("utf-8", "replace").strip()
    if line == "ok":
        return
    if line.startswith("error: "):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        raise MountError(line.removeprefix("error: "))
    _, status = os.waitpid(pid, 0)
    raise MountError(
        f"the mount daemon exited (status {os.waitstatus_to_exitcode(status)}) before the "
        "mount was ready; run with --foreground or --log-file to see why"
    )
