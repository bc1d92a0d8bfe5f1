"""The grep engine (fusefs/agent/grep.py) against GNU grep, on real stores of both backends."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from semfs.fusefs.agent.grep import (
    Grep,
    compile_pattern,
    ere_to_python,
    plan,
    required_literals,
    resolve,
    walk,
)
from semfs.fusefs.agent.patterns import line_matcher, re2_source
from semfs.fusefs.view.reader import DocumentReader
from semfs.fusefs.view.tree import FileIds, InodeMap, Tree
from semfs.ingest.errors import PathError, PatternError, SlowPatternError
from semfs.ingest.pipeline import ingest
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import SAMPLE_CORPUS
from tests.helpers.grepcorpus import PATTERNS, boundary_pattern, build, gnu_grep
from tests.helpers.mounting import ingest_hash


class CountingStore:
    """Passes every call through to a real store, counting the chunk reads."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.documents_fetched = 0

    def get_chunks(self, path: str, gen: int, indexes: Sequence[int]) -> object:
        self.documents_fetched += 1
        return self.inner.get_chunks(path, gen, indexes)

    def chunk_texts(self, path: str, gen: int, indexes: Sequence[int]) -> object:
        # The reader's text-only fetch: a chunk read all the same.
        self.documents_fetched += 1
        return self.inner.chunk_texts(path, gen, indexes)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


@pytest.fixture(scope="module", params=["embedded", "local"])
def corpus_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Store]]:
    base = tmp_path_factory.mktemp(request.param)
    src = build(base / "src")
    if request.param == "embedded":
        store = open_store(CollectionAddress(store=base / "store"))
    else:
        store = open_store(CollectionAddress(url=f"file://{base / 'qdrant'}"))
    ingest(src, store, model="hash")
    try:
        yield src, store
    finally:
        store.close()


def engine(store: Store, **kwargs: int) -> tuple[Grep, Tree]:
    tree = Tree.build(store.list_documents(), InodeMap(), FileIds(os.getuid(), os.getgid()))
    return Grep(store, DocumentReader(store), **kwargs), tree


def test_ere_translation() -> None:
    assert ere_to_python(r"\<api\>") == r"\b(?=\w)api\b(?<=\w)"
    assert ere_to_python("[[:digit:]]+") == "[0-9]+"
    assert ere_to_python(r"[\w]") == r"[\\w]"  # backslash is literal in an ERE bracket
    assert ere_to_python("[]a]") == r"[\]a]"
    assert re.fullmatch(ere_to_python("[^[:space:]]+"), "a-b")
    with pytest.raises(PatternError, match="character class"):
        ere_to_python("[[:letters:]]")
    with pytest.raises(PatternError, match="unmatched"):
        ere_to_python("[abc")


@pytest.mark.parametrize(
    ("pattern", "regex", "ignore_case", "substrings", "words"),
    [
        ("api key", False, False, ("api key",), ()),
        ("set the api key now", False, True, (), ("the", "api", "key")),
        ("api key", False, True, (), ()),  # both words may be parts of longer ones
        ("foo.*bar", True, False, ("foo", "bar"), ()),
        ("(get|post)Started", True, False, ("Started",), ()),
        ("a|b", True, False, (), ()),
        ("[0-9]+", True, False, (), ()),
        ("x(abc)?y", True, False, ("x", "y"), ()),
        ("(?i)Foo Bar Baz", True, False, (), ("bar",)),
    ],
)
def test_plan(
    pattern: str,
    regex: bool,
    ignore_case: bool,
    substrings: tuple[str, ...],
    words: tuple[str, ...],
) -> None:
    p = plan(compile_pattern(pattern, regex, ignore_case))
    assert sorted(p.substrings) == sorted(substrings)
    assert sorted(p.words) == sorted(words)
    assert p.pushed_down == bool(substrings or words)


def test_required_literals_sees_inline_ignore_case() -> None:
    assert required_literals(compile_pattern("(?i)abc", True, False)) == (["abc"], True)


@pytest.mark.parametrize(("pattern", "regex", "ignore_case"), PATTERNS)
def test_grep_equals_gnu_grep(
    corpus_store: tuple[Path, Store], pattern: str, regex: bool, ignore_case: bool
) -> None:
    src, store = corpus_store
    grep, tree = engine(store)
    want = gnu_grep(src, pattern, regex, ignore_case)
    got = grep.run(tree, pattern, regex=regex, ignore_case=ignore_case, max_results=10_000)
    assert got.lines == want
    assert not got.limited


def test_pattern_across_a_chunk_boundary(corpus_store: tuple[Path, Store]) -> None:
    src, store = corpus_store
    pattern = boundary_pattern(store)
    # No single chunk holds the text: only the split-line rule finds the line.
    assert "long/one-line.txt" not in store.chunk_paths_matching([pattern], [])
    grep, tree = engine(store)
    want = gnu_grep(src, pattern, False, False)
    assert len(want) == 1
    assert grep.run(tree, pattern).lines == want
    assert grep.run(tree, pattern.upper(), ignore_case=True).lines == want


def test_scoped_to_a_directory_and_a_file(corpus_store: tuple[Path, Store]) -> None:
    src, store = corpus_store
    grep, tree = engine(store)
    assert grep.run(tree, "api", path="deploy").lines == gnu_grep(
        src, "api", False, False, "deploy"
    )
    one = "customize/custom-domain.mdx"
    assert grep.run(tree, "DNS", path=f"/{one}").lines == gnu_grep(src, "DNS", False, False, one)


def test_pushdown_reads_only_candidates(corpus_store: tuple[Path, Store]) -> None:
    _src, store = corpus_store
    counting = CountingStore(store)
    grep, tree = engine(counting)  # type: ignore[arg-type]
    res = grep.run(tree, "München")
    assert res.pushed_down and res.lines
    # The matching document and the one with a split line; nothing else is read.
    assert res.documents_read == counting.documents_fetched == 2
    assert res.documents_in_scope == tree.files


def test_max_results_stops_early(corpus_store: tuple[Path, Store]) -> None:
    src, store = corpus_store
    grep, tree = engine(store)
    res = grep.run(tree, "the", max_results=3)
    assert res.lines == gnu_grep(src, "the", False, False)[:3]
    assert res.limited


def test_scan_is_bounded_and_reported(corpus_store: tuple[Path, Store]) -> None:
    src, store = corpus_store
    grep, tree = engine(store, scan_bytes=20_000)
    res = grep.run(tree, r"[0-9]{2}[a-z]", regex=True, max_results=10_000)
    assert not res.pushed_down
    assert res.scan_stopped_at is not None
    assert 0 < res.documents_read < res.documents_in_scope
    # What it did read is right: a prefix of grep's answer.
    want = gnu_grep(src, r"[0-9]{2}[a-z]", True, False)
    assert res.lines == want[: len(res.lines)]


def test_store_without_text_index_gives_the_same_lines(tmp_path: Path) -> None:
    src = build(tmp_path / "src")
    ingest_hash(src, tmp_path / "store")
    import qdrant_edge as qe

    from semfs.ingest.store.edge.store import EdgeStore

    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        assert isinstance(store, EdgeStore)
        grep, tree = engine(store)
        before = [grep.run(tree, p, regex=r, ignore_case=i).lines for p, r, i in PATTERNS]
        store.shard.update(qe.UpdateOperation.delete_field_index("text"))
        grep, tree = engine(store)
        after = [grep.run(tree, p, regex=r, ignore_case=i).lines for p, r, i in PATTERNS]
    assert after == before
    assert any(after)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"pattern": "(", "regex": True}, PatternError, "bad regular expression"),
        ({"pattern": "x", "path": "nope/nothing"}, PathError, "no such file"),
        ({"pattern": "x", "path": "../etc"}, PathError, "outside the collection"),
        ({"pattern": "x", "max_results": 0}, PatternError, "max_results"),
        ({"pattern": "a\nb"}, PatternError, "newline"),
    ],
)
def test_bad_input(
    corpus_store: tuple[Path, Store], kwargs: dict[str, object], error: type, message: str
) -> None:
    _src, store = corpus_store
    grep, tree = engine(store)
    with pytest.raises(error, match=message):
        grep.run(tree, **kwargs)  # type: ignore[arg-type]


def test_split_lines_flag_and_older_records(tmp_path: Path) -> None:
    """Ingest flags the documents whose lines cross chunks; records without the flag (older
    stores) fall back to the chunks' line numbers, with the same answer."""
    src = build(tmp_path / "src")
    ingest_hash(src, tmp_path / "store")
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        records = store.list_documents()
        flagged = {r.path for r in records if r.split_lines}
        assert flagged == {"long/one-line.txt"} == set(store.split_line_paths())
        pattern = boundary_pattern(store)
        grep, tree = engine(store)
        want = grep.run(tree, pattern).lines
        assert len(want) == 1
        for rec in records:
            full = store.get_document(rec.path)
            assert full is not None
            store.put_document(dataclasses.replace(full, split_lines=None))
        grep, tree = engine(store)
        assert all(n.doc is None or n.doc.split_lines is None for n in walk(tree.root))
        assert grep.run(tree, pattern).lines == want


def test_regexes_run_on_re2_with_pythons_meaning() -> None:
    """RE2 where it can say the same (Unicode classes rewritten), else the deadline engine."""
    lines = ["München 42", "naïve café", "x\u00a0y", "٣ digits", "tab\there", "plain ascii", ""]
    for pattern, engine in [
        (r"\w+ \d+", "re2"),
        (r"[\w]+é", "re2"),
        (r"x\sy", "re2"),
        (r"^\d", "re2"),
        (r"\S+\s\S+", "re2"),
        (r"(?i)MÜNCHEN", "re2"),
        (r"\bcafé\b", "regex"),  # RE2's \b is ASCII
        (r"(a)\1", "regex"),
        (r"a{,2}", "regex"),
        (r"\<naïve\>", "regex"),
    ]:
        compiled = compile_pattern(pattern, True, False)
        matcher = line_matcher(compiled, True)
        assert matcher.engine == engine, pattern
        assert [bool(matcher.search(s)) for s in lines] == [
            bool(compiled.search(s)) for s in lines
        ], pattern
    assert re2_source(r"[\W]") is None and re2_source(r"(?:a)\Z") == r"(?:a)\z"


def test_a_backtracking_regex_stops_at_its_deadline(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "deploy").mkdir(parents=True)
    page = "deploy/reverse-proxy.mdx"  # of the Mintlify sample: a Markdown table of dashes
    (src / page).write_bytes((SAMPLE_CORPUS / page).read_bytes())
    with open_store(CollectionAddress(store=tmp_path / "store")) as s:
        ingest(src, s, model="hash")
        tree = Tree.build(s.list_documents(), InodeMap(), FileIds(0, 0))
        engine = Grep(s, DocumentReader(s), regex_seconds=0.5)
        # Linear on RE2: the pattern that hung the server answers.
        found = engine.run(tree, "(-+)+$", page, regex=True)
        assert found.lines == [f"{page}:1:---", f"{page}:5:---"]
        with pytest.raises(SlowPatternError, match="pattern too slow, narrow it"):
            engine.run(tree, r"(-|--)+\b$", page, regex=True)


# One line on which (-|--)+\b$ backtracks about 1.6**80 times: without the per-line timeout
# the call never ends (the deadline between lines is never reached), with it it stops at 0.5 s.
ONE_HOSTILE_LINE = """
import re, sys
from semfs.fusefs.agent.patterns import line_matcher
from semfs.ingest.errors import SlowPatternError
matcher = line_matcher(re.compile(sys.argv[1]), True, seconds=0.5)
assert matcher.engine == "regex"  # RE2 cannot run \\b with Python's meaning
try:
    matcher.search("-" * 80 + "x")
except SlowPatternError as exc:
    print(exc)
"""


def test_one_backtracking_line_stops_at_the_deadline() -> None:
    """Before (checked by removing the per-line timeout): the deadline was only looked at
    between lines, so the test above passed after 14.8 s and one hostile line ran for ever."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", ONE_HOSTILE_LINE, r"(-|--)+\b$"],
            capture_output=True,
            text=True,
            timeout=120,  # the call itself stops at 0.5 CPU seconds
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("one backtracking line ran past its deadline (120 s and counting)")
    assert "pattern too slow, narrow it" in out.stdout


class FilterSpy:
    """Passes every call through to a real store, keeping what the engine's text filter
    returned: what it had to find and send back, so what its time depends on."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.found: list[str] = []

    def chunk_paths_matching(self, *args: object, **kwargs: object) -> list[str]:
        hits = self.inner.chunk_paths_matching(*args, **kwargs)  # type: ignore[arg-type]
        self.found.extend(hits)
        return hits

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_scoped_grep_filters_only_its_folders_in_the_engine(
    corpus_store: tuple[Path, Store],
) -> None:
    """Before: at the scope's root, or given a file, the engine filtered the whole collection
    (3,000 matches outside cost 33-38 ms against 9.5-10 ms for none), so a scoped token could
    time what it cannot see."""
    src, store = corpus_store
    spy = FilterSpy(store)
    grep, tree = engine(spy)  # type: ignore[arg-type]
    scope = ("deploy",)
    scoped = Tree.build(
        [n.doc for n in walk(tree.root) if n.doc and n.doc.path.startswith("deploy/")],
        InodeMap(),
        tree.ids,
    )
    word = "the"  # in nearly every page, in and out of deploy/
    outside = gnu_grep(src, word, False, False)
    assert any(not line.startswith("deploy/") for line in outside)
    for path in ("", "deploy/reverse-proxy.mdx"):
        spy.found.clear()
        res = grep.run(scoped, word, path, max_results=10_000, scope=scope)
        assert res.pushed_down and res.lines
        assert spy.found and all(p.startswith(path or "deploy/") for p in spy.found), path
        assert res.lines == gnu_grep(src, word, False, False, path or "deploy")


def test_a_scoped_tools_grep_filters_only_its_folders_in_the_engine(
    corpus_store: tuple[Path, Store],
) -> None:
    """The same through the tools, as a scoped token calls them: the engine is given the
    token's folders (before, passing no scope to the engine passed every test)."""
    from semfs.fusefs.agent.toolbox import Toolbox
    from semfs.ingest.opened import Opened

    _src, store = corpus_store
    spy = FilterSpy(store)
    box = Toolbox(Opened.over(spy))  # type: ignore[arg-type]
    try:
        out = box.grep("the", max_results=10_000, scope=("deploy",))
    finally:
        box.close()
    assert out.data["pushed_down"] and out.data["matches"]
    assert spy.found and all(p.startswith("deploy/") for p in spy.found), spy.found[:5]


def test_grep_and_read_right_after_a_concurrent_reingest(tmp_path: Path) -> None:
    """Before: a grep (or read) whose tree still showed the version a re-ingest had just
    replaced answered "grep failed: ChunksMissingError"; now it reads the new version."""
    from semfs.fusefs.agent.toolbox import Toolbox
    from semfs.ingest.opened import Opened

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nthe alpha version one\n")
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        box = Toolbox(Opened.over(store))  # its tree shows version one; no refresh runs here
        try:
            (src / "a.md").write_text("# A\n\nthe alpha version two, longer\n")
            ingest(src, store, model="hash")  # drops version one's chunks
            grepped = box.grep("alpha")
            read = box.read("a.md")
        finally:
            box.close()
    assert grepped.text.splitlines()[0] == "a.md:3:the alpha version two, longer"
    assert "the alpha version two, longer" in read.text


def gnu_grep_context(
    src: Path, tree: Tree, pattern: str, context: int, path: str = ""
) -> list[str]:
    """``grep -rnF -C context`` over the mount: GNU grep file by file in the mount's order
    (``grep -r`` follows the directory's own order), its groups joined by ``--`` as one
    recursive run prints them."""
    out: list[str] = []
    for node in walk(resolve(tree, path)):
        cmd = ["grep", "-nHF", f"-C{context}", "--", pattern, node.path]
        env = {**os.environ, "LC_ALL": "C.UTF-8"}
        proc = subprocess.run(cmd, cwd=src, capture_output=True, env=env, check=False)
        assert proc.returncode in (0, 1), proc.stderr
        lines = proc.stdout.decode("utf-8").split("\n")[:-1]
        if lines and out:
            out.append("--")
        out += lines
    return out


@pytest.mark.parametrize("context", [1, 3])
def test_context_lines_equal_gnu_grep_c(corpus_store: tuple[Path, Store], context: int) -> None:
    """grep(context=N) prints what ``grep -rn -C N`` prints: the lines around each match
    (PATH-N-TEXT), touching windows joined, ``--`` between groups and between files."""
    src, store = corpus_store
    grep, tree = engine(store)
    for path in ("", "deploy", "customize/custom-domain.mdx"):
        want = gnu_grep_context(src, tree, "the", context, path)
        got = grep.run(tree, "the", path=path, max_results=10_000, context=context)
        assert got.lines == want, path
        assert any(line == "--" for line in want) and any(
            "-" in line.split(":")[0] for line in want
        )
        assert got.matched == len(gnu_grep(src, "the", False, False, path))


def test_context_with_a_limit_ends_as_grep_m(corpus_store: tuple[Path, Store]) -> None:
    """max_results counts matching lines only; the last one keeps its trailing lines, and a
    match among them is shown as context, as ``grep -m N -C K`` does in one file."""
    src, store = corpus_store
    grep, tree = engine(store)
    one = "customize/custom-domain.mdx"
    proc = subprocess.run(
        ["grep", "-nHF", "-m2", "-C2", "--", "the", one],
        cwd=src,
        capture_output=True,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
        check=True,
    )
    got = grep.run(tree, "the", path=one, max_results=2, context=2)
    assert got.lines == proc.stdout.decode("utf-8").split("\n")[:-1]
    assert got.matched == 2 and got.limited
    with pytest.raises(PatternError, match="context must be between 0 and 20"):
        grep.run(tree, "the", context=21)


def test_the_tools_grep_counts_matches_not_context(corpus_store: tuple[Path, Store]) -> None:
    """The MCP grep's answer with context: its data counts the matching lines, the text
    holds the lines around them."""
    from semfs.fusefs.agent.toolbox import Toolbox
    from semfs.ingest.opened import Opened

    src, store = corpus_store
    box = Toolbox(Opened.over(store))
    try:
        plain = box.grep("DNS", path="customize")
        around = box.grep("DNS", path="customize", context=2)
    finally:
        box.close()
    assert (
        around.data["matches"]
        == plain.data["matches"]
        == len(gnu_grep(src, "DNS", False, False, "customize"))
    )
    assert len(around.text) > len(plain.text)
    assert set(plain.text.splitlines()) <= set(around.text.splitlines())
