"""The `semfs` group is assembled in one place: each command module adds exactly its own
commands through its ``register(group)``, and `semfs mount`'s parameters are the option
table's, which the click-free start reads too."""

from __future__ import annotations

import click
from click.testing import CliRunner

from semfs.fusefs.cli import agent, collections, ingest, maintenance, mount, search, status
from semfs.fusefs.cli.common import Command, Group
from semfs.fusefs.cli.fastmount import parse
from semfs.fusefs.cli.group import cli
from semfs.fusefs.cli.options import MOUNT

OWN_COMMANDS = {
    ingest: {"ingest"},
    search: {"search"},
    status: {"status"},
    collections: {"collections"},
    maintenance: {"check", "compact"},
    mount: {"mount", "umount"},
    agent: {"mcp", "token", "guide"},
}


def test_each_command_module_registers_its_own_commands_and_only_there() -> None:
    for module, names in OWN_COMMANDS.items():
        group = click.Group("fresh")
        module.register(group)
        assert set(group.commands) == names, module.__name__
    assert set(cli.commands) == set().union(*OWN_COMMANDS.values())


def test_the_mount_command_takes_its_parameters_from_the_table() -> None:
    command = cli.commands["mount"]
    assert [p.name for p in command.params] == [p.name for p in MOUNT]
    for param, row in zip(command.params, MOUNT, strict=True):
        if isinstance(param, click.Option):
            assert tuple(param.opts) == row.flags, row.name
            assert param.envvar == row.envvar, row.name
            assert param.help == row.help, row.name


def _commands(command: click.Command) -> list[click.Command]:
    found = [command]
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            found += _commands(sub)
    return found


def test_every_command_refuses_a_single_option_given_twice() -> None:
    """click keeps the last of an option given twice (`-c docs -c code` searched `code`
    alone): every semfs command is the class that refuses it instead."""
    for command in _commands(cli):
        kind = Group if isinstance(command, click.Group) else Command
        assert isinstance(command, kind), command.name
    runner = CliRunner()
    for args, flag in (
        (["search", "q", "--mode", "keyword", "--mode", "hybrid"], "--mode"),
        (["search", "q", "-k", "2", "--k=5"], "--k"),
        (["status", "-c", "a", "--collection", "b"], "--collection"),
        (["token", "create", "ci", "--under", "a", "-c", "a", "-c", "b"], "--collection"),
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.output.splitlines()[-1] == f"Error: {flag} given twice", result.output
    # What may repeat still does: a multiple (--include), a count (-vv), a flag.
    result = runner.invoke(cli, ["-vv", "ingest", "--help", "--include", "a", "--include", "b"])
    assert result.exit_code == 0, result.output


def test_the_fast_mount_start_leaves_an_option_given_twice_to_click() -> None:
    assert parse(["/mnt/docs", "--log-file", "/tmp/a", "--log-file", "/tmp/b"]) is None
    assert parse(["/mnt/docs", "-c", "a", "-c", "b"]) is None
    assert parse(["/mnt/docs", "--include", "*.md", "--include", "*.txt"]) is not None
