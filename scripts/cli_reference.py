"""The generated documentation, built from the code: the commands table and every command's
help in docs/cli.md, the search syntax in docs/searching.md, the agent guide in docs/agents.md.
Run by cog (``cog -r docs/cli.md docs/searching.md docs/agents.md`` rewrites them; ``cog
--check``, in scripts/test.sh, fails when they drift from ``semfs --help`` and ``semfs guide``).

Nothing here is written by hand about a command: a summary is the first paragraph of the
command's docstring, options are its click parameters, the search syntax is ``semfs mount
--help``'s own text.
"""

from __future__ import annotations

import os
import re

import click
import click.testing

# Help texts show the default store folder: spell it $HOME/.local/share/semfs on every machine.
os.environ.pop("SEMFS_STORE", None)
os.environ["XDG_DATA_HOME"] = "$HOME/.local/share"

from semfs.fusefs.agent.guide import guide
from semfs.fusefs.cli.group import cli  # after the environment above

PROG = "semfs"


def _commands(group: click.Group = cli, prefix: str = "") -> list[tuple[str, click.Command]]:
    """Every command, a group's subcommands after it (``collections list``, ...)."""
    ctx = click.Context(group, info_name=PROG)
    out: list[tuple[str, click.Command]] = []
    for name in group.list_commands(ctx):
        cmd = group.commands[name]
        out.append((prefix + name, cmd))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, f"{prefix}{name} ")
    return out


def _summary(cmd: click.Command) -> str:
    """The first paragraph of the docstring, on one line."""
    text = (cmd.help or "").split("\n\n")[0]
    return " ".join(text.split())


def _usage(name: str, cmd: click.Command) -> str:
    ctx = click.Context(cmd, info_name=f"{PROG} {name}")
    args = [p.make_metavar(ctx) for p in cmd.params if isinstance(p, click.Argument)]
    return " ".join([PROG, name, *args])


def _options(cmd: click.Command) -> str:
    flags = [
        "/".join(f"`{o}`" for o in p.opts)
        for p in cmd.params
        if isinstance(p, click.Option) and not p.hidden
    ]
    return ", ".join(flags)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def commands_table() -> str:
    """A Markdown table: each command's usage, summary and options."""
    rows = ["| command | what it does | options |", "|---|---|---|"]
    for name, cmd in _commands():
        rows.append(
            f"| `{_cell(_usage(name, cmd))}` | {_cell(_summary(cmd))} | {_cell(_options(cmd))} |"
        )
    return "\n".join(rows) + "\n"


def help_text(*args: str) -> str:
    """``semfs ARGS --help`` as the terminal shows it, 80 columns wide."""
    result = click.testing.CliRunner().invoke(
        cli, [*args, "--help"], prog_name=PROG, terminal_width=80
    )
    if result.exit_code != 0:
        raise RuntimeError(f"{PROG} {' '.join(args)} --help failed: {result.output}")
    return result.output


def full_help() -> str:
    """Every command's ``--help``, in a fenced block each."""
    parts = []
    for name, _cmd in _commands():
        parts.append(f"#### `{PROG} {name}`\n\n```\n{help_text(*name.split()).rstrip()}\n```\n")
    return "\n".join(parts)


def search_syntax() -> str:
    """The search-directory syntax exactly as ``semfs mount --help`` states it."""
    epilog = cli.commands["mount"].epilog or ""
    paragraphs = [p.strip("\n") for p in re.split(r"\n\s*\n", epilog.replace("\b\n", ""))]
    wanted = [p for p in paragraphs if ".search" in p or "parameter folders" in p]
    return "```\n" + "\n\n".join(wanted) + "\n```\n"


def agent_guide() -> str:
    """The agent guide exactly as ``semfs guide`` prints it (DOCS where the mountpoint goes)."""
    return "```text\n" + guide() + "```\n"
