"""The store commands: ingest, status, collections, check, compact, search.

Commands are thin: they parse options, call the library, and print. The library is imported
inside each command (the pipeline and search load Qdrant Edge and the chunker), so that
`semfs --help` starts fast. :func:`register` adds them to the ``semfs`` group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from semfs.fusefs.cli.common import (
    catalog_options,
    handle_errors,
    opened,
    opened_catalog,
    search_options,
    source_options,
    store_options,
)
from semfs.fusefs.cli.maintenance import check, compact, in_place
from semfs.fusefs.cli.status import (
    collection_row,
    collection_table,
    print_watch,
    status_lines,
    store_info,
)
from semfs.ingest import display
from semfs.ingest.errors import SemfsError, StoreLockedError
from semfs.ingest.logs import MOUNT_LOG
from semfs.ingest.store import Store, default_store_path
from semfs.ingest.store.backends import missing_collection

if TYPE_CHECKING:
    from semfs.ingest.embedding.embedder import Embedder
    from semfs.ingest.pipeline import IngestReport
    from semfs.ingest.progress import IngestProgress
    from semfs.ingest.sources import SourceOptions
    from semfs.ingest.syncstate import SyncState


@click.command(name="ingest")
@click.argument("source", type=click.Path(path_type=Path))
@store_options
@source_options
@click.option(
    "-w",
    "--watch",
    is_flag=True,
    help="Then keep following SOURCE: each change is ingested within about a second "
    "(foreground; Ctrl-C stops).",
)
@click.option(
    "--verify",
    is_flag=True,
    help="Also check unchanged documents against what the store holds (reads every chunk) "
    "and re-ingest the damaged ones.",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Let the collection mirror SOURCE although it was built from another folder "
    "(its documents not in SOURCE are deleted).",
)
@click.option(
    "--retry-skipped",
    is_flag=True,
    help="Extract again the converted files skipped for their contents (a zip bomb, text over "
    "--max-size, ...), which are otherwise not tried again while unchanged.",
)
@click.option(
    "-n",
    "--dry-run",
    is_flag=True,
    help="Say what a run would add, update, delete and skip; write nothing, load no model.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a summary.")
@handle_errors
def ingest_cmd(
    source: Path,
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    model: str | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    batch_size: int,
    max_bytes: int,
    watch: bool,
    follow_symlinks: bool,
    jobs: int | None,
    verify: bool,
    replace: bool,
    retry_skipped: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Make a collection mirror SOURCE: add new files, re-embed changed ones, drop deleted ones.

    Unchanged files are not re-embedded (and an unchanged re-run loads no model). VCS folders
    are skipped; files that are not documents (images, stylesheets, fonts, binaries, a scanned
    PDF) are stored as they are, so a mount serves every file, but never searched; unreadable
    and oversized files (--max-size) are skipped with a reason, and so are symlinks that lead
    outside SOURCE (unless --follow-symlinks). A file that cannot be read this time keeps its
    ingested version. A converted file its extractor refused is not extracted again while
    unchanged (--retry-skipped). Exit status is 0 when the run
    succeeded, even with skipped files. With --watch it then follows SOURCE until Ctrl-C,
    one small batch per burst of changes (see `semfs status`). With --verify, documents
    whose stored chunks no longer hash to what was ingested are re-ingested too.

    A collection mirrors one folder, recorded at its first ingest: another folder is
    refused (it would delete the collection's documents) unless --replace; use
    -c NAME to ingest it into a collection of its own. A folder that moved is followed.

    \b
    Example:
        semfs ingest ./docs
        semfs ingest ./docs --verify
        semfs ingest ./other-docs -c other
        semfs ingest ./docs --include '*.md' --include '*.mdx' --exclude 'drafts/'
        semfs ingest ./docs --url http://localhost:6333 --collection acme
        semfs ingest ./docs --watch
        semfs ingest ./docs --dry-run
        semfs ingest ./big-folder --jobs 4
    """
    from semfs.ingest.pipeline import ingest

    if dry_run:
        if watch:
            raise click.UsageError("--dry-run and --watch do not go together")
        _dry_run(source, store_path, url, api_key, collection, model, include, exclude,
                 max_bytes, follow_symlinks, replace, as_json, jobs)  # fmt: skip
        return
    if watch:
        from semfs.ingest.sources import SourceOptions

        opts = SourceOptions(model, include, exclude, batch_size, max_bytes, follow_symlinks, jobs)
        _follow(
            source, store_path, url, api_key, collection, opts, as_json=as_json, replace=replace
        )
        return

    from semfs.ingest.embedding.embedder import load_embedder
    from semfs.ingest.pipeline import resolve_model
    from semfs.ingest.skipmemo import memo_file

    with opened(store_path, url, api_key, collection) as store, _in_place_if(verify):
        # Made here, so that the export it may make on first use can be reported afterwards.
        embedder = load_embedder(resolve_model(store, model))
        # The model's load, then a bar (a line every 10 s when stderr is not a terminal).
        progress = None if as_json else _progress(embedder)
        try:
            report = ingest(
                source,
                store,
                model=model,
                embedder=embedder,
                include=include,
                exclude=exclude,
                batch_size=batch_size,
                max_bytes=max_bytes,
                follow_symlinks=follow_symlinks,
                jobs=jobs,
                on_start=progress.start if progress else None,
                on_progress=progress.advance if progress else None,
                verify=verify,
                replace_source=replace,
                skip_memo=memo_file(store_path, url, collection),
                retry_skipped=retry_skipped,
            )
        except KeyboardInterrupt:
            if progress is not None:
                progress.close()
                progress = None
            # Each document commits whole (its chunks, then its record): what was in stays.
            click.echo(
                "Interrupted: the documents ingested so far are kept, the one in progress "
                "is not; run the same command again to resume (what is in is not embedded "
                "again).",
                err=True,
            )
            sys.exit(130)
        finally:
            if progress is not None:
                progress.close()
        location = store.location
    _prepare_queries(embedder, quiet=as_json)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        _print_report(report, source, collection, location)


def _in_place_if(verify: bool) -> contextlib.AbstractContextManager[None]:
    return in_place("ingest --verify") if verify else contextlib.nullcontext()


def _progress(embedder: Embedder, label: str = "Embedding") -> IngestProgress:
    """The progress display of an ingest on stderr, told of ``embedder``'s load too."""
    from semfs.ingest.progress import IngestProgress

    progress = IngestProgress(sys.stderr, label=label)
    if hasattr(embedder, "on_load"):
        embedder.on_load = progress.on_load
    if hasattr(embedder, "on_export"):
        embedder.on_export = lambda: click.echo(
            "Exporting the model to ONNX Runtime, once per model (later ingests and searches "
            "run without torch) ...",
            err=True,
        )
    return progress


def _prepare_queries(embedder: Embedder, quiet: bool) -> None:
    """What the model's one-off ONNX export measured, when this process made it."""
    agreement = getattr(embedder, "agreement", None)
    if agreement is not None and not quiet:
        verdict = "agrees" if agreement.agrees else "DISAGREES: torch goes on embedding"
        click.echo(
            f"  ONNX fp32 export {verdict} with torch (lowest cosine {agreement.min_cosine:.6f}"
            f" on {agreement.texts} texts), {agreement.seconds:.1f} s",
            err=True,
        )


def _follow(
    source: Path,
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    options: SourceOptions,
    *,
    as_json: bool,
    replace: bool = False,
) -> None:
    """`semfs ingest --watch`: what :class:`semfs.ingest.follow.Follower` does, printed."""
    from semfs.ingest.follow import Follower

    with Follower(
        source, store_path, url, api_key, collection, options, replace=replace
    ) as follower:
        embedder = follower.embedder
        progress = None if as_json else _progress(embedder, "Syncing")
        prepared = threading.Event()

        def on_batch(report: IngestReport, state: SyncState) -> None:
            if not prepared.is_set() and getattr(embedder, "loaded", False):
                prepared.set()  # once the model has loaded (and perhaps been exported) here
                _prepare_queries(embedder, quiet=as_json)
            if as_json:
                click.echo(json.dumps(report.to_json(), separators=(",", ":")))
                return
            if not (report.added or report.updated or report.deleted) and state.batches > 1:
                return
            click.echo(
                f"{time.strftime('%H:%M:%S')} synced: added {len(report.added)}, updated "
                f"{len(report.updated)}, deleted {len(report.deleted)}, failed "
                f"{len(state.failed)} ({report.seconds:.1f} s)"
            )

        def on_ready() -> None:
            if not as_json:
                click.echo(f"Following {source} into collection {collection!r}; Ctrl-C stops.")
            # SIGTERM stops as Ctrl-C does: the batch under way finishes, the state says so.
            signal.signal(signal.SIGTERM, _interrupt)

        follower.run(
            on_batch,
            on_start=progress.start if progress else None,
            on_progress=progress.advance if progress else None,
            on_ready=on_ready,
        )
    if not as_json:
        click.echo("Stopped following " + str(source))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _dry_run(
    source: Path,
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    model: str | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    max_bytes: int,
    follow_symlinks: bool,
    replace: bool,
    as_json: bool,
    jobs: int | None = None,
) -> None:
    """``semfs ingest --dry-run``: the run's report, with nothing written."""
    from semfs.ingest.pipeline import ingest

    with opened(store_path, url, api_key, collection) as store:
        report = ingest(
            source,
            store,
            model=model,
            include=include,
            exclude=exclude,
            max_bytes=max_bytes,
            follow_symlinks=follow_symlinks,
            replace_source=replace,
            dry_run=True,
            jobs=jobs,
        )
    if as_json:
        click.echo(json.dumps({**report.to_json(), "dry_run": True}, indent=2))
        return
    click.echo(
        f"Dry run of {source} into collection {collection!r}: would add {len(report.added)}, "
        f"update {len(report.updated)}, delete {len(report.deleted)}, skip "
        f"{len(report.skipped)} ({len(report.unchanged)} unchanged); nothing written"
    )
    for what, paths in (("add", report.added), ("update", report.updated),
                        ("delete", report.deleted)):  # fmt: skip
        for path in paths:
            click.echo(f"  {what} {path!r}" if "\n" in path else f"  {what} {path}")
    for s in report.skipped:
        click.echo(f"  skip {s.path}: {s.reason}")


# Files stored as they are listed by name after an ingest: a docs folder has hundreds of images.
_UNSEARCHED_SHOWN = 10


def _print_report(report: IngestReport, source: Path, collection: str, location: str) -> None:
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"Ingested {source} into collection {collection!r} ({location})")
    click.echo(
        f"  added {len(report.added)}, updated {len(report.updated)}, unchanged "
        f"{len(report.unchanged)}, deleted {len(report.deleted)}, skipped {len(report.skipped)}"
    )
    click.echo(
        f"  {report.chunks_embedded} chunks embedded in {report.seconds:.1f} s "
        f"({report.chunks_per_second:.1f} chunks/s)"
    )
    if report.words_cut:
        from semfs.ingest.store.bm25 import MAX_WORD_CHARS

        click.echo(
            f"  {report.words_cut} words longer than {MAX_WORD_CHARS} characters: keyword "
            f"search indexes their first {MAX_WORD_CHARS}"
        )
    if report.repaired:
        click.echo(f"Repaired (damaged in the store): {', '.join(report.repaired)}")
    if report.unsearched:
        click.echo(f"Stored as they are, not searched ({len(report.unsearched)}):")
        for s in report.unsearched[:_UNSEARCHED_SHOWN]:
            click.echo(f"  {s.path!r}: {s.reason}" if "\n" in s.path else f"  {s.path}: {s.reason}")
        if len(report.unsearched) > _UNSEARCHED_SHOWN:
            click.echo(
                f"  … and {len(report.unsearched) - _UNSEARCHED_SHOWN} more (--json lists all)"
            )
    if report.skipped:
        click.echo("Skipped:")
        for s in report.skipped:
            click.echo(f"  {s.path!r}: {s.reason}" if "\n" in s.path else f"  {s.path}: {s.reason}")


@click.command()
@store_options
@click.option("--bytes", "raw_bytes", is_flag=True, help="Sizes in bytes, not KiB/MiB/GiB.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (sizes in bytes).")
@handle_errors
def status(
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    raw_bytes: bool,
    as_json: bool,
) -> None:
    """Show what a collection holds (documents, chunks, model, size, source folder, last
    ingest) and, when a folder is followed (--watch), how fresh it is: last sync, pending
    and failed changes.

    \b
    Example:
        semfs status
        semfs status --collection acme --json
    """
    from semfs.ingest.syncstate import load_state, state_file

    watch = load_state(state_file(store_path, url, collection))
    try:
        info = store_info(store_path, url, api_key, collection)
    except StoreLockedError as exc:
        # `semfs ingest --watch` holds an embedded store: its state file still answers.
        if watch is None or not watch.running:
            raise
        info = {"collection": collection, "store": str(exc)}
    if watch is not None:
        info["watch"] = {**watch.to_json(), "running": watch.running}
    log = (store_path or default_store_path()).expanduser() / collection / MOUNT_LOG
    if url is None and log.is_file():  # where a background mount of it logs (damage too)
        info["mount_log"] = str(log)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    for label, value in status_lines(info, raw_bytes):
        click.echo(f"{label:>11}: {value}")
    if watch is not None:
        print_watch(watch)


@click.group()
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
def collections_list(
    store_path: Path | None, url: str | None, api_key: str | None, raw_bytes: bool, as_json: bool
) -> None:
    """List the collections: documents, chunks, size, model, source folder, last ingest.

    \b
    Example:
        semfs collections list
        semfs collections list --url http://localhost:6333 --json
    """
    with opened_catalog(store_path, url, api_key) as catalog:
        names = catalog.names()
        where = catalog.location
    rows = [collection_row(store_path, url, api_key, name) for name in names]
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
def collections_rm(
    name: str, store_path: Path | None, url: str | None, api_key: str | None, yes: bool
) -> None:
    """Remove collection NAME and everything it holds (the source folder is not touched).

    Asks first unless -y. Refused while a mount, `semfs mcp` or a watcher owns it.

    \b
    Example:
        semfs collections rm semfs-demo
        semfs collections rm old --url http://localhost:6333 -y
    """
    with opened_catalog(store_path, url, api_key) as catalog:
        catalog.require(name)
        where = catalog.location
    _refuse_if_followed(store_path, url, name)
    if not yes:
        row = collection_row(store_path, url, api_key, name)
        about = row.get("error") or (
            f"{row['documents']} documents, {display.size(row['bytes'])}, "
            f"from {row['source'] or 'an unknown folder'}"
        )
        click.confirm(f"Remove collection {name!r} ({about}) at {where}?", abort=True)
    with opened_catalog(store_path, url, api_key) as catalog:
        catalog.remove(name)
    if url:  # a server collection's watcher state is kept beside the embedded store
        from semfs.ingest.skipmemo import memo_file
        from semfs.ingest.syncstate import state_file

        for local in (state_file(store_path, url, name), memo_file(store_path, url, name)):
            with contextlib.suppress(OSError):
                local.unlink()
    click.echo(f"Removed collection {name!r}")


@collections.command(name="rename")
@click.argument("old")
@click.argument("new")
@catalog_options
@handle_errors
def collections_rename(
    old: str, new: str, store_path: Path | None, url: str | None, api_key: str | None
) -> None:
    """Rename collection OLD to NEW (refused while a mount, `semfs mcp` or a watcher owns it).

    On a Qdrant server, which cannot rename, the points are copied to NEW, then OLD is
    deleted.

    \b
    Example:
        semfs collections rename docs fastapi
    """
    with opened_catalog(store_path, url, api_key) as catalog:
        catalog.require(old)
        _refuse_if_followed(store_path, url, old)
        catalog.rename(old, new)
    click.echo(f"Renamed collection {old!r} to {new!r}")


def _refuse_if_followed(store_path: Path | None, url: str | None, name: str) -> None:
    """A watcher of a server collection holds no lock: its state file says it runs."""
    from semfs.ingest.syncstate import load_state, state_file

    state = load_state(state_file(store_path, url, name))
    if state is not None and state.running:
        raise StoreLockedError(
            f"collection {name!r} is followed by pid {state.pid} ({state.source}): stop it first"
        )


@click.command()
@click.argument("query")
@store_options
@search_options(
    k_help="Number of documents.",
    mode_help="hybrid: dense + BM25, scores fused; semantic: dense only; keyword: BM25 only.",
    min_score_help="Drop hits whose match strength (0-1) is below this.",
)
@click.option(
    "--under", metavar="DIR", help="Only documents inside DIR (a path in the collection)."
)
@click.option("--more", is_flag=True, help="Excerpts from more of the hits (about 3x the lines).")
@click.option(
    "--paths", "paths_only", is_flag=True, help="Print the documents' paths only, best first."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@handle_errors
def search(
    query: str,
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    k: int,
    mode: str,
    under: str | None,
    min_score: float | None,
    more: bool,
    paths_only: bool,
    as_json: bool,
) -> None:
    """Find the documents that best answer QUERY, with the lines that answer it.

    Prints what a mount's `.search/QUERY/00-results.md` holds: a ranked list, then the
    numbered lines that answer, under their headings. `--paths` prints the paths only, one
    a line, as `grep -l` would: absolute paths in the source folder (a converted document's
    original), usable from any folder. --under DIR searches only the documents inside DIR, a
    folder of the collection (as a mount shows it); a DIR that is not one is an error.

    \b
    Example:
        semfs search "how do I rotate an api key"
        semfs search "custom domain" --under deploy -k 3 --json
        semfs search "webhook retries" --paths | xargs -d '\\n' grep -n retry
    """
    from semfs.ingest.search import Searcher, normalize_under
    from semfs.ingest.search.results import render

    scope = normalize_under(under)
    with opened(store_path, url, api_key, collection) as store:
        meta = store.read_meta()
        found = meta is not None
        if found:
            if scope is not None:
                _check_folder(store, scope, collection)
            hits = Searcher(store).search(
                query, k=k, mode=mode, under=scope, min_score=min_score, more=more
            )
    if not found:  # after closing: listing may open the store (a file: URL takes one client)
        raise missing_collection(collection, store_path, url, api_key)
    if as_json:
        click.echo(json.dumps([h.to_json() for h in hits], indent=2, ensure_ascii=False))
        return
    if paths_only:
        source = meta.source if meta is not None else None
        for h in hits:
            click.echo(_source_path(source, h.path))
        return
    settings = f"{mode} · k {k}" + (f" · min {min_score:g}" if min_score is not None else "")
    settings += (" · more" if more else "") + (f" · in {scope}/" if scope else " · in all")
    click.echo(render(" ".join(query.split()), hits, settings), nl=False)


def _source_path(source: str | None, path: str) -> str:
    """``path`` (a document of the collection) as a path usable from any folder: the file
    in the source folder it mirrors, the original for a text view (``report.pdf.md`` ->
    ``SOURCE/report.pdf``); as it is when the store does not record its source."""
    from semfs.ingest import formats

    if not source:
        return path
    if path.endswith(formats.VIEW_SUFFIX) and formats.view_path(path[: -len(formats.VIEW_SUFFIX)]):
        path = path[: -len(formats.VIEW_SUFFIX)]
    return os.path.join(source, path)


def _check_folder(store: Store, folder: str, collection: str) -> None:
    """Raise SemfsError unless ``folder`` is a folder of the collection (it holds a document)."""
    prefix = folder + "/"
    paths = [d.path for d in store.list_documents()]
    if folder in paths:
        raise SemfsError(f"--under {folder}: that is a file, not a folder, of {collection!r}")
    if not any(p.startswith(prefix) for p in paths):
        raise SemfsError(
            f"--under {folder}: no such folder in collection {collection!r} "
            "(a path in the collection, as `ls` of a mount shows it)"
        )


def register(group: click.Group) -> None:
    """Add the store commands to ``group``."""
    for command in (ingest_cmd, status, collections, check, compact, search):
        group.add_command(command)
