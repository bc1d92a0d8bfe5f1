"""The ``semfs`` click group, and the one place its commands are added.

Each command module has one ``register(group)`` (as llm's plugin hook
``register_commands(cli)``), one module a command group: ingest, search, status, collections,
maintenance (check, compact), the mount's and the agents'. No module adds to another's group
when it is imported. :mod:`semfs.fusefs.cli` (the console script) runs
this group, except for a plain `semfs mount`, which it starts without click
(:mod:`semfs.fusefs.cli.fastmount`).

A command module imports the library it calls inside the command: `semfs --version`,
`--help` and `semfs mount` start without the pipeline, the engine or the FUSE bindings.
"""

from __future__ import annotations

import click

from semfs.fusefs.cli.agent import register as register_agent
from semfs.fusefs.cli.collections import register as register_collections
from semfs.fusefs.cli.common import Group
from semfs.fusefs.cli.ingest import register as register_ingest
from semfs.fusefs.cli.maintenance import register as register_maintenance
from semfs.fusefs.cli.mount import register as register_mount
from semfs.fusefs.cli.search import register as register_search
from semfs.fusefs.cli.status import register as register_status
from semfs.ingest import __version__
from semfs.ingest.logs import configure_logging


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`semfs --version`: the version, then what embeds the default model here (read off the
    installed packages' metadata: nothing is imported)."""
    if not value or ctx.resilient_parsing:
        return
    from semfs.ingest.embedding.embedder import embedding_runtime

    click.echo(f"semfs, version {__version__}\n{embedding_runtime()}")
    ctx.exit()


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and the embedding runtime, and exit.",
)
@click.option(
    "-v", "--verbose", count=True, help="More logging; -vv for debug. Tracebacks with -v."
)
@click.pass_context
def cli(ctx: click.Context, verbose: int) -> None:
    """semfs: a document collection as a directory, with search as paths.

    \b
    Example:
        semfs ingest ./docs
        semfs search "how do I rotate an api key"
        semfs mount ~/mnt/docs && ls ~/mnt/docs/.search/"rotate api key"/
    """
    ctx.meta["semfs.verbose"] = verbose
    configure_logging(verbose)


register_ingest(cli)
register_search(cli)
register_status(cli)
register_collections(cli)
register_maintenance(cli)
register_mount(cli)
register_agent(cli)


def main() -> None:
    cli(prog_name="semfs")
