"""`semfs.open_collections`: several collections as one from Python (issue 50), each on its own
model (the hash stand-in at 384 and 64 dimensions), with Collection's methods."""

from __future__ import annotations

from pathlib import Path

import semfs
from semfs.ingest.store.address import CollectionAddress
from tests.helpers.mounting import semfs as run_semfs
from tests.helpers.several import MODELS, two_collections

# "one hour": the nearest collection (by its own model) is not the strongest one's.
QUESTIONS = ("rotate an API key", "how do uploads get retried", "one hour")
BOTH = ("-c", "handbook", "-c", "secretrepo")


def test_open_collections_searches_each_on_its_own_model(tmp_path: Path) -> None:
    """Before: no open_collections."""
    store = two_collections(tmp_path)
    with semfs.open_collections([CollectionAddress(n, store=store) for n in MODELS]) as both:
        assert {name: s["model"] for name, s in both.status().items()} == MODELS
        assert both.search("rotate an API key")[0].path == "handbook/guide/keys.md"
        code = both.search("retry zebrafish upload", k=2)
        assert [h.path.partition("/")[0] for h in code] == ["secretrepo", "secretrepo"]
        inside = both.search("zebrafish billing key", under="handbook")
        assert inside and all(h.path.startswith("handbook/") for h in inside)
        assert both.read(code[0].path) == (tmp_path / code[0].path).read_bytes()
        near = both.similar("handbook/guide/keys.md")
        assert [h.path for h in near] == ["handbook/faq.md"]
        assert len(both.documents()) == 4
        texts = {q: both.results_text(q, k=4) for q in QUESTIONS}
    # The results text is byte for byte `semfs search -c A -c B`'s (the same merge).
    for question, text in texts.items():
        cli = run_semfs("search", question, "-k", "4", "--store", str(store), *BOTH)
        assert cli.stdout == text
