"""Damage that is named and repairable (issue 21 item 7): bytes changed in a real store's
files on disk, then the real commands. Each either names the damaged documents or says the
store must be rebuilt, in one line, and `semfs check --rebuild SOURCE` brings it back."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from tests.helpers import SEMFS
from tests.helpers.mounting import semfs


def _store(src: Path, store: Path) -> Path:
    """The ingested store's one segment folder."""
    semfs("ingest", str(src), "--store", str(store), "--model", "hash")
    (segment,) = (store / "docs" / "shard" / "segments").iterdir()
    return segment


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SEMFS, *args], capture_output=True, text=True, timeout=120)


def _rebuilt(src: Path, store: Path) -> None:
    rebuilt = _run("check", "--store", str(store), "--rebuild", str(src), "-m", "hash")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert "set the damaged shard aside" in rebuilt.stdout and "ok: " in rebuilt.stdout
    assert list((store / "docs").glob("shard.damaged-*"))


def test_random_bytes_in_the_payload_page_are_named(sample_copy: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    page = _store(sample_copy, store) / "payload_storage" / "page_0.dat"
    assert page.stat().st_blocks * 512 > 256 * 1024  # the bytes land inside stored payloads
    with open(page, "r+b") as f:
        f.seek(200 * 1024)
        f.write(random.Random(21).randbytes(4096))
    out = _run("check", "--store", str(store))
    assert out.returncode == 1
    named = [line for line in out.stdout.splitlines() if line.startswith("damaged: ")]
    if named:  # the documents whose points cannot be decoded, by path
        paths = [line.split(": ")[1] for line in named]
        assert all((sample_copy / p).is_file() for p in paths), named
        assert "semfs check --rebuild SOURCE" in out.stdout
    else:  # no record is readable: one line saying so
        assert out.stderr.count("\n") == 1 and "must be rebuilt" in out.stderr, out.stderr
    # Pruning in place cannot delete what the engine cannot decode: one line, the way out.
    fixing = _run("check", "--prune", "--store", str(store))
    errors = [line for line in fixing.stderr.splitlines() if line.startswith("Error: ")]
    assert fixing.returncode == 1 and len(errors) == 1, fixing.stderr
    assert "semfs check --rebuild SOURCE" in errors[0]
    # Nor can repairing; but where the engine cannot even load the shard (which of the two
    # the bytes cause varies from run to run), --repair SOURCE rebuilds it from SOURCE.
    fixing = _run("check", "--repair", str(sample_copy), "--store", str(store))
    errors = [line for line in fixing.stderr.splitlines() if line.startswith("Error: ")]
    if fixing.returncode == 0:
        assert "set the damaged shard aside" in fixing.stdout, fixing.stdout
        assert not errors and "ok: " in _run("check", "--store", str(store)).stdout
    else:
        assert fixing.returncode == 1 and len(errors) == 1, fixing.stderr
        assert "semfs check --rebuild SOURCE" in errors[0]
    _rebuilt(sample_copy, store)


def test_a_truncated_vector_file_fails_check(sample_copy: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    vectors = _store(sample_copy, store) / "vector_storage-dense" / "vectors" / "chunk_0.mmap"
    with open(vectors, "r+b") as f:
        f.truncate(4096)
    assert _run("search", "status code", "--store", str(store)).returncode == 1
    out = _run("check", "--store", str(store))
    assert out.returncode == 1
    assert "damaged store: its dense vectors cannot be read" in out.stdout, out.stdout
    _rebuilt(sample_copy, store)
    assert _run("search", "status code", "--store", str(store)).returncode == 0


def test_a_zeroed_payload_tracker_is_one_line_naming_the_damage(
    sample_copy: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    payload = _store(sample_copy, store) / "payload_storage"
    for name in ("tracker.dat", "tracker_journal.dat"):
        path = payload / name
        path.write_bytes(b"\0" * path.stat().st_size)
    (store / "docs" / "manifest.json.gz").unlink()  # else status answers from it, unharmed
    for args in (("status",), ("check",), ("search", "status code")):
        out = _run(*args, "--store", str(store))
        assert out.returncode == 1, out
        assert out.stderr.count("\n") == 1 and "KeyError" not in out.stderr, out.stderr
        assert "is damaged: its meta point has no readable payload" in out.stderr
        assert "semfs check --rebuild SOURCE" in out.stderr
    _rebuilt(sample_copy, store)


def _undecodable_store(tmp_path: Path) -> tuple[Path, Path]:
    """A store whose payload page starts with random bytes (no manifest to answer from)."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"d{i}.md").write_text(f"# Doc {i}\n\nthe quick brown fox number {i}\n")
    store = tmp_path / "store"
    page = _store(src, store) / "payload_storage" / "page_0.dat"
    with open(page, "r+b") as f:
        f.write(random.Random(1).randbytes(8192))
    (store / "docs" / "manifest.json.gz").unlink()  # else status answers from it, unharmed
    return src, store


def _one_damage_line(out: subprocess.CompletedProcess[str]) -> None:
    assert out.returncode == 1, out
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("Error: the store is damaged: "), out.stderr
    assert "semfs check --rebuild SOURCE" in out.stderr


def test_undecodable_payloads_are_one_damage_line_with_the_way_out(tmp_path: Path) -> None:
    """Issue 29: random bytes at the start of the payload page made status, search and
    ingest print `Exception: Service runtime error: Failed to decode value` and no way out."""
    src, store = _undecodable_store(tmp_path)
    for args in (("status",), ("search", "fox"), ("ingest", str(src))):
        _one_damage_line(_run(*args, "--store", str(store)))
    _rebuilt(src, store)


@pytest.mark.mount
def test_a_mount_of_undecodable_payloads_fails_with_the_damage_line(tmp_path: Path) -> None:
    _src, store = _undecodable_store(tmp_path)
    (tmp_path / "mnt").mkdir()
    _one_damage_line(semfs("mount", str(tmp_path / "mnt"), "--store", str(store), check=False))
    assert not os.path.ismount(tmp_path / "mnt")
