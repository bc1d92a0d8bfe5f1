"""``mount.semfs``: the helper mount(8) runs for ``mount -t semfs`` and /etc/fstab entries.

mount(8) calls ``mount.semfs SPEC DIR [-sfnv] [-N NS] [-o OPTIONS] [-t TYPE]``. SPEC is the
store folder, or a Qdrant URL; ``collection=``, ``url=``, ``api_key=``, ``log_file=``,
``connect_timeout=`` and ``search_dir=``, ``search_k=``, ``search_mode=``,
``search_min_score=`` become the matching ``semfs mount`` options; options that only mean
something to mount(8) or fstab are dropped; everything else goes to FUSE as ``-o``.
Then the normal ``semfs mount`` runs, in the background, and the helper exits once the
mount answers. Install once with ``sudo ln -s "$(command -v mount.semfs)" /sbin/mount.semfs``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from semfs.fusefs.mount.daemon import parse_options

# Options for mount(8) and fstab, not for the filesystem. `rw` is dropped too: semfs is
# read-only whatever the fstab line says (mount(8) may add it on its own).
# fmt: off
DROPPED = frozenset({
    "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "_netdev",
    "nofail", "loud", "silent", "sw",
})
# fmt: on
# Options that become semfs mount options, by name.
TRANSLATED = {
    "collection": "--collection",
    "url": "--url",
    "api_key": "--api-key",
    "log_file": "--log-file",
    "connect_timeout": "--connect-timeout",
    "search_dir": "--search-dir",
    "search_k": "--k",
    "search_mode": "--mode",
    "search_min_score": "--min-score",
}


def translate(argv: Sequence[str]) -> list[str] | None:
    """The ``semfs`` arguments for a mount(8) helper command line; None for a fake mount."""
    positional: list[str] = []
    raw_options: list[str] = []
    fake = verbose = False
    args = iter(argv)
    for arg in args:
        if arg == "-o":
            raw_options.append(next(args, ""))
        elif arg in ("-t", "-N"):
            next(args, None)  # the type (we know it) and a namespace (unsupported)
        elif arg.startswith("-o") and len(arg) > 2:
            raw_options.append(arg[2:])
        elif arg.startswith("-") and len(arg) > 1:
            fake |= "f" in arg  # -f: mount(8)'s "fake", not our foreground
            verbose |= "v" in arg
        else:
            positional.append(arg)
    if len(positional) != 2:
        raise SystemExit("usage: mount.semfs STORE|URL MOUNTPOINT [-o collection=NAME,...]")
    spec, mountpoint = positional
    semfs = ["-v"] if verbose else []
    semfs += ["mount", mountpoint]
    fuse: list[str] = []
    opts = parse_options(raw_options)
    if "url" not in opts:
        semfs += ["--url", spec] if "://" in spec else ["--store", spec]
    for key, value in opts.items():
        if key in TRANSLATED and isinstance(value, str):
            semfs += [TRANSLATED[key], value]
        elif key in DROPPED or key.startswith("x-") or key == "comment":
            continue
        else:
            fuse.append(key if value is True else f"{key}={value}")
    if fuse:
        semfs += ["-o", ",".join(fuse)]
    return None if fake else semfs


def main(argv: Sequence[str] | None = None) -> None:
    args = translate(sys.argv[1:] if argv is None else argv)
    if args is None:
        return
    from semfs.fusefs.cli.group import cli

    cli(args=args, prog_name="mount.semfs")
