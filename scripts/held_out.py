#!/usr/bin/env python3
"""Out-of-sample checks of the search defaults that were tuned on the benchmark's own data.

BENCHMARKS.md marks the figures measured on the data a default was chosen on as in-sample
(docs/search.md, "What was tuned on what"). This script gives the out-of-sample side, from
the stores the other scripts keep under their ``--work`` folders:

* ``--cranfield-work C`` (``scripts/cranfield.py --work C``): ``FUSION_CANDIDATES`` was chosen
  on Cranfield. Its queries are split in two halves (odd and even positions in cran.qry); on
  each half the candidate count with the best hybrid nDCG@10 among :data:`CANDIDATES` is
  picked, then scored on the other half. Printed: every count's nDCG@10 per half, the pick of
  each half and its score on the other half (out-of-sample), beside the default's.
* ``--answers-work W`` (``scripts/answers.py --work W --set SET`` for a held-out set):
  ``STRENGTH_FIT`` was fitted on the top 10 of the fastapi-docs and mem0-docs questions. For
  each held-out set present under ``W`` (``answers.HELD_OUT_SETS``), the committed fit's bands
  are scored the same way: the share of strong, fair and weak hits that were the right page,
  and the area under the ROC curve, to compare with the in-sample shares quoted beside
  ``STRENGTH_FIT``.

Nothing is tuned or written here: it only measures.

Example:
    .venv/bin/python scripts/cranfield.py --work /var/tmp/cran
    .venv/bin/python scripts/answers.py --set mintlify-docs --work /var/tmp/answers
    .venv/bin/python scripts/held_out.py --cranfield-work /var/tmp/cran \\
        --answers-work /var/tmp/answers
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import answers
import cranfield
import strength_fit

from semfs.ingest.request import SearchRequest
from semfs.ingest.search import FAIR, STRONG, Searcher, match_strength
from semfs.ingest.store import FUSION_CANDIDATES
from semfs.ingest.store import qdrant as qdrant_core
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

# Candidate counts per retriever to pick from: around the default, as when it was chosen.
CANDIDATES = (50, 100, 150, 200, 300, 400)


def cranfield_split(work: Path) -> dict[str, Any]:
    """Hybrid nDCG@10 per candidate count on each half; each half's pick scored on the other."""
    data = cranfield.DEFAULT_DATA
    texts = cranfield.load_queries(data)
    qrels_by_pos = cranfield.load_qrels(data)
    positions = [p for p in range(1, len(texts) + 1) if qrels_by_pos.get(p)]
    halves = {"odd": [p for p in positions if p % 2], "even": [p for p in positions if not p % 2]}
    ndcg: dict[int, dict[str, float]] = {}
    with open_store(CollectionAddress(store=work / "store")) as store:
        searcher = Searcher(store)
        searcher.warm_up()
        for count in CANDIDATES:
            # The store reads the module's constant at each query: set it for this count.
            qdrant_core.FUSION_CANDIDATES = count
            ndcg[count] = {}
            for half, members in halves.items():
                run = [
                    [
                        cranfield.doc_id_of(h.path)
                        for h in searcher.search(SearchRequest(texts[p - 1], k=10))
                    ]
                    for p in members
                ]
                score = cranfield.evaluate(run, [qrels_by_pos[p] for p in members])["ndcg@10"]
                ndcg[count][half] = score
    qdrant_core.FUSION_CANDIDATES = FUSION_CANDIDATES
    out: dict[str, Any] = {"queries": {h: len(m) for h, m in halves.items()}, "ndcg@10": ndcg}
    for tune, test in (("odd", "even"), ("even", "odd")):
        pick = max(CANDIDATES, key=lambda c: ndcg[c][tune])
        out[f"picked on {tune}"] = {
            "candidates": pick,
            f"{tune} (in-sample)": round(ndcg[pick][tune], 4),
            f"{test} (out-of-sample)": round(ndcg[pick][test], 4),
            f"{test} with the best count for it": round(max(ndcg[c][test] for c in CANDIDATES), 4),
            f"{test} with the default ({FUSION_CANDIDATES})": round(
                ndcg[FUSION_CANDIDATES][test], 4
            ),
        }
    return out


def strength_bands(work: Path, sets: Sequence[str]) -> dict[str, Any]:
    """The committed STRENGTH_FIT's bands on each held-out set, hybrid mode, top 10."""
    out: dict[str, Any] = {}
    for name in sets:
        store = work / name / "store"
        if not store.is_dir():
            continue
        qs = answers.read_questions(answers.SHARED / "datasets" / "doc-questions" / f"{name}.tsv")
        rows = strength_fit.collect(store, [(q.text, q.targets) for q in qs], "hybrid")
        scores = np.array([s for s, _ in rows])
        right = np.array([r for _, r in rows])
        strength = np.array([match_strength(s, "hybrid") for s in scores])
        bands = {}
        for label, lo, hi in (("strong", STRONG, 1.01), ("fair", FAIR, STRONG), ("weak", 0, FAIR)):
            inside = (strength >= lo) & (strength < hi)
            share = float(right[inside].mean()) if inside.any() else math.nan
            bands[label] = {"hits": int(inside.sum()), "right": round(share, 3)}
        out[name] = {
            "questions": len(qs),
            "auc": round(strength_fit.auc(scores, right), 3),
            "bands": bands,
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cranfield-work", type=Path, help="scripts/cranfield.py's --work folder.")
    p.add_argument("--answers-work", type=Path, help="scripts/answers.py's --work folder.")
    args = p.parse_args(argv)
    if not args.cranfield_work and not args.answers_work:
        p.error("give --cranfield-work and/or --answers-work")
    result: dict[str, Any] = {}
    if args.cranfield_work:
        result["cranfield FUSION_CANDIDATES, hybrid"] = cranfield_split(args.cranfield_work)
    if args.answers_work:
        held_out = strength_bands(args.answers_work, answers.HELD_OUT_SETS)
        result["STRENGTH_FIT on held-out sets, hybrid"] = held_out
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
