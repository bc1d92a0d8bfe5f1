"""The ``semfs`` console script's entry point.

A plain `semfs mount MOUNTPOINT [options]` starts without importing click or the commands
(:mod:`semfs.fusefs.cli.fastmount`): a mount's start is paid every time one starts.
Everything else, `semfs mount --help` and any argument that path is not sure of included,
runs the click command group of :mod:`semfs.fusefs.cli.group`. Nothing here imports click.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["mount"]:
        from semfs.fusefs.cli.fastmount import try_mount

        if try_mount(sys.argv[2:]):
            return
    from semfs.fusefs.cli.group import main as click_main

    click_main()
