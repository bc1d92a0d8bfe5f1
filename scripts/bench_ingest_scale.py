#!/usr/bin/env python3
"""A first ingest of a large folder as a user lives it (issue 38.6): when is it searchable?

``semfs ingest`` runs as a user runs it (a subprocess, the default model unless ``-m``), while
this script watches it from other processes, as a user's next terminal would:

* ``semfs search WORDS --mode keyword`` every ``--poll`` seconds: the time to the first keyword
  hit;
* ``semfs status --json``: documents committed over time; the time until every document the
  run commits is listed (hence keyword-searchable: a committed record has its BM25 vectors),
  and the embedding progress when the status reports one;
* the ingest's exit: every dense vector is in (or, when the status reports embedding progress,
  the time it reached every chunk);
* the ingest's own chunks/s, beside a raw encode of a sample of the same chunk texts (those of
  every ``--sample``-th file, built as the pipeline builds them) by the same model in the same
  run;
* peak RSS of the ingest (VmHWM, polled) and of its largest child (an extraction worker).

Corpora: any folders given (``--corpus NAME=PATH``; the large mixed collection is
``scripts/bigcorpus.py --no-store``'s ``collection/``, the shared corpora are copied into one
folder with ``--shared``); ``--growth 10000,100000`` adds synthetic Zipf corpora of that many
chunks (``benchmarks.corpora.synthetic_corpus``) to show how each figure grows. Each run
starts from an empty store. The machine's load is recorded at the start and end of each.

``--first-pass`` (issue 45.4) measures the keyword pass alone, as a watcher's batch runs it
(``ingest(..., dense=False)``, the same function ``semfs ingest`` calls first) in a process of its
own: chunks/s to the end of the pass (compaction included) and to its last commit, CPU seconds
(user + sys, its chunking and extraction children's included: a figure the machine's load does
not inflate),
and the peaks of VmHWM, RssAnon and RssFile (polled; VmHWM is the kernel's own peak).
``--baseline-rev REV`` runs the same on REV's code (``git archive``, on PYTHONPATH) in the same
run, the two sides alternated per corpus.

Example:
    .venv/bin/python scripts/bench_ingest_scale.py --corpus big=bench-out/bigcorpus/collection \\
        --shared --out bench-out/ingest-scale.json
    .venv/bin/python scripts/bench_ingest_scale.py --growth 10000,100000 -m hash
    nice -n 10 .venv/bin/python scripts/bench_ingest_scale.py --first-pass --growth 10000,100000 \\
        --baseline-rev main
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_update import baseline_tree
from benchmarks.corpora import synthetic_corpus
from benchmarks.harness import SEMFS

REPO = Path(__file__).resolve().parents[1]
SHARED = next(
    (p / "shared" / "corpora" for p in REPO.parents if (p / "shared" / "corpora").is_dir()),
    REPO.parent / "shared" / "corpora",
)
SHARED_CORPORA = ("fastapi-docs", "mem0-docs", "mintlify-docs")
# Words most pages of any documentation hold: a keyword search for them hits the first document
# committed, whichever it is.
COMMON_WORDS = "the use install file data example function page run command"


def _semfs(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SEMFS), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _not_yet(stderr: str) -> bool:
    """Whether a refusal only says that nothing is committed yet."""
    return "no collection" in stderr or "is being made" in stderr or "is empty" in stderr


def _hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _children(pid: int) -> list[int]:
    """The processes ``pid``'s threads started (an extraction worker is a reading thread's)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


class Watcher:
    """Polls a running ingest from other processes; a timeline of what they saw."""

    def __init__(self, store: Path, pid: int, started: float, poll: float, words: str) -> None:
        self.store, self.pid, self.started, self.poll, self.words = store, pid, started, poll, words
        self.first_hit: float | None = None
        self.listed: list[tuple[float, int]] = []  # (seconds, documents)
        self.embedded: list[tuple[float, int, int]] = []  # (seconds, embedded, chunks)
        self.peak_mb = 0.0
        self.child_peak_mb = 0.0
        self.refusals: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._searches, daemon=True),
            threading.Thread(target=self._statuses, daemon=True),
            threading.Thread(target=self._memory, daemon=True),
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def _now(self) -> float:
        return time.perf_counter() - self.started

    def _searches(self) -> None:
        where = ("--store", str(self.store))
        while not self._stop.is_set() and self.first_hit is None:
            out = _semfs("search", self.words, "--mode", "keyword", "-k", "1", "--json", *where)
            if out.returncode == 0 and json.loads(out.stdout or "[]"):
                self.first_hit = self._now()
                return
            if out.returncode != 0 and not _not_yet(out.stderr):
                self.refusals.append(out.stderr.strip()[:200])
            self._stop.wait(self.poll)

    def _statuses(self) -> None:
        while not self._stop.is_set():
            out = _semfs("status", "--json", "--store", str(self.store))
            at = self._now()
            if out.returncode == 0:
                info = json.loads(out.stdout)
                self.listed.append((at, int(info.get("documents") or 0)))
                progress = info.get("embedding")
                if isinstance(progress, dict) and "embedded" in progress:
                    self.embedded.append((at, int(progress["embedded"]), int(info["chunks"])))
            elif not _not_yet(out.stderr):
                self.refusals.append(out.stderr.strip()[:200])
            self._stop.wait(self.poll)

    def _memory(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, _hwm_mb(self.pid) or 0.0)
            for child in _children(self.pid):
                self.child_peak_mb = max(self.child_peak_mb, _hwm_mb(child) or 0.0)
            self._stop.wait(0.5)


def run_ingest(
    source: Path, store: Path, model: str | None, poll: float, jobs: int | None
) -> dict[str, Any]:
    """One first ingest of ``source`` into a new ``store``, watched; its figures."""
    if store.exists():
        shutil.rmtree(store)
    cmd = [str(SEMFS), "ingest", str(source), "--store", str(store), "--json"]
    cmd += ["-m", model] if model else []
    cmd += ["--jobs", str(jobs)] if jobs else []
    load = os.getloadavg()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watcher = Watcher(store, proc.pid, started, poll, COMMON_WORDS)
    watcher.start()
    out, err = proc.communicate()
    exited = time.perf_counter() - started
    # The readers go on until they have seen the end (a status poll takes a second or two).
    time.sleep(2 * poll)
    watcher.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err[-600:]}")
    report = json.loads(out)
    final = max((n for _t, n in watcher.listed), default=0)
    all_listed = next((t for t, n in watcher.listed if n >= final), None)
    chunks = int(report["chunks_embedded"])
    written = int(report.get("chunks_written") or chunks)
    # Every chunk of the run embedded: a status taken before the first commits (no chunk yet,
    # or a first window's, not yet pending) does not count.
    dense = next((t for t, e, c in watcher.embedded if c >= written and e >= c), None)
    return {
        "documents": final,
        "chunks": chunks,
        "first_keyword_hit_s": _round(watcher.first_hit),
        "all_listed_s": _round(all_listed),
        "dense_done_s": _round(dense if dense is not None else exited),
        "exited_s": round(exited, 1),
        "ingest_chunks_per_s": report.get("chunks_per_second"),
        "chunks_per_s_to_dense_done": round(chunks / (dense or exited), 1),
        "peak_rss_mb": round(watcher.peak_mb, 1),
        "largest_child_rss_mb": round(watcher.child_peak_mb, 1),
        "refusals": watcher.refusals[:3],
        "load_start": [round(x, 1) for x in load],
        "load_end": [round(x, 1) for x in os.getloadavg()],
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def raw_encode(source: Path, model: str | None, every: int) -> dict[str, Any]:
    """The model's raw encode of every ``every``-th chunk text of ``source`` (built as the
    pipeline builds them), chunks/s. Only calls every semfs version has, so that a baseline
    checkout runs it too."""
    from semfs.ingest.chunking import chunk_text, document_title, embedding_text
    from semfs.ingest.embedding.embedder import DEFAULT_BATCH_SIZE, DEFAULT_MODEL, load_embedder
    from semfs.ingest.sources import Skipped, read_document, scan

    embedder = load_embedder(model or DEFAULT_MODEL)
    files = scan(source)[0]
    texts: list[str] = []
    for f in files[::every]:  # every Nth file: its chunks as the ingest made them
        doc = read_document(f)
        if isinstance(doc, Skipped) or not doc.text:
            continue
        title = document_title(doc.text, doc.path)
        spans = chunk_text(doc.text, doc.path, embedder.count_tokens, embedder.max_tokens)
        texts += [embedding_text(s, title) for s in spans]
    embedder.encode(texts[:8])  # loaded and warm
    started = time.perf_counter()
    embedder.encode(texts, batch_size=DEFAULT_BATCH_SIZE)
    seconds = time.perf_counter() - started
    return {
        "texts": len(texts),
        "files": len(files[::every]),
        "chunks_per_s": round(len(texts) / seconds, 1),
    }


# The keyword pass alone, in a process of its own: the report's figures, then the process's
# CPU seconds and its ended children's (the chunking children, issue 45.4). Only calls every
# semfs version since keywords first has (a baseline runs it too).
FIRST_PASS = """
import json, os, sys, time
from pathlib import Path
from semfs.ingest.pipeline import ingest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
started = time.perf_counter()
with open_store(CollectionAddress(store=Path(sys.argv[2]))) as store:
    r = ingest(Path(sys.argv[1]), store, model=sys.argv[3] or None, dense=False)
seconds = time.perf_counter() - started
# The extraction workers end at exit: end them now, so that their CPU is counted.
workers = sys.modules.get("semfs.ingest.formats.worker")
if workers is not None and workers._shared is not None:
    workers._shared.close()
cpu = os.times()
print(json.dumps({"chunks": r.chunks_written, "documents": r.committed, "seconds": seconds,
                  "keywords_seconds": r.keywords_seconds, "cpu_s": cpu.user + cpu.system,
                  "children_cpu_s": cpu.children_user + cpu.children_system}))
"""


def _memory(pid: int) -> dict[str, int]:
    """VmHWM, VmRSS, RssAnon and RssFile of ``pid`` (kB)."""
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0])
    except (OSError, ValueError):
        pass
    return out


def first_pass(source: Path, store: Path, model: str | None, env: dict[str, str]) -> dict[str, Any]:
    """The keyword pass of a first ingest of ``source`` into a new ``store`` (FIRST_PASS), run
    with ``env`` (a baseline's PYTHONPATH): chunks/s and peak memory."""
    if store.exists():
        shutil.rmtree(store)
    cmd = [sys.executable, "-c", FIRST_PASS, str(source), str(store), model or ""]
    load = os.getloadavg()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        peak: dict[str, int] = {}
        while proc.poll() is None:
            for key, kb in _memory(proc.pid).items():
                peak[key] = max(peak.get(key, 0), kb)
            # Its children (chunking, extraction) together, and the largest one's own peak.
            kids = [_memory(c) for c in _children(proc.pid)]
            together = sum(k.get("VmRSS", 0) for k in kids)
            peak["children"] = max(peak.get("children", 0), together)
            hwm = max((k.get("VmHWM", 0) for k in kids), default=0)
            peak["child_hwm"] = max(peak.get("child_hwm", 0), hwm)
            time.sleep(0.2)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(f"first pass of {source} exited {proc.returncode}: {stderr[-800:]}")
    report = json.loads(stdout.strip().splitlines()[-1])
    shutil.rmtree(store, ignore_errors=True)
    chunks = int(report["chunks"])
    cpu = report["cpu_s"] + report["children_cpu_s"]  # the process's and its children's
    return {
        "chunks": chunks,
        "documents": report["documents"],
        "pass_s": round(report["seconds"], 1),
        "chunks_per_s": round(chunks / report["seconds"], 1),
        "last_commit_s": round(report["keywords_seconds"], 1),
        "cpu_s": round(cpu, 1),
        "children_cpu_s": round(report["children_cpu_s"], 1),
        "chunks_per_cpu_s": round(chunks / cpu, 1),
        "peak_vmhwm_mb": round(peak.get("VmHWM", 0) / 1024),
        "peak_rss_anon_mb": round(peak.get("RssAnon", 0) / 1024),
        "peak_rss_file_mb": round(peak.get("RssFile", 0) / 1024),
        "peak_children_rss_mb": round(peak.get("children", 0) / 1024),
        "peak_child_vmhwm_mb": round(peak.get("child_hwm", 0) / 1024),
        "load_start": [round(x, 1) for x in load],
        "load_end": [round(x, 1) for x in os.getloadavg()],
    }


def first_pass_sides(
    sources: dict[str, Path], work: Path, model: str | None, baseline: str | None
) -> dict[str, Any]:
    """FIRST_PASS of each corpus, on this checkout and on ``baseline``'s code, alternated."""
    clean = {k: v for k, v in os.environ.items() if k not in ("SEMFS_STORE", "PYTHONPATH")}
    sides = {"this": clean}
    if baseline:
        code = baseline_tree(baseline, Path(tempfile.mkdtemp(prefix="baseline-", dir=work)))
        sides = {"baseline": {**clean, "PYTHONPATH": str(code)}, "this": clean}
    out: dict[str, Any] = {"baseline": baseline, "model": model or "default", "runs": {}}
    for i, (name, source) in enumerate(sources.items()):
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]
        for side in order:
            print(f"bench_ingest_scale: first pass, {name}, {side}", file=sys.stderr, flush=True)
            run = first_pass(source, work / "store", model, sides[side])
            out["runs"].setdefault(name, {})[side] = run
            print(json.dumps({name: {side: run}}), file=sys.stderr, flush=True)
    return out


def shared_folder(work: Path) -> Path:
    """The three shared corpora copied into one folder (one collection mirrors one folder)."""
    dest = work / "shared-corpora"
    if not dest.is_dir():
        for name in SHARED_CORPORA:
            shutil.copytree(SHARED / name, dest / name)
    return dest


def shared_copies(work: Path, copies: int) -> Path:
    """``copies`` copies of the three shared corpora in one folder (``copyNN/<corpus>/``), each
    copy after the first with its first 50 paragraph breaks of each page marked ``variantN``,
    so that no two copies' chunks have the same text (a chunk's stored vector is not reused):
    a real documentation collection of 10k to 100k+ chunks (issue 45.4's scale curve)."""
    dest = work / f"shared-x{copies}"
    if dest.is_dir():
        return dest
    for k in range(copies):
        for name in SHARED_CORPORA:
            for f in sorted((SHARED / name).rglob("*")):
                if not f.is_file() or f.suffix not in (".md", ".mdx"):
                    continue
                out = dest / f"copy{k:02d}" / name / f.relative_to(SHARED / name)
                out.parent.mkdir(parents=True, exist_ok=True)
                text = f.read_text(errors="replace")
                out.write_text(text.replace("\n\n", f"\n\nvariant{k} ", 50) if k else text)
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", action="append", default=[], metavar="NAME=PATH")
    p.add_argument("--shared", action="store_true", help="Also the three shared corpora, together.")
    p.add_argument("--growth", help="Synthetic corpora of these many chunks, comma-separated.")
    p.add_argument(
        "--shared-copies",
        help="Corpora of this many copies of the shared corpora, comma-separated (1: ~10k "
        "chunks with the default model, 6: ~53k, 12: ~105k).",
    )
    p.add_argument("-m", "--model", help="The store's model [default: semfs's].")
    p.add_argument("--jobs", type=int, help="semfs ingest --jobs [default: its own].")
    p.add_argument("--poll", type=float, default=1.0, help="Seconds between polls [1].")
    p.add_argument("--sample", type=int, default=20, help="Raw encode: every Nth file [20].")
    p.add_argument("--no-raw", action="store_true", help="Skip the raw encode.")
    p.add_argument("--work", type=Path, help="Where sources and stores go [a temporary folder].")
    p.add_argument("--out", type=Path, help="Write the JSON here too.")
    p.add_argument(
        "--first-pass", action="store_true", help="The keyword pass alone: chunks/s and memory."
    )
    p.add_argument("--baseline-rev", help="--first-pass: also on this commit's code, same run.")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="semfs-scale-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        corpora = dict(c.split("=", 1) for c in args.corpus)
        sources = {name: Path(path) for name, path in corpora.items()}
        if args.shared:
            sources["shared corpora"] = shared_folder(work)
        for n in [int(s) for s in args.shared_copies.split(",")] if args.shared_copies else []:
            sources[f"shared x{n}"] = shared_copies(work, n)
        for size in [int(s) for s in args.growth.split(",")] if args.growth else []:
            folder = work / f"synthetic-{size}"
            if not folder.is_dir():
                synthetic_corpus(folder, size)
            sources[f"synthetic {size}"] = folder
        if args.first_pass:
            results = first_pass_sides(sources, work, args.model, args.baseline_rev)
            sources = {}
        else:
            results = {"model": args.model or "default", "runs": {}}
        for name, source in sources.items():
            print(f"bench_ingest_scale: {name} ({source})", file=sys.stderr, flush=True)
            run = run_ingest(source, work / "store", args.model, args.poll, args.jobs)
            if not args.no_raw and args.model != "hash":
                run["raw_encode"] = raw_encode(source, args.model, args.sample)
            results["runs"][name] = run
            print(json.dumps({name: run}), file=sys.stderr, flush=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
