"""scripts/manpage.py: semfs(1) from the click commands' help, every command in it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click

from semfs.fusefs.cli.group import cli

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "manpage.py"


def test_the_man_page_has_every_command_and_its_help() -> None:
    spec = importlib.util.spec_from_file_location("manpage", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = module.manpage(cli)
    assert page.startswith(".TH SEMFS 1 ")
    ctx = click.Context(cli, info_name="semfs")
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        assert f"\n.SS semfs {name}\n" in page, name
        words = " ".join((command.help or "").split()[:4])  # help is wrapped anew
        assert words.replace("\\", "\\e") in page, name
    assert "_SEMFS_COMPLETE=bash_source" in page
