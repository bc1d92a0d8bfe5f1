"""The BM25 model of every collection (semfs.ingest.store.bm25): long words are cut before it
(issue 39.3), in documents and queries alike, and an ingest says how many."""

from __future__ import annotations

from pathlib import Path

from semfs.ingest.embedding.embedder import HashEmbedder
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.bm25 import MAX_WORD_CHARS, Bm25, bm25_model, cut_long_words


def _vector(sv: object) -> tuple[list[int], list[float]]:
    return list(sv.indices), list(sv.values)  # type: ignore[attr-defined]


def test_words_past_the_limit_are_cut_and_counted() -> None:
    long = "q" * (MAX_WORD_CHARS + 6)
    text = f"keep short_words and {'x' * MAX_WORD_CHARS} but cut {long}, naïve{long}."
    cut, n = cut_long_words(text)
    assert n == 2
    joined = ("naïve" + long)[:64]
    assert cut == f"keep short_words and {'x' * MAX_WORD_CHARS} but cut {long[:64]}, {joined}."
    # "_" and "-" part words, as BM25's tokenizer does: a long identifier keeps every part.
    snake = "_".join(["segment"] * 30)
    assert cut_long_words(snake) == (snake, 0)


def test_a_huge_word_costs_what_its_first_64_characters_cost() -> None:
    # Issue 39.3: Qdrant Edge's Bm25 is quadratic in a word's length and holds the GIL
    # (3 MiB: minutes). The model sees the cut word only: the same vector as its beginning.
    model = Bm25()
    huge = "y" * (3 * 1024 * 1024)
    assert _vector(model.embed_document(huge)) == _vector(model.embed_document("y" * 64))
    assert _vector(model.embed_query(huge)) == _vector(model.embed_query("y" * 64))
    assert model.words_cut == 1  # documents only
    assert isinstance(bm25_model(), Bm25)


def test_an_ingest_counts_the_words_it_cut_and_the_word_is_still_found(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    word = "k" + "y" * (512 * 1024)
    (src / "big.log").write_text(f"start of the log\n{word}\nend of the log\n")
    (src / "small.md").write_text("# Small\n\nnothing long here\n")
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        report = ingest(src, store, model="hash")
        # The chunker cut the word into pieces of at most 3,584 characters; BM25 cut each.
        assert report.words_cut == report.to_json()["words_cut"] >= 512 * 1024 // 3584
        doc = store.get_document("big.log")
        assert doc is not None
        longest = max(len(c.text) for c in store.get_chunks("big.log", doc.gen, range(doc.chunks)))
        assert longest <= 3584
        hits = Searcher(store, embedder=HashEmbedder()).search(
            SearchRequest(word, k=3, mode="keyword")
        )
        assert [h.path for h in hits][:1] == ["big.log"]
