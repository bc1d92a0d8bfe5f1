#!/usr/bin/env python3
"""Passages inside the right page (issue 48): where the answer line's chunk is, and what a
results file holds when the first hit's chunks are chosen by other evidence or its bytes move.

For each public question set, asked in process (the mount's code path without FUSE, as
``scripts/answers.py --via searcher``) on the store ``scripts/answers.py --work W`` keeps (the
real model's vectors), the hits and the chunks the search hands the excerpt picker are taken
as they are. Then:

* **where**: over the questions whose first hit is the expected page, with the answer line in
  one chunk of it, how often that chunk is the page's best by the search (its fused rank), the
  nearest to the query's vector (the stored chunk vectors), the chunk of the best passage
  shown (``Answer:``), and one of the three: the most a passage search choosing among those
  signals could reach, had it then the right line;
* **picker**: answer-in-excerpts with the first hit's chunks given otherwise: every chunk of
  the page (not only those the search ranked), ordered by the query's vector, or by the
  reciprocal-rank fusion of that order and the search's;
* **budgets** (``--budgets``): answer-in-results, hit@1 and the results file's bytes with the
  excerpt characters laid out as FIRST:LATER:TOTAL:LEAD (the first hit's cap, each later hit's,
  the total they share, the best passage's), e.g. ``1000:0:1000:600``: the later hits' bytes
  moved to the first. ``default`` is today's layout, the baseline to read the others against.

Example:
    .venv/bin/python scripts/answers.py --via searcher --work /var/tmp/answers
    nice -n 10 .venv/bin/python scripts/bench_passages.py --work /var/tmp/answers \\
        --budgets default,1000:0:1000:600,1000:0:1000:800
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import answers as A


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    den = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / den if den else 0.0


def layout(text: str) -> tuple[tuple[int, ...], int, int]:
    """FIRST:LATER:TOTAL:LEAD as the searcher's caps by rank, total and best passage's
    characters; ``default``: today's."""
    from semfs.ingest.search import EXCERPT_CHARS, EXCERPT_TOTAL
    from semfs.ingest.search.excerpts import LEAD_CHARS

    if text == "default":
        return EXCERPT_CHARS, EXCERPT_TOTAL, LEAD_CHARS
    first, later, total, lead = (int(x) for x in text.split(":"))
    return (first, later, later, later, later, 0), total, lead


def measure(
    name: str, work: Path, budgets: Sequence[str], log: Any = print
) -> tuple[str, list[str]]:
    """The set's row of the where/picker table, and one row per budget layout."""
    from semfs.ingest.search import Searcher, excerpts
    from semfs.ingest.store.address import CollectionAddress
    from semfs.ingest.store.backends import open_store

    qs = A.read_questions(A.SHARED / "datasets" / "doc-questions" / f"{name}.tsv")
    corpus = A.SHARED / "corpora" / name
    A.ensure_store(corpus, work / name / "store", log)
    rows: list[str] = []
    with open_store(CollectionAddress(store=work / name / "store")) as store:
        searcher = Searcher(store)
        searcher.warm_up()
        # The picker's inputs, as the search hands them over (one call a question).
        seen: list[tuple[Any, ...]] = []
        pick = excerpts.ExcerptPicker.pick

        def capture(self: Any, docs: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append((docs, args, kwargs))
            return pick(self, docs, *args, **kwargs)

        excerpts.ExcerptPicker.pick = capture  # type: ignore[method-assign]
        try:
            outcomes = A._ask_searcher(store, searcher, qs, ())
        finally:
            excerpts.ExcerptPicker.pick = pick  # type: ignore[method-assign]
        where = {"questions": 0, "search": 0, "vector": 0, "shown": 0, "any": 0, "answered": 0}
        variants = {"as searched": 0, "whole page": 0, "by vector": 0, "fused": 0}
        for q, o, (docs, args, kwargs) in zip(qs, outcomes, seen, strict=True):
            want = A.normalise(q.answer)
            qv = searcher.embedder.encode([q.text])[0]
            top = docs[0][0]
            doc = store.get_document(top.path)
            assert doc is not None
            chunks = store.get_chunks(top.path, top.gen, range(doc.chunks))
            vectors = store.chunk_vectors(top.path, top.gen, range(doc.chunks))
            near = {c.index: cosine(qv, vectors[c.index]) for c in chunks if c.index in vectors}
            by_vector = sorted(chunks, key=lambda c: -near.get(c.index, -1.0))
            fused = {c.index: 1 / (1 + r) for r, c in enumerate(docs[0])}
            for r, c in enumerate(by_vector):
                fused[c.index] = fused.get(c.index, 0.0) + 1 / (1 + r)
            given = {c.index for c in docs[0]}
            whole = list(docs[0]) + [c for c in by_vector if c.index not in given]
            for label, first in (
                ("as searched", docs[0]),
                ("whole page", whole),
                ("by vector", [c for c in by_vector if c.index in given]),
                ("fused", sorted(docs[0], key=lambda c: -fused[c.index])),
            ):
                picked = excerpts.ExcerptPicker(q.text).pick([first, *docs[1:]], *args, **kwargs)
                text = A.normalise(" ".join(e.text for ex in picked for e in ex))
                variants[label] += want in text
            held = [c.index for c in chunks if want in A.normalise(c.text)]
            if top.path not in q.targets or not held:
                continue
            best = o.results.split("\n\n")[1]  # the best passage's block
            lines = A.shown_lines(best).get(top.path, set())
            shown = {c.index for c in chunks if lines and c.start_line <= min(lines) <= c.end_line}
            signals = {"search": docs[0][0].index, "vector": by_vector[0].index}
            where["questions"] += 1
            where["answered"] += o.answered
            where["search"] += signals["search"] == held[0]
            where["vector"] += signals["vector"] == held[0]
            where["shown"] += held[0] in shown
            where["any"] += held[0] in {*signals.values(), *shown}
        n = len(qs)
        found = (
            f"| {name} | {where['questions']} | {where['answered']} | {where['search']} "
            f"| {where['vector']} | {where['shown']} | {where['any']} | "
            + " | ".join(f"{variants[k] / n:.3f}" for k in variants)
            + " |"
        )
        log(found)
        chars, total, lead = searcher.excerpt_chars, searcher.excerpt_total, excerpts.LEAD_CHARS
        try:
            for spec in budgets:
                searcher.excerpt_chars, searcher.excerpt_total, excerpts.LEAD_CHARS = layout(spec)
                got = A._ask_searcher(store, searcher, qs, ())
                A.with_pages(got, corpus)
                s = A.summarise(got)
                rows.append(
                    f"| {name} | {spec} | {s['hit@1']:.2f} | {s['answer_in_results']:.3f} "
                    f"| {s['results_bytes_mean']:,.0f} | {s['results_bytes_p50']:,.0f} "
                    f"| {s['cost_bytes_mean']:,.0f} |"
                )
                log(rows[-1])
        finally:
            searcher.excerpt_chars, searcher.excerpt_total, excerpts.LEAD_CHARS = chars, total, lead
    return found, rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", action="append", dest="sets", help="Question set [all three].")
    p.add_argument("--work", type=Path, required=True, help="Where answers.py keeps the stores.")
    p.add_argument(
        "--budgets",
        default="default",
        help="Comma-separated FIRST:LATER:TOTAL:LEAD layouts, the baseline first [%(default)s].",
    )
    args = p.parse_args(argv)
    sets = args.sets or [*A.DEFAULT_SETS, *A.HELD_OUT_SETS]
    specs = args.budgets.split(",")
    got = [
        measure(name, args.work, specs, log=lambda m: print(m, file=sys.stderr)) for name in sets
    ]
    print(
        "| set | first hit right, answer in one chunk | of them answered | its chunk: the "
        "search's best | the vector's nearest | the best passage's | any of the three "
        "| answer-in-excerpts: as searched | whole page | by vector | fused |"
    )
    print("|---|" + "---:|" * 10)
    print("\n".join(found for found, _ in got))
    print(
        "\n| set | FIRST:LATER:TOTAL:LEAD | hit@1 | answer-in-results | mean B | p50 B | cost B |"
    )
    print("|---|---|" + "---:|" * 5)
    print("\n".join(r for _, rows in got for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
