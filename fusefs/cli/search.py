"""`semfs search`: the documents that best answer a question, and the lines that answer it.

A thin command: :class:`semfs.ingest.search.Searcher` ranks, and
:func:`semfs.ingest.search.results.results_file` prints what a mount's results file holds; both are
imported inside the command (they load Qdrant Edge and a model), so `semfs --help` starts fast.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

import click

from semfs.fusefs.cli.common import Command, handle_errors, search_options, stores_options
from semfs.fusefs.cli.options import MODE_MEANINGS
from semfs.ingest.errors import OwnerGoneError, SemfsError, StoreLockedError
from semfs.ingest.request import SearchRequest
from semfs.ingest.store import StoreReader
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import missing_collection, open_store

# How long a search waits for the next owner of a store whose owner ended under it (an
# ingest that got SIGTERM took ~30 s to exit while a `semfs mcp` beside it took over), and
# how often it tries again meanwhile.
HANDOVER_WAIT = 30.0
HANDOVER_POLL = 0.2

if TYPE_CHECKING:
    from semfs.ingest.search import Hit, Standing
    from semfs.ingest.store.schema import StoreMeta


@click.command(cls=Command)
@click.argument("query")
@stores_options
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
    addresses: tuple[CollectionAddress, ...],
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
    that is not one is an error. -c names the collection; -c docs -c code searches both as
    one, best first whichever holds it, each hit under its collection's name.

    \b
    Example:
        semfs search "how do I rotate an api key"
        semfs search "custom domain" --under deploy -k 3 --json
        semfs search "parse a config file" -c docs -c code
        semfs search "webhook retries" --paths | xargs -d '\\n' grep -n retry
    """
    from semfs.ingest.search.results import link_names, results_file, with_status_line
    from semfs.ingest.search.several import merge_hits, several_results

    if not query.strip():
        raise click.BadParameter("give a question or words to search for", param_hint="QUERY")
    request = SearchRequest(query, k=k, mode=mode, min_score=min_score, under=under, more=more)
    several = len(addresses) > 1
    metas: dict[str, StoreMeta] = {}
    each: dict[str, list[Hit]] = {}
    standing: dict[str, Standing | None] = {}
    notes: list[str] = []
    wrong_folder: list[str] = []
    for address in addresses:  # one store open at a time; each its own model
        name = address.collection
        meta, hits, note, wrong, standing[name] = _search_one(address, request, several)
        if wrong is not None:
            wrong_folder.append(wrong)
        metas[name], each[name] = meta, hits
        if note:
            notes.append(f"{name}: {note}" if several else note)
    if len(wrong_folder) == len(addresses):  # --under: a folder of at least one of them
        raise SemfsError("; ".join(wrong_folder))
    found = merge_hits(each, request.k, standing)
    if as_json:
        listed = [{**h.to_json(), "collection": name} for name, h in found]
        click.echo(json.dumps(listed, indent=2, ensure_ascii=False))
        return
    if paths_only:
        for name, h in found:
            click.echo(_source_path(metas[name].source, h.path))
        return
    # Several collections: a hit's path begins with its collection's name (as one mount of
    # them shows it: MNT/docs/..., MNT/code/...).
    if several:
        text = several_results(request, found, list(each), notes)
    else:
        shown = tuple(h for _, h in found)
        text = with_status_line(
            results_file(request, shown, link_names(shown, request.k)), "; ".join(notes) or None
        )
    click.echo(text.decode("utf-8", "surrogateescape"), nl=False)


def _search_one(
    address: CollectionAddress, request: SearchRequest, several: bool = False
) -> tuple[StoreMeta, list[Hit], str | None, str | None, Standing | None]:
    """One collection's (meta, hits, meaning note, why --under is not a folder of it, and
    with ``several`` its standing: who comes first, see merge_hits). Raises SemfsError when
    the collection does not exist."""
    from semfs.ingest.search import Searcher

    gone_at: float | None = None  # when the store's owner was found ending under us
    hits: list[Hit] = []
    note = wrong = None
    standing: Standing | None = None
    while True:
        try:
            with open_store(address) as store:
                meta = store.read_meta()
                if meta is not None:
                    if request.under is not None:
                        wrong = _folder_error(store, request.under, address.collection)
                    if wrong is None:
                        searcher = Searcher(store)
                        hits = searcher.search(request)
                        # While an ingest's dense pass is under way: how much is embedded.
                        note = searcher.meaning_note(request.mode, request.under, meta)
                        if several and hits:
                            standing = searcher.standing(request)
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
    if meta is None:  # after closing: listing may open the store (a file: URL takes one client)
        raise missing_collection(address)
    return meta, hits, note, wrong, standing


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


def _folder_error(store: StoreReader, folder: str, collection: str) -> str | None:
    """Why ``folder`` is not a folder of the collection (one that holds a document), or None."""
    prefix = folder + "/"
    paths = [d.path for d in store.list_documents()]
    if folder in paths:
        return f"--under {folder}: that is a file, not a folder, of {collection!r}"
    if not any(p.startswith(prefix) for p in paths):
        return (
            f"--under {folder}: no such folder in collection {collection!r} "
            "(a path in the collection, as `ls` of a mount shows it)"
        )
    return None


def register(group: click.Group) -> None:
    """Add `semfs search` to ``group``."""
    group.add_command(search)
