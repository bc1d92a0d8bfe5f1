#!/usr/bin/env python3
"""Source code as a collection (issue 42): questions about real source trees, asked of semfs
with the code chunker and with the prose chunker, and of `grep -rn` and `git grep`.

For each tree (``--tree NAME=PATH``, a git checkout: ``git grep`` needs one) and its question
file (``scripts/codebench/NAME.tsv``: question, expected_path, lines, alternates, kind,
answer, split), it reports:

* **semfs, code chunker**: the tree ingested as `semfs ingest` does (tree-sitter chunks,
  .gitignore, generated and vendored files kept out of search), with the real model; each
  question asked as a `.search` folder does (hybrid, k 3) and its `00-results.md` rendered;
* **semfs, prose chunker**: the same store settings, the same ingest, with the code path of
  the chunker switched off (source files cut as before issue 42: at blank lines before a
  column-0 definition), and the same questions;
* **grep -rn** and **git grep**: the question's words (stop words and words under three
  letters left out) as one case-insensitive whole-word pattern; files ranked by how many of
  the words they hold, then by how many lines match; their "results" are the lines printed
  for the first three files (what an agent reads after one grep).

hit@1 and hit@3: the expected file (or an alternate) ranked first, or in the first three.
answer-in-results: the question's answer line (whitespace-normalised) is in the results text
(`00-results.md`, or grep's lines). Bytes: the results text's size. Tuned and held-out
questions apart (the ``split`` column): only the tuned ones were looked at while choosing
how code is chunked and labelled.

It also times (CPU seconds of this process, with the load average beside them), on the same
machine in the same run, what the code path costs besides the model: the chunker alone over
every searched file (the real tokenizer counting tokens, code path against prose path,
alternating, best of three), and a whole ingest with the stand-in model (`--model hash`), and
a lookup by name (`@symbol`) against keyword and hybrid searches.

Example:
    .venv/bin/python scripts/bench_code.py --work /var/tmp/codebench \\
        --tree go=/var/tmp/trees/go --tree twisted=/var/tmp/trees/twisted \\
        --markdown code.md --json code.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semfs.ingest import chunking, syntax
from semfs.ingest.chunking import chunk_text
from semfs.ingest.embedding.embedder import DEFAULT_MODEL, load_embedder
from semfs.ingest.pipeline import ingest
from semfs.ingest.request import SearchRequest
from semfs.ingest.search import Searcher
from semfs.ingest.search.results import render
from semfs.ingest.sources import Document, read_document, scan
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "codebench"
K = 3
# fmt: off
STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "has",
    "have", "how", "i", "if", "in", "into", "is", "it", "its", "of", "on", "once", "or", "so",
    "than", "that", "the", "their", "them", "then", "there", "these", "this", "to", "under",
    "up", "was", "what", "when", "where", "which", "while", "who", "why", "will", "with",
    "without", "it's", "one", "two", "many", "much", "long",
})
# fmt: on
# An ingest whose chunking runs in this process (one file at a time, no chunking children):
# what the prose arm needs (see prose_chunker), and the code arm too where they are timed.
IN_PROCESS = 1
# What grep shows of each of the first files: an agent reads about this many lines.
GREP_LINES = 20


@dataclass
class Question:
    name: str
    question: str
    path: str
    lines: tuple[int, int]
    alternates: tuple[str, ...]
    kind: str
    answer: str
    split: str

    def right(self, path: str) -> bool:
        return path == self.path or path in self.alternates


@dataclass
class Outcome:
    ranked: list[str]
    text: str
    seconds: float = 0.0


@dataclass
class Arm:
    name: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)


def read_questions(path: Path) -> list[Question]:
    lines = path.read_text(encoding="utf-8").splitlines()
    col = {n: i for i, n in enumerate(lines[0].split("\t"))}
    out = []
    for i, line in enumerate(lines[1:], 1):
        f = line.split("\t")
        a, b = f[col["lines"]].split("-")
        out.append(
            Question(
                f"q{i:02d}",
                f[col["question"]],
                f[col["expected_path"]],
                (int(a), int(b)),
                tuple(x.strip() for x in f[col["alternates"]].split(",") if x.strip()),
                f[col["kind"]],
                f[col["answer"]],
                f[col["split"]].strip() or "tuned",
            )
        )
    return out


def norm(text: str) -> str:
    return " ".join(text.split())


@contextlib.contextmanager
def prose_chunker() -> Iterator[None]:
    """The chunker as before issue 42: no grammar reads any file. In this process only: an
    ingest under it must chunk in process (``jobs=1``, :data:`IN_PROCESS`), as the chunking
    children (semfs.ingest.chunkworkers) would cut code as code."""
    saved = syntax.outline
    syntax.outline = lambda text, path: None
    try:
        yield
    finally:
        syntax.outline = saved


def build(
    tree: Path, store_dir: Path, prose: bool, model: str | None = None, in_process: bool = False
) -> dict[str, Any]:
    """Ingest ``tree`` into ``store_dir`` (kept: a later run reuses a complete store); the
    prose arm, and with ``in_process`` the code arm too, chunk in this process (an
    experiment's settings reach no chunking child)."""
    done = store_dir / "ingested.json"
    if done.exists():
        return dict(json.loads(done.read_text()))
    started = time.perf_counter()
    with (
        prose_chunker() if prose else contextlib.nullcontext(),
        open_store(CollectionAddress(store=store_dir)) as store,
    ):
        jobs = IN_PROCESS if prose or in_process else None
        report = ingest(tree, store, model=model, jobs=jobs)
        chunks = store.count_chunks()
    info = {
        "seconds": round(time.perf_counter() - started, 1),
        "documents": len(report.added),
        "chunks": chunks,
        "unsearched": report.unsearched_counts(),
        "ignored": len(report.ignored),
    }
    done.write_text(json.dumps(info))
    return info


def ask_semfs(store_dir: Path, questions: list[Question], mode: str = "hybrid") -> Arm:
    arm = Arm("semfs")
    with open_store(CollectionAddress(store=store_dir)) as store:
        searcher = Searcher(store)
        if mode != "keyword":
            searcher.warm_up()
        for q in questions:
            started = time.perf_counter()
            request = SearchRequest(q.question, k=K, mode=mode)
            hits = searcher.search(request)
            seconds = time.perf_counter() - started
            text = render(request.text, hits, request.describe())
            arm.outcomes[q.name] = Outcome([h.path for h in hits], text, seconds)
    return arm


def words_of(question: str) -> list[str]:
    found = [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9_.]*[A-Za-z0-9]", question)]
    return list(dict.fromkeys(w for w in found if w not in STOP and len(w) >= 3))


def ask_grep(tree: Path, questions: list[Question], git: bool) -> Arm:
    """One grep per question: the words as alternatives, whole words, any case."""
    arm = Arm("git grep" if git else "grep -rn")
    for q in questions:
        words = words_of(q.question)
        pattern = "|".join(re.escape(w) for w in words)
        command = (
            ["git", "-C", str(tree), "grep", "-n", "-I", "-i", "-w", "-E", pattern]
            if git
            else ["grep", "-rn", "-I", "-i", "-w", "-E", pattern, "."]
        )
        started = time.perf_counter()
        out = subprocess.run(
            command, cwd=tree, capture_output=True, text=True, errors="replace", check=False
        ).stdout
        seconds = time.perf_counter() - started
        held: dict[str, set[str]] = {}
        count: dict[str, int] = {}
        lines: dict[str, list[str]] = {}
        word_re = re.compile(r"(?<![A-Za-z0-9_])(" + pattern + r")(?![A-Za-z0-9_])", re.I)
        for line in out.splitlines():
            path, _, rest = line.partition(":")
            path = path.removeprefix("./")
            _number, _, text = rest.partition(":")
            held.setdefault(path, set()).update(m.lower() for m in word_re.findall(text))
            count[path] = count.get(path, 0) + 1
            lines.setdefault(path, []).append(line)
        ranked = sorted(held, key=lambda p: (-len(held[p]), -count[p], p))
        shown = "\n".join(x for p in ranked[:K] for x in lines[p][:GREP_LINES])
        arm.outcomes[q.name] = Outcome(ranked, shown, seconds)
    return arm


def score(arm: Arm, questions: list[Question]) -> dict[str, dict[str, float]]:
    """hit@1, hit@3, answer-in-results and results bytes, per split and in all."""
    out: dict[str, dict[str, float]] = {}
    for split in ("tuned", "held-out", "all"):
        chosen = [q for q in questions if split in ("all", q.split)]
        if not chosen:
            continue
        hit1 = hit3 = found = 0
        sizes = []
        for q in chosen:
            o = arm.outcomes[q.name]
            hit1 += bool(o.ranked[:1]) and q.right(o.ranked[0])
            hit3 += any(q.right(p) for p in o.ranked[:K])
            found += norm(q.answer) in norm(o.text)
            sizes.append(len(o.text.encode()))
        n = len(chosen)
        out[split] = {
            "n": n,
            "hit@1": hit1 / n,
            "hit@3": hit3 / n,
            "answer_in_results": found / n,
            "results_bytes_p50": statistics.median(sizes),
        }
    return out


def code_files(tree: Path) -> list[tuple[str, str]]:
    """(path, text) of every file a code ingest searches."""
    files, _ = scan(tree)
    out = []
    for f in files:
        doc = read_document(f)
        if isinstance(doc, Document) and not doc.unsearched and doc.text is not None:
            out.append((f.path, doc.text))
    return out


def best_of(run: Callable[[], object], times: int = 3) -> float:
    """The least CPU time of ``times`` runs (this process's, every thread's): on a shared
    machine the wall time measures the other processes too."""
    best = float("inf")
    for _ in range(times):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def chunker_cost(tree: Path) -> dict[str, float]:
    """The chunker alone over the tree, code path against prose path, with the real model's
    tokenizer counting tokens (no vectors): alternating, best of three each."""
    embedder = load_embedder(DEFAULT_MODEL)
    files = code_files(tree)
    count, budget = embedder.count_tokens, embedder.max_tokens
    # The parser and grammars load once per process: paid before timing (a mount never does).
    chunk_text(files[0][1], files[0][0], count, budget)

    def run() -> None:
        for path, text in files:
            chunk_text(text, path, count, budget)

    code: list[float] = []
    prose: list[float] = []
    for _ in range(3):
        code.append(best_of(run, 1))
        with prose_chunker():
            prose.append(best_of(run, 1))
    return {"files": len(files), "code_s": min(code), "prose_s": min(prose),
            "ratio": min(code) / min(prose), "load": os.getloadavg()[0]}  # fmt: skip


def hash_ingest_cost(tree: Path, work: Path) -> dict[str, float]:
    """A whole ingest with the stand-in model (everything but the model), code path against
    prose path, alternating, best of two each; both chunk in process (see prose_chunker)."""
    times: dict[str, list[float]] = {"code": [], "prose": []}
    for i in range(2):
        for arm in ("code", "prose"):
            target = work / f"hash-{arm}-{i}"
            subprocess.run(["rm", "-rf", str(target)], check=True)
            started = time.process_time()
            chunker = prose_chunker() if arm == "prose" else contextlib.nullcontext()
            with chunker, open_store(CollectionAddress(store=target)) as store:
                ingest(tree, store, model="hash", jobs=IN_PROCESS)
            times[arm].append(time.process_time() - started)
            subprocess.run(["rm", "-rf", str(target)], check=True)
    code, prose = min(times["code"]), min(times["prose"])
    return {"code_s": code, "prose_s": prose, "ratio": code / prose, "load": os.getloadavg()[0]}


def symbol_cost(store_dir: Path, names: list[str]) -> dict[str, float]:
    """Median ms of a lookup by name against a keyword and a hybrid search of the same word
    (warm searcher, in process)."""
    out: dict[str, float] = {}
    with open_store(CollectionAddress(store=store_dir)) as store:
        searcher = Searcher(store)
        searcher.warm_up()
        for mode in ("symbol", "keyword", "hybrid"):
            taken = []
            for name in names:
                started = time.perf_counter()
                searcher.search(SearchRequest(name, k=K, mode=mode))
                taken.append((time.perf_counter() - started) * 1000)
            out[f"{mode}_ms"] = statistics.median(taken)
        found = sum(bool(searcher.search(SearchRequest(n, k=K, mode="symbol"))) for n in names)
        out["names"] = len(names)
        out["found"] = found
    return out


def defined_names(questions: list[Question]) -> list[str]:
    """Names the questions' answer lines define (``func X``, ``def x``, ``const X``)."""
    names = []
    for q in questions:
        m = re.search(r"(?:func(?: \([^)]*\))?|def|class|const|var)\s+([A-Za-z_]\w*)", q.answer)
        if m:
            names.append(m.group(1))
    return list(dict.fromkeys(names))


def misses(arm: Arm, questions: list[Question]) -> list[str]:
    """The questions whose first result is not the expected file."""
    return [q.name for q in questions if not any(map(q.right, arm.outcomes[q.name].ranked[:1]))]


def table(results: dict[str, Any]) -> str:
    lines = [
        "| tree | questions | arm | hit@1 | hit@3 | answer-in-results | results p50 B |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for tree, r in results.items():
        for split in ("held-out", "tuned", "all"):
            for arm, s in r["arms"].items():
                if split not in s:
                    continue
                x = s[split]
                lines.append(
                    f"| {tree} | {split} ({x['n']}) | {arm} | {x['hit@1']:.2f} | "
                    f"{x['hit@3']:.2f} | {x['answer_in_results']:.2f} | "
                    f"{x['results_bytes_p50']:,.0f} |"
                )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True, help="Keeps the stores between runs.")
    p.add_argument("--tree", action="append", required=True, help="NAME=PATH (a git checkout)")
    p.add_argument("--markdown", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--no-costs", action="store_true", help="Skip the chunker and ingest timings.")
    p.add_argument("--no-prose", action="store_true", help="Skip the prose chunker's store.")
    p.add_argument(
        "--model", help="The stores' model (default: the packaged one; 'hash': the stand-in)"
    )
    p.add_argument(
        "--mode",
        default="hybrid",
        help="The search mode asked (default hybrid; 'keyword': BM25 alone, no model needed)",
    )
    p.add_argument(
        "--short-share",
        type=float,
        help="chunking.SHORT_SHARE for the code chunker (an experiment; default: the code's)",
    )
    args = p.parse_args(argv)
    if args.short_share is not None:
        chunking.SHORT_SHARE = args.short_share
    results: dict[str, Any] = {}
    for spec in args.tree:
        name, _, where = spec.partition("=")
        tree = Path(where).resolve()
        questions = read_questions(QUESTIONS / f"{name}.tsv")
        work = args.work / name
        work.mkdir(parents=True, exist_ok=True)
        print(f"{name}: ingesting (code chunker)", file=sys.stderr)
        code_info = build(
            tree, work / "code-store", False, args.model, in_process=args.short_share is not None
        )
        arms = {"semfs, code chunker": ask_semfs(work / "code-store", questions, args.mode)}
        prose_info = None
        if not args.no_prose:
            print(f"{name}: ingesting (prose chunker) {code_info}", file=sys.stderr)
            prose_info = build(tree, work / "prose-store", prose=True, model=args.model)
            arms["semfs, prose chunker"] = ask_semfs(work / "prose-store", questions, args.mode)
        arms |= {
            "grep -rn": ask_grep(tree, questions, git=False),
            "git grep": ask_grep(tree, questions, git=True),
        }
        r: dict[str, Any] = {
            "ingest": {"code": code_info, "prose": prose_info},
            "arms": {a: score(arm, questions) for a, arm in arms.items()},
            "misses": {a: misses(arm, questions) for a, arm in arms.items()},
            "results": {
                a: {q.name: arm.outcomes[q.name].text for q in questions} for a, arm in arms.items()
            },
        }
        r["symbol"] = symbol_cost(work / "code-store", defined_names(questions))
        if not args.no_costs:
            r["chunker"] = chunker_cost(tree)
            r["hash_ingest"] = hash_ingest_cost(tree, work)
        results[name] = r
        print(table({name: r}), file=sys.stderr)
    text = table(results)
    print(text)
    for name, r in results.items():
        print(f"{name}: ingest {r['ingest']}")
        print(f"{name}: @symbol {r['symbol']}")
        if "chunker" in r:
            print(f"{name}: chunker {r['chunker']}; hash ingest {r['hash_ingest']}")
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
