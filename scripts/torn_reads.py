#!/usr/bin/env python3
"""Read every file of a mount in parallel loops while `semfs ingest` rewrites them all.

Issue 9's test of what a reader sees during a re-ingest: N ``cat`` loops (one ``sh``
process each, every file in turn) over the mount, while the source cycles through three
versions of every file (the original, a longer one, a shorter one) and ``semfs ingest``
writes each round through the mount's daemon. Every read is compared with the versions of
its file; one that matches none is bad (a torn read: new bytes cut to the old size, or
padded with NULs), and a failed ``cat`` is an error. The embedder is ``--model hash``: the
model is not what is tested.

Prints one JSON object: reads, bad, errors, rounds, seconds and up to 5 examples. Exit 0
only when bad and errors are both 0.

Example:
    .venv/bin/python scripts/torn_reads.py --readers 8 --min-reads 500000 \\
        --corpus ../shared/corpora/mintlify-docs
    .venv/bin/python scripts/torn_reads.py --readers 4 --min-reads 5000 --rounds 3
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

REPO = Path(__file__).resolve().parents[1]
SEMFS = str(Path(sys.executable).with_name("semfs"))
# Printed after each file by the reader loops; cannot occur in text, NUL padding included.
MARK = b"\x00\x01SEMFS-READ-END\x01\x00"
ERR = b"\x01SEMFS-CAT-FAILED\x01"
READER = (
    'while :; do for f in "$@"; do cat -- "$f" 2>/dev/null || printf "\\001SEMFS-CAT-FAILED\\001"; '
    'printf "\\000\\001SEMFS-READ-END\\001\\000"; done; done'
)


def versions(original: bytes) -> list[bytes]:
    """Three versions of different sizes: torn reads show up against both neighbours.

    Cuts fall on character boundaries: a version that is not UTF-8 would not be ingested.
    """
    text = original.decode("utf-8", "surrogateescape")
    longer = text + "\n<!-- revised -->\n" + text[: len(text) // 2]
    shorter = text[: max(1, len(text) // 3)] + "\n<!-- cut -->\n"
    return [original, *(v.encode("utf-8", "surrogateescape") for v in (longer, shorter))]


def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kwargs)


class Reader(threading.Thread):
    """One `sh` loop of `cat` over ``files``; checks each read against ``known``."""

    def __init__(self, mnt: Path, files: list[str], known: dict[str, set[bytes]]) -> None:
        super().__init__(daemon=True)
        self.files = files
        self.known = known
        self.reads = self.bad = self.errors = 0
        self.examples: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            ["sh", "-c", READER, "sh", *(str(mnt / f) for f in files)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def run(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        index = 0
        while chunk := os.read(self.proc.stdout.fileno(), 1 << 20):
            buf += chunk
            *done, buf = buf.split(MARK)
            for data in done:
                rel = self.files[index % len(self.files)]
                index += 1
                self.reads += 1
                if data.endswith(ERR):
                    self.errors += 1
                    self._example(rel, "cat failed", data)
                elif data not in self.known[rel]:
                    self.bad += 1
                    self._example(rel, _kind(data, self.known[rel]), data)

    def _example(self, rel: str, kind: str, data: bytes) -> None:
        if len(self.examples) < 5:
            sizes = sorted(len(v) for v in self.known[rel])
            self.examples.append({"path": rel, "kind": kind, "size": len(data), "versions": sizes})

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.join(10)


def _kind(data: bytes, known: set[bytes]) -> str:
    stripped = data.rstrip(b"\x00")
    if stripped != data and any(v == stripped for v in known):
        return "NUL-padded"
    if any(v.startswith(data) for v in known):
        return "cut short"
    return "mixed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "tests/corpus/mintlify-sample")
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--min-reads", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3, help="at least this many re-ingests")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="semfs-torn-"))
    src, store, mnt = work / "src", work / "store", work / "mnt"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(args.corpus, src, ignore=shutil.ignore_patterns(".git"))
    files = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    originals = {rel: (src / rel).read_bytes() for rel in files}
    known = {rel: set(versions(data)) for rel, data in originals.items()}
    mnt.mkdir(parents=True, exist_ok=True)
    ingest = [SEMFS, "ingest", str(src), "--store", str(store), "--model", "hash"]
    run(ingest)
    run([SEMFS, "mount", str(mnt), "--store", str(store), "--log-file", str(work / "mount.log")])
    readers: list[Reader] = []
    rounds = 0
    started = time.monotonic()
    try:
        readers = [Reader(mnt, files, known) for _ in range(args.readers)]
        for reader in readers:
            reader.start()
        while rounds < args.rounds or sum(r.reads for r in readers) < args.min_reads:
            rounds += 1
            for rel, data in originals.items():
                (src / rel).write_bytes(versions(data)[rounds % 3])
            run(ingest)  # through the mount's daemon: it owns the store
    finally:
        for reader in readers:
            reader.stop()
        subprocess.run([SEMFS, "umount", str(mnt)], capture_output=True, check=False)
    result = {
        "reads": sum(r.reads for r in readers),
        "bad": sum(r.bad for r in readers),
        "errors": sum(r.errors for r in readers),
        "rounds": rounds,
        "files": len(files),
        "readers": args.readers,
        "seconds": round(time.monotonic() - started, 1),
        "examples": [e for r in readers for e in r.examples][:5],
    }
    print(json.dumps(result))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if result["bad"] == 0 and result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
