"""Who comes first in a keyword search of several collections (issue 50, BENCHMARKS.md section
44): the collection whose best match scores highest by BM25 with the IDF of all the collections
together, as one collection of them all would rank it. Before, match strength decided: a DBSF
score measured against each collection's own candidates, on each collection's own IDF, so a
collection whose one page holds a word that is rare there outranked the page that answers."""

from __future__ import annotations

from pathlib import Path

import semfs
from semfs.ingest.store.address import CollectionAddress
from tests.helpers.mounting import semfs as run_semfs
from tests.helpers.several import KEYWORD_FILES, QUESTION, keyword_collections


def test_a_keyword_search_of_two_collections_ranks_first_what_one_of_both_would(
    tmp_path: Path,
) -> None:
    """Before: notes/meeting.md (a printer that failed) came first: its strength in notes was
    0.03, the answer's in handbook 0.008."""
    store = keyword_collections(tmp_path)
    names = list(KEYWORD_FILES)
    with (
        semfs.open_collections([CollectionAddress(n, store=store) for n in names]) as two,
        semfs.open_collections([CollectionAddress("both", store=store)]) as one,
    ):
        alone = {n: two[n].search(QUESTION, mode="keyword") for n in names}
        # The premise: on strength, notes's best looks the stronger match.
        assert alone["notes"][0].strength > alone["handbook"][0].strength
        merged = two.search(QUESTION, mode="keyword", k=3)
        assert merged[0].path == "handbook/deploy/rollback.md"
        assert merged[0].path == one.search(QUESTION, mode="keyword")[0].path.removeprefix("both/")
        # The rest follow on strength, as before (notes's first hit second).
        assert merged[1].path == "notes/meeting.md"
        text = two.results_text(QUESTION, mode="keyword", k=3)
    # `semfs search -c a -c b` merges the same way, byte for byte.
    both = ("-c", "handbook", "-c", "notes")
    cli = run_semfs(
        "search", QUESTION, "--mode", "keyword", "-k", "3", "--store", str(store), *both
    )
    assert cli.stdout == text
