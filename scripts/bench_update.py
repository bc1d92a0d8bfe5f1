#!/usr/bin/env python3
"""Benchmark issue 30's updates without torch: documents embedded on the checked fp32 ONNX
export (this checkout) against torch (the same commands run by an older checkout, whose ingest
embeds with torch), in the same run, the two sides alternated.

* ``first``: ``semfs ingest CORPUS`` into a new store with an empty model cache: what a fresh
  install's first ingest pays (this checkout: torch's load, the export and its check, then the
  documents on ONNX Runtime).
* ``full``: ``semfs ingest CORPUS`` into a new store, the export cached: the ingest's own
  chunks/s (its ``--json`` report) and the command's wall time and peak RSS.
* ``update``: one file of an ingested copy of the corpus edited (a line appended), then
  ``semfs ingest COPY``: the command's wall time, process start included, and peak RSS.
* ``watch``: ``semfs ingest COPY --watch`` after its first pass and one edited file's batch:
  its resident memory (VmRSS) and peak (VmHWM).

Example (the baseline: the commit before issue 30's change):
    .venv/bin/python scripts/bench_update.py --baseline-rev 3bde287 --rounds 3
    .venv/bin/python scripts/bench_update.py --baseline-rev 3bde287 --only full \\
        --corpus ../shared/corpora/mintlify-docs --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.syncstate import load_state, state_file

REPO = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "tests" / "corpus" / "mintlify-sample"
SEMFS = shutil.which("semfs", path=str(Path(sys.executable).parent)) or "semfs"
SIDES = ("onnx", "torch")


def baseline_tree(rev: str, dest: Path) -> Path:
    """A PYTHONPATH folder whose ``semfs`` package is ``rev``'s code (``git archive``)."""
    src = dest / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    # The packaged model's files are put in the checkout by setup.py, not committed: the
    # baseline uses this checkout's (the same model either side).
    model = Path("ingest") / "embedding" / "all-MiniLM-L6-v2"
    if (REPO / model).is_dir() and not (src / model).exists():
        (src / model).symlink_to(REPO / model)
    package = dest / "py" / "semfs"
    package.mkdir(parents=True)
    for part in ("ingest", "fusefs"):
        (package / part).symlink_to(src / part)
    return dest / "py"


def timed_rss(cmd: Sequence[str], env: dict[str, str]) -> tuple[float, float, str, str]:
    """Wall seconds, peak RSS (MB, the child's own: wait4), stdout and stderr of ``cmd``."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    return wall, usage.ru_maxrss / 1024, stdout, stderr


def alternate(rounds: int, measure: Callable[[str, int], dict[str, Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {s: [] for s in SIDES}
    for r in range(rounds):
        for side in SIDES if r % 2 == 0 else SIDES[::-1]:
            out[side].append(measure(side, r))
    return out


def edit(source: Path, i: int) -> None:
    doc = sorted(p for p in source.rglob("*.md*") if p.is_file())[0]
    with doc.open("a") as f:
        f.write(f"\nEdit {i}: one more line about rotating the API key.\n")


def watcher_memory(side: str, env: dict[str, str], source: Path, store: Path) -> dict[str, Any]:
    """A watcher's VmRSS and VmHWM once its first pass and one edit's batch are committed."""
    cmd = [SEMFS, "ingest", str(source), "--store", str(store), "--watch"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:

        def batches() -> int:
            s = load_state(state_file(CollectionAddress("docs", store=store)))
            ok = s is not None and s.pid == proc.pid and s.pending == 0
            return s.batches if ok and s is not None else -1

        def wait(pred: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + 900
            while not pred():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{side} watcher: {what}: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
                time.sleep(0.2)

        wait(lambda: batches() >= 1, "no first pass")
        first = batches()
        edit(source, 1000)
        wait(lambda: batches() > first, "the edit was not synced")
        time.sleep(1)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline-rev", required=True, help="the torch side's commit")
    p.add_argument("--corpus", type=Path, default=SAMPLE_CORPUS)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", action="append", choices=["first", "full", "update", "watch"])
    p.add_argument("--work", type=Path, help="scratch folder [a temporary one, removed]")
    p.add_argument("--json", type=Path, help="write the figures here too")
    args = p.parse_args(argv)
    only = set(args.only or ["first", "full", "update", "watch"])
    work = Path(tempfile.mkdtemp(prefix="semfs-bench-update-", dir=args.work))
    try:
        base_path = baseline_tree(args.baseline_rev, work / "baseline")
        clean = {k: v for k, v in os.environ.items() if k not in ("SEMFS_STORE", "PYTHONPATH")}
        envs = {
            "onnx": {**clean, "SEMFS_MODEL_CACHE": str(work / "models-onnx")},
            "torch": {
                **clean,
                "SEMFS_MODEL_CACHE": str(work / "models-torch"),
                "PYTHONPATH": str(base_path),
            },
        }
        res: dict[str, Any] = {
            "corpus": str(args.corpus),
            "baseline_rev": args.baseline_rev,
            "load_start": os.getloadavg(),
        }

        def ingest(side: str, source: Path, store: Path) -> dict[str, Any]:
            cmd = [SEMFS, "ingest", str(source), "--store", str(store), "--json"]
            wall, rss, out, _err = timed_rss(cmd, envs[side])
            report = json.loads(out)
            return {
                "wall_s": wall,
                "rss_mb": rss,
                "chunks": report["chunks_embedded"],
                "chunks_per_s": report["chunks_embedded"] / report["seconds"],
            }

        # Each side's export made (and for "first" timed) before anything else is timed.
        first = {s: ingest(s, args.corpus, work / f"first-{s}") for s in SIDES}
        res["first"] = first if "first" in only else None
        if "full" in only:
            res["full"] = alternate(
                args.rounds, lambda s, r: ingest(s, args.corpus, work / f"full-{s}-{r}")
            )
        copies = {}
        for s in SIDES:
            copies[s] = work / f"copy-{s}"
            shutil.copytree(args.corpus, copies[s])
            ingest(s, copies[s], work / f"update-{s}")
        if "update" in only:

            def update(side: str, r: int) -> dict[str, Any]:
                edit(copies[side], r)
                cmd = [SEMFS, "ingest", str(copies[side]), "--store", str(work / f"update-{side}")]
                wall, rss, out, _ = timed_rss(cmd, envs[side])
                assert "updated 1," in out, out
                return {"wall_s": wall, "rss_mb": rss}

            res["update"] = alternate(args.rounds, update)
        if "watch" in only:
            res["watch"] = {
                s: watcher_memory(s, envs[s], copies[s], work / f"update-{s}") for s in SIDES
            }
        res["load_end"] = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(res)
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return 0


def print_table(res: dict[str, Any]) -> None:
    def med(side: str, section: str, key: str) -> float:
        return statistics.median(x[key] for x in res[section][side])

    rows = []
    if res.get("first"):
        f = res["first"]
        rows.append(
            ("first ingest, empty model cache: wall s", f["onnx"]["wall_s"], f["torch"]["wall_s"])
        )
    if res.get("full"):
        rows += [
            (
                "full ingest: chunks/s (report)",
                med("onnx", "full", "chunks_per_s"),
                med("torch", "full", "chunks_per_s"),
            ),
            ("full ingest: wall s", med("onnx", "full", "wall_s"), med("torch", "full", "wall_s")),
            (
                "full ingest: peak RSS MB",
                med("onnx", "full", "rss_mb"),
                med("torch", "full", "rss_mb"),
            ),
        ]
    if res.get("update"):
        rows += [
            (
                "one edited file, `semfs ingest`: wall s",
                med("onnx", "update", "wall_s"),
                med("torch", "update", "wall_s"),
            ),
            (
                "one edited file: peak RSS MB",
                med("onnx", "update", "rss_mb"),
                med("torch", "update", "rss_mb"),
            ),
        ]
    if res.get("watch"):
        w = res["watch"]
        rows += [
            ("watcher after an edit: VmRSS MB", w["onnx"]["VmRSS"], w["torch"]["VmRSS"]),
            ("watcher: VmHWM (peak) MB", w["onnx"]["VmHWM"], w["torch"]["VmHWM"]),
        ]
    print(f"corpus {res['corpus']}; load {res['load_start']} -> {res.get('load_end')}")
    print("| measurement | ONNX Runtime fp32 | torch | ONNX / torch |")
    print("|---|---:|---:|---:|")
    for name, a, b in rows:
        print(f"| {name} | {a:.2f} | {b:.2f} | {a / b:.2f} |")
    for section in ("full", "update"):
        if res.get(section):
            for side in SIDES:
                print(section, side, [round(x["wall_s"], 2) for x in res[section][side]])


if __name__ == "__main__":
    raise SystemExit(main())
