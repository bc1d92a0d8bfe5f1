#!/usr/bin/env python3
"""Benchmark the writable workspace (`semfs mount MNT --watch SRC --writable`), beside native.

Each figure is a ratio against the same work done directly in the source folder, in the
same run, alternating the two (best of ``--repeat``):

* ``seq_write``: one 100 MB file written in 1 MiB writes (``dd bs=1M``), closed; throughput
  through the mount / throughput into SRC. Target >= 0.5.
* ``cp_small``: ``cp -r`` of 1,000 small files (10 folders of 100, 0.5-4 KB) into the mount /
  into SRC. Target <= 3x.
* ``close_to_hit``: a new file written and closed through the mount, until a keyword query
  folder of the mount lists it (``.search/@keyword/WORD/``), over ``--edits`` files; p50 and
  p95, beside the batch time the watcher reports (chunking, embedding, commit). Target: p50
  <= 1 s with the hash model, <= 1 s plus the embedding time with the real model
  (``--model``, slow: the model loads once).
* ``tar_x``: the mintlify-docs tree (``--corpus``) extracted with ``tar x`` into an empty
  writable mount, then ``diff -r`` against the tree: its output must be empty; the time
  beside ``tar x`` into an empty folder of the same disk.

The daemon is let settle (its watcher idle) between measurements, so that one's ingest does
not slow the next.

Example:
    .venv/bin/python scripts/bench_writable.py --workdir /var/tmp
    .venv/bin/python scripts/bench_writable.py --model all-MiniLM-L6-v2 --edits 10
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.syncstate import load_state, state_file

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpora" / "mintlify-docs"
SEMFS = shutil.which("semfs", path=str(Path(sys.executable).parent)) or "semfs"
POLL = 0.01


def wait_for(pred: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.perf_counter()
    while not pred():
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(POLL)
    return time.perf_counter() - start


def settled(store: Path) -> bool:
    state = load_state(state_file(CollectionAddress("docs", store=store)))
    return state is not None and state.batches > 0 and state.pending == 0


def settle(store: Path) -> None:
    """Wait until the watcher has nothing pending, twice 0.3 s apart (a batch may follow)."""
    for _ in range(2):
        wait_for(lambda: settled(store), 600, "the watcher to settle")
        time.sleep(0.3)


@contextmanager
def writable_mount(work: Path, name: str, model: str) -> Iterator[tuple[Path, Path, Path]]:
    """(mountpoint, source, store) of a fresh background writable mount; always unmounted."""
    src, mnt, store = work / f"{name}-src", work / f"{name}-mnt", work / f"{name}-store"
    for p in (src, mnt):
        p.mkdir(parents=True)
    log = work / f"{name}.log"
    args = ["--store", str(store), "--watch", str(src), "--writable", "-m", model]
    subprocess.run([SEMFS, "mount", str(mnt), *args, "--log-file", str(log)], check=True)
    try:
        wait_for(lambda: settled(store), 1800, "the first pass")
        yield mnt, src, store
    finally:
        subprocess.run([SEMFS, "umount", str(mnt)], check=False, timeout=120)


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def small_tree(root: Path) -> Path:
    rnd = random.Random(7)
    tree = root / "small"
    for d in range(10):
        folder = tree / f"d{d}"
        folder.mkdir(parents=True)
        for f in range(100):
            words = " ".join(rnd.choice(("alpha", "beta", "gamma", "delta")) for _ in range(400))
            (folder / f"f{f}.md").write_text(words[: rnd.randint(500, 4000)] + "\n")
    return tree


def seq_write(mnt: Path, src: Path, store: Path, repeat: int) -> dict[str, Any]:
    native: list[float] = []
    mounted: list[float] = []
    for i in range(repeat):
        for where, out in ((src, native), (mnt, mounted)):
            target = where / f"seq{i}.bin"
            out.append(timed(["dd", "if=/dev/zero", f"of={target}", "bs=1M", "count=100"]))
            (where / f"seq{i}.bin").unlink()
            settle(store)
    mb = 100 * 1024 * 1024 / 1e6
    return {
        "native_MBps": round(mb / min(native), 1),
        "mount_MBps": round(mb / min(mounted), 1),
        "ratio": round(min(native) / min(mounted), 2),
    }


def cp_small(mnt: Path, src: Path, store: Path, tree: Path, repeat: int) -> dict[str, Any]:
    native: list[float] = []
    mounted: list[float] = []
    for i in range(repeat):
        for where, out in ((src, native), (mnt, mounted)):
            target = where / f"cp{i}"
            out.append(timed(["cp", "-r", str(tree), str(target)]))
            settle(store)
            shutil.rmtree(target)
            settle(store)
    return {
        "native_s": round(min(native), 3),
        "mount_s": round(min(mounted), 3),
        "ratio": round(min(mounted) / min(native), 2),
    }


def close_to_hit(mnt: Path, store: Path, edits: int) -> dict[str, Any]:
    rnd = random.Random(11)
    latencies, batches = [], []
    (mnt / "notes").mkdir(exist_ok=True)
    settle(store)
    for i in range(edits):
        word = "".join(rnd.choices("bcdfghjklmnpqrstvwxz", k=6)) + "ium"
        rel = f"notes/n{i}.md"
        before = load_state(state_file(CollectionAddress("docs", store=store)))
        text = f"# Note {i}\n\nThe build log says {word} failed twice.\n"
        with open(mnt / rel, "w") as f:
            f.write(text)
        start = time.perf_counter()
        query = mnt / ".search" / "@keyword" / word

        def hit(query: Path = query, rel: str = rel) -> bool:
            try:
                names = [n for n in os.listdir(query) if not n.endswith("-results.md")]
                return any(os.readlink(query / n).endswith("/" + rel) for n in names)
            except OSError:  # not listed yet, or a link renamed by a new ranking
                return False

        wait_for(hit, 600, f"a hit for {rel}")
        latencies.append(time.perf_counter() - start)
        after = load_state(state_file(CollectionAddress("docs", store=store)))
        if after and after.last_batch and (before is None or after.batches > before.batches):
            batches.append(after.last_batch.seconds)
        settle(store)
    q = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else latencies * 19
    return {
        "edits": edits,
        "p50_s": round(statistics.median(latencies), 3),
        "p95_s": round(q[18], 3),
        "batch_p50_s": round(statistics.median(batches), 3) if batches else None,
    }


def tar_x(work: Path, mnt: Path, store: Path, corpus: Path) -> dict[str, Any]:
    archive = work / "corpus.tar"
    subprocess.run(["tar", "-C", str(corpus), "-cf", str(archive), "."], check=True)
    native_tree = work / "native-tree"
    native_tree.mkdir()
    native = timed(["tar", "-C", str(native_tree), "-xf", str(archive)])
    mounted = timed(["tar", "-C", str(mnt), "-xf", str(archive)])  # the empty mount's root
    diff = subprocess.run(["diff", "-r", str(corpus), str(mnt)], capture_output=True, check=False)
    settle(store)
    return {
        "files": sum(len(f) for _, _, f in os.walk(corpus)),
        "native_s": round(native, 3),
        "mount_s": round(mounted, 3),
        "diff_r_lines": len(diff.stdout.splitlines()),
        "diff_r_status": diff.returncode,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--model", default=None, help="also time close -> hit with this model")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--parts", default="seq,cp,hit,tar", help="comma-separated: seq,cp,hit,tar")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    work = Path(tempfile.mkdtemp(prefix="semfs-bench-writable-", dir=args.workdir))
    out: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    try:
        with writable_mount(work, "hash", "hash") as (mnt, src, store):
            if "seq" in parts:
                out["seq_write_100MB"] = seq_write(mnt, src, store, args.repeat)
            if "cp" in parts:
                out["cp_r_1000_small"] = cp_small(mnt, src, store, small_tree(work), args.repeat)
            if "hit" in parts:
                out["close_to_hit_hash"] = close_to_hit(mnt, store, args.edits)
        if "tar" in parts:
            with writable_mount(work, "tar", "hash") as (mnt, _src, store):
                out["tar_x_mintlify_docs"] = tar_x(work, mnt, store, args.corpus)
        if args.model:
            with writable_mount(work, "model", args.model) as (mnt, _src, store):
                out["close_to_hit_model"] = close_to_hit(mnt, store, args.edits)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        out["load_after"] = os.getloadavg()[0]
        print(json.dumps(out, indent=2))  # what was measured, even when a part failed


if __name__ == "__main__":
    main()
