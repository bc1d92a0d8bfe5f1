#!/usr/bin/env python3
"""Which collection's first hit goes first at the root of several? Merge rules compared on the
same stores, held out (issue 50; BENCHMARKS.md section 33).

At the root of a mount of several collections (and in `semfs search -c a -c b`, MCP and
``Collections``) the first place goes to one collection's first hit
(:func:`semfs.ingest.search.several.merge_hits`); the rest do not change hit@1. So a question
is right together when the rule picks its own collection and that collection's first hit is
right alone. This script asks every question of each set of each collection (the stores
``scripts/bench_together.py`` keeps under ``--work``: ``WORK/store``), reads each collection's
chunk vectors once, and scores the rules offline on the same hits and vectors:

* ``nearest``: the cosine of the nearest chunk (section 33's rule; ``Searcher.nearness`` now
  adds the mean of the three nearest documents', section 44);
* ``top-k mean``: the mean cosine of the k nearest chunks;
* ``calibrated``: the nearest cosine minus lambda times the collection's typical nearness
  (computed from its chunk vectors alone, as at open time: the mean cosine of 400 sampled
  chunks to their nearest chunk of another document), centred on the collections' mean;
* ``z-score``: (nearest - q.mu) / sqrt(q' Sigma q), the nearest against the collection's whole
  cosine distribution for that question (mu, Sigma: its chunk vectors' mean and covariance);
* ``centroid``: the nearest cosine plus lambda times the cosine to the collection's centroid.

Each rule's parameter is chosen on the first half of every set (questions 1-20, the sum of the
questions lost), ties to the first listed; the second half (21-40) chose nothing and is
reported apart. Figures are together - alone (hit@1), per set; then every parameter of every
rule on all the questions (the choice in hindsight).

Example:
    nice -n 10 .venv/bin/python scripts/bench_together.py --work /var/tmp/together
    nice -n 10 .venv/bin/python scripts/bench_merge_rules.py --work /var/tmp/together
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from answers import DEFAULT_SETS, HELD_OUT_SETS, SHARED, read_questions  # noqa: E402

from semfs.ingest.collection import open_collections  # noqa: E402
from semfs.ingest.store.address import CollectionAddress  # noqa: E402

# One question of one set asked of one collection: (set, question index, collection).
Key = tuple[str, int, str]
Rule = Callable[[Key], float]


class Asked:
    """Every question of ``sets`` asked of every collection: its first hit and the cosine of
    the question to each of the collection's chunks, with each collection's own statistics."""

    def __init__(self, store: Path, sets: Sequence[str], data: Path) -> None:
        self.sets = list(sets)
        self.questions = {
            n: read_questions(data / "datasets" / "doc-questions" / f"{n}.tsv") for n in sets
        }
        self.first: dict[Key, str | None] = {}
        self.cosines: dict[Key, np.ndarray] = {}
        self.query: dict[Key, np.ndarray] = {}
        self.vectors: dict[str, np.ndarray] = {}
        self.paths: dict[str, np.ndarray] = {}
        with open_collections([CollectionAddress(n, store=store) for n in sets]) as several:
            for n in sets:
                store_of = several[n].opened.store
                rows, paths = [], []
                for doc in store_of.list_documents():
                    vectors = store_of.chunk_vectors(doc.path, doc.gen, range(doc.chunks))
                    rows += [vectors[i] for i in sorted(vectors)]
                    paths += [doc.path] * len(vectors)
                self.vectors[n] = np.array(rows, dtype=np.float32)
                self.paths[n] = np.array(paths)
            for owner in sets:
                for i, q in enumerate(self.questions[owner]):
                    for n in sets:
                        hits = several[n].search(q.text)
                        self.first[(owner, i, n)] = hits[0].path if hits else None
                        embedder = several[n].opened.searcher().embedder
                        vec = np.array(embedder.encode([q.text])[0], dtype=np.float32)
                        self.query[(owner, i, n)] = vec
                        self.cosines[(owner, i, n)] = np.sort(self.vectors[n] @ vec)[::-1]

    def right_alone(self, owner: str, i: int) -> bool:
        return self.first[(owner, i, owner)] in self.questions[owner][i].targets

    def lost(self, rule: Rule, owner: str, indexes: Sequence[int]) -> float:
        """together - alone, hit@1, over the questions ``indexes`` of set ``owner``."""

        def picked(i: int) -> str:
            return max(self.sets, key=lambda n: rule((owner, i, n)))

        wrong = sum(self.right_alone(owner, i) and picked(i) != owner for i in indexes)
        return -wrong / len(indexes)


def rules(asked: Asked) -> dict[str, list[tuple[str, Rule]]]:
    """Each family of rules, its parameters in the order ties go."""
    mean = {n: v.mean(0) for n, v in asked.vectors.items()}
    cov = {n: np.cov(v.T) for n, v in asked.vectors.items()}
    typical = {n: _typical_nearness(asked.vectors[n], asked.paths[n]) for n in asked.sets}
    centre = float(np.mean(list(typical.values())))
    cos = asked.cosines
    q = asked.query

    def near(k: Key) -> float:
        return float(cos[k][0])

    def z_score(k: Key) -> float:
        n = k[2]
        return (near(k) - float(q[k] @ mean[n])) / float(np.sqrt(q[k] @ cov[n] @ q[k]))

    def centroid(k: Key) -> float:
        n = k[2]
        return float(q[k] @ mean[n] / np.linalg.norm(mean[n]))

    def top_mean(k: int) -> Rule:
        return lambda key: float(cos[key][:k].mean())

    def calibrated(lam: float) -> Rule:
        return lambda key: near(key) - lam * (typical[key[2]] - centre)

    def with_centroid(lam: float) -> Rule:
        return lambda key: near(key) + lam * centroid(key)

    lams = (0.25, 0.5, 1.0, 2.0)
    return {
        "nearest (today)": [("", near)],
        "top-k mean": [(f"k={k}", top_mean(k)) for k in (3, 5, 10)],
        "calibrated by typical nearness": [(f"lambda={lam}", calibrated(lam)) for lam in lams],
        "z-score": [("", z_score)],
        "centroid": [(f"lambda={lam}", with_centroid(lam)) for lam in (0.1, *lams)],
    }


def _typical_nearness(vectors: np.ndarray, paths: np.ndarray, sample: int = 400) -> float:
    """The mean cosine of ``sample`` chunks to their nearest chunk of another document."""
    picked = np.random.default_rng(0).choice(len(vectors), min(sample, len(vectors)), False)
    cosines = vectors[picked] @ vectors.T
    cosines[paths[picked][:, None] == paths[None, :]] = -1.0
    return float(cosines.max(1).mean())


def markdown(asked: Asked) -> str:
    halves = {}
    for n in asked.sets:
        count = len(asked.questions[n])
        halves[n] = (range(count // 2), range(count // 2, count), range(count))
    sets = " / ".join(asked.sets)
    out = [
        f"| rule (parameter chosen on the first half) | first half (chose) {sets} | "
        f"second half (held out) {sets} | all |",
        "|---|---|---|---|",
    ]
    for family, candidates in rules(asked).items():

        def lost_on_first(candidate: tuple[str, Rule]) -> float:
            return sum(asked.lost(candidate[1], n, halves[n][0]) for n in asked.sets)

        name, rule = max(candidates, key=lost_on_first)  # max: the fewest lost; ties: first
        cells = [
            " / ".join(f"{asked.lost(rule, n, halves[n][h]):+.3f}" for n in asked.sets)
            for h in range(3)
        ]
        out.append(f"| {family}{f' ({name})' if name else ''} | " + " | ".join(cells) + " |")
    out += ["", f"Every parameter, all questions ({sets}): together - alone", ""]
    for family, candidates in rules(asked).items():
        for name, rule in candidates:
            lost = " / ".join(f"{asked.lost(rule, n, halves[n][2]):+.3f}" for n in asked.sets)
            out.append(f"- {family}{f' ({name})' if name else ''}: {lost}")
    alone = " / ".join(
        f"{sum(asked.right_alone(n, i) for i in halves[n][2]) / len(halves[n][2]):.3f}"
        for n in asked.sets
    )
    return "\n".join([f"hit@1 alone, all questions ({sets}): {alone}", "", *out]) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True, help="bench_together.py's --work.")
    p.add_argument("--set", action="append", dest="sets", help="Question set [all three].")
    p.add_argument("--data", type=Path, default=SHARED, help="Holds datasets/.")
    p.add_argument("--markdown", type=Path, help="Write the Markdown table here too.")
    args = p.parse_args(argv)
    table = markdown(
        Asked(args.work / "store", args.sets or [*DEFAULT_SETS, *HELD_OUT_SETS], args.data)
    )
    if args.markdown:
        args.markdown.write_text(table)
    sys.stdout.write(table)


if __name__ == "__main__":
    main()
