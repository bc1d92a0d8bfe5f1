"""`semfs collections`: list, remove and rename the collections of a store.

Commands are thin: the catalog (:func:`semfs.ingest.store.backends.open_catalog`) does the
work and refuses a collection a process owns; :func:`register` adds the group to ``semfs``.
"""

from __future__ import annotations

import json

import click

from semfs.fusefs.cli.common import Group, catalog_options, handle_errors
from semfs.fusefs.cli.display import size
from semfs.fusefs.cli.status import collection_row, collection_table
from semfs.ingest.collection import refuse_if_followed, remove
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import capabilities, open_catalog


@click.group(cls=Group)
def collections() -> None:
    """List, remove and rename the collections of a store.

    \b
    Example:
        semfs collections list
        semfs collections rm old-docs
        semfs collections rename docs fastapi
    """


@collections.command(name="list")
@catalog_options
@click.option("--bytes", "raw_bytes", is_flag=True, help="Sizes in bytes, not KiB/MiB/GiB.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list (sizes in bytes).")
@handle_errors
def collections_list(address: CollectionAddress, raw_bytes: bool, as_json: bool) -> None:
    """List the collections: documents, chunks, size, model, source folder, last ingest.

    \b
    Example:
        semfs collections list
        semfs collections list --url http://localhost:6333 --json
    """
    with open_catalog(address) as catalog:
        names = catalog.names()
        where = catalog.location
    rows = [collection_row(address.named(name)) for name in names]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no collections at {where}: run `semfs ingest DIR` to make one", err=True)
        return
    for line in collection_table(rows, raw_bytes):
        click.echo(line)


@collections.command(name="rm")
@click.argument("name")
@catalog_options
@click.option("-y", "--yes", is_flag=True, help="Do not ask first.")
@handle_errors
def collections_rm(name: str, address: CollectionAddress, yes: bool) -> None:
    """Remove collection NAME and everything it holds (the source folder is not touched).

    Asks first unless -y. Refused while a mount, `semfs mcp` or a watcher owns it.

    \b
    Example:
        semfs collections rm semfs-demo
        semfs collections rm old --url http://localhost:6333 -y
    """
    with open_catalog(address) as catalog:
        catalog.require(name)
        where = catalog.location
    refuse_if_followed(address.named(name))
    if not yes:
        row = collection_row(address.named(name))
        about = row.get("error") or (
            f"{row['documents']} documents, {size(row['bytes'])}, "
            f"from {row['source'] or 'an unknown folder'}"
        )
        click.confirm(f"Remove collection {name!r} ({about}) at {where}?", abort=True)
    remove(address.named(name))
    click.echo(f"Removed collection {name!r}")


@collections.command(name="rename")
@click.argument("old")
@click.argument("new")
@catalog_options
@handle_errors
def collections_rename(old: str, new: str, address: CollectionAddress) -> None:
    """Rename collection OLD to NEW (refused while a mount, `semfs mcp` or a watcher owns it).

    On a Qdrant server, which cannot rename, the points are copied to NEW, then OLD is
    deleted.

    \b
    Example:
        semfs collections rename docs fastapi
    """
    with open_catalog(address) as catalog:
        catalog.require(old)
        refuse_if_followed(address.named(old))
        catalog.rename(old, new)
    if not capabilities(address).in_store_folder:  # the local files follow (a folder's did)
        before, after = address.named(old).local_dir, address.named(new).local_dir
        if before.is_dir() and not after.exists():
            before.rename(after)
    click.echo(f"Renamed collection {old!r} to {new!r}")


def register(group: click.Group) -> None:
    """Add `semfs collections` to ``group``."""
    group.add_command(collections)
