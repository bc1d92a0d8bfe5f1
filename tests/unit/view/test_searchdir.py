"""Search directories without a mount: paths, nodes, results file, cache and recent list.

A real Edge store holding the sample corpus, ingested with the hash embedder, and the real
:class:`semfs.ingest.search.Searcher`; the nodes are what the FUSE callbacks would serve.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import posixpath
import random
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from semfs.fusefs.cli.mounthelper import translate
from semfs.fusefs.mount.bindings import FuseOSError
from semfs.fusefs.mount.ops import SemfsOperations
from semfs.fusefs.view.reader import DocumentReader
from semfs.fusefs.view.searchdir import (
    NAME_MAX,
    QueryCache,
    QueryResult,
    RecentQueries,
    SearchDirectories,
    check_folder_name,
    query_text,
    results_name,
)
from semfs.fusefs.view.tree import DIR, FILE, SYMLINK, FileIds, InodeMap, Node, Tree
from semfs.ingest.errors import SemfsError
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Hit, Searcher
from semfs.ingest.search.results import link_names, list_entry, results_file
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import SAMPLE_CORPUS

IDS = FileIds(uid=1234, gid=5678, mounted_at=1_000_000.0)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with open_store(CollectionAddress(store=tmp_path_factory.mktemp("searchdir-store"))) as s:
        ingest(SAMPLE_CORPUS, s, model="hash")
        yield s


@pytest.fixture(scope="module")
def tree(store: Store) -> Tree:
    return Tree.build(store.list_documents(), InodeMap(), IDS)


class CountingSearch:
    """The real Searcher, counting its calls (a spy); ``delay`` widens race windows."""

    def __init__(self, searcher: Searcher, delay: float = 0.0) -> None:
        self.searcher = searcher
        self.delay = delay
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (query, request's other fields)
        self.fail: Exception | None = None
        self._lock = threading.Lock()

    def __call__(self, request: SearchRequest, **kwargs: Any) -> list[Hit]:
        fields = {**dataclasses.asdict(request), **kwargs}
        with self._lock:
            self.calls.append((fields.pop("query"), fields))
        time.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        return self.searcher.search(request, **kwargs)


@pytest.fixture
def spy(store: Store) -> CountingSearch:
    return CountingSearch(Searcher(store))


@pytest.fixture
def dirs(spy: CountingSearch) -> SearchDirectories:
    return SearchDirectories(spy)


def listing(node: Node) -> list[str]:
    return list(node.children)


def resolve(dirs: SearchDirectories, tree: Tree, rel: str) -> Node:
    node = dirs.resolve(tree, rel)
    assert node is not None, rel
    return node


# -- paths -----------------------------------------------------------------------------


def test_search_folder_answers_in_every_directory_and_nowhere_else(
    dirs: SearchDirectories, tree: Tree
) -> None:
    for scope in ("", "deploy", "customize"):
        rel = f"{scope}/.search" if scope else ".search"
        node = resolve(dirs, tree, rel)
        assert node.kind == DIR
        assert ".search" not in tree.lookup(scope).children  # type: ignore[union-attr]
    assert dirs.resolve(tree, "quickstart.mdx/.search") is None  # not a directory
    assert dirs.resolve(tree, "nope/.search") is None
    assert dirs.resolve(tree, "deploy") is None  # the tree's, not ours


def test_parse_parameters_and_query(dirs: SearchDirectories, tree: Tree) -> None:
    sp = dirs.parse(tree, "deploy/.search/@keyword/@k=3/@min=0.5/serve docs/01-x.mdx")
    assert sp is not None
    assert sp.under == "deploy"
    assert sp.params == ("@keyword", "@k=3", "@min=0.5")
    assert sp.options == SearchRequest(mode="keyword", k=3, min_score=0.5)
    assert (sp.query, sp.entry) == ("serve docs", "01-x.mdx")
    assert sp.dir_path == "deploy/.search/@keyword/@k=3/@min=0.5/serve docs"
    assert sp.depth == 6
    later_wins = dirs.parse(tree, ".search/@k=3/@semantic/@k=5/q")
    assert later_wins is not None and later_wins.options == SearchRequest(mode="semantic", k=5)
    full = dirs.parse(tree, ".search/@full/q")
    assert full is not None and full.options == SearchRequest(full=True)
    assert dirs.parse(tree, ".search/@full=1/q") is None
    more = dirs.parse(tree, ".search/@more/@keyword/q")
    assert more is not None and more.options == SearchRequest(mode="keyword", more=True)
    assert dirs.parse(tree, ".search/@more=2/q") is None


@pytest.mark.parametrize(
    "rel",
    [
        ".search/.DS_Store",
        ".search/._foo",
        ".search/.git",
        ".search/.hidden/01-x",
        "deploy/.search/@keyword/.directory",
        ".search/@k=0/q",
        ".search/@k=101/q",
        ".search/@k=three/q",
        ".search/@k=-1/q",
        ".search/@min=nan/q",
        ".search/@min=/q",
        ".search/@fuzzy/q",
        ".search/@/q",
        ".search/q/01-x/deeper",
        ".search/q/.DS_Store",
        ".search/q/desktop.ini",
        ".search/q/1-x",
    ],
)
def test_not_search_paths(
    dirs: SearchDirectories, spy: CountingSearch, tree: Tree, rel: str
) -> None:
    assert dirs.parse(tree, rel) is None
    assert dirs.resolve(tree, rel) is None
    assert not spy.calls, "a probe must not run a search"


def test_a_real_entry_of_the_folder_name_shadows_the_search_folder(spy: CountingSearch) -> None:
    records = [
        _record("a/.search/b/notes.md"),
        _record("a/other.md"),
    ]
    tree = Tree.build(records, InodeMap(), IDS)
    dirs = SearchDirectories(spy)
    assert dirs.parse(tree, "a/.search/x") is None  # a/.search is the source's folder
    sp = dirs.parse(tree, "a/.search/b/.search/x")
    assert sp is not None and sp.under == "a/.search/b"


def _record(path: str) -> Any:
    from semfs.ingest.store.schema import DocumentRecord

    return DocumentRecord(path, 1, 1.0, "0" * 64, 1, 1)


def test_folder_names_and_options_are_checked() -> None:
    assert check_folder_name(".find") == ".find"
    for bad in ("", ".", "..", "a/b", "@x", "x" * 256):
        with pytest.raises(SemfsError):
            check_folder_name(bad)
    with pytest.raises(SemfsError, match="mode"):
        SearchRequest(mode="fuzzy")
    with pytest.raises(SemfsError, match="k must be"):
        SearchRequest(k=0)
    with pytest.raises(SemfsError, match="finite"):
        SearchRequest(min_score=float("inf"))


def test_query_text_is_clean() -> None:
    assert query_text("  rotate\tapi\nkey  ") == "rotate api key"
    assert query_text("\x01\x1b[31m") == "[31m"
    assert query_text("caf\udce9") == "caf\ufffd"  # a non-UTF-8 byte, as FUSE passes it
    assert query_text("   ") == ""


def test_query_text_maps_slash_look_alikes() -> None:
    # "/" cannot be in a file name: DIVISION SLASH and FULLWIDTH SOLIDUS stand in for it.
    assert query_text("under example.com\u2215docs") == "under example.com/docs"
    assert query_text("a\uff0fb \u2044 c") == "a/b \u2044 c"  # FRACTION SLASH is not one


# -- query directories -------------------------------------------------------------------


def test_query_directory_lists_results_file_then_ranked_links(
    dirs: SearchDirectories, spy: CountingSearch, tree: Tree
) -> None:
    question = "custom domain"
    node = resolve(dirs, tree, f".search/{question}")
    assert node.kind == DIR and node.attrs["st_mode"] & 0o777 == 0o555
    assert not spy.calls, "getattr of a query directory must not search"
    names = listing(node)
    assert names[0] == "00-results.md"
    assert names == sorted(names), "ls order is rank order"
    expected = spy.searcher.search(SearchRequest(question))  # the `semfs search` code path
    assert len(names) == len(expected) + 1 <= 11
    for name, hit in zip(names[1:], expected, strict=True):
        assert name == f"{hit.rank:02d}-{posixpath.basename(hit.path)}"
        child = node.children[name]
        assert child.kind == SYMLINK
        assert child.attrs["st_size"] == len(child.target.encode())
        assert (
            posixpath.normpath(posixpath.join(posixpath.dirname(child.path), child.target))
            == hit.path
        )
    assert len(spy.calls) == 1


@pytest.mark.parametrize(
    "query_dir",
    [".search/q", "deploy/.search/q", "deploy/.search/@keyword/@k=3/q", ".search/@k=2/q"],
)
def test_link_targets_are_relative_to_their_depth(
    dirs: SearchDirectories, tree: Tree, query_dir: str
) -> None:
    node = resolve(dirs, tree, query_dir.replace("/q", "/deploy to vercel or cloudflare"))
    links = [c for c in node.children.values() if c.kind == SYMLINK]
    assert links
    for link in links:
        assert not link.target.startswith("/")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link.path), link.target))
        assert tree.lookup(resolved) is not None and tree.lookup(resolved).kind == FILE  # type: ignore[union-attr]
        assert not resolved.startswith("..")


def test_scoped_search_stays_inside_its_directory(dirs: SearchDirectories, tree: Tree) -> None:
    everywhere = resolve(dirs, tree, ".search/custom domain setup")
    assert any(
        not c.target.startswith("../../deploy/")
        for c in everywhere.children.values()
        if c.kind == SYMLINK
    )
    scoped = resolve(dirs, tree, "deploy/.search/custom domain setup")
    links = [c for c in scoped.children.values() if c.kind == SYMLINK]
    assert links and all(c.target.startswith("../../../deploy/") for c in links)


def test_parameters_change_mode_k_and_floor(
    dirs: SearchDirectories, spy: CountingSearch, tree: Tree
) -> None:
    three = resolve(dirs, tree, ".search/@keyword/@k=3/nginx reverse proxy")
    assert len(listing(three)) == 4
    assert spy.calls[-1][1]["mode"] == "keyword" and spy.calls[-1][1]["k"] == 3
    keyword = spy.searcher.search(SearchRequest("nginx reverse proxy", k=3, mode="keyword"))
    assert [
        c.target.rpartition("../")[2] for c in three.children.values() if c.kind == SYMLINK
    ] == [h.path for h in keyword]
    nothing = resolve(dirs, tree, ".search/@min=1000/nginx reverse proxy")
    assert listing(nothing) == ["00-results.md"]
    text = nothing.children["00-results.md"]
    assert text.data is not None
    assert b"below the floor 1000" in text.data


def test_entry_lookup_without_listing(dirs: SearchDirectories, tree: Tree) -> None:
    names = listing(resolve(dirs, tree, ".search/fonts"))
    link = resolve(dirs, tree, f".search/fonts/{names[1]}")
    assert link.kind == SYMLINK
    results = resolve(dirs, tree, ".search/fonts/00-results.md")
    assert results.data is not None and results.attrs["st_size"] == len(results.data)
    assert dirs.resolve(tree, ".search/fonts/99-nothing.mdx") is None
    assert dirs.resolve(tree, ".search/fonts/.DS_Store") is None


def test_results_file_holds_what_an_agent_needs(dirs: SearchDirectories, tree: Tree) -> None:
    node = resolve(dirs, tree, "customize/.search/@k=3/change the fonts")
    data = node.children["00-results.md"]
    assert data.data is not None
    text = data.data.decode()
    header = "# Search: change the fonts\nhybrid · k 3 · in customize/ · 3 documents\n"
    assert text.startswith(header)
    links = listing(node)[1:]
    for rank, name in enumerate(links, start=1):
        target = posixpath.normpath(posixpath.join(node.path, node.children[name].target or ""))
        # The ranked list: rank, path, match strength on the 0-1 scale, then the title where
        # it says more than the path.
        entry = next(line for line in text.splitlines() if line.startswith(f"{rank}. {target} ("))
        assert re.fullmatch(r"\d\. \S+ \(([01]\.\d\d) (strong|fair|weak)\)( \S.*)?", entry), entry
    # "Fonts" restates fonts.mdx; descriptions and the legend live in the guide, not here.
    assert "\n1. customize/fonts.mdx (" in text and ") Fonts" not in text
    assert "Customize typography" not in text and "strong ≥" not in text and "sed -n" not in text


def test_list_entries_show_a_title_only_where_it_adds_words() -> None:
    plain = Hit(1, "deploy/domains.mdx", 1.0, 1, 1, "", title="Domains", strength=0.7)
    named = Hit(2, "deploy/dns.mdx", 1.0, 1, 1, "", title="Custom domain DNS", strength=0.3)
    assert list_entry(plain) == "1. deploy/domains.mdx (0.70 strong)"
    assert list_entry(named) == "2. deploy/dns.mdx (0.30 fair) Custom domain DNS"


def test_the_default_results_file_is_compact_and_more_is_one_folder_away(
    dirs: SearchDirectories, tree: Tree
) -> None:
    query = "how do I set up a custom domain and dns records"
    small = resolve(dirs, tree, f".search/{query}").children["00-results.md"].data
    more = resolve(dirs, tree, f".search/@more/{query}").children["00-results.md"].data
    assert small is not None and more is not None
    numbered = re.compile(rb"^\d+: ", re.M)
    # The excerpts stop within their budget; @more shows more of the answering lines.
    assert len(small) <= 2000 and len(numbered.findall(small)) >= 2
    assert len(numbered.findall(more)) > len(numbered.findall(small))
    assert " · more · " in more.decode()


def test_excerpt_lines_are_the_documents_own_lines(dirs: SearchDirectories, tree: Tree) -> None:
    """Every ``N: text`` line under a hit is line N of that file, verbatim (sed -n 'Np'),
    or, for a line too long to show, pieces of it joined by an ellipsis."""
    text = resolve(dirs, tree, ".search/load Google Fonts by font family name/00-results.md")
    assert text.data is not None
    current = None
    checked = 0
    for line in text.data.decode().splitlines():
        if m := re.match(r"## \d+\. (\S+)$", line):
            current = (SAMPLE_CORPUS / m.group(1)).read_text().split("\n")
        elif (m := re.match(r"(\d+): (.*)$", line)) and current is not None:
            source = current[int(m.group(1)) - 1].rstrip()
            if "…" in m.group(2):
                assert all(piece.strip() in source for piece in m.group(2).split("…"))
            else:
                assert source == m.group(2)
            checked += 1
    assert checked >= 3
    # The fonts page's answering line, not its front matter, is shown for it.
    assert "\n14: Mintlify automatically loads [Google Fonts]" in text.data.decode()


def test_full_parameter_shows_whole_passages(dirs: SearchDirectories, tree: Tree) -> None:
    node = resolve(dirs, tree, ".search/@full/@k=2/change the fonts")
    data = node.children["00-results.md"].data
    assert data is not None
    text = data.decode()
    assert "· full passages ·" in text
    assert "## 1. customize/fonts.mdx (lines 1-" in text and "link: 01-fonts.mdx" in text
    assert 'title: "Fonts"' in text  # the first chunk whole, front matter included
    plain = resolve(dirs, tree, ".search/@k=2/change the fonts").children["00-results.md"]
    assert plain.data is not None and 'title: "Fonts"' not in plain.data.decode()


def test_results_file_fences_passages_that_hold_fences() -> None:
    hit = Hit(1, "a/b.md", 0.5, 3, 9, "```python\nprint(1)\n```\n", "Intro > Code")
    sp = SearchDirectories(lambda *a, **k: []).parse(  # type: ignore[arg-type]
        Tree.build([_record("a/b.md")], InodeMap(), IDS), ".search/@full/q"
    )
    assert sp is not None
    text = results_file(sp.request(), (hit,), ("01-b.md",)).decode()
    assert "## 1. a/b.md (lines 3-9) score 0.5000" in text
    assert "section: Intro > Code" in text
    assert "````\n```python\nprint(1)\n```\n````" in text


@pytest.mark.parametrize(
    "name",
    [
        "x" * NAME_MAX,
        "é" * (NAME_MAX // 2),
        "   ",
        "\t",
        "what\nabout\rcontrol\x01chars\x7f",
        "caf\udce9 au lait",
        "日本語のドキュメント 🚀",
        "* ? [ ] $HOME `ls` ; rm -rf",
        "no..dots..",
        "a:b|c<d>e\\f",
    ],
)
def test_odd_query_names_give_a_result(dirs: SearchDirectories, tree: Tree, name: str) -> None:
    node = resolve(dirs, tree, f".search/{name}")
    names = listing(node)
    assert names[0] == "00-results.md"
    results = node.children["00-results.md"]
    assert results.data is not None
    results.data.decode("utf-8")
    assert all(len(n.encode("utf-8", "surrogateescape")) <= NAME_MAX for n in names)


def test_long_file_names_are_cut_to_name_max() -> None:
    hits = tuple(Hit(i, f"d/{'n' * 300}.mdx", 1.0, 1, 1, "") for i in (1, 2))
    names = link_names(hits, 10)
    assert [len(n.encode()) for n in names] == [NAME_MAX, NAME_MAX]  # cut to the limit, no less
    assert names[0].startswith("01-n") and names[0].endswith("….mdx")
    assert len(set(names)) == 2
    # Two-byte letters: the cut falls between characters, up to a byte short of the limit.
    wide_letters = link_names((Hit(1, f"d/{'é' * 300}.mdx", 1.0, 1, 1, ""),), 10)
    assert NAME_MAX - 1 <= len(wide_letters[0].encode()) <= NAME_MAX
    assert wide_letters[0].startswith("01-éé") and wide_letters[0].endswith("é….mdx")
    wide = link_names((Hit(7, "a.md", 1.0, 1, 1, ""),), 100)
    assert wide == ("007-a.md",)
    # 00-results.md whatever k (the README and the guide say so); it still sorts first.
    assert results_name(100) == "00-results.md"
    assert sorted([wide[0], "001-b.md", results_name(100)])[0] == results_name(100)
    assert results_name(10) == "00-results.md"


# -- the cache ---------------------------------------------------------------------------


def test_repeated_lookups_search_once(
    dirs: SearchDirectories, spy: CountingSearch, tree: Tree
) -> None:
    for _ in range(3):
        node = resolve(dirs, tree, ".search/api keys")
        for name in listing(node):
            resolve(dirs, tree, f".search/api keys/{name}")
    resolve(dirs, tree, ".search/  api   keys ")  # the same text
    listing(resolve(dirs, tree, ".search/  api   keys "))
    assert len(spy.calls) == 1
    listing(resolve(dirs, tree, ".search/@k=4/api keys"))  # other options: another search
    listing(resolve(dirs, tree, "deploy/.search/api keys"))  # another scope: another search
    assert len(spy.calls) == 3


def test_concurrent_lookups_of_one_query_search_once(store: Store, tree: Tree) -> None:
    spy = CountingSearch(Searcher(store), delay=1.0)  # 1 s: room for 8 threads, loaded
    dirs = SearchDirectories(spy)
    barrier = threading.Barrier(8)
    seen: list[list[str]] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            if i % 2:
                seen.append(listing(resolve(dirs, tree, ".search/preview deployments")))
            else:
                node = resolve(dirs, tree, ".search/preview deployments/00-results.md")
                seen.append([node.name])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(seen) == 8
    assert len(spy.calls) == 1
    assert len({tuple(s) for s in seen if len(s) > 1}) == 1


def test_a_new_tree_drops_the_cached_results(
    store: Store, tree: Tree, dirs: SearchDirectories, spy: CountingSearch
) -> None:
    listing(resolve(dirs, tree, ".search/themes"))
    listing(resolve(dirs, tree, ".search/themes"))
    assert len(spy.calls) == 1
    newer = Tree.build(store.list_documents(), InodeMap(), IDS)
    listing(resolve(dirs, newer, ".search/themes"))
    assert len(spy.calls) == 2
    assert len(dirs.cache) == 1


def test_results_name_only_documents_the_tree_shows(store: Store, spy: CountingSearch) -> None:
    docs = [d for d in store.list_documents() if d.path != "customize/fonts.mdx"]
    smaller = Tree.build(docs, InodeMap(), IDS)
    dirs = SearchDirectories(spy)
    node = resolve(dirs, smaller, ".search/fonts typeface")
    targets = [c.target for c in node.children.values() if c.kind == SYMLINK]
    assert targets and all(not t.endswith("customize/fonts.mdx") for t in targets)


def test_a_failed_search_reaches_every_waiter_and_is_not_kept(store: Store, tree: Tree) -> None:
    # The four start together and the failing search takes 1 s: all four wait for that one
    # (0.1 s let a thread scheduled late on a loaded machine start a second search).
    spy = CountingSearch(Searcher(store), delay=1.0)
    spy.fail = RuntimeError("store down")
    dirs = SearchDirectories(spy)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def worker() -> None:
        start.wait()
        try:
            listing(resolve(dirs, tree, ".search/cards"))
        except RuntimeError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(errors) == 4 and len(spy.calls) == 1
    assert len(dirs.cache) == 0
    spy.fail = None
    assert listing(resolve(dirs, tree, ".search/cards"))[0] == "00-results.md"
    assert len(spy.calls) == 2


def test_cache_is_bounded(tree: Tree) -> None:
    cache = QueryCache(max_entries=3)
    made: list[str] = []

    def compute(key: str) -> Callable[[], QueryResult]:
        def run() -> QueryResult:
            made.append(key)
            return QueryResult(key, (), (), "00-results.md", b"", 0.0)

        return run

    for key in ("a", "b", "c", "a", "d", "a", "b"):
        cache.get(tree, key, compute(key))
    assert len(cache) == 3
    assert made == ["a", "b", "c", "d", "b"]  # "b" was least recently used when "d" came


# -- recent queries ----------------------------------------------------------------------


def test_search_folders_list_recent_queries_most_recent_first(
    dirs: SearchDirectories, spy: CountingSearch, tree: Tree
) -> None:
    assert listing(resolve(dirs, tree, ".search")) == ["README.md"]
    for q in ("tabs", "cards", "steps"):
        listing(resolve(dirs, tree, f".search/{q}"))
    listing(resolve(dirs, tree, ".search/tabs"))
    listing(resolve(dirs, tree, "deploy/.search/vercel"))
    listing(resolve(dirs, tree, ".search/@keyword/callouts"))
    calls = len(spy.calls)
    folder = resolve(dirs, tree, ".search")
    assert listing(folder) == ["README.md", "tabs", "steps", "cards"]
    assert all(c.kind == DIR for n, c in folder.children.items() if n != "README.md")
    assert listing(resolve(dirs, tree, "deploy/.search")) == ["README.md", "vercel"]
    assert listing(resolve(dirs, tree, ".search/@keyword")) == ["README.md", "callouts"]
    assert len(spy.calls) == calls, "listing a search folder must not search"
    assert resolve(dirs, tree, ".search/@keyword").attrs["st_nlink"] == 2


def test_every_search_folder_explains_itself(
    spy: CountingSearch, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    dirs = SearchDirectories(spy, folder=".find", defaults=SearchRequest(mode="keyword", k=7))
    for folder in (".find", "deploy/.find", ".find/@semantic/@k=2"):
        readme = resolve(dirs, tree, f"{folder}/README.md")
        assert readme.kind == FILE and readme.attrs["st_size"] == len(readme.data or b"")
        assert listing(resolve(dirs, tree, folder))[0] == "README.md"
    text = (readme.data or b"").decode()
    assert text.startswith("# .find: search by naming a question")
    assert ".find/how do I rotate an api key/00-results.md" in text
    assert re.search(r"^    @keyword +exact words.*\(default\)$", text, re.MULTILINE)
    assert "(default 7)" in text and "@k=500" in text
    assert dirs.resolve(tree, ".find/README.md/00-results.md") is None
    assert spy.calls == [], "the README is not a search"
    caplog.set_level(logging.WARNING, logger="semfs.fusefs.view.searchdir")
    reasons = {
        "@k=500": "k must be a whole number from 1 to 100, not '500'",
        "@min=x": "min must be a number",
        "@bogus": "unknown parameter '@bogus'",
        "@k": "@k needs a value",
        "@full=1": "@full takes no value",
    }
    for name in reasons:
        for _ in range(3):  # the kernel asks again; one line each
            assert dirs.resolve(tree, f".find/{name}/gitlab") is None
            assert dirs.resolve(tree, f".find/@keyword/{name}") is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == len(reasons), lines
    for line, (name, why) in zip(lines, reasons.items(), strict=True):
        assert line.startswith(f".find/{name}: not found: ") and why in line, line
        assert line.endswith("(see .find/README.md)")


def test_recent_queries_are_bounded() -> None:
    recent = RecentQueries(max_entries=3)
    for q in "abcde":
        recent.add("", (), q)
    recent.add("", (), "c")
    assert recent.names("", ()) == ["c", "e", "d"]


def test_mount_defaults_apply(spy: CountingSearch, tree: Tree) -> None:
    dirs = SearchDirectories(spy, folder=".find", defaults=SearchRequest(mode="keyword", k=2))
    assert dirs.resolve(tree, ".search/x") is None
    node = resolve(dirs, tree, ".find/gitlab")
    assert len(listing(node)) == 3
    assert spy.calls[-1][1]["mode"] == "keyword"
    assert listing(resolve(dirs, tree, ".find/@semantic/gitlab"))
    assert spy.calls[-1][1]["mode"] == "semantic" and spy.calls[-1][1]["k"] == 2


def test_inode_numbers_are_stable_and_apart_from_the_tree(
    dirs: SearchDirectories, tree: Tree
) -> None:
    a = resolve(dirs, tree, ".search/tabs")
    b = resolve(dirs, tree, ".search/tabs")
    assert a.ino == b.ino and a.ino >= 1 << 62
    assert a.ino != resolve(dirs, tree, "deploy/.search/tabs").ino
    assert max(n.ino for n in (tree.lookup(p) for p in ("", "deploy")) if n) < 1 << 62


def test_module_never_imports_fuse() -> None:
    import semfs.fusefs.view.searchdir as mod

    source = Path(mod.__file__).read_text()
    assert "bindings" not in source and "mfusepy" not in source


# -- through the FUSE callbacks, called directly as libfuse would -----------------------------


@pytest.fixture
def ops(store: Store, tree: Tree, dirs: SearchDirectories) -> SemfsOperations:
    ops = SemfsOperations(tree, DocumentReader(store))
    ops.resolvers.append(lambda rel: dirs.resolve(ops.tree, rel))
    return ops


def errno_of(call: Callable[..., Any], *args: Any) -> int:
    with pytest.raises(FuseOSError) as info:
        call(*args)
    return int(info.value.errno)


def test_callbacks_serve_search_directories(ops: SemfsOperations) -> None:
    root = [e[0] for e in ops.readdir("/", 0)]  # type: ignore[index]
    assert ".search" not in root
    assert stat.S_ISDIR(ops.getattr("/.search")["st_mode"])
    assert stat.S_ISDIR(ops.getattr("/deploy/.search/vercel")["st_mode"])
    names = [e[0] for e in ops.readdir("/deploy/.search/vercel", 0)]  # type: ignore[index]
    assert names[:3] == [".", "..", "00-results.md"]
    link = f"/deploy/.search/vercel/{names[3]}"
    assert stat.S_ISLNK(ops.getattr(link)["st_mode"])
    assert ops.readlink(link).startswith("../../../deploy/")
    info = SimpleNamespace(flags=os.O_RDONLY, fh=0, keep_cache=0, direct_io=0)
    ops.open("/deploy/.search/vercel/00-results.md", info)
    size = ops.getattr("/deploy/.search/vercel/00-results.md")["st_size"]
    data = ops.read("/deploy/.search/vercel/00-results.md", size + 100, 0, info)
    assert len(data) == size and data.startswith(b"# Search: vercel\n")
    assert ops.read("/deploy/.search/vercel/00-results.md", 10, size, info) == b""
    ops.release("/deploy/.search/vercel/00-results.md", info)
    assert errno_of(ops.readlink, "/deploy/.search/vercel") == errno.EINVAL
    assert (
        errno_of(
            ops.open,
            link.replace(names[3], "00-results.md"),
            SimpleNamespace(flags=os.O_WRONLY, fh=0, keep_cache=0, direct_io=0),
        )
        == errno.EROFS
    )
    assert errno_of(ops.mkdir, "/.search/new", 0o755) == errno.EROFS


def test_callbacks_answer_precise_errors(
    ops: SemfsOperations, spy: CountingSearch, caplog: pytest.LogCaptureFixture
) -> None:
    assert errno_of(ops.getattr, "/.search/.DS_Store") == errno.ENOENT
    assert errno_of(ops.getattr, "/.search/@nope/q") == errno.ENOENT
    assert errno_of(ops.getattr, "/.search/" + "x" * 256) == errno.ENAMETOOLONG
    assert errno_of(ops.getattr, "/.search/" + "é" * 128) == errno.ENAMETOOLONG
    assert stat.S_ISDIR(ops.getattr("/.search/" + "x" * 255)["st_mode"])
    assert not spy.calls
    spy.fail = RuntimeError("store down")
    with caplog.at_level(logging.ERROR, logger="semfs.fusefs.mount.ops"):
        assert errno_of(ops.readdir, "/.search/cards", 0) == errno.EIO
        assert errno_of(ops.getattr, "/.search/cards/01-cards.mdx") == errno.EIO
    assert "store down" in caplog.text
    spy.fail = None
    assert len(ops.readdir("/.search/cards", 0)) > 3


def test_ranking_ignores_the_order_of_tied_chunks(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tied fused (DBSF) scores happen and Qdrant returns ties in no fixed order; `semfs
    search` and a search directory (two calls, often two processes) must still rank alike."""
    searcher = Searcher(store)
    expected = {
        m: searcher.search(SearchRequest("deploy docs", mode=m)) for m in ("hybrid", "keyword")
    }
    real_query = store.query

    def shuffled(*args: Any, **kwargs: Any) -> Any:
        chunks = real_query(*args, **kwargs)
        random.Random(len(chunks)).shuffle(chunks)
        return chunks

    monkeypatch.setattr(store, "query", shuffled)
    for mode, hits in expected.items():
        assert searcher.search(SearchRequest("deploy docs", mode=mode)) == hits


def test_fstab_options_set_the_search_defaults() -> None:
    args = translate(["/s", "/m", "-o", "search_dir=.find,search_k=3,search_mode=keyword"])
    assert args == [
        "mount",
        "/m",
        "--store",
        "/s",
        "--search-dir",
        ".find",
        "--k",
        "3",
        "--mode",
        "keyword",
    ]
