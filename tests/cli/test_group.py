"""The `semfs` group is assembled in one place: each command module adds exactly its own
commands through its ``register(group)``, and `semfs mount`'s parameters are the option
table's, which the click-free start reads too."""

from __future__ import annotations

import click

from semfs.fusefs.cli import agent, collections, ingest, maintenance, mount, search, status
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
