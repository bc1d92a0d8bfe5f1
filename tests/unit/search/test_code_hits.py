"""Code hits name their symbol: ``path:LINE · class Uploader (U+203A) def retry_upload``, the
signature first, then the answering lines; ``#`` comments are lines, not headings.

A real Edge store, the real chunker and BM25 (hash embedder: keyword mode needs no model).
"""

from __future__ import annotations

import json
from pathlib import Path

from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher, hit_fields, hit_from_fields
from semfs.ingest.search.results import render, results_file
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

CLIENT = '''\
"""Upload client."""

import time


class Uploader:
    """Sends parts to the server."""

    def __init__(self, session, attempts=3):
        self.session = session
        self.attempts = attempts

    def retry_upload(self, part, attempts=3):
        """Upload one part again after a failure."""
        for attempt in range(attempts):
            try:
                return self.session.put(part)
            except ConnectionError:
                pass
            # wait longer each time: exponential backoff between the tries
            time.sleep(2 ** attempt)
            time.sleep(0)
            time.sleep(0)
            time.sleep(0)
        raise RuntimeError("upload failed after retries")

    def abort(self):
        self.session.close()
'''


def test_a_code_hit_names_its_definition_and_signature(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "uploads").mkdir(parents=True)
    (src / "uploads" / "client.py").write_text(CLIENT)
    (src / "notes.md").write_text("# Notes\n\nNothing about uploads here.\n")
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        searcher = Searcher(store)
        hits = searcher.search(SearchRequest("exponential backoff", k=3, mode="keyword"))
    top = hits[0]
    assert top.path == "uploads/client.py"
    text = render("exponential backoff", hits, "keyword · k 3")
    lines = text.split("\n")
    # The best passage first, named by its definition.
    head = lines.index("Answer: 1. uploads/client.py:13 · class Uploader › def retry_upload")
    # The signature first (with its number, as sed -n counts), then the answering lines.
    assert lines[head + 1] == "13:     def retry_upload(self, part, attempts=3):"
    assert (
        "20:             # wait longer each time: exponential backoff between the tries"
        in (lines[head + 2 :])
    )
    best = next(e for e in top.excerpts if e.best)
    assert best.definition is not None and best.definition.line == 13
    assert best.heading == "class Uploader > def retry_upload"
    # The definition survives the owner's socket (JSON) and reaches --json and MCP.
    again = hit_from_fields(json.loads(json.dumps(hit_fields(top))))
    assert again == top
    definition = top.to_json()["excerpts"][0]["definition"]
    assert definition["label"] == "class Uploader > def retry_upload"
    assert definition["signature"] == "    def retry_upload(self, part, attempts=3):"


def test_lines_in_two_definitions_are_labelled_apart(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "client.py").write_text(CLIENT)
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        hits = Searcher(store).search(SearchRequest("session", k=1, mode="keyword", more=True))
    text = render("session", hits, "keyword · k 1")
    assert "[class Uploader › def abort]" in text
    abort = text.split("[class Uploader › def abort]\n", 1)[1].split("\n")
    assert abort[:2] == ["27:     def abort(self):", "28:         self.session.close()"]


GO = """\
package uploads

// Uploader sends parts.
type Uploader struct{ attempts int }

// RetryUpload sends the part again.
func (u *Uploader) RetryUpload(part []byte) error {
	return u.send(part)
}
"""


def test_a_definition_by_its_exact_name(tmp_path: Path) -> None:
    """@symbol: the chunks that define a name, found by the name alone (no model, no
    vectors), with the definition's signature first."""
    src = tmp_path / "src"
    (src / "uploads").mkdir(parents=True)
    (src / "uploads" / "client.py").write_text(CLIENT)
    (src / "uploads" / "client.go").write_text(GO)
    (src / "README.md").write_text("# Uploads\n\nCall retry_upload after a failure.\n")
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        searcher = Searcher(store)
        hits = searcher.search(SearchRequest("retry_upload", k=5, mode="symbol"))
        qualified = searcher.search(SearchRequest("Uploader.retry_upload", k=5, mode="symbol"))
        method = searcher.search(SearchRequest("Uploader::RetryUpload()", k=5, mode="symbol"))
        classes = searcher.search(SearchRequest("Uploader", k=5, mode="symbol"))
        none = searcher.search(SearchRequest("retry", k=5, mode="symbol"))
        scoped = searcher.search(SearchRequest("Uploader", k=5, mode="symbol", under="elsewhere"))
    # The README mentions the name but defines nothing: not a hit.
    assert [h.path for h in hits] == ["uploads/client.py"]
    assert [h.path for h in qualified] == ["uploads/client.py"]
    assert [h.path for h in method] == ["uploads/client.go"]
    assert [h.path for h in classes] == ["uploads/client.go", "uploads/client.py"]
    assert none == [] and scoped == []
    assert hits[0].strength == 1.0 and hits[0].strength_label == "strong"
    text = render("retry_upload", hits, "symbol · k 5")
    assert "## 1. uploads/client.py:13 · class Uploader › def retry_upload\n" in text
    assert "\n13:     def retry_upload(self, part, attempts=3):\n" in text
    # The results file of an empty lookup by name says what to try (the mode's row).
    missing = results_file(SearchRequest("retry", k=5, mode="symbol"), (), ()).decode()
    assert "No documents match." in missing and "exact name" in missing


def test_a_lookup_by_name_loads_no_model(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "client.py").write_text(CLIENT)
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")

        class NoModel:
            def __getattr__(self, name: str) -> object:
                raise AssertionError("a symbol lookup touched the model")

        searcher = Searcher(store, embedder=NoModel())  # type: ignore[arg-type]
        assert [h.path for h in searcher.search(SearchRequest("abort", mode="symbol"))] == [
            "client.py"
        ]
