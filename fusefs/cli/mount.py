"""The mount's commands: `semfs mount` (click's side: help, usage errors and whatever
:mod:`semfs.fusefs.cli.fastmount` leaves to it) and `semfs umount`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from semfs.fusefs.cli.common import Command, handle_errors, params
from semfs.fusefs.cli.options import MOUNT
from semfs.fusefs.view.parameters import parameter_lines

# semfs.fusefs.mount (FUSE bindings, the store backends, the watcher) is imported by the
# commands that use it: `semfs --version`, `--help` and the store commands start without it.

# The search syntax of `semfs mount --help`; its parameter lines come from the one table of
# `@` folders (semfs.fusefs.view.parameters), with the code's defaults.
MOUNT_EPILOG = f"""\b
Search as directories: every folder answers .search (--search-dir), listed nowhere,
so ls -a, find, grep -r and diff -r see only your documents:
    ls ~/mnt/docs/.search/"how do I rotate an api key"/
    ls ~/mnt/docs/deploy/.search/"serve docs under a subpath"/  # only inside deploy/
    cat ~/mnt/docs/.search/"rotate api key"/00-results.md     # ranked list + answering lines
    cat ~/mnt/docs/.search/"rotate api key"/01-*              # the best document, whole
    ls -U ~/mnt/docs/.search/                                 # recent queries, newest first
    cat ~/mnt/docs/.search/README.md                          # this syntax, in the mount

\b
A query folder holds 00-results.md, then one symlink per document, best first
(01-NAME, 02-NAME, ...; relative, so cat, grep and editors reach the real file).
Per-query options are parameter folders before the question, in any order
(a later one wins):
{parameter_lines()}
    e.g. ls ~/mnt/docs/.search/@keyword/@k=3/"nginx subpath"/
A parameter folder that is none of these (@k=500, @min=x, @bogus) is not found;
the mount's log says why. 00-results.md keeps its name whatever k.
The question is one file name: type '/' as U+2215 or U+FF0F, at most 255 bytes.
Names starting with '.' are not queries (.DS_Store, .git probes); '@' starts a
parameter; for a question that starts with either, begin the name with a space.
Results are cached per question and refreshed when the collection changes.

\b
System mount (mount -t semfs, /etc/fstab), after a one-time install of the helper:
    sudo ln -s "$(command -v mount.semfs)" /sbin/mount.semfs
    sudo mount -t semfs ~/.local/share/semfs ~/mnt/docs -o collection=docs
    sudo umount ~/mnt/docs

\b
An /etc/fstab line that lets you (not only root) run `mount ~/mnt/docs`:
    /home/me/.local/share/semfs  /home/me/mnt/docs  semfs  noauto,user,collection=docs  0 0
For a Qdrant server, give its URL instead of the store folder (or -o url=URL).
"""


@click.command(cls=Command, name="mount", epilog=MOUNT_EPILOG)
@params(MOUNT)
@click.pass_context
@handle_errors
def mount_cmd(ctx: click.Context, **parameters: Any) -> None:
    """Show a collection as a read-only directory tree at MOUNTPOINT.

    The tree mirrors the ingested folder, file for file and byte for byte, so ls, cat,
    grep -r, rg, find, diff -r and editors work on it. A PDF, Word, PowerPoint, HTML or
    EPUB file also has its text view beside it (report.pdf.md, with "## Page N" headings);
    diff -r SRC MNT then lists only the views (--no-views hides them). Goes to the
    background once the mount answers. `semfs ingest` into the same collection while
    mounted updates the tree within about a second. Each folder also answers
    `.search/QUESTION/` with the documents that best answer QUESTION (see below).
    Unmount with `semfs umount MOUNTPOINT`.
    With --watch DIR the daemon keeps the collection mirroring DIR while mounted (creating
    it if need be): each change shows within about a second; `semfs status` says how fresh.
    With --watch DIR --writable the mount also takes writes: they go to DIR as the writer
    (their permissions, their files), and each file is searchable soon after it is closed.
    With --collections docs,code (or --all) each collection is a folder of the mount
    (MOUNTPOINT/docs/, MOUNTPOINT/code/), searched with its own model: MOUNTPOINT/.search/Q/
    searches them all, best first whichever holds it, MOUNTPOINT/docs/.search/Q/ docs only,
    and MOUNTPOINT/.map.md names each with its size, kind and model.

    \b
    Example:
        semfs mount ~/mnt/docs
        ls -l ~/mnt/docs; grep -rn "api key" ~/mnt/docs; diff -r ./docs ~/mnt/docs
        semfs mount ~/mnt/acme --url http://localhost:6333 --collection acme -o allow_other
        semfs mount -f ~/mnt/docs --log-file /tmp/semfs.log
        semfs mount ~/mnt/docs --k 5 --mode keyword --search-dir .find
        semfs mount ~/mnt/docs --watch ./docs --exclude drafts/
        semfs mount ~/mnt/docs --no-views; diff -r ./docs ~/mnt/docs
        semfs mount ~/mnt/all --collections docs,code; ls ~/mnt/all/.search/"parse a config"/
        semfs mount ~/mnt/work -c work --watch ./work --writable; make test > ~/mnt/work/t.log
        semfs umount ~/mnt/docs
    """
    from semfs.fusefs.cli.fastmount import run_mount

    run_mount(ctx.params, ctx.find_root().meta.get("semfs.verbose", 0))


@click.command(cls=Command, name="umount")
@click.argument("mountpoint", type=click.Path(path_type=Path))
@click.option("-z", "--lazy", is_flag=True, help="Detach now even if busy (a lazy unmount).")
@click.option(
    "--force", is_flag=True, help="Unmount even what is not a semfs mount (any filesystem)."
)
@handle_errors
def umount_cmd(mountpoint: Path, lazy: bool, force: bool) -> None:
    """Unmount a semfs mount (or a stale one) and wait for its daemon to exit.

    Refuses anything that is not a semfs mount (type fuse.semfs) unless --force. Uses
    the system's FUSE unmount tool (umount on macOS). With --lazy the daemon keeps
    serving files still open under the mount and exits when they are closed; the command
    says so.

    \b
    Example:
        semfs umount ~/mnt/docs
        semfs umount --lazy ~/mnt/docs
    """
    from semfs.fusefs.mount.unmount import unmount

    note = unmount(mountpoint, lazy=lazy, force=force)
    if note is not None:
        click.echo(note, err=True)


def register(group: click.Group) -> None:
    """Add `mount` and `umount` to ``group``."""
    group.add_command(mount_cmd)
    group.add_command(umount_cmd)
