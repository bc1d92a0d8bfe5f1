"""`semfs status`, and what it and `semfs collections list` show: gathered from a store without
loading a model, and laid out for a person (sizes in KiB/MiB, local times, aligned columns)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from semfs.fusefs.cli.common import Command, handle_errors, one_line, store_options
from semfs.fusefs.cli.display import ago, duration, size, when, yes_no
from semfs.ingest.errors import SemfsError
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

if TYPE_CHECKING:
    from semfs.ingest.syncstate import SyncState

# Failed files listed by `semfs status` (all of them with --json).
STATUS_FAILED_SHOWN = 20


def status_lines(info: dict[str, Any], raw_bytes: bool) -> Iterator[tuple[str, str]]:
    """`semfs status` for a person: sizes in KiB/MiB (bytes with --bytes), yes/no, local
    times. A key this function does not know is shown as it is (after the known ones)."""
    shown = {
        "watch",
        "embedding",
        "bytes",
        "dimension",
        "ingest_seconds",
        "disk_bytes",
        "mount_log",
        "model_cache",
        "served_by",
        "through",
    }
    order = ["collection", "backend", "location", "source", "documents", "chunks"]
    for key in order:
        if info.get(key) is None:
            continue
        value = info[key]
        if key == "location" and info.get("through"):
            value = info["through"]
        if key == "documents" and info.get("bytes") is not None:
            value = f"{value} ({shown_size(info['bytes'], raw_bytes)})"
        yield key, str(value)
    if info.get("embedding") is not None:
        yield "embedded", embedding_line(info["embedding"])
    if "disk_bytes" in info:
        yield "on disk", shown_size(info["disk_bytes"], raw_bytes)  # None: a server keeps its own
    if info.get("model") is not None:
        yield "model", f"{info['model']} (dimension {info.get('dimension')})"
    if info.get("runtime") is not None:
        yield "runtime", str(info["runtime"])  # what embeds documents here
    if info.get("queries") is not None:
        yield "queries", str(info["queries"])  # what embeds them: ONNX Runtime, torch, the owner
    if info.get("model_cache") is not None:
        yield "model cache", str(info["model_cache"])
    if "ingested_at" in info:
        last = when(info["ingested_at"])
        if info.get("ingest_seconds") is not None:
            last += f", took {duration(info['ingest_seconds'])}"
        yield "last ingest", last
    for key, value in info.items():
        if key in shown or key in order or key in ("model", "runtime", "queries", "ingested_at"):
            continue
        if value is None:
            continue
        yield key, yes_no(value) if isinstance(value, bool) else str(value)
    if info.get("mount_log"):
        yield "mount log", info["mount_log"]


def print_watch(watch: SyncState) -> None:
    """The freshness lines of `semfs status`: what is followed, last sync, pending, failed."""
    how = f"pid {watch.pid}, {watch.watcher or 'starting'}"
    if watch.running:
        click.echo(f"{'following':>11}: {watch.source} ({how})")
    else:
        click.echo(f"{'followed':>11}: {watch.source} (not any more: {how} has stopped)")
    if watch.synced_at is None:
        click.echo(f"{'last sync':>11}: none yet")
    else:
        seconds = max(0.0, time.time() - watch.synced_at)
        synced = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(watch.synced_at))
        click.echo(f"{'last sync':>11}: {synced} ({seconds:.0f} s ago; {watch.batches} batches)")
    waiting = f" (waiting {watch.waiting})" if watch.pending and watch.waiting else ""
    click.echo(f"{'pending':>11}: {watch.pending}{waiting}")
    if watch.source_problem:
        click.echo(f"{'source':>11}: {watch.source_problem} (the index keeps its last state)")
    if watch.error:
        click.echo(f"{'error':>11}: {watch.error}")
    click.echo(f"{'failed':>11}: {len(watch.failed)}")
    for path, reason in sorted(watch.failed.items())[:STATUS_FAILED_SHOWN]:
        click.echo(f"{'':>13}{path!r}: {reason}" if "\n" in path else f"{'':>13}{path}: {reason}")
    if len(watch.failed) > STATUS_FAILED_SHOWN:
        click.echo(f"{'':>13}... and {len(watch.failed) - STATUS_FAILED_SHOWN} more (--json)")


def collection_row(address: CollectionAddress) -> dict[str, Any]:
    """One line of `semfs collections list`: from the meta and the document records (a
    manifest read on the embedded store), without counting chunks in the engine."""
    name = address.collection
    try:
        with open_store(address) as store:
            meta = store.read_meta()
            if meta is None:
                return {"name": name, "error": "empty (no meta): ingest into it or remove it"}
            # As `semfs status`: a current manifest answers without loading the engine's
            # shard (8.5 s of the 11 s this line took at 100k chunks, growing with them).
            manifest = store.read_manifest()
            docs = list(manifest.documents) if manifest is not None else store.list_documents()
            return {
                "name": name,
                "documents": len(docs),
                "chunks": meta.chunks,
                "bytes": sum(d.size for d in docs),
                "disk_bytes": store.disk_bytes(),
                "model": meta.model,
                "source": meta.source,
                "ingested_at": meta.ingested_at,
                "ingest_seconds": meta.ingest_seconds,
                "interrupted": meta.dirty,
            }
    except SemfsError as exc:  # in use by an ingest, damaged: say so on its line
        return {"name": name, "error": one_line(str(exc))}


def collection_table(rows: list[dict[str, Any]], raw_bytes: bool) -> Iterator[str]:
    """`semfs collections list`'s lines: a header, then one aligned line per collection."""
    table = [("NAME", "DOCS", "CHUNKS", "SIZE", "MODEL", "LAST INGEST", "SOURCE")]
    for r in rows:
        if "error" in r:
            table.append((r["name"], "-", "-", "-", "-", "-", r["error"]))
            continue
        last = ago(time.time() - r["ingested_at"]) if r["ingested_at"] else "-"
        table.append(
            (
                r["name"],
                str(r["documents"]),
                "-" if r["chunks"] is None else str(r["chunks"]),
                shown_size(r["bytes"], raw_bytes),
                r["model"],
                last,
                r["source"] or "-",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        cells = [
            c.ljust(w) if i == 0 or i >= 4 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row[:-1], widths, strict=True))
        ]
        yield "  ".join([*cells, row[-1]]).rstrip()


def shown_size(n: int | None, raw: bool) -> str:
    return size(n) if not raw or n is None else f"{n} bytes"


@click.command(cls=Command)
@store_options
@click.option("--bytes", "raw_bytes", is_flag=True, help="Sizes in bytes, not KiB/MiB/GiB.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (sizes in bytes).")
@handle_errors
def status(address: CollectionAddress, raw_bytes: bool, as_json: bool) -> None:
    """Show what a collection holds (documents, chunks, model, size, source folder, last
    ingest) and, when a folder is followed (--watch), how fresh it is: last sync, pending
    and failed changes.

    \b
    Example:
        semfs status
        semfs status --collection acme --json
    """
    from semfs.ingest.status import collection_status
    from semfs.ingest.syncstate import SyncState

    info = collection_status(address)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    for label, value in status_lines(info, raw_bytes):
        click.echo(f"{label:>11}: {value}")
    if "watch" in info:
        print_watch(SyncState.from_json(dict(info["watch"])))


def register(group: click.Group) -> None:
    """Add `semfs status` to ``group``."""
    group.add_command(status)


def embedding_line(progress: dict[str, Any]) -> str:
    """``41 % (1,230 of 3,000 chunks; keyword scores for the rest), pid 7 (semfs mount ...)
    is embedding them``; ``every chunk`` when done."""
    embedded, total = progress["embedded"], progress["chunks"]
    if embedded >= total:
        return "every chunk (meaning and keywords)"
    pct = 100 * embedded // total if total else 100
    line = f"{pct} % ({embedded:,} of {total:,} chunks; keyword scores for the rest)"
    if progress.get("by"):
        return f"{line}, {progress['by']} is embedding them"
    return f"{line}; the next `semfs ingest` (or a mount) embeds them"
