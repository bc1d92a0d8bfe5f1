#!/usr/bin/env python3
"""Print semfs(1), a man page made from the click commands' own help (as docs/cli.md is).

Our own few lines rather than click-man: nothing to install, and the page says exactly what
`semfs COMMAND --help` says, one section per command.

Example:
    .venv/bin/python scripts/manpage.py > semfs.1 && man -l semfs.1
    sudo install -m 644 semfs.1 /usr/local/share/man/man1/
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterator

import click


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
        sub = click.Context(command, info_name=name, parent=ctx)
        yield f"{prefix} {name}", command, sub
        if isinstance(command, click.Group):
            yield from _commands(command, sub, f"{prefix} {name}")


def manpage(group: click.Group) -> str:
    root = click.Context(group, info_name="semfs")
    date = datetime.date.today().isoformat()
    lines = [
        f'.TH SEMFS 1 "{date}" "semfs" "User Commands"',
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


def main() -> int:
    from semfs.fusefs.cli.group import cli

    sys.stdout.write(manpage(cli))
    return 0


if __name__ == "__main__":
    sys.exit(main())
