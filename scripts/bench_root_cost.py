#!/usr/bin/env python3
"""What a search of several collections costs: the question embedded once per collection (its
hits and its nearness share the vector) against twice (before), in one process, same run.

Opens the collections of ``--work``'s store (``scripts/bench_together.py`` keeps one: the three
shared corpora), then asks every question of their sets through ``Collections.search`` (what
``semfs search -c a -c b``, the MCP tools and a mount's root ``.search`` run), the two ways in
alternating rounds, each question's kept vectors cleared first. Prints p50 and mean per way.

Example:
    nice -n 10 .venv/bin/python scripts/bench_root_cost.py --work /var/tmp/together
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from answers import DEFAULT_SETS, HELD_OUT_SETS, SHARED, read_questions  # noqa: E402

from semfs.ingest.collection import open_collections  # noqa: E402
from semfs.ingest.search import Searcher  # noqa: E402
from semfs.ingest.store.address import CollectionAddress  # noqa: E402


def _twice(self: Searcher, text: str) -> list[float]:
    """Before: every call embeds the question anew."""
    return self.embedder.encode([text])[0]


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True, help="bench_together.py's --work.")
    p.add_argument("--rounds", type=int, default=4, help="Alternations of the two ways.")
    args = p.parse_args(argv)
    sets = [*DEFAULT_SETS, *HELD_OUT_SETS]
    folder = SHARED / "datasets" / "doc-questions"
    questions = [q.text for n in sets for q in read_questions(folder / f"{n}.tsv")]
    ways = {"twice (before)": _twice, "once (now)": Searcher._dense}
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    addresses = [CollectionAddress(n, store=args.work / "store") for n in sets]
    with open_collections(addresses) as several:
        searchers = [several[n].opened.searcher() for n in sets]
        for s in searchers:
            s.warm_up()
        try:
            for r in range(args.rounds):
                for way, dense in ways.items():
                    Searcher._dense = dense  # type: ignore[method-assign]
                    for q in questions[r :: args.rounds]:
                        for s in searchers:
                            s._vectors.clear()
                        start = time.perf_counter()
                        several.search(q)
                        seconds[way].append(time.perf_counter() - start)
        finally:
            Searcher._dense = ways["once (now)"]  # type: ignore[method-assign]
    for way, times in seconds.items():
        p50, mean = statistics.median(times) * 1000, statistics.mean(times) * 1000
        print(
            f"{way}: a search of {len(sets)} collections, p50 {p50:.1f} ms, mean {mean:.1f} ms "
            f"({len(times)} questions)"
        )


if __name__ == "__main__":
    main()
