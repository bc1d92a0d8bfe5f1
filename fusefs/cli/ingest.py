"""`semfs ingest`: a folder into a collection, once or following it (--watch).

Commands are thin: they parse options, call the library, and print. The library is imported
inside the command (the pipeline loads Qdrant Edge, the chunker and a model), so that
`semfs --help` starts fast. :func:`register` adds it to the ``semfs`` group.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from semfs.fusefs.cli.common import (
    Command,
    handle_errors,
    source_options,
    store_options,
    waiting,
)
from semfs.fusefs.cli.maintenance import in_place
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

if TYPE_CHECKING:
    from semfs.fusefs.cli.progress import IngestProgress
    from semfs.ingest.embedding.embedder import Embedder
    from semfs.ingest.report import IngestReport, Interrupted
    from semfs.ingest.sources import SourceOptions
    from semfs.ingest.store import Store
    from semfs.ingest.syncstate import SyncState


@click.command(cls=Command, name="ingest")
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
    address: CollectionAddress,
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
    are skipped, and so is what the source's .gitignore and .ignore files leave out (read as
    ripgrep reads them); files that are not documents (images, stylesheets, fonts, binaries,
    a scanned PDF) and text that is not the source's own writing (lock files, vendored,
    generated and minified files, a Sphinx build's _sources copies) are stored as they are,
    so a mount serves every file, but never searched; unreadable
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
    from semfs.ingest.sources import IngestRequest, SourceOptions

    opts = SourceOptions(model, include, exclude, batch_size, max_bytes, follow_symlinks, jobs)
    if dry_run:
        if watch:
            raise click.UsageError("--dry-run and --watch do not go together")
        _dry_run(source, address, opts, replace, as_json)
        return
    if watch:
        _follow(source, address, opts, as_json=as_json, replace=replace)
        return

    from semfs.ingest.embedding.embedder import load_embedder
    from semfs.ingest.pipeline import resolve_model
    from semfs.ingest.report import IngestReport, Interrupted
    from semfs.ingest.skipmemo import memo_file

    # SIGTERM stops a run as Ctrl-C does, with the same message (it was silent).
    stopped_by = [int(signal.SIGINT)]
    signal.signal(signal.SIGTERM, lambda signum, frame: _stop_by(stopped_by, signum))
    with _serving(address) as store, _in_place_if(verify):
        # Made here, so that the export it may make on first use can be reported afterwards.
        embedder = load_embedder(resolve_model(store, model))
        # The model's load, then a bar (a line every 10 s when stderr is not a terminal).
        progress = None if as_json else _progress(embedder)
        try:
            request = IngestRequest(
                opts,
                verify=verify,
                replace_source=replace,
                skip_memo=memo_file(address),
                retry_skipped=retry_skipped,
            )
            report = ingest(
                source,
                store,
                request,
                embedder=embedder,
                on_phase=progress.phase if progress else None,
                on_progress=progress.advance if progress else None,
                on_wait=None if as_json else waiting,
            )
        except KeyboardInterrupt as exc:
            if progress is not None:
                progress.close()
                progress = None
            stopped = exc if isinstance(exc, Interrupted) else None
            click.echo(_interrupted(stopped), err=True)
            if as_json:  # a script reads what was kept, as from a run that ended
                kept = stopped.report.to_json() if stopped else IngestReport().to_json()
                interrupted = stopped.phase if stopped else "before writing"
                click.echo(json.dumps({**kept, "interrupted": interrupted}, indent=2))
            sys.exit(128 + stopped_by[0])
        finally:
            if progress is not None:
                progress.close()
        location = store.location
    _prepare_queries(embedder, quiet=as_json)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        _print_report(report, source, address.collection, location)


@contextlib.contextmanager
def _serving(address: CollectionAddress) -> Iterator[Store]:
    """The collection an ingest writes, served on its socket while the run lasts when this
    process owns it: `semfs search`, `status`, `mount` and `mcp` in other processes read what
    it has committed meanwhile (a mount and `semfs mcp` take it over when it ends). When
    another process owns it (a mount), the ingest writes through that one's socket."""
    from semfs.ingest.resident import ResidentStore

    with ResidentStore.open(address, must_exist=False) as resident:
        resident.serve()
        yield resident.store


def _stop_by(stopped_by: list[int], signum: int) -> None:
    stopped_by[0] = signum
    raise KeyboardInterrupt


def _interrupted(exc: Interrupted | None) -> str:
    """What an interrupted ingest kept, in one line: each document commits whole (its chunks,
    then its record), and its dense vectors follow in a pass of their own."""
    again = "run the same command again to resume (nothing in is read into the model again)"
    if exc is None:  # before the first document (waiting for another writer, say)
        return f"Interrupted before anything was written; {again}."
    report = exc.report
    if exc.phase == "keywords":
        return (
            f"Interrupted: the {report.committed} documents ingested in this run are kept and "
            f"keyword-searchable, the one in progress is not; {again}."
        )
    pending = f"{report.dense_pending} chunks" if report.dense_pending else "some chunks"
    return (
        "Interrupted while embedding: every document is in and keyword-searchable, and "
        f"{pending} wait for their dense vectors (searches score them on keywords "
        f"meanwhile); {again}."
    )


def _in_place_if(verify: bool) -> contextlib.AbstractContextManager[None]:
    return in_place("ingest --verify") if verify else contextlib.nullcontext()


def _progress(embedder: Embedder, label: str = "") -> IngestProgress:
    """The progress display of an ingest on stderr, told of ``embedder``'s load too;
    ``label`` names both passes (a watcher's "Syncing")."""
    from semfs.fusefs.cli.progress import IngestProgress

    labels = {"reading": label, "embedding": label} if label else None
    progress = IngestProgress(sys.stderr, label=label or "Embedding", labels=labels)
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
    address: CollectionAddress,
    options: SourceOptions,
    *,
    as_json: bool,
    replace: bool = False,
) -> None:
    """`semfs ingest --watch`: what :class:`semfs.ingest.follow.Follower` does, printed."""
    from semfs.ingest.follow import Follower

    with Follower(source, address, options, replace=replace) as follower:
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
                click.echo(
                    f"Following {source} into collection {address.collection!r}; Ctrl-C stops."
                )
            # SIGTERM stops as Ctrl-C does: the batch under way finishes, the state says so.
            signal.signal(signal.SIGTERM, _interrupt)

        follower.run(
            on_batch,
            on_phase=progress.phase if progress else None,
            on_progress=progress.advance if progress else None,
            on_ready=on_ready,
        )
    if not as_json:
        click.echo("Stopped following " + str(source))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _dry_run(
    source: Path, address: CollectionAddress, opts: SourceOptions, replace: bool, as_json: bool
) -> None:
    """``semfs ingest --dry-run``: the run's report, with nothing written."""
    from semfs.ingest.pipeline import ingest
    from semfs.ingest.sources import IngestRequest

    with open_store(address) as store:
        report = ingest(source, store, IngestRequest(opts, replace_source=replace, dry_run=True))
    if as_json:
        click.echo(json.dumps({**report.to_json(), "dry_run": True}, indent=2))
        return
    click.echo(
        f"Dry run of {source} into collection {address.collection!r}: would add "
        f"{len(report.added)}, update {len(report.updated)}, delete {len(report.deleted)}, skip "
        f"{len(report.skipped)} ({len(report.unchanged)} unchanged); nothing written"
    )
    for what, paths in (("add", report.added), ("update", report.updated),
                        ("delete", report.deleted)):  # fmt: skip
        for path in paths:
            click.echo(f"  {what} {_as_stored(path)}")
    for s in report.skipped:
        click.echo(f"  skip {s.path}: {s.reason}")


def _as_stored(path: str) -> str:
    """A reported path as the source folder names it: a converted file's own name, with the
    text view the mount serves beside it (``requests/api.html (text view: ...html.md)``)."""
    from semfs.ingest.formats import VIEW_SUFFIX, view_path

    original = path.removesuffix(VIEW_SUFFIX)
    shown = f"{original} (text view: {path})" if view_path(original) == path else path
    return repr(shown) if "\n" in shown else shown


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
    if report.chunks_written:  # the first pass: keyword-searchable from then on
        click.echo(
            f"  {report.chunks_written} chunks written, keyword-searchable after "
            f"{report.keywords_seconds:.1f} s"
        )
    reused = f", {report.vectors_reused} took a stored vector" if report.vectors_reused else ""
    click.echo(
        f"  {report.chunks_embedded} chunks embedded{reused} in {report.seconds:.1f} s "
        f"({report.chunks_per_second:.1f} chunks/s)"
    )
    if report.dense_pending:  # left to the store's owner (a mount), or dense=False
        by = report.dense_elsewhere or "the next `semfs ingest`, or a mount,"
        click.echo(
            f"  {report.dense_pending} chunks wait for their dense vectors ({by} embeds "
            "them; keyword scores meanwhile; `semfs status` shows how far)"
        )
    if report.words_cut:
        from semfs.ingest.store.bm25 import MAX_WORD_CHARS

        click.echo(
            f"  {report.words_cut} words longer than {MAX_WORD_CHARS} characters: keyword "
            f"search indexes their first {MAX_WORD_CHARS}"
        )
    if report.ignored:
        folders = sum(1 for p in report.ignored if p.endswith("/"))
        click.echo(
            f"  left out by .gitignore/.ignore: {folders} folders, "
            f"{len(report.ignored) - folders} files (--json lists them)"
        )
    if report.repaired:
        click.echo(f"Repaired (damaged in the store): {', '.join(report.repaired)}")
    if report.unsearched:
        kinds = ", ".join(f"{n} {kind}" for kind, n in report.unsearched_counts().items())
        click.echo(f"Stored as they are, not searched ({len(report.unsearched)}: {kinds}):")
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


def register(group: click.Group) -> None:
    """Add `semfs ingest` to ``group``."""
    group.add_command(ingest_cmd)
