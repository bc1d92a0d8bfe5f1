"""The store's upkeep commands: `semfs check` (and its repairs) and `semfs compact`."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from semfs.fusefs.cli.common import Command, handle_errors, one_line, store_options, waiting
from semfs.ingest.errors import SemfsError
from semfs.ingest.store import DEFAULT_COLLECTION, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import capabilities, open_store

if TYPE_CHECKING:
    from semfs.ingest.store.check import CheckReport
    from semfs.ingest.store.schema import StoreMeta


@click.command(cls=Command)
@store_options
@click.option(
    "--repair",
    "repair_source",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="SOURCE",
    help="Re-ingest the damaged documents from SOURCE (the folder they were ingested from).",
)
@click.option("--prune", is_flag=True, help="Delete the damaged documents from the store.")
@click.option(
    "--rebuild",
    "rebuild_source",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="SOURCE",
    help="Set the collection's shard aside (shard.damaged-TIME) and ingest SOURCE afresh: for "
    "damage the engine cannot repair in place (embedded stores).",
)
@click.option("-m", "--model", help="With --repair: the model, when it is not the store's.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@handle_errors
def check(
    address: CollectionAddress,
    repair_source: Path | None,
    prune: bool,
    rebuild_source: Path | None,
    model: str | None,
    as_json: bool,
) -> None:
    """Check a store: every document's chunks whole, in order and hashing to its sha256,
    and its dense vectors readable.

    Not verified (said with every ok): the dense vectors' values (that would mean embedding
    every chunk again) and the keyword index; bytes changed there only skew rankings, and
    --rebuild SOURCE makes both afresh.

    Prints one line per damaged document and exits 1 when there is any (0 when the store
    is sound). --repair SOURCE re-ingests the damaged documents from SOURCE (a full ingest
    of SOURCE, which also picks up any other change there); --prune deletes them instead.
    Points the engine cannot decode cannot be replaced in place: --rebuild SOURCE sets the
    damaged shard aside and ingests SOURCE into a new one.

    \b
    Example:
        semfs check
        semfs check --repair ./docs
        semfs check --prune --collection acme
        semfs check --rebuild ./docs
    """
    from semfs.ingest.errors import StoreDamagedError
    from semfs.ingest.store.check import check_store

    if sum(x is not None and x is not False for x in (repair_source, prune, rebuild_source)) > 1:
        raise click.UsageError("--repair, --prune and --rebuild exclude each other")
    if rebuild_source is not None:
        if not capabilities(address).set_aside:
            raise click.UsageError("--rebuild sets an embedded shard aside: not with --url")
        _rebuild(address, rebuild_source, model, None)
    try:
        with open_store(address):
            pass  # an unreadable store can only be rebuilt
    except StoreDamagedError as exc:
        if repair_source is None or not capabilities(address).set_aside:
            raise
        _rebuild(address, repair_source, model, exc)
    with open_store(address) as store:
        report = check_store(store)
        meta = store.read_meta()
        fixed: list[str] = []
        if report.problems and prune:
            fixed = report.damaged_paths
            with in_place("--prune"):
                _prune(store, fixed)  # also records the counts: what was lost is accepted
            report = check_store(store)
        elif report.problems and repair_source is not None:
            from semfs.ingest.pipeline import ingest

            # Lost documents come back as added, damaged ones as repaired.
            with in_place("--repair"):
                run = ingest(repair_source, store, model=model, verify=True)
            fixed = sorted({*run.repaired, *run.added})
            report = check_store(store)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "documents": report.documents,
                    "chunks": report.chunks,
                    "problems": [{"path": p.path, "reason": p.reason} for p in report.problems],
                    "notes": report.notes,
                    "not_verified": list(report.not_verified),
                    "fixed": fixed,
                    "repair": _repair_command(report, meta, address),
                },
                indent=2,
            )
        )
    else:
        for path in fixed:
            click.echo(f"{'pruned' if prune else 'repaired'}: {path}")  # or restored
        for problem in report.problems:
            line = f"damaged: {problem}" if problem.path else f"damaged store: {problem.reason}"
            click.echo(line)
        for note in report.notes:
            click.echo(f"note: {note}")
        repair = _repair_command(report, meta, address)
        if repair is not None:
            click.echo(
                f"note: to repair, re-ingest the damaged documents from their folder: {repair} "
                "(or --prune to delete them)"
            )
        if any("cannot be read" in p.reason for p in report.problems):
            click.echo(
                "note: the engine cannot decode some points, so they cannot be replaced in "
                "place: `semfs check --rebuild SOURCE` sets the shard aside and ingests SOURCE "
                "afresh"
            )
        if report.ok:
            # An ok says what it vouches for: flipped bytes in what it cannot verify pass.
            click.echo(
                f"ok: {report.documents} documents, {report.chunks} chunks checked (not "
                "verified: the dense vectors' values, the keyword index; --json says why)"
            )
    if not report.ok:
        raise click.exceptions.Exit(1)


def _repair_command(
    report: CheckReport, meta: StoreMeta | None, address: CollectionAddress
) -> str | None:
    """The command that repairs what ``report`` found (the folder the collection mirrors, when
    it is recorded), or None when nothing is to repair in place."""
    if report.ok or any("cannot be read" in p.reason for p in report.problems):
        return None  # sound, or only a rebuild helps (said on its own line)
    words = ["semfs", "check", "--repair", meta.source if meta and meta.source else "SOURCE"]
    if address.store is not None:
        words += ["--store", str(address.store)]
    if address.url:
        words += ["--url", address.url]
    if address.collection != DEFAULT_COLLECTION:
        words += ["-c", address.collection]
    return " ".join(w if w == "SOURCE" else shlex.quote(w) for w in words)


@contextlib.contextmanager
def in_place(what: str) -> Iterator[None]:
    """An engine failure while changing damaged points becomes one line saying to rebuild."""
    try:
        yield
    except SemfsError:
        raise
    except Exception as exc:
        from semfs.ingest.errors import StoreDamagedError

        raise StoreDamagedError(
            f"{what} failed: the store engine cannot change its damaged points "
            f"({one_line(f'{type(exc).__name__}: {exc}')}); rebuild the store from its "
            "source instead: `semfs check --rebuild SOURCE`"
        ) from exc


def _rebuild(
    address: CollectionAddress, source: Path, model: str | None, why: Exception | None
) -> None:
    """Set the shard aside and ingest ``source`` afresh (a store the engine cannot open or
    repair in place)."""
    from semfs.ingest.pipeline import ingest
    from semfs.ingest.store.backends import set_aside

    aside = set_aside(address)
    if why is not None:
        click.echo(f"unreadable: {why}", err=True)
    click.echo(f"set the damaged shard aside as {aside}; rebuilding from {source}")
    with open_store(address) as store:
        ingest(source, store, model=model)


def _prune(store: Store, paths: list[str]) -> None:
    """Delete damaged documents and record the new counts (a change the mount picks up),
    in its turn with the collection's other writers."""
    from semfs.ingest.store.writelock import WRITE_LOCK, CollectionLock

    with CollectionLock(store.lock_path(WRITE_LOCK), "first").held_for(on_wait=waiting):
        store.delete_documents(paths)
        meta = store.read_meta()
        if meta is not None:
            docs = store.list_documents()
            # replace(), not a new StoreMeta: the source record and BM25's average stay.
            store.write_meta(
                dataclasses.replace(
                    meta,
                    generation=meta.generation + 1,
                    documents=len(docs),
                    chunks=sum(d.chunks for d in docs),
                )
            )
        store.flush()


@click.command(cls=Command)
@store_options
@handle_errors
def compact(address: CollectionAddress) -> None:
    """Reclaim the space of replaced and deleted chunks now (ingest also does it by itself).

    Runs Qdrant Edge's optimizers on the embedded store: segments where a fifth or more of
    the points are deleted are rewritten, and the write-ahead log drops what they hold. A
    Qdrant server optimizes on its own, so there this does nothing.

    \b
    Example:
        semfs compact
        semfs compact --store /data/semfs --collection acme
    """
    with open_store(address) as store:
        before = store.disk_bytes()
        changed = store.compact()
        after = store.disk_bytes()
    if before is None or after is None:
        click.echo("nothing to do: the server compacts its collections itself")
        return
    click.echo(
        f"{'compacted' if changed else 'already compact'}: "
        f"{before / 1e6:.1f} MB -> {after / 1e6:.1f} MB on disk"
    )


def register(group: click.Group) -> None:
    """Add `semfs check` and `semfs compact` to ``group``."""
    for command in (check, compact):
        group.add_command(command)
