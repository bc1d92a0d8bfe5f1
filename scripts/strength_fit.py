#!/usr/bin/env python3
"""Fit the match-strength scale (``semfs.ingest.search.STRENGTH_FIT``) on judged queries.

A hit's strength is the chance that a hit with its fused (DBSF) score is a page judged to
answer the query. This script measures it: every query of the doc-question sets (right = the
expected page or an alternate) and of Cranfield (right = judged relevant, codes 1-4) runs
through :class:`semfs.ingest.search.Searcher` in each mode at k=10, and a logistic regression of
right/wrong on the hit's score is fitted per mode, pooled over the doc-question sets (one page
answers each question, as when an agent looks for the page that answers; Cranfield judges many
abstracts relevant per query, a different base rate, so it is reported, not fitted). It prints
the fit (paste it into ``STRENGTH_FIT``), the area under the ROC curve per set, and, per
strength band (``STRONG``/``FAIR`` cut points), the share of hits that were right.

The stores come from the other scripts' ``--work`` folders (``scripts/answers.py --work W``
keeps ``W/SET/store``; ``scripts/cranfield.py --work C`` keeps ``C/store``).

Example:
    .venv/bin/python scripts/strength_fit.py --answers-work /var/tmp/answers \\
        --cranfield-work /var/tmp/cran
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import answers
import cranfield

from semfs.ingest.request import SearchRequest
from semfs.ingest.search import FAIR, STRENGTH_FIT, STRONG, Searcher
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

Judged = list[tuple[str, set[str]]]  # (query, paths judged right)


def judged_sets(
    answers_work: Path | None, cran_work: Path | None
) -> dict[str, tuple[Path, Judged]]:
    out: dict[str, tuple[Path, Judged]] = {}
    if answers_work:
        for name in answers.DEFAULT_SETS:
            tsv = answers.SHARED / "datasets" / "doc-questions" / f"{name}.tsv"
            qs = answers.read_questions(tsv)
            out[name] = (answers_work / name / "store", [(q.text, q.targets) for q in qs])
    if cran_work:
        data = answers.SHARED / "datasets" / "cranfield"
        qrels = cranfield.load_qrels(data)
        queries = cranfield.load_queries(data)
        judged = [(q, {f"{d:04d}.md" for d in qrels.get(i, {})}) for i, q in enumerate(queries, 1)]
        out["cranfield"] = (cran_work / "store", [(q, r) for q, r in judged if r])
    return out


def collect(store: Path, judged: Judged, mode: str) -> list[tuple[float, bool]]:
    with open_store(CollectionAddress(store=store)) as s:
        searcher = Searcher(s)
        return [
            (h.score, h.path in right)
            for q, right in judged
            for h in searcher.search(SearchRequest(q, k=10, mode=mode))
        ]


def logistic_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood intercept and slope (Newton's method)."""
    w = np.zeros(2)
    design = np.column_stack([np.ones_like(x), x])
    for _ in range(50):
        p = 1 / (1 + np.exp(-design @ w))
        grad = design.T @ (y - p)
        hess = design.T @ (design * (p * (1 - p))[:, None])
        step = np.linalg.solve(hess, grad)
        w += step
        if np.abs(step).max() < 1e-9:
            break
    return float(w[0]), float(w[1])


def auc(scores: np.ndarray, right: np.ndarray) -> float:
    pos, neg = scores[right], scores[~right]
    if not len(pos) or not len(neg):
        return math.nan
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--answers-work", type=Path, help="scripts/answers.py's --work folder.")
    p.add_argument("--cranfield-work", type=Path, help="scripts/cranfield.py's --work folder.")
    p.add_argument(
        "--mode", action="append", choices=tuple(STRENGTH_FIT), help="Mode to fit [all]."
    )
    args = p.parse_args(argv)
    sets = judged_sets(args.answers_work, args.cranfield_work)
    if not sets:
        p.error("give --answers-work and/or --cranfield-work")
    fits = {}
    for mode in args.mode or STRENGTH_FIT:
        per_set = {name: collect(store, judged, mode) for name, (store, judged) in sets.items()}
        pooled = [row for name, rows in per_set.items() if name != "cranfield" for row in rows]
        x = np.array([s for s, _ in pooled])
        y = np.array([r for _, r in pooled], dtype=float)
        a, b = logistic_fit(x, y)
        fits[mode] = (round(a, 2), round(b, 2))
        print(f"{mode}: intercept {a:.2f}, slope {b:.2f}; {len(pooled)} hits, {int(y.sum())} right")
        for name, rows in per_set.items():
            s = np.array([v for v, _ in rows])
            r = np.array([v for _, v in rows])
            strength = 1 / (1 + np.exp(-(a + b * s)))
            bands = []
            cuts = (("strong", STRONG, 1.01), ("fair", FAIR, STRONG), ("weak", 0.0, FAIR))
            for label, lo, hi in cuts:
                inside = (strength >= lo) & (strength < hi)
                share = r[inside].mean() if inside.any() else math.nan
                bands.append(f"{label} {int(inside.sum())} hits {share:.2f} right")
            print(f"  {name}: AUC {auc(s, r):.3f}; " + "; ".join(bands))
    print("STRENGTH_FIT =", fits)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
