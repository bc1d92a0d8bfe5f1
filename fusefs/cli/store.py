"""The ``semfs`` commands that work on a store: ingest, status, search.

Commands are thin: they parse options, call the library, and print. The mount commands
are added by :mod:`semfs.fusefs.cli`, which builds the full ``semfs`` group on top of this one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from semfs.ingest import __version__, display
from semfs.ingest.embedding.embedder import DEFAULT_BATCH_SIZE
from semfs.ingest.errors import SemfsError, StoreLockedError
from semfs.ingest.logs import MOUNT_LOG, configure_logging
from semfs.ingest.sources import DEFAULT_MAX_BYTES
from semfs.ingest.store import (
    DEFAULT_COLLECTION,
    DEFAULT_K,
    MAX_K,
    MODES,
    Store,
    default_store_path,
)
from semfs.ingest.store.backends import missing_collection, open_store

# pipeline and search import qdrant_edge and the chunker: imported inside the commands that
# need them, so that `semfs --help` and `semfs mount` start fast.
if TYPE_CHECKING:
    from semfs.ingest.embedding.embedder import Embedder
    from semfs.ingest.pipeline import IngestReport
    from semfs.ingest.progress import IngestProgress
    from semfs.ingest.sources import SourceOptions
    from semfs.ingest.store.catalog import Catalog
    from semfs.ingest.store.schema import StoreMeta
    from semfs.ingest.syncstate import SyncState

logger = logging.getLogger(__name__)
# Failed files listed by `semfs status` (all of them with --json).
STATUS_FAILED_SHOWN = 20
F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def _one_line(message: str) -> str:
    return " ".join(message.split())


def handle_errors(func: F) -> F:
    """Library errors become one line and exit 1; a traceback only with -v.

    A command called with ``--json`` (its ``as_json`` parameter) also prints the error as
    ``{"error": "..."}`` on stdout, so a script reading stdout always gets JSON.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return translate_errors(func, *args, **kwargs)
        except click.ClickException as exc:
            if kwargs.get("as_json"):
                click.echo(json.dumps({"error": exc.format_message()}, ensure_ascii=False))
            raise

    return wrapper  # type: ignore[return-value]


def translate_errors(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, its library errors raised as one-line ClickExceptions."""
    try:
        return func(*args, **kwargs)
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except BrokenPipeError:
        if not _stdout_gone():
            raise click.ClickException("the connection closed (BrokenPipeError)") from None
        _end_as_sigpipe()
        raise  # not reached
    except SemfsError as exc:
        raise click.ClickException(_one_line(str(exc))) from exc
    except Exception as exc:
        ctx = click.get_current_context(silent=True)
        if ctx is not None and ctx.find_root().meta.get("semfs.verbose", 0) > 0:
            raise
        raise click.ClickException(
            _one_line(f"{type(exc).__name__}: {exc} (run with -v for details)")
        ) from exc
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":  # Qdrant Edge's Rust panics (pyo3)
            raise
        raise click.ClickException(
            _one_line(f"the store engine failed: {exc}; run `semfs check` on the store")
        ) from exc


def _stdout_gone() -> bool:
    """Whether our stdout is a pipe whose reader went away (``semfs search ... | head -1``)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _end_as_sigpipe() -> None:
    """End the way cat or grep end when their reader leaves: silently, by SIGPIPE (the shell
    sees 141). Python ignores the signal, so it is restored and sent to ourselves."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush into the dead pipe
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)


def store_options(func: F) -> F:
    """--store / --url / --api-key / --collection, shared by every command that opens a store."""
    return _store_option_list(func, with_collection=True)


def _store_option_list(func: F, *, with_collection: bool) -> F:
    options = [
        click.option(
            "--store",
            "store_path",
            type=click.Path(file_okay=False, path_type=Path),
            envvar="SEMFS_STORE",
            help=f"Embedded store directory [env SEMFS_STORE; default {default_store_path()}].",
        ),
        click.option(
            "--url",
            envvar="QDRANT_URL",
            help="Qdrant server URL instead of the embedded store [env QDRANT_URL].",
        ),
        click.option(
            "--api-key", envvar="QDRANT_API_KEY", help="Qdrant API key [env QDRANT_API_KEY]."
        ),
        click.option(
            "-c",
            "--collection",
            default=DEFAULT_COLLECTION,
            envvar="SEMFS_COLLECTION",
            show_default=True,
            help="Collection name [env SEMFS_COLLECTION].",
        ),
    ]
    for option in reversed(options if with_collection else options[:3]):
        func = option(func)
    return func


def search_options(k_help: str, mode_help: str, min_score_help: str) -> Callable[[F], F]:
    """-k / --mode / --min-score, shared by `semfs search` and `semfs mount` (its defaults)."""

    def decorate(func: F) -> F:
        options = [
            click.option(
                "-k",
                "--k",
                "k",
                default=DEFAULT_K,
                show_default=True,
                type=click.IntRange(1, MAX_K),
                help=k_help,
            ),
            click.option(
                "--mode",
                type=click.Choice(MODES),
                default="hybrid",
                show_default=True,
                help=mode_help,
            ),
            click.option("--min-score", type=float, help=min_score_help),
        ]
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


@contextmanager
def opened(
    store_path: Path | None, url: str | None, api_key: str | None, collection: str
) -> Iterator[Store]:
    store = open_store(store_path, url=url, collection=collection, api_key=api_key)
    try:
        yield store
    finally:
        store.close()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="semfs")
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


def source_options(func: F) -> F:
    """--model / --include / --exclude / --batch-size / --max-size / --follow-symlinks: how a
    source is read,
    shared by `semfs ingest` and `semfs mount --watch`."""
    options = [
        click.option(
            "-m",
            "--model",
            help="sentence-transformers model name or path [default: the store's, "
            "else all-MiniLM-L6-v2, the packaged model, on torch in fp32]. "
            "@onnx-int8 (all-MiniLM-L6-v2@onnx-int8) runs it int8 on ONNX Runtime: starts "
            "and answers queries faster, in less memory; @onnx: fp32. "
            "'hash' is a fast non-semantic stand-in for tests.",
        ),
        click.option(
            "--include",
            multiple=True,
            metavar="GLOB",
            help="Only files matching GLOB (repeatable).",
        ),
        click.option(
            "--exclude",
            multiple=True,
            metavar="GLOB",
            help="Skip files or folders matching GLOB (repeatable).",
        ),
        click.option(
            "--batch-size",
            default=DEFAULT_BATCH_SIZE,
            show_default=True,
            type=click.IntRange(1, 4096),
            help="Chunks per model batch.",
        ),
        click.option(
            "--max-size",
            "max_bytes",
            default=DEFAULT_MAX_BYTES,
            show_default=True,
            type=click.IntRange(1),
            help="Skip files larger than this many bytes.",
        ),
        click.option(
            "--follow-symlinks",
            is_flag=True,
            help="Also ingest files that symlinks lead to outside SOURCE (skipped by default).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@cli.command(name="ingest")
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
    verify: bool,
    replace: bool,
    as_json: bool,
) -> None:
    """Make a collection mirror SOURCE: add new files, re-embed changed ones, drop deleted ones.

    Unchanged files are not re-embedded (and an unchanged re-run loads no model). VCS folders
    are skipped; binary, non-UTF-8, unreadable and oversized files are skipped with a reason,
    and so are symlinks that lead outside SOURCE (unless --follow-symlinks). A file that
    cannot be read this time keeps its ingested version. Exit status is 0 when the run
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
    """
    from semfs.ingest.pipeline import ingest

    if watch:
        from semfs.ingest.sources import SourceOptions

        opts = SourceOptions(model, include, exclude, batch_size, max_bytes, follow_symlinks)
        _follow(
            source, store_path, url, api_key, collection, opts, as_json=as_json, replace=replace
        )
        return

    from semfs.ingest.embedding.embedder import load_embedder
    from semfs.ingest.pipeline import resolve_model

    with opened(store_path, url, api_key, collection) as store, _in_place_if(verify):
        # Made here, so that once the documents are in, its torch model (if it loaded) can
        # prepare the store's queries.
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
                on_start=progress.start if progress else None,
                on_progress=progress.advance if progress else None,
                verify=verify,
                replace_source=replace,
            )
        finally:
            if progress is not None:
                progress.close()
        location = store.location
    _prepare_queries(embedder, quiet=as_json)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        _print_report(report, source, collection, location)


def _progress(embedder: Embedder, label: str = "Embedding") -> IngestProgress:
    """The progress display of an ingest on stderr, told of ``embedder``'s load too."""
    from semfs.ingest.progress import IngestProgress

    progress = IngestProgress(sys.stderr, label=label)
    if hasattr(embedder, "on_load"):
        embedder.on_load = progress.on_load
    return progress


def _prepare_queries(embedder: Embedder, quiet: bool) -> None:
    """Once per model, where torch has just embedded documents: export it for searches."""
    from semfs.ingest.embedding.embedder import prepare_query_embedding

    def say() -> None:
        if not quiet:
            click.echo("Preparing searches without torch (once per model) ...", err=True)

    agreement = prepare_query_embedding(embedder, on_start=say)
    if agreement is not None and not quiet:
        verdict = "agrees" if agreement.agrees else "DISAGREES: searches keep torch"
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
    """`semfs ingest --watch`: a full pass, then a batch per burst of changes, until Ctrl-C.

    It owns the store as a mount does: `semfs search`, `semfs status`, `semfs mcp` and a
    plain `semfs ingest` reach it through its socket (searches embedded with its model). When
    a mount owns the store already, it writes through the mount's socket instead."""
    from semfs.ingest.embedding.embedder import load_embedder
    from semfs.ingest.errors import StoreOwnedError
    from semfs.ingest.origin import claim_source
    from semfs.ingest.pipeline import ingest, resolve_model
    from semfs.ingest.search import Searcher, query_service
    from semfs.ingest.sources import check_source
    from semfs.ingest.store.owner import StoreOwner
    from semfs.ingest.syncstate import state_file
    from semfs.ingest.watch import SourceWatcher

    check_source(source)

    prepared = threading.Event()

    def on_batch(report: IngestReport, state: Any) -> None:
        if not prepared.is_set() and getattr(embedder, "loaded", False):
            prepared.set()  # once torch has embedded something here
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

    owner: StoreOwner | None = None
    try:
        owner = StoreOwner.open(
            store_path, url=url, collection=collection, api_key=api_key, must_exist=False
        )
        store = owner.store
    except StoreOwnedError:  # a mount owns it: write through its socket, as `semfs ingest` does
        store = open_store(store_path, url=url, collection=collection, api_key=api_key)
    try:
        # Another model: fail now, not per batch. The documents' model stays loaded between
        # batches (it loads on the first change to embed).
        embedder = load_embedder(resolve_model(store, options.model))
        progress = None if as_json else _progress(embedder, "Syncing")
        # Another folder: refuse now, not per batch. With --replace the first pass takes it.
        claim = claim_source(store.read_meta(), source, collection, replace=replace)
        if claim.replaced:
            o = options
            ingest(
                source,
                store,
                model=o.model,
                embedder=embedder,
                include=o.include,
                exclude=o.exclude,
                batch_size=o.batch_size,
                max_bytes=o.max_bytes,
                follow_symlinks=o.follow_symlinks,
                replace_source=True,
            )
        watcher = SourceWatcher(
            source,
            store,
            options,
            embedder=embedder,
            state_file=state_file(store_path, url, collection),
            on_batch=on_batch,
            on_start=progress.start if progress else None,
            on_progress=progress.advance if progress else None,
        )
        if owner is not None:
            searcher = _once(lambda: Searcher(store))
            owner.serve(queries=query_service(searcher))
            if store.read_meta() is not None:  # the first search finds the model warm
                threading.Thread(target=_warm_up, args=(searcher,), daemon=True).start()
        if not as_json:
            click.echo(f"Following {source} into collection {collection!r}; Ctrl-C stops.")
        # SIGTERM stops as Ctrl-C does: the batch under way finishes, the state says so.
        signal.signal(signal.SIGTERM, _interrupt)
        with contextlib.suppress(KeyboardInterrupt):
            watcher.run()  # stops the watcher on its way out
    finally:
        if owner is not None:
            owner.close()
        else:
            store.close()
    if not as_json:
        click.echo("Stopped following " + str(source))


def _warm_up(searcher: Callable[[], Any]) -> None:
    try:
        searcher().warm_up()
    except Exception as exc:  # each search then says why, or embeds its query itself
        logger.warning("cannot prepare searches: %s", exc)


def _once(make: Callable[[], T]) -> Callable[[], T]:
    """``make()`` on the first call, the same object on every later one; thread-safe."""
    lock = threading.Lock()
    made: list[T] = []

    def get() -> T:
        with lock:
            if not made:
                made.append(make())
            return made[0]

    return get


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


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
    if report.repaired:
        click.echo(f"Repaired (damaged in the store): {', '.join(report.repaired)}")
    if report.skipped:
        click.echo("Skipped:")
        for s in report.skipped:
            click.echo(f"  {s.path!r}: {s.reason}" if "\n" in s.path else f"  {s.path}: {s.reason}")


@cli.command()
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
        info = _store_info(store_path, url, api_key, collection)
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
    for label, value in _status_lines(info, raw_bytes):
        click.echo(f"{label:>11}: {value}")
    if watch is not None:
        _print_watch(watch)


def catalog_options(func: F) -> F:
    """--store / --url / --api-key: where the collections are (no --collection)."""
    return _store_option_list(func, with_collection=False)


@contextmanager
def opened_catalog(
    store_path: Path | None, url: str | None, api_key: str | None
) -> Iterator[Catalog]:
    from semfs.ingest.store.backends import open_catalog

    catalog = open_catalog(store_path, url, api_key)
    try:
        yield catalog
    finally:
        catalog.close()


@cli.group()
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
    rows = [_collection_row(store_path, url, api_key, name) for name in names]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no collections at {where}: run `semfs ingest DIR` to make one", err=True)
        return
    table = [("NAME", "DOCS", "CHUNKS", "SIZE", "MODEL", "LAST INGEST", "SOURCE")]
    for r in rows:
        if "error" in r:
            table.append((r["name"], "-", "-", "-", "-", "-", r["error"]))
            continue
        last = display.ago(time.time() - r["ingested_at"]) if r["ingested_at"] else "-"
        table.append(
            (
                r["name"],
                str(r["documents"]),
                "-" if r["chunks"] is None else str(r["chunks"]),
                _size(r["bytes"], raw_bytes),
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
        click.echo("  ".join([*cells, row[-1]]).rstrip())


def _collection_row(
    store_path: Path | None, url: str | None, api_key: str | None, name: str
) -> dict[str, Any]:
    """One line of `semfs collections list`: from the meta and the document records (a
    manifest read on the embedded store), without counting chunks in the engine."""
    try:
        with opened(store_path, url, api_key, name) as store:
            meta = store.read_meta()
            if meta is None:
                return {"name": name, "error": "empty (no meta): ingest into it or remove it"}
            docs = store.list_documents()
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
        return {"name": name, "error": _one_line(str(exc))}


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
        row = _collection_row(store_path, url, api_key, name)
        about = row.get("error") or (
            f"{row['documents']} documents, {display.size(row['bytes'])}, "
            f"from {row['source'] or 'an unknown folder'}"
        )
        click.confirm(f"Remove collection {name!r} ({about}) at {where}?", abort=True)
    with opened_catalog(store_path, url, api_key) as catalog:
        catalog.remove(name)
    if url:  # a server collection's watcher state is kept beside the embedded store
        from semfs.ingest.syncstate import state_file

        with contextlib.suppress(OSError):
            state_file(store_path, url, name).unlink()
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


def _size(n: int | None, raw: bool) -> str:
    return display.size(n) if not raw or n is None else f"{n} bytes"


def _status_lines(info: dict[str, Any], raw_bytes: bool) -> Iterator[tuple[str, str]]:
    """`semfs status` for a person: sizes in KiB/MiB (bytes with --bytes), yes/no, local
    times. A key this function does not know is shown as it is (after the known ones)."""
    shown = {"watch", "bytes", "dimension", "ingest_seconds", "disk_bytes", "mount_log"}
    order = ["collection", "backend", "location", "source", "documents", "chunks"]
    for key in order:
        if info.get(key) is None:
            continue
        value = info[key]
        if key == "documents" and info.get("bytes") is not None:
            value = f"{value} ({_size(info['bytes'], raw_bytes)})"
        yield key, str(value)
    if "disk_bytes" in info:
        yield "on disk", _size(info["disk_bytes"], raw_bytes)  # None: a server keeps its own
    if info.get("model") is not None:
        yield "model", f"{info['model']} (dimension {info.get('dimension')})"
    if info.get("queries") is not None:
        yield "queries", str(info["queries"])  # what embeds them: ONNX Runtime, torch, the owner
    if "ingested_at" in info:
        last = display.when(info["ingested_at"])
        if info.get("ingest_seconds") is not None:
            last += f", took {display.duration(info['ingest_seconds'])}"
        yield "last ingest", last
    for key, value in info.items():
        if key in shown or key in order or key in ("model", "queries", "ingested_at"):
            continue
        if value is None:
            continue
        yield key, display.yes_no(value) if isinstance(value, bool) else str(value)
    if info.get("mount_log"):
        yield "mount log", info["mount_log"]


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


def _store_info(
    store_path: Path | None, url: str | None, api_key: str | None, collection: str
) -> dict[str, Any]:
    with opened(store_path, url, api_key, collection) as store:
        meta = store.read_meta()
        if meta is not None:
            return _collection_info(store, meta, collection)
    # After closing: listing may open the store (a file: URL takes one client).
    raise missing_collection(collection, store_path, url, api_key)


def _collection_info(store: Store, meta: StoreMeta, collection: str) -> dict[str, Any]:
    # A current manifest is the store as its last ingest left it (semfs.ingest.store.manifest):
    # its records and counts need no shard, which the engine cannot open on a full disk.
    manifest = store.read_manifest()
    if manifest is not None:
        docs = list(manifest.documents)
        chunks = sum(d.chunks for d in docs)
    else:
        docs = store.list_documents()
        chunks = store.count_chunks()
    from semfs.ingest.store.check import require_counts

    require_counts(store, len(docs), chunks)  # a store that lost points says so
    return {
        "backend": store.backend,
        "location": store.location,
        "collection": collection,
        "source": meta.source,
        "documents": len(docs),
        "chunks": chunks,
        "bytes": sum(d.size for d in docs),
        "model": meta.model,
        "queries": _queries_backend(store, meta.model),
        "dimension": meta.dimension,
        "generation": meta.generation,
        "interrupted": meta.dirty,
        "disk_bytes": store.disk_bytes(),
        "ingested_at": meta.ingested_at,
        "ingest_seconds": meta.ingest_seconds,
    }


def _queries_backend(store: Store, model: str) -> str:
    """What embeds this store's search queries (`semfs status`), loading nothing: the owner's
    model over its socket, ONNX Runtime, or torch and why."""
    from semfs.ingest.embedding.embedder import QueryEmbedder, load_query_embedder, query_backend
    from semfs.ingest.store.ipc import owner_embedder

    served = owner_embedder(store, model, lambda: None)
    if served is not None:
        return served.query_backend
    embedder = load_query_embedder(model)
    backend = query_backend(embedder)
    if isinstance(embedder, QueryEmbedder) and embedder.why_torch:
        return f"{backend} ({embedder.why_torch}; the next `semfs ingest` that embeds fixes it)"
    return backend


def _print_watch(watch: SyncState) -> None:
    """The freshness lines of `semfs status`: what is followed, last sync, pending, failed."""
    how = f"pid {watch.pid}, {watch.watcher or 'starting'}"
    if watch.running:
        click.echo(f"{'following':>11}: {watch.source} ({how})")
    else:
        click.echo(f"{'followed':>11}: {watch.source} (not any more: {how} has stopped)")
    if watch.synced_at is None:
        click.echo(f"{'last sync':>11}: none yet")
    else:
        ago = max(0.0, time.time() - watch.synced_at)
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(watch.synced_at))
        click.echo(f"{'last sync':>11}: {when} ({ago:.0f} s ago; {watch.batches} batches)")
    click.echo(f"{'pending':>11}: {watch.pending}")
    if watch.source_problem:
        click.echo(f"{'source':>11}: {watch.source_problem} (the index keeps its last state)")
    if watch.error:
        click.echo(f"{'error':>11}: {watch.error}")
    click.echo(f"{'failed':>11}: {len(watch.failed)}")
    for path, reason in sorted(watch.failed.items())[:STATUS_FAILED_SHOWN]:
        click.echo(f"{'':>13}{path!r}: {reason}" if "\n" in path else f"{'':>13}{path}: {reason}")
    if len(watch.failed) > STATUS_FAILED_SHOWN:
        click.echo(f"{'':>13}... and {len(watch.failed) - STATUS_FAILED_SHOWN} more (--json)")


@cli.command()
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
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    repair_source: Path | None,
    prune: bool,
    rebuild_source: Path | None,
    model: str | None,
    as_json: bool,
) -> None:
    """Check a store: every document's chunks whole, in order and hashing to its sha256,
    and its dense vectors readable.

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
        if url:
            raise click.UsageError("--rebuild sets an embedded shard aside: not with --url")
        _rebuild(store_path, collection, rebuild_source, model, None)
    try:
        with opened(store_path, url, api_key, collection):
            pass  # an unreadable store can only be rebuilt
    except StoreDamagedError as exc:
        if repair_source is None or url:
            raise
        _rebuild(store_path, collection, repair_source, model, exc)
    with opened(store_path, url, api_key, collection) as store:
        report = check_store(store)
        fixed: list[str] = []
        if report.problems and prune:
            fixed = report.damaged_paths
            with _in_place("--prune"):
                _prune(store, fixed)  # also records the counts: what was lost is accepted
            report = check_store(store)
        elif report.problems and repair_source is not None:
            from semfs.ingest.pipeline import ingest

            # Lost documents come back as added, damaged ones as repaired.
            with _in_place("--repair"):
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
                    "fixed": fixed,
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
        if any("cannot be read" in p.reason for p in report.problems):
            click.echo(
                "note: the engine cannot decode some points, so they cannot be replaced in "
                "place: `semfs check --rebuild SOURCE` sets the shard aside and ingests SOURCE "
                "afresh"
            )
        if report.ok:
            click.echo(f"ok: {report.documents} documents, {report.chunks} chunks checked")
    if not report.ok:
        raise click.exceptions.Exit(1)


def _in_place_if(verify: bool) -> contextlib.AbstractContextManager[None]:
    return _in_place("ingest --verify") if verify else contextlib.nullcontext()


@contextlib.contextmanager
def _in_place(what: str) -> Iterator[None]:
    """An engine failure while changing damaged points becomes one line saying to rebuild."""
    try:
        yield
    except SemfsError:
        raise
    except Exception as exc:
        from semfs.ingest.errors import StoreDamagedError

        raise StoreDamagedError(
            f"{what} failed: the store engine cannot change its damaged points "
            f"({_one_line(f'{type(exc).__name__}: {exc}')}); rebuild the store from its "
            "source instead: `semfs check --rebuild SOURCE`"
        ) from exc


def _rebuild(
    store_path: Path | None,
    collection: str,
    source: Path,
    model: str | None,
    why: Exception | None,
) -> None:
    """Set the shard aside and ingest ``source`` afresh (a store the engine cannot open or
    repair in place)."""
    from semfs.ingest.pipeline import ingest
    from semfs.ingest.store.edge_store import set_aside

    aside = set_aside(store_path or default_store_path(), collection)
    if why is not None:
        click.echo(f"unreadable: {why}", err=True)
    click.echo(f"set the damaged shard aside as {aside}; rebuilding from {source}")
    with opened(store_path, None, None, collection) as store:
        ingest(source, store, model=model)


def _prune(store: Store, paths: list[str]) -> None:
    """Delete damaged documents and record the new counts (a change the mount picks up)."""
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


@cli.command()
@store_options
@handle_errors
def compact(store_path: Path | None, url: str | None, api_key: str | None, collection: str) -> None:
    """Reclaim the space of replaced and deleted chunks now (ingest also does it by itself).

    Runs Qdrant Edge's optimizers on the embedded store: segments where a fifth or more of
    the points are deleted are rewritten, and the write-ahead log drops what they hold. A
    Qdrant server optimizes on its own, so there this does nothing.

    \b
    Example:
        semfs compact
        semfs compact --store /data/semfs --collection acme
    """
    with opened(store_path, url, api_key, collection) as store:
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


@cli.command()
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
    a line, as `grep -l` would. --under DIR searches only the documents inside DIR, a
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
        found = store.read_meta() is not None
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
        for h in hits:
            click.echo(h.path)
        return
    settings = f"{mode} · k {k}" + (f" · min {min_score:g}" if min_score is not None else "")
    settings += (" · more" if more else "") + (f" · in {scope}/" if scope else " · in all")
    click.echo(render(" ".join(query.split()), hits, settings), nl=False)
