"""Files skipped for what their bytes hold, remembered so that an unchanged one costs nothing.

A converted file that the extractor refuses (a zip bomb, a document whose text is over
``--max-size``, one that takes too long or sinks the worker) cost its whole extraction on
every run: a folder of hostile files took 83 s and 2 GB each time, unchanged. So the reason
is kept with the file's size, mtime and sha256 and the extractor's tag; while all four are
the same, the file is skipped with its reason without being extracted again
(``semfs ingest --retry-skipped`` forgets them all first).

Rules a caller may rely on:

* Only a skip decided by the bytes is remembered (``Skipped.fingerprint`` set): never an
  unreadable file, a file over ``--max-size`` (that costs a ``stat``), or a link refused.
* The memory is a local file beside the collection's other local state (``skipped.json``,
  owner-only, replaced atomically; for a Qdrant server under the default store folder). A
  damaged or missing one is an empty memory: the files are tried again, nothing fails.
* At most :data:`MAX_ENTRIES` files are kept (the newest run's first).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Collection, Iterable
from pathlib import Path

from semfs.ingest.sources import Fingerprint, Skipped
from semfs.ingest.store.address import CollectionAddress

logger = logging.getLogger(__name__)

MEMO_NAME = "skipped.json"
FORMAT = 1
# One entry is ~200 bytes of JSON: 20 MB at the bound, read once per run.
MAX_ENTRIES = 100_000


def memo_file(address: CollectionAddress) -> Path:
    """Where the skipped files of the collection at ``address`` are remembered."""
    return address.local_dir / MEMO_NAME


class SkipMemo:
    """The remembered skips of one collection: path -> (fingerprint, reason)."""

    def __init__(self, path: Path | None, entries: dict[str, tuple[Fingerprint, str]]) -> None:
        self.path = path
        self.entries = entries

    @classmethod
    def load(cls, path: Path | None) -> SkipMemo:
        entries: dict[str, tuple[Fingerprint, str]] = {}
        if path is None:
            return cls(None, entries)
        try:
            body = json.loads(path.read_bytes())
            if body.get("format") == FORMAT:
                for rel, (size, mtime_ns, sha256, tag, reason) in body["files"].items():
                    entries[str(rel)] = (
                        Fingerprint(int(size), int(mtime_ns), str(sha256), str(tag)),
                        str(reason),
                    )
        except FileNotFoundError:
            pass
        except Exception as exc:  # any damage: forget, and try the files again
            logger.warning("ignoring %s: %s", path, exc)
            entries = {}
        return cls(path, entries)

    def reason(self, rel: str, fingerprint: Fingerprint) -> str | None:
        """The reason ``rel`` was skipped, if it is unchanged since."""
        found = self.entries.get(rel)
        return found[1] if found is not None and found[0] == fingerprint else None

    def update(self, only: Collection[str] | None, skipped: Iterable[Skipped]) -> None:
        """After a run over ``only`` (None: the whole source): its fingerprinted skips
        replace what was remembered there; entries outside them stay."""
        if only is None:
            self.entries = {}
        else:
            for rel in [r for r in self.entries if _in(r, only)]:
                del self.entries[rel]
        for s in skipped:
            if s.fingerprint is not None and len(self.entries) < MAX_ENTRIES:
                self.entries[s.path] = (s.fingerprint, s.memo_reason or s.reason)

    def save(self) -> None:
        """Write the memory (owner-only, atomically); a failure is logged, never raised."""
        if self.path is None:
            return
        files = {
            rel: [fp.size, fp.mtime_ns, fp.sha256, fp.extractor, reason]
            for rel, (fp, reason) in sorted(self.entries.items())
        }
        try:
            if not files and not self.path.exists():
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".skipped-")
            with os.fdopen(fd, "w") as f:  # mkstemp makes it 0600
                json.dump({"format": FORMAT, "files": files}, f)
            os.replace(tmp, self.path)
        except OSError as exc:
            logger.warning("cannot remember the skipped files in %s: %s", self.path, exc)


def _in(rel: str, only: Collection[str]) -> bool:
    return any(rel == p or rel.startswith(p + "/") for p in only)
