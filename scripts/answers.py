#!/usr/bin/env python3
"""Does one read of ``00-results.md`` answer the question? Measured through a real mount.

For each question set under ``shared/datasets/doc-questions`` (``NAME.tsv`` beside the corpus
``shared/corpora/NAME``), the corpus is ingested with the real model (``semfs ingest``, so the
default model of a new store, all-MiniLM-L6-v2 on torch; a store kept under ``--work`` is
reused when it is complete, with the model it records), mounted with ``semfs mount``, and every
question is asked as an agent would: ``os.listdir(MNT/.search/QUESTION)`` then a read of
``00-results.md``. Reported per set and per kind of question:

* hit@1, hit@3, MRR: the rank of the first link whose target is the expected page or one of
  its alternates;
* answer-in-results: the share of questions whose ``answer`` line (whitespace-normalised)
  appears in the default ``00-results.md``;
* ``00-results.md`` bytes, p50 and p95;
* cost: the bytes an agent reads to reach the answer, mean. The results file; plus, when the
  answer line is not in it, the 21 lines of the page around the answer line (``sed -n``);
  plus, when no listed link is the expected page or an alternate, one more results file of
  the same size (a second search). The page lines are the expected page's, read from the
  corpus;
* query-dir listing p50: a fresh question's first ``listdir`` on a warm mount (model loaded),
  and the warm listing p50: the same directory listed again (the mount's query cache).

``--curve B1,B2,...`` asks every question once per excerpt budget instead (in process) and
prints answer-in-results, results bytes and cost against the budget.

The question files are read with plain tab splitting: two answers start with ``"``, which a
CSV reader would strip. ``/`` in a question is typed as U+2215 DIVISION SLASH, as the guide
tells agents to. ``--via searcher`` runs the same path in-process (``SearchDirectories`` over the
store's tree, no FUSE): quicker for iteration, same ranking and results file.

Example:
    .venv/bin/python scripts/answers.py --work /var/tmp/answers            # both sets
    .venv/bin/python scripts/answers.py --set fastapi-docs --markdown out.md
    .venv/bin/python scripts/answers.py --work /var/tmp/answers --curve 300,600,800,1200,3000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The shared data sits beside the checkout (or beside the worktree folder holding it).
SHARED = next(
    (p / "shared" for p in REPO.parents if (p / "shared" / "datasets").is_dir()),
    REPO.parent / "shared",
)
# The sets the search defaults were chosen on (excerpt budgets and weights, DEFAULT_K,
# STRENGTH_FIT, FUSION_CANDIDATES: docs/search.md "What was tuned on what"). Their figures are
# in-sample; tune on these only, so that HELD_OUT_SETS keep saying how the defaults carry over.
DEFAULT_SETS = ("fastapi-docs", "mem0-docs")
# No default was chosen on these questions: their figures are out-of-sample.
HELD_OUT_SETS = ("mintlify-docs",)
SEMFS = shutil.which("semfs", path=str(Path(sys.executable).parent)) or shutil.which("semfs")
SLASH = "\u2215"  # DIVISION SLASH: how a query directory name says "/"
NAME_MAX = 255
KINDS = ("paraphrase", "exact", "vague", "deep")


@dataclass(frozen=True)
class Question:
    text: str
    expected: str
    alternates: tuple[str, ...]
    kind: str
    answer: str

    @property
    def targets(self) -> set[str]:
        return {self.expected, *self.alternates}

    @property
    def dir_name(self) -> str:
        """The query directory name: ``/`` typed as its look-alike, cut to NAME_MAX bytes."""
        name = self.text.replace("/", SLASH)
        while len(name.encode()) > NAME_MAX:
            name = name[:-1]
        return name.rstrip()


def read_questions(path: Path) -> list[Question]:
    """Plain tab splitting, no CSV quoting: an answer may start with a quote character."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    col = {name: i for i, name in enumerate(header)}
    out = []
    for line in lines[1:]:
        if not line.strip():
            continue
        f = line.split("\t")
        alternates = tuple(a for a in f[col["alternates"]].split(",") if a.strip())
        out.append(
            Question(
                f[col["question"]],
                f[col["expected_path"]],
                tuple(a.strip() for a in alternates),
                f[col["kind"]],
                f[col["answer"]],
            )
        )
    return out


def normalise(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Outcome:
    question: Question
    ranked: list[str]  # document paths, best first
    results: str  # the 00-results.md text
    listing_ms: float  # the first listing: the search runs
    warm_listing_ms: float = float("nan")  # the same directory listed again: from the cache
    around_bytes: int = 0  # the 21 page lines around the answer line (see answer_window)
    missed: dict[str, Any] | None = None  # why the answer line is not in the file (why_missed)

    @property
    def rank(self) -> int | None:
        targets = self.question.targets
        return next((i + 1 for i, p in enumerate(self.ranked) if p in targets), None)

    @property
    def answered(self) -> bool:
        return normalise(self.question.answer) in normalise(self.results)

    @property
    def results_bytes(self) -> int:
        return len(self.results.encode())

    @property
    def cost(self) -> int:
        """Bytes read to reach the answer: the results file, the lines around the answer
        when it is not in the file, a second results file when the page is not listed."""
        cost = self.results_bytes
        if not self.answered:
            cost += self.around_bytes
        if self.rank is None:
            cost += self.results_bytes
        return cost


# Lines an agent reads around the answer line when the results file lacks it: the line and
# ten either side, as ``sed -n 'A,Bp'`` after a results file pointed at the place.
AROUND = 10


def answer_line(page: str, answer: str) -> int | None:
    """The 1-based number of the line of ``page`` holding ``answer`` (whitespace-normalised);
    for an answer that spans lines, the first line holding its start; None when none does."""
    lines = page.splitlines()
    want = normalise(answer)
    at = next((i for i, line in enumerate(lines) if want in normalise(line)), None)
    if at is None:
        head = want[:40]
        at = next((i for i, line in enumerate(lines) if head and head in normalise(line)), None)
    return None if at is None else at + 1


def answer_window(page: str, answer: str) -> int:
    """Bytes of the ``2 * AROUND + 1`` lines of ``page`` centred on the line holding
    ``answer`` (see :func:`answer_line`); the page's first lines when no line holds it."""
    lines = page.splitlines(keepends=True)
    lo = max(0, (answer_line(page, answer) or 1) - 1 - AROUND)
    return len("".join(lines[lo : lo + 2 * AROUND + 1]).encode())


# Why a results file lacks the answer line, from what it shows (BENCHMARKS.md section 31):
# the right page is not listed; it is listed without any of its lines (the budget went to
# other hits); its answer line is shown but cut to its best sentences; or other lines of
# it are shown, not the answer's.
MISSES = ("page not listed", "page listed, no lines", "answer line cut", "other lines of the page")
_SHOWN_HIT = re.compile(r"(?:Answer: |## )\d+\. (.+?)(?::\d+ · | \(| lines? \d|$)")
_SHOWN_LINE = re.compile(r"(\d+): ")


def shown_lines(results: str) -> dict[str, set[int]]:
    """The line numbers a results file shows, by document path (the best passage's and each
    hit's windows)."""
    out: dict[str, set[int]] = {}
    path = None
    for line in results.splitlines():
        if m := _SHOWN_HIT.match(line):
            path = m.group(1).strip()
            out.setdefault(path, set())
        elif path is not None and (m := _SHOWN_LINE.match(line)):
            out[path].add(int(m.group(1)))
        elif not line.strip():  # a block (the best passage, a hit's windows) ends
            path = None
    return out


def line_kind(page: str, number: int | None) -> str:
    """What holds the line ``number`` of a Markdown page: ``code`` (inside a fence), ``table``,
    ``list``, ``prose``; ``spans lines`` for None."""
    if number is None:
        return "spans lines"
    lines = page.splitlines()
    fenced = sum(1 for x in lines[: number - 1] if re.match(r"\s*(```|~~~)", x)) % 2 == 1
    text = lines[number - 1].strip()
    if fenced:
        return "code"
    if text.startswith("|"):
        return "table"
    return "list" if re.match(r"([-*+]|\d+\.)\s", text) else "prose"


def why_missed(
    o: Outcome, page: str, spans: Sequence[tuple[int, int]] = ()
) -> dict[str, Any] | None:
    """For a results file without the answer line: which of :data:`MISSES` it is, the kind
    of line the answer is (:func:`line_kind`) and where the nearest line of the page it shows
    is (its number minus the answer line's: negative above it); None when the answer is in
    the file. Given the page's chunks (``spans``: each chunk's first and last line), also
    whether the answer line is in a chunk the file shows a line of (``answer_chunk``:
    ``shown``) or in another chunk of the page (``other``): a passage search inside the page
    would find the second, a better line choice the first."""
    if o.answered:
        return None
    at = answer_line(page, o.question.answer)
    shown = shown_lines(o.results)
    nums = set().union(*(shown.get(t, set()) for t in o.question.targets))
    if o.rank is None:
        why = MISSES[0]
    elif not nums:
        why = MISSES[1]
    elif at in nums:
        why = MISSES[2]
    else:
        why = MISSES[3]
    near = min((n - at for n in nums), key=abs, default=None) if at else None
    out = {"why": why, "line": at, "line_kind": line_kind(page, at), "nearest_shown": near}
    if spans and at is not None and nums:
        own = shown.get(o.question.expected, set())
        held = [(a, b) for a, b in spans if a <= at <= b]
        out["answer_chunk"] = "shown" if any(a <= n <= b for a, b in held for n in own) else "other"
    return out


def percentile(xs: Sequence[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    i = (len(s) - 1) * p / 100
    lo = int(i)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


def summarise(outcomes: Sequence[Outcome]) -> dict[str, float]:
    n = len(outcomes)
    ranks = [o.rank for o in outcomes]
    sizes = [o.results_bytes for o in outcomes]
    return {
        "n": n,
        "hit@1": sum(r == 1 for r in ranks) / n,
        "hit@3": sum(r is not None and r <= 3 for r in ranks) / n,
        "mrr": sum(1 / r for r in ranks if r) / n,
        "answer_in_results": sum(o.answered for o in outcomes) / n,
        "results_bytes_mean": sum(sizes) / n,
        "results_bytes_p50": percentile(sizes, 50),
        "results_bytes_p95": percentile(sizes, 95),
        "cost_bytes_mean": sum(o.cost for o in outcomes) / n,
        "listing_ms_p50": percentile([o.listing_ms for o in outcomes], 50),
        "warm_listing_ms_p50": percentile([o.warm_listing_ms for o in outcomes], 50),
    }


@dataclass
class SetReport:
    name: str
    chunks: int
    overall: dict[str, float]
    by_kind: dict[str, dict[str, float]]
    misses: list[dict[str, Any]] = field(default_factory=list)
    model: str = ""  # the store's recorded embedding model
    # Every question's outcome: its words, the expected page's rank, whether the answer line
    # is in the file, the file's bytes (a before/after comparison question by question).
    questions: list[dict[str, Any]] = field(default_factory=list)


def report(name: str, chunks: int, outcomes: Sequence[Outcome], model: str = "") -> SetReport:
    by_kind = {
        kind: summarise([o for o in outcomes if o.question.kind == kind])
        for kind in KINDS
        if any(o.question.kind == kind for o in outcomes)
    }
    misses = [
        {
            "question": o.question.text,
            "kind": o.question.kind,
            "expected": o.question.expected,
            "rank": o.rank,
            "top": o.ranked[:3],
            "answered": o.answered,
            **(o.missed or {}),
        }
        for o in outcomes
        if o.rank != 1 or not o.answered
    ]
    questions = [
        {
            "words": len(o.question.text.split()),
            "rank": o.rank,
            "answered": o.answered,
            "bytes": o.results_bytes,
        }
        for o in outcomes
    ]
    return SetReport(name, chunks, summarise(outcomes), by_kind, misses, model, questions)


# -- stores ----------------------------------------------------------------------------------


def semfs(*args: str, timeout: float = 3600) -> str:
    if SEMFS is None:
        raise SystemExit("the `semfs` command is not installed in this environment")
    proc = subprocess.run(
        [SEMFS, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"semfs {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


def ensure_store(source: Path, store: Path, log: Callable[[str], None]) -> tuple[int, str]:
    """Ingest ``source`` into ``store`` with the default (real) model; an unchanged store is
    kept as it is (``semfs ingest`` then embeds nothing). Returns the chunk count and the
    store's model."""
    started = time.perf_counter()
    semfs("ingest", str(source), "--store", str(store))
    status = json.loads(semfs("status", "--store", str(store), "--json"))
    log(f"  {source.name}: store ready in {time.perf_counter() - started:.0f} s, {status}")
    return int(status.get("chunks") or 0), str(status.get("model") or "")


# -- asking ----------------------------------------------------------------------------------


def ask_dir(query_dir: Path) -> tuple[list[str], str, float, float]:
    """List a query directory (timed), read its results file and resolve its links; then
    list it again (timed): a question already asked, answered from the mount's cache."""
    started = time.perf_counter()
    names = sorted(os.listdir(query_dir))
    took = (time.perf_counter() - started) * 1000
    results = next((n for n in names if n.endswith("-results.md")), None)
    text = (query_dir / results).read_text(encoding="utf-8") if results else ""
    ranked = []
    for n in names:
        if n == results:
            continue
        target = os.readlink(query_dir / n)
        ranked.append("/".join(p for p in target.split("/") if p not in ("..", ".")))
    started = time.perf_counter()
    os.listdir(query_dir)
    warm = (time.perf_counter() - started) * 1000
    return ranked, text, took, warm


@contextlib.contextmanager
def mounted(
    store: Path, mnt: Path, log: Callable[[str], None], args: Sequence[str] = ()
) -> Iterator[Path]:
    """``semfs mount`` (with ``args``: ``-c NAME``, ``--collections A,B``) in the background;
    always unmounted."""
    mnt.mkdir(parents=True, exist_ok=True)
    logfile = mnt.with_name(mnt.name + ".log")
    try:
        semfs(
            "mount",
            str(mnt),
            "--store",
            str(store),
            "--log-file",
            str(logfile),
            *args,
            timeout=300,
        )
        yield mnt
    finally:
        subprocess.run([SEMFS or "semfs", "umount", str(mnt)], capture_output=True, check=False)
        for tool in ("fusermount3", "fusermount"):
            if os.path.ismount(mnt) and shutil.which(tool):
                subprocess.run([tool, "-uz", str(mnt)], capture_output=True, check=False)
        problems = (
            [
                line
                for line in logfile.read_text(errors="replace").splitlines()
                if "WARNING" in line or "ERROR" in line
            ]
            if logfile.exists()
            else []
        )
        for line in problems[:5]:
            log(f"  mount log: {line}")


def ask_mount(
    store: Path,
    work: Path,
    qs: Sequence[Question],
    log: Callable[[str], None],
    params: Sequence[str] = (),
) -> list[Outcome]:
    with mounted(store, work / "mnt", log) as mnt:
        root = mnt.joinpath(".search", *params)
        # The first search waits for the model to load: take it out of the timings.
        os.listdir(root / "warm up the model")
        out = []
        for q in qs:
            ranked, text, took, warm = ask_dir(root / q.dir_name)
            out.append(Outcome(q, ranked, text, took, warm))
        return out


def ask_in_process(
    store: Path,
    qs: Sequence[Question],
    params: Sequence[str] = (),
    budgets: Sequence[int] = (),
) -> list[Outcome] | dict[int, list[Outcome]]:
    """The mount's code path without FUSE: SearchDirectories over the store's tree. With
    ``budgets``, every question once per excerpt budget (the Searcher's total, its per-rank
    caps scaled alike), by budget."""
    from semfs.ingest.search import Searcher
    from semfs.ingest.store.address import CollectionAddress
    from semfs.ingest.store.backends import open_store

    with open_store(CollectionAddress(store=store)) as s:
        searcher = Searcher(s)
        searcher.warm_up()
        if not budgets:
            return _ask_searcher(s, searcher, qs, params)
        caps, total = searcher.excerpt_chars, searcher.excerpt_total
        by_budget = {}
        for b in budgets:
            searcher.excerpt_total = b
            searcher.excerpt_chars = tuple(round(c * b / total) for c in caps)
            by_budget[b] = _ask_searcher(s, searcher, qs, params)
        return by_budget


def _ask_searcher(
    store: Any, searcher: Any, qs: Sequence[Question], params: Sequence[str]
) -> list[Outcome]:
    from semfs.fusefs.view.searchdir import SearchDirectories
    from semfs.fusefs.view.tree import FileIds, InodeMap, Tree

    tree = Tree.build(store.list_documents(), InodeMap(), FileIds(os.getuid(), os.getgid()))
    dirs = SearchDirectories(searcher.search)
    out = []
    for q in qs:
        rel = "/".join([".search", *params, q.dir_name])
        started = time.perf_counter()
        node = dirs.resolve(tree, rel)
        assert node is not None and node.children is not None
        names = sorted(node.children)
        took = (time.perf_counter() - started) * 1000
        ranked, text = [], ""
        for n in names:
            child = node.children[n]
            if child.data is not None:
                text = child.data.decode()
            elif child.target is not None:
                ranked.append("/".join(p for p in child.target.split("/") if p != ".."))
        started = time.perf_counter()
        again = dirs.resolve(tree, rel)
        assert again is not None and again.children is not None
        sorted(again.children)
        warm = (time.perf_counter() - started) * 1000
        out.append(Outcome(q, ranked, text, took, warm))
    return out


def with_pages(outcomes: Sequence[Outcome], corpus: Path, store: Path | None = None) -> None:
    """Sets each outcome's ``around_bytes`` from its expected page in ``corpus``, and why it
    missed (with the page's chunks read from ``store``, once no mount holds it)."""
    pages = {}
    for o in outcomes:
        page = corpus / o.question.expected
        text = page.read_text(encoding="utf-8", errors="replace") if page.is_file() else ""
        pages[o.question.expected] = text
        o.around_bytes = answer_window(text, o.question.answer)
        o.missed = why_missed(o, text)
    missed = {o.question.expected for o in outcomes if o.missed and o.missed["why"] == MISSES[3]}
    spans = chunk_spans(store, missed) if store is not None and missed else {}
    for o in outcomes:
        if o.question.expected in spans:
            o.missed = why_missed(o, pages[o.question.expected], spans[o.question.expected])


def chunk_spans(store: Path, paths: set[str]) -> dict[str, list[tuple[int, int]]]:
    """Each document's chunks in ``store`` as (first line, last line), for ``paths``."""
    from semfs.ingest.store.address import CollectionAddress
    from semfs.ingest.store.backends import open_store

    out = {}
    with open_store(CollectionAddress(store=store)) as s:
        for path in sorted(paths):
            doc = s.get_document(path)
            if doc is not None:
                chunks = s.get_chunks(path, doc.gen, range(doc.chunks))
                out[path] = [(c.start_line, c.end_line) for c in chunks]
    return out


# -- output ----------------------------------------------------------------------------------


def fmt_row(label: str, kind: str, s: dict[str, float]) -> str:
    return (
        f"| {label} | {kind} | {int(s['n'])} | {s['hit@1']:.2f} | {s['hit@3']:.2f} "
        f"| {s['mrr']:.3f} | {s['answer_in_results']:.2f} | {s['results_bytes_mean']:,.0f} "
        f"| {s['results_bytes_p50']:,.0f} "
        f"| {s['results_bytes_p95']:,.0f} | {s['cost_bytes_mean']:,.0f} "
        f"| {s['listing_ms_p50']:.1f} "
        f"| {s['warm_listing_ms_p50']:.1f} |"
    )


def markdown(reports: Sequence[SetReport], via: str) -> str:
    from semfs.ingest.store import DEFAULT_K

    lines = [
        "## Answers: does one read of 00-results.md answer the question?",
        "",
        f"`scripts/answers.py` (via {via}, default settings: hybrid, k {DEFAULT_K}): each question "
        "of `doc-questions/SET.tsv` asked as `ls .search/QUESTION/` + `cat 00-results.md` on the "
        "corpus ingested with the real model. hit@N and MRR count alternates; answer-in-results "
        "is the share whose answer line (whitespace-normalised) is in `00-results.md`; listing "
        "is a fresh question's first `ls` on a warm mount (the search runs), warm listing the "
        "same directory listed again (answered from the mount's cache). In-sample: a set the "
        "search defaults were tuned on; held out: one no default was chosen on. cost: bytes "
        "read to reach the answer, mean: the results file, plus the 21 page lines around the "
        "answer line when the file lacks it, plus a second results file when the page is not "
        "listed.",
        "",
        "| set | kind | n | hit@1 | hit@3 | MRR | answer-in-results | results mean B "
        "| results p50 B | results p95 B | cost mean B | listing p50 ms | warm listing p50 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in reports:
        model = f", {r.model.rpartition('/')[2]}" if r.model else ""
        sample = ", in-sample" if r.name in DEFAULT_SETS else ", held out"
        lines.append(
            fmt_row(f"**{r.name}** ({r.chunks} chunks{model}{sample})", "**all**", r.overall)
        )
        lines += [fmt_row("″", kind, s) for kind, s in r.by_kind.items()]
    return "\n".join(lines) + "\n\n" + misses_table(reports)


def misses_table(reports: Sequence[SetReport]) -> str:
    """Per set, the questions whose results file lacks the answer line, by why (MISSES); the
    last column: those whose page is shown within five lines of the answer line."""
    lines = [
        "Where the answer line is missing (`why_missed`): " + ", ".join(MISSES) + "; of the "
        "last, those whose answer line is in another chunk of the page than every line shown.",
        "",
        "| set | " + " | ".join(MISSES) + " | in another chunk | shown within 5 lines |",
        "|---|" + "---:|" * (len(MISSES) + 2),
    ]
    for r in reports:
        whys = [m for m in r.misses if "why" in m]
        counts = [sum(m["why"] == w for m in whys) for w in MISSES]
        other = sum(m.get("answer_chunk") == "other" for m in whys)
        near = sum(m["nearest_shown"] is not None and abs(m["nearest_shown"]) <= 5 for m in whys)
        lines.append(f"| {r.name} | " + " | ".join(map(str, counts)) + f" | {other} | {near} |")
    return "\n".join(lines) + "\n"


def curve(
    sets: Sequence[str],
    work: Path,
    budgets: Sequence[int],
    data: Path = SHARED,
    log: Callable[[str], None] = print,
) -> str:
    """answer-in-results, results bytes and cost against the excerpt budget, per set (in
    process): the data a default budget is chosen from."""
    lines = [
        "| set | excerpt budget (chars) | answer-in-results | results p50 B | results p95 B "
        "| cost mean B |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in sets:
        qs = read_questions(data / "datasets" / "doc-questions" / f"{name}.tsv")
        store = work / name / "store"
        ensure_store(data / "corpora" / name, store, log)
        got = ask_in_process(store, qs, budgets=budgets)
        assert isinstance(got, dict)
        for b, outcomes in got.items():
            with_pages(outcomes, data / "corpora" / name)
            s = summarise(outcomes)
            row = (
                f"| {name} | {b} | {s['answer_in_results']:.3f} | {s['results_bytes_p50']:,.0f} "
                f"| {s['results_bytes_p95']:,.0f} | {s['cost_bytes_mean']:,.0f} |"
            )
            log(row)
            lines.append(row)
    return "\n".join(lines) + "\n"


def run(
    sets: Sequence[str],
    work: Path,
    via: str = "mount",
    data: Path = SHARED,
    log: Callable[[str], None] = print,
    params: Sequence[str] = (),
) -> list[SetReport]:
    """Measure every set; the entry point scripts/bench.py calls."""
    reports = []
    for name in sets:
        qs = read_questions(data / "datasets" / "doc-questions" / f"{name}.tsv")
        store = work / name / "store"
        chunks, model = ensure_store(data / "corpora" / name, store, log)
        if via == "mount":
            outcomes = ask_mount(store, work / name, qs, log, params)
        else:
            got = ask_in_process(store, qs, params)
            assert isinstance(got, list)
            outcomes = got
        with_pages(outcomes, data / "corpora" / name, store)
        r = report(name, chunks, outcomes, model)
        log(fmt_row(name, "all", r.overall))
        reports.append(r)
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", action="append", dest="sets", help="Question set [all three].")
    p.add_argument("--work", type=Path, help="Keeps the stores: a re-run skips the ingest.")
    p.add_argument("--data", type=Path, default=SHARED, help="Holds corpora/ and datasets/.")
    p.add_argument("--via", choices=("mount", "searcher"), default="mount")
    p.add_argument(
        "--param", action="append", default=[], help="A parameter folder, e.g. @k=5 [none]."
    )
    p.add_argument(
        "--curve",
        help="Comma-separated excerpt budgets (chars): answer-in-results and bytes for each "
        "(in process) instead of the table, e.g. 300,600,800,1200,2000,3000.",
    )
    p.add_argument("--markdown", type=Path, help="Write the Markdown table here too.")
    p.add_argument("--json", type=Path, help="Write every figure and each miss as JSON.")
    args = p.parse_args(argv)
    sets = args.sets or [*DEFAULT_SETS, *HELD_OUT_SETS]
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.curve:
            budgets = [int(b) for b in args.curve.split(",")]
            table = curve(sets, work, budgets, args.data, log=lambda m: print(m, file=sys.stderr))
            print(table)
            if args.markdown:
                args.markdown.write_text(table)
            return 0
        reports = run(
            sets,
            work,
            args.via,
            args.data,
            log=lambda m: print(m, file=sys.stderr),
            params=args.param,
        )
    table = markdown(reports, args.via)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in reports], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
