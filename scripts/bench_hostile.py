"""Time and peak memory of `semfs ingest` over a folder of hostile documents, first run and
unchanged re-runs (issue 29: every re-run cost 83 s and 2.09 GB, the skipped files extracted
again each time).

The folder: DOCX files whose document.xml holds --inflate MiB of zeros but declares 1,000
bytes (a "lying" member), and one whose directory claims 4 GB (a plain zip bomb). Each run is
a fresh `semfs ingest --model hash --json` process; peak RSS is the largest of it and its
children (the extraction worker), from getrusage in a wrapper process per run.

    .venv/bin/python scripts/bench_hostile.py
    PYTHONPATH=/path/to/other/semfs .venv/bin/python scripts/bench_hostile.py   # another version
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.docfixtures import _claims_huge, docx_with, lying_zip  # noqa: E402

# Run in a fresh interpreter: the semfs command, then the peak RSS (KiB) of it and its children.
_WRAPPER = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(proc.stderr)
print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(proc.stdout)
"""


def build(folder: Path, files: int, inflate_mib: int) -> None:
    folder.mkdir(parents=True)
    # A whole Word package, so that python-docx reaches document.xml (the liar).
    real = zipfile.ZipFile(io.BytesIO(docx_with("text")))
    parts = {n: real.read(n) for n in real.namelist() if n != "word/document.xml"}
    for i in range(files):
        lying = lying_zip("word/document.xml", inflate_mib << 20, extra=parts)
        (folder / f"lying-{i}.docx").write_bytes(lying)
    (folder / "bomb.docx").write_bytes(_claims_huge(b"word/document.xml", b"<w:document/>"))
    (folder / "fine.md").write_text("# Fine\n\nan ordinary page\n")


def run(source: Path, store: Path) -> tuple[float, int, dict[str, object]]:
    semfs = Path(sys.executable).with_name("semfs")
    cmd = [str(semfs), "ingest", str(source), "--store", str(store), "-m", "hash", "--json"]
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True, check=True
    )
    seconds = time.perf_counter() - started
    status, rss_kib = out.stdout.splitlines()[0].split()
    if status != "0":
        sys.exit(f"semfs ingest exited {status}: {out.stderr}")
    report = json.loads("\n".join(out.stdout.splitlines()[1:]))
    return seconds, int(rss_kib) * 1024, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=4, help="lying DOCX files")
    parser.add_argument("--inflate", type=int, default=1024, help="MiB each lying member holds")
    parser.add_argument("--reruns", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="semfs-hostile-") as tmp:
        source, store = Path(tmp) / "src", Path(tmp) / "store"
        build(source, args.files, args.inflate)
        for label in ["first run", *(f"unchanged re-run {i + 1}" for i in range(args.reruns))]:
            seconds, rss, report = run(source, store)
            skipped = report.get("skipped", [])
            assert isinstance(skipped, list)
            print(f"{label}: {seconds:.1f} s, peak RSS {rss / 2**20:.0f} MiB")
            for skip in skipped[-2:]:  # the bomb and a lying file
                print(f"    {skip['path']}: {skip['reason']}")


if __name__ == "__main__":
    main()
