"""`semfs search`: the documents that best answer a question, and the lines that answer it.

A thin command: :class:`semfs.ingest.search.Searcher` ranks, and
:func:`semfs.ingest.search.results.results_file` prints what a mount's results file holds; both are
imported inside the command (they load Qdrant Edge and a model), so `semfs --help` starts fast.
"""

from __future__ import annotations

import json
import os
import time

import click

from semfs.fusefs.cli.common import Command, handle_errors, search_options, store_options
from semfs.fusefs.cli.options import MODE_MEANINGS
from semfs.ingest.errors import OwnerGoneError, SemfsError, StoreLockedError
from semfs.ingest.request import SearchRequest
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import missing_collection, open_store

# How long a search waits for the next owner of a store whose owner ended under it (an
# ingest that got SIGTERM took ~30 s to exit while a `semfs mcp` beside it took over), and
# how often it tries again meanwhile.
HANDOVER_WAIT = 30.0
HANDOVER_POLL = 0.2


@click.command(cls=Command)
@click.argument("query")
@store_options
@search_options(
    k_help="Number of documents.",
    mode_help=MODE_MEANINGS,
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
    address: CollectionAddress,
    k: int,
    mode: str,
    under: str | None,
    min_score: float | None,
    more: bool,
    paths_only: bool,
    as_json: bool,
) -> None:
    """Find the documents that best answer QUERY, with the lines that answer it.

    Prints what a mount's `.search/QUERY/00-results.md` holds: the best answering lines, a
    ranked list, then more numbered lines that answer, under their headings. `--paths`
    prints the paths only, one a line, as `grep -l` would: absolute paths in the source
    folder (a converted document's original), usable from any folder. --under DIR searches
    only the documents inside DIR, a folder of the collection (as a mount shows it); a DIR
    that is not one is an error.

    \b
    Example:
        semfs search "how do I rotate an api key"
        semfs search "custom domain" --under deploy -k 3 --json
        semfs search "webhook retries" --paths | xargs -d '\\n' grep -n retry
    """
    from semfs.ingest.search import Searcher
    from semfs.ingest.search.results import link_names, results_file, with_status_line

    if not query.strip():
        raise click.BadParameter("give a question or words to search for", param_hint="QUERY")
    request = SearchRequest(query, k=k, mode=mode, min_score=min_score, under=under, more=more)
    gone_at: float | None = None  # when the store's owner was found ending under us
    while True:
        try:
            with open_store(address) as store:
                meta = store.read_meta()
                found = meta is not None
                if found:
                    if request.under is not None:
                        _check_folder(store, request.under, address.collection)
                    searcher = Searcher(store)
                    hits = searcher.search(request)
                    # While an ingest's dense pass is under way: how much of it is embedded.
                    note = searcher.meaning_note(request.mode, request.under, meta)
            break
        except (OwnerGoneError, StoreLockedError) as exc:
            # The owner ended under this search (an ingest's exit): its next owner (a mount,
            # `semfs mcp`) takes the store over in moments, or the store comes free. A store
            # locked before any owner was seen ending is refused at once, as before.
            if isinstance(exc, OwnerGoneError) and gone_at is None:
                gone_at = time.monotonic()
            if gone_at is None or time.monotonic() - gone_at > HANDOVER_WAIT:
                raise
            time.sleep(HANDOVER_POLL)
    if not found:  # after closing: listing may open the store (a file: URL takes one client)
        raise missing_collection(address)
    if as_json:
        click.echo(json.dumps([h.to_json() for h in hits], indent=2, ensure_ascii=False))
        return
    if paths_only:
        source = meta.source if meta is not None else None
        for h in hits:
            click.echo(_source_path(source, h.path))
        return
    text = results_file(request, tuple(hits), link_names(tuple(hits), request.k))
    click.echo(with_status_line(text, note).decode("utf-8", "surrogateescape"), nl=False)


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
    """Add `semfs search` to ``group``."""
    group.add_command(search)
