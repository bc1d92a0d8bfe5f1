"""Issue 20's figures: the first answer after a mount, a fresh `semfs search`, a search served
by a mount or a watcher, and whether ONNX Runtime ranks a torch store's queries as torch does.

Every figure is a median over fresh processes, beside the same measurement with queries on
torch (the model cache pointed at an empty folder, so no checked ONNX export is found: what
every search paid before issue 20) in the same run, with the load average at the time.

Sections (``--only`` picks some):

* ``mount``: `semfs mount` of the store, then the first ``os.listdir(.search/<question>)``,
  the model not loaded yet (a fresh daemon each run); seconds from the mount command's start.
* ``fresh``: `semfs search` with no owner: wall seconds and the child's peak RSS (wait4).
* ``served``: `semfs search` while a mount owns the store, process start included; and while
  `semfs ingest --watch` runs (results compared with a local search of the same store).
* ``rankings``: per question set (and Cranfield), the hybrid top 10 of every question with
  queries on ONNX Runtime vs torch, in one process; each difference is listed.

Usage::

    python scripts/bench_first.py --store /tmp/stores/mintlify-docs --source CORPUS
    python scripts/bench_first.py --only rankings --rank-store fastapi-docs=/tmp/s/fastapi ...
    python scripts/bench_first.py --json out.json

Needs a store built with the default (torch) model whose ONNX export the ingest prepared (the
model cache is ``$SEMFS_MODEL_CACHE``, else the default store folder's ``models/``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = next(
    (p / "shared" for p in REPO.parents if (p / "shared" / "datasets").is_dir()),
    REPO.parent / "shared",
)
SEMFS = str(Path(sys.executable).with_name("semfs"))
QUESTIONS = [
    "how do I add a custom domain",
    "rotate an api key",
    "analytics setup",
    "configure navigation",
    "deploy previews",
    "webhook signature",
    "search settings",
]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_rss(cmd: Sequence[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, stdout) of one fresh process, measured with os.wait4."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
        out.seek(0)
        return seconds, usage.ru_maxrss / 1024, out.read().decode()


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


@contextlib.contextmanager
def mounted(store: Path, env: dict[str, str]) -> Iterator[tuple[Path, float]]:
    """A background mount of ``store``; (mountpoint, seconds the mount command took)."""
    mnt = Path(tempfile.mkdtemp(prefix="bench-first-mnt-"))
    started = time.perf_counter()
    subprocess.run([SEMFS, "mount", str(mnt), "--store", str(store)], check=True, env=env)
    try:
        yield mnt, started
    finally:
        subprocess.run([SEMFS, "umount", str(mnt)], check=False, env=env)
        for _ in range(200):  # the daemon closes its store, then exits
            if not (store / "docs" / "daemon.sock").exists():
                break
            time.sleep(0.1)
        with contextlib.suppress(OSError):
            mnt.rmdir()


def first_listing(store: Path, env: dict[str, str], question: str) -> float:
    with mounted(store, env) as (mnt, started):
        os.listdir(mnt / ".search" / question)
        return time.perf_counter() - started


def section_mount(
    args: argparse.Namespace, env: dict[str, str], torch_env: dict[str, str]
) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": load()}
    for name, e, n in (("onnx", env, args.runs), ("torch", torch_env, args.torch_runs)):
        samples = [
            first_listing(args.store, e, f"{QUESTIONS[i % len(QUESTIONS)]} {name}{i}")
            for i in range(n)
        ]
        out[name] = {
            "median_s": round(median(samples), 3),
            "samples": [round(s, 3) for s in samples],
        }
    out["ratio"] = round(out["torch"]["median_s"] / out["onnx"]["median_s"], 2)
    out["load_after"] = load()
    return out


def section_fresh(
    args: argparse.Namespace, env: dict[str, str], torch_env: dict[str, str]
) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": load()}
    for name, e, n in (("onnx", env, args.runs), ("torch", torch_env, args.torch_runs)):
        runs = [
            run_rss(
                [
                    SEMFS,
                    "search",
                    QUESTIONS[i % len(QUESTIONS)],
                    "--store",
                    str(args.store),
                    "--json",
                ],
                e,
            )
            for i in range(n)
        ]
        out[name] = {
            "median_s": round(median([r[0] for r in runs]), 3),
            "peak_rss_mb": round(max(r[1] for r in runs), 1),
            "samples": [round(r[0], 3) for r in runs],
        }
    out["ratio"] = round(out["torch"]["median_s"] / out["onnx"]["median_s"], 2)
    out["load_after"] = load()
    return out


def section_served(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"load_before": load()}
    search = [SEMFS, "search", "", "--store", str(args.store), "--json", "-k", "10"]

    def ask(q: str) -> tuple[float, str]:
        cmd = list(search)
        cmd[2] = q
        seconds, _rss, stdout = run_rss(cmd, env)
        return seconds, stdout

    with mounted(args.store, env) as (mnt, _started):
        os.listdir(mnt / ".search" / "warm up")  # the mount's model is warm
        ask("warm up")
        samples, served = [], {}
        for i in range(args.served_runs):
            q = QUESTIONS[i % len(QUESTIONS)]
            s, stdout = ask(q)
            samples.append(s)
            served[q] = stdout
    local = {q: ask(q)[1] for q in served}
    out["mount"] = {
        "median_s": round(median(samples), 3),
        "samples": [round(s, 3) for s in samples],
        "same_as_local": all(json.loads(served[q]) == json.loads(local[q]) for q in served),
    }
    out["process_start_s"] = round(
        median([run_rss([sys.executable, "-c", "pass"], env)[0] for _ in range(5)]), 3
    )
    if args.source is not None:
        watcher = subprocess.Popen(
            [SEMFS, "ingest", str(args.source), "--store", str(args.store), "--watch"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            state = args.store / "docs" / "watch.json"
            for _ in range(600):
                with contextlib.suppress(OSError, ValueError):
                    if json.loads(state.read_text()).get("batches", 0) and watcher.poll() is None:
                        break
                time.sleep(0.5)
            ask("warm up")
            wsamples, wserved = [], {}
            for i in range(args.served_runs):
                q = QUESTIONS[i % len(QUESTIONS)]
                s, stdout = ask(q)
                wsamples.append(s)
                wserved[q] = stdout
        finally:
            watcher.terminate()
            watcher.wait(120)
        out["watch"] = {
            "median_s": round(median(wsamples), 3),
            "samples": [round(s, 3) for s in wsamples],
            "same_as_local": all(json.loads(wserved[q]) == json.loads(local[q]) for q in wserved),
        }
    out["load_after"] = load()
    return out


def questions_of(name: str) -> list[str]:
    if name == "cranfield":
        sys.path.insert(0, str(REPO / "scripts"))
        import cranfield

        return list(cranfield.load_queries(SHARED / "datasets" / "cranfield"))
    path = SHARED / "datasets" / "doc-questions" / f"{name}.tsv"
    with path.open(newline="") as f:
        return [row["question"] for row in csv.DictReader(f, delimiter="\t")]


def section_rankings(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from semfs.ingest.embedding.embedder import PACKAGED_MODEL, load_torch_embedder, query_backend
    from semfs.ingest.request import SearchRequest
    from semfs.ingest.search import Searcher
    from semfs.ingest.store.address import CollectionAddress
    from semfs.ingest.store.backends import open_store

    torch = load_torch_embedder(PACKAGED_MODEL)
    out: dict[str, Any] = {"load_before": load()}
    for spec in args.rank_store:
        name, _, path = spec.partition("=")
        qs = questions_of(name)
        with open_store(CollectionAddress(store=Path(path))) as store:
            onnx = Searcher(store)
            assert query_backend(onnx.embedder) == "onnxruntime fp32", query_backend(onnx.embedder)
            ref = Searcher(store, embedder=torch)
            a = np.array(torch.encode(qs))
            b = np.array(onnx.embedder.encode(qs))
            cos = (a * b).sum(1)
            diffs = []
            for mode in args.modes:
                for q in qs:
                    got = [h.path for h in onnx.search(SearchRequest(q, k=10, mode=mode))]
                    want = [h.path for h in ref.search(SearchRequest(q, k=10, mode=mode))]
                    if got != want:
                        diffs.append({"mode": mode, "question": q, "onnx": got, "torch": want})
        out[name] = {
            "questions": len(qs),
            "modes": list(args.modes),
            "identical_top10": len(qs) * len(args.modes) - len(diffs),
            "min_query_cosine": round(float(cos.min()), 7),
            "differences": diffs,
        }
    out["load_after"] = load()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", type=Path, help="a torch store (default model), e.g. mintlify-docs")
    p.add_argument("--source", type=Path, help="its source folder (for the --watch figure)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--torch-runs", type=int, default=3)
    p.add_argument("--served-runs", type=int, default=10)
    p.add_argument(
        "--rank-store",
        action="append",
        default=[],
        metavar="NAME=STORE",
        help="question set (fastapi-docs, mem0-docs, mintlify-docs, cranfield) and its store",
    )
    p.add_argument("--modes", nargs="+", default=["hybrid"])
    p.add_argument("--only", nargs="+", choices=["mount", "fresh", "served", "rankings"])
    p.add_argument("--json", type=Path, help="write the results here")
    args = p.parse_args(argv)
    env = dict(os.environ)
    empty = tempfile.mkdtemp(prefix="bench-first-nomodels-")
    torch_env = {**env, "SEMFS_MODEL_CACHE": empty}
    sections = args.only or ["mount", "fresh", "served", "rankings"]
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "cpus": os.cpu_count(),
    }
    for section in sections:
        print(f"== {section} (load {load()})", file=sys.stderr, flush=True)
        if section == "mount":
            results[section] = section_mount(args, env, torch_env)
        elif section == "fresh":
            results[section] = section_fresh(args, env, torch_env)
        elif section == "served":
            results[section] = section_served(args, env)
        else:
            results[section] = section_rankings(args)
        print(json.dumps(results[section], indent=1)[:3000], file=sys.stderr, flush=True)
    text = json.dumps(results, indent=2)
    if args.json:
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
