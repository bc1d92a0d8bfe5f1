"""A mount of several collections without the kernel (semfs.fusefs.view.forest): each tree a
top-level folder with unique inode numbers, a swap replacing one collection only, and searches
going to the collections of their folder, merged, with mount paths."""

from __future__ import annotations

from semfs.fusefs.view.forest import Forest, ForestSearch, Member, kind_of
from semfs.fusefs.view.tree import DIR, FILE, ROOT_INO, InodeMap, Tree
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Hit, Standing
from tests.helpers.trees import IDS, at, record


def _forest() -> Forest:
    docs = Tree.build([record("guide/setup.md"), record("index.md")], InodeMap(), IDS)
    code = Tree.build([record("src/app.py"), record("index.md")], InodeMap(), IDS)
    return Forest({"docs": docs, "code": code}, IDS)


def test_each_collection_is_a_top_level_folder_with_inodes_unique_across_them() -> None:
    forest = _forest()
    assert forest.root.ino == ROOT_INO and list(forest.root.children) == ["code", "docs"]
    assert forest.part("docs/guide/setup.md") == ("docs", "guide/setup.md")
    assert forest.part("notes/x.md") is None and forest.lookup("index.md") is None
    paths = ["docs", "code", "docs/index.md", "code/index.md", "docs/guide", "code/src/app.py"]
    nodes = [at(forest, p) for p in paths]
    assert [n.path for n in nodes] == paths
    assert len({n.ino for n in nodes} | {ROOT_INO}) == len(paths) + 1
    assert all(n.attrs["st_ino"] == n.ino for n in nodes)
    doc = at(forest, "code/index.md")
    assert doc.kind == FILE and doc.doc is not None and doc.doc.path == "index.md"  # its store's
    assert at(forest, "docs").kind == DIR and list(at(forest, "docs").children) == [
        "guide",
        "index.md",
    ]
    assert at(forest, "docs").children["guide"] is at(forest, "docs/guide")  # one node per path
    assert forest.files == 4 and sorted(forest.paths())[0] == "code/index.md"


def test_a_swap_replaces_one_collection_and_keeps_the_others_numbers() -> None:
    forest = _forest()
    before = {p: at(forest, p).ino for p in ("docs/index.md", "code/src/app.py")}
    code = Tree.build([record("src/app.py"), record("src/new.py")], InodeMap(), IDS)
    after = forest.replaced("code", code)
    assert at(after, "docs/index.md").ino == before["docs/index.md"]
    assert after.lookup("code/index.md") is None and after.lookup("code/src/new.py") is not None
    assert forest.lookup("code/index.md") is not None  # the old snapshot is unchanged


def _hit(path: str, strength: float) -> Hit:
    return Hit(1, path, strength, 1, 1, "text", strength=strength)


def test_the_root_searches_every_collection_and_a_folder_its_own() -> None:
    asked: list[tuple[str, str | None]] = []

    def member(name: str, hits: list[Hit], near: float | None = None) -> Member:
        def search(request: SearchRequest, committed: object = None) -> list[Hit]:
            asked.append((name, request.under))
            return hits

        chunks = lambda path, gen, indexes: []  # noqa: E731
        return Member(name, search, search, chunks, standing=lambda request: Standing(near))  # type: ignore[arg-type]

    code = member("code", [_hit("x.py", 0.9), _hit("y.py", 0.1)], 0.3)
    several = ForestSearch([member("docs", [_hit("a.md", 0.4)]), code])
    found = several.search(SearchRequest("q", k=2))
    assert [(h.path, h.rank) for h in found] == [("code/x.py", 1), ("docs/a.md", 2)]
    assert sorted(asked) == [("code", None), ("docs", None)]
    # The nearest collection's first hit first, whatever the strengths.
    several = ForestSearch([member("docs", [_hit("a.md", 0.4)], 0.6), code])
    found = several.search(SearchRequest("q", k=2))
    assert [(h.path, h.rank) for h in found] == [("docs/a.md", 1), ("code/x.py", 2)]
    asked.clear()
    found = several.search(SearchRequest("q", k=5, under="docs/guide"))
    assert [h.path for h in found] == ["docs/a.md"] and asked == [("docs", "guide")]
    assert several.search(SearchRequest("q", under="notes")) == []


def test_a_collection_is_code_prose_or_both_by_its_documents_names() -> None:
    assert kind_of(["a.py", "b.rs", "c.go", "README.md"]) == "code"  # 75%: a README or two
    assert kind_of(["a.py", "b.rs", "c.go"]) == "code"
    assert kind_of(["a.md", "b.txt", "c.pdf"]) == "prose"
    assert kind_of(["a.py", "b.md"]) == "code and prose (50% code)"
    assert kind_of([]) == "nothing yet"
