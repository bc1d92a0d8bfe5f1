#!/usr/bin/env python3
"""Is ranking across collections fair? hit@1 of each question set asked at the root of one mount
of all the collections (``semfs mount MNT --collections a,b,c``) against each collection mounted
alone (issue 50).

Each corpus (``shared/corpora/NAME``, its questions ``shared/datasets/doc-questions/NAME.tsv``)
is ingested as collection NAME of one store under ``--work`` (kept: a re-run embeds nothing),
with the store's model (``--model``: the real default unless told). Each collection is then
mounted alone (``-c NAME``) and its questions asked at ``MNT/.search/QUESTION/``; then all are
mounted together and every question asked at the root's ``.search``, where its page is
``NAME/PAGE``. The same stores and vectors are searched both ways: the difference is the merge
of the collections' hits (:func:`semfs.ingest.search.several.merge_hits`: who comes first).
``--mode keyword`` asks ``.search/@keyword/QUESTION/`` instead (BENCHMARKS.md section 44).
Also reported: how often the top hit came from another collection (a "stolen" first place), and
the same question asked in ``MNT/NAME/.search/`` (scoped to its collection: should equal alone).

Example:
    nice -n 10 .venv/bin/python scripts/bench_together.py --work /var/tmp/together
    .venv/bin/python scripts/bench_together.py --set fastapi-docs --set mem0-docs -m hash
    nice -n 10 .venv/bin/python scripts/bench_together.py --work /var/tmp/together --mode keyword
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from answers import (  # noqa: E402
    DEFAULT_SETS,
    HELD_OUT_SETS,
    SHARED,
    Question,
    ask_dir,
    mounted,
    read_questions,
    semfs,
)


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def first(folder: Path) -> str | None:
    """The path (in the mount) of the first document a search folder links to."""
    ranked = ask_dir(folder)[0]
    return ranked[0] if ranked else None


def hit(found: str | None, q: Question, prefix: str = "") -> bool:
    return found is not None and found in {prefix + t for t in q.targets}


def measure(
    sets: Sequence[str], work: Path, data: Path, model: str | None, mode: str | None = None
) -> list[dict[str, object]]:
    store = work / "store"
    # A mode other than the default is a folder before the question (`.search/@keyword/Q/`).
    at = f"@{mode}/" if mode else ""
    questions = {}
    for name in sets:
        args = ["-c", name] + (["--model", model] if model else [])
        semfs("ingest", str(data / "corpora" / name), "--store", str(store), *args)
        questions[name] = read_questions(data / "datasets" / "doc-questions" / f"{name}.tsv")
    alone: dict[str, list[str | None]] = {}
    for name in sets:
        with mounted(store, work / "mnt", _log, ["-c", name]) as mnt:
            os.listdir(mnt / ".search" / "warm up the model")
            alone[name] = [first(mnt / ".search" / (at + q.dir_name)) for q in questions[name]]
    rows = []
    with mounted(store, work / "mnt", _log, ["--collections", ",".join(sets)]) as mnt:
        for name in sets:
            os.listdir(mnt / name / ".search" / "warm up the model")
        for name in sets:
            qs = questions[name]
            together = [first(mnt / ".search" / (at + q.dir_name)) for q in qs]
            scoped = [first(mnt / name / ".search" / (at + q.dir_name)) for q in qs]
            n = len(qs)
            rows.append(
                {
                    "set": name,
                    "questions": n,
                    "alone": sum(hit(f, q) for f, q in zip(alone[name], qs, strict=True)) / n,
                    "together": sum(
                        hit(f, q, name + "/") for f, q in zip(together, qs, strict=True)
                    )
                    / n,
                    "scoped": sum(hit(f, q, name + "/") for f, q in zip(scoped, qs, strict=True))
                    / n,
                    "stolen": sum(not (f or "").startswith(name + "/") for f in together),
                    # Right alone, wrong together: the question and what came first instead.
                    "lost": [
                        (q.text, t)
                        for a, t, q in zip(alone[name], together, qs, strict=True)
                        if hit(a, q) and not hit(t, q, name + "/")
                    ],
                }
            )
    return rows


def markdown(rows: Sequence[dict[str, object]], model: str) -> str:
    out = [
        f"| set ({model}) | questions | hit@1 alone | hit@1 together (root .search) | "
        "together - alone | hit@1 in MNT/NAME/.search | top hit from another collection |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        a, t, s = float(r["alone"]), float(r["together"]), float(r["scoped"])  # type: ignore[arg-type]
        out.append(
            f"| {r['set']} | {r['questions']} | {a:.3f} | {t:.3f} | {t - a:+.3f} | {s:.3f} "
            f"| {r['stolen']} |"
        )
    lost = [(r["set"], q, t) for r in rows for q, t in r["lost"]]  # type: ignore[attr-defined]
    if lost:
        out.append("\nRight alone, not first together (what came first instead):\n")
        out += [f"- {name}: {q[:90]!r} -> {t}" for name, q, t in lost]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", action="append", dest="sets", help="Question set [all three].")
    p.add_argument("--work", type=Path, help="Keeps the store: a re-run skips the ingest.")
    p.add_argument("--data", type=Path, default=SHARED, help="Holds corpora/ and datasets/.")
    p.add_argument("-m", "--model", help="A new collection's model [the default].")
    p.add_argument("--mode", help="A search mode other than the default (keyword, semantic).")
    p.add_argument("--markdown", type=Path, help="Write the Markdown table here too.")
    args = p.parse_args(argv)
    sets = args.sets or [*DEFAULT_SETS, *HELD_OUT_SETS]
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        rows = measure(sets, work, args.data, args.model, args.mode)
    label = (args.model or "default model") + (f", @{args.mode}" if args.mode else "")
    table = markdown(rows, label)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
