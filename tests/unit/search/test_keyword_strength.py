"""A keyword hit on a word only a few files hold is rated by the words it holds, not by a
fusion that has nothing to measure against (it was 0.002 "weak" for a word in one file)."""

from __future__ import annotations

from pathlib import Path

from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import FAIR, STRONG, Searcher
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store


def _corpus(root: Path) -> Path:
    for i in range(1, 9):
        (root / f"d{i}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / f"d{i}.md").write_text(f"# Doc {i}\n\nCommon words about deployment {i}.\n")
    (root / "flags.md").write_text("# Flags\n\nThe zanzibar flag turns it on.\n")
    return root


def test_a_word_in_one_file_is_a_strong_keyword_match(tmp_path: Path, store_dir: Path) -> None:
    src = _corpus(tmp_path / "src")
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash")
        searcher = Searcher(store)
        (hit,) = searcher.search(SearchRequest("zanzibar", mode="keyword"))
        assert hit.path == "flags.md" and hit.strength >= STRONG and hit.strength_label == "strong"
        # Half the words: no longer strong; a floor applies to the rating shown.
        (half,) = searcher.search(SearchRequest("zanzibar quokka", mode="keyword"))
        assert FAIR <= half.strength < STRONG
        assert (
            searcher.search(SearchRequest("zanzibar quokka", mode="keyword", min_score=STRONG))
            == []
        )
        assert (
            searcher.search(SearchRequest("zanzibar", mode="keyword", min_score=STRONG))[0].path
            == "flags.md"
        )
        # A word every file holds: DBSF has candidates to measure against, and says weak.
        common = searcher.search(SearchRequest("deployment", mode="keyword", k=8))
        assert len(common) == 8 and all(h.strength < FAIR for h in common)
        strengths = [h.strength for h in common]
        assert strengths == sorted(strengths, reverse=True)
