#!/usr/bin/env python3
"""Print semfs(1), a man page made from the click commands' own help (as docs/cli.md is).

Our own few lines rather than click-man: nothing to install, and the page says exactly what
`semfs COMMAND --help` says, one section per command. The page the package installs
(share/man/man1, so that `man semfs` finds it) is man/semfs.1, written by --write; a test that
land.sh runs (tests/test_setup.py) fails while it differs from what this prints.

Example:
    .venv/bin/python scripts/manpage.py --write     # after changing a command's help
    .venv/bin/python scripts/manpage.py | man -l -
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import click

PAGE = Path(__file__).resolve().parents[1] / "man" / "semfs.1"
# The help is wrapped at a fixed width, whatever the terminal, so the page is the same anywhere.
WIDTH = 80


def _roff(text: str) -> str:
    """Text as roff: backslashes doubled, a leading dot or quote escaped."""
    out = []
    for line in text.replace("\\", "\\e").split("\n"):
        out.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(out)


def _commands(
    group: click.Group, ctx: click.Context, prefix: str
) -> Iterator[tuple[str, click.Command, click.Context]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx, terminal_width=WIDTH)
        yield f"{prefix} {name}", command, sub
        if isinstance(command, click.Group):
            yield from _commands(command, sub, f"{prefix} {name}")


def manpage(group: click.Group, version: str = "") -> str:
    """The page, the same on every machine and day: no date, help wrapped at :data:`WIDTH`."""
    root = click.Context(group, info_name="semfs", terminal_width=WIDTH)
    lines = [
        f'.TH SEMFS 1 "" "{f"semfs {version}".strip()}" "User Commands"',
        ".SH NAME",
        "semfs \\- a document collection as a directory you can search",
        ".SH SYNOPSIS",
        ".B semfs",
        "COMMAND [OPTIONS] [ARGS]...",
        ".SH DESCRIPTION",
        ".nf",
        _roff(group.get_help(root)),
        ".fi",
        ".SH COMMANDS",
    ]
    for name, _command, ctx in _commands(group, root, "semfs"):
        lines += [f".SS {name}", ".nf", _roff(ctx.get_help()), ".fi"]
    lines += [
        ".SH SHELL COMPLETION",
        ".nf",
        'eval "$(_SEMFS_COMPLETE=bash_source semfs)"   # bash; zsh_source, fish_source',
        ".fi",
    ]
    return "\n".join(lines) + "\n"


def current() -> str:
    """The page for the installed semfs's commands."""
    # Help texts show the default store folder: spell it $HOME/.local/share/semfs on every
    # machine (as scripts/cli_reference.py does), before the options' table is imported.
    os.environ["XDG_DATA_HOME"] = "$HOME/.local/share"
    os.environ.pop("SEMFS_STORE", None)
    from semfs.fusefs.cli.group import cli
    from semfs.ingest import __version__

    return manpage(cli, __version__)


def main(argv: list[str]) -> int:
    page = current()
    if argv == ["--write"]:
        PAGE.parent.mkdir(exist_ok=True)
        PAGE.write_text(page)
    elif argv == ["--check"]:
        if not PAGE.exists() or PAGE.read_text() != page:
            print(f"{PAGE} is out of date: scripts/manpage.py --write", file=sys.stderr)
            return 1
    elif not argv:
        sys.stdout.write(page)
    else:
        print("usage: scripts/manpage.py [--write | --check]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
