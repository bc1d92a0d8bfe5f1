"""The full ``semfs`` command: the store commands from :mod:`ingest.cli` plus mount commands.

It lives here, not in ``ingest``, because data flows one way: fusefs may import ingest,
never the reverse.
"""

from __future__ import annotations

from pathlib import Path

import click

from ingest.cli import cli, handle_errors, store_options

from .daemon import MountConfig, configure_logging, mount, parse_options, unmount

MOUNT_EPILOG = """\b
System mount (mount -t semfs, /etc/fstab), after a one-time install of the helper:
    sudo ln -s "$(command -v mount.semfs)" /sbin/mount.semfs
    sudo mount -t semfs ~/.local/share/semfs ~/mnt/docs -o collection=docs
    sudo umount ~/mnt/docs

\b
An /etc/fstab line that lets you (not only root) run `mount ~/mnt/docs`:
    /home/me/.local/share/semfs  /home/me/mnt/docs  semfs  noauto,user,collection=docs  0 0
For a Qdrant server, give its URL instead of the store folder (or -o url=URL).
"""


@cli.command(name="mount", epilog=MOUNT_EPILOG)
@click.argument("mountpoint", type=click.Path(path_type=Path))
@store_options
@click.option(
    "-f",
    "--foreground",
    is_flag=True,
    help="Stay in the foreground, logging to stderr; Ctrl-C unmounts.",
)
@click.option(
    "-o",
    "options",
    multiple=True,
    metavar="OPT[,OPT...]",
    help="FUSE mount options, comma-separated, repeatable: allow_other, "
    "entry_timeout=S, attr_timeout=S, uid=N, gid=N, nonempty, debug, ...",
)
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append the daemon's log (INFO and up) here [default: discarded in the "
    "background, stderr with -f].",
)
@click.option(
    "--connect-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds to wait for a Qdrant server before giving up.",
)
@click.pass_context
@handle_errors
def mount_cmd(
    ctx: click.Context,
    mountpoint: Path,
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    foreground: bool,
    options: tuple[str, ...],
    log_file: Path | None,
    connect_timeout: float,
) -> None:
    """Show a collection as a read-only directory tree at MOUNTPOINT.

    The tree mirrors the ingested folder, file for file and byte for byte, so ls, cat,
    grep -r, rg, find, diff -r and editors work on it. Goes to the background once the
    mount answers. `semfs ingest` into the same collection while mounted updates the tree
    within about a second. Unmount with `semfs umount MOUNTPOINT`.

    \b
    Example:
        semfs mount ~/mnt/docs
        ls -l ~/mnt/docs; grep -rn "api key" ~/mnt/docs; diff -r ./docs ~/mnt/docs
        semfs mount ~/mnt/acme --url http://localhost:6333 --collection acme -o allow_other
        semfs mount -f ~/mnt/docs --log-file /tmp/semfs.log
        semfs umount ~/mnt/docs
    """
    configure_logging(log_file, ctx.find_root().meta.get("semfs.verbose", 0))
    mount(
        MountConfig(
            mountpoint=mountpoint,
            store_path=store_path,
            url=url,
            api_key=api_key,
            collection=collection,
            options=parse_options(options),
            foreground=foreground,
            log_file=log_file,
            connect_timeout=connect_timeout,
        )
    )


@cli.command(name="umount")
@click.argument("mountpoint", type=click.Path(path_type=Path))
@click.option("-z", "--lazy", is_flag=True, help="Detach now even if busy (fusermount -uz).")
@handle_errors
def umount_cmd(mountpoint: Path, lazy: bool) -> None:
    """Unmount a semfs mount (or a stale one) and wait for its daemon to exit.

    Uses fusermount3 / fusermount on Linux and umount on macOS.

    \b
    Example:
        semfs umount ~/mnt/docs
        semfs umount --lazy ~/mnt/docs
    """
    unmount(mountpoint, lazy=lazy)


def main() -> None:
    cli(prog_name="semfs")
