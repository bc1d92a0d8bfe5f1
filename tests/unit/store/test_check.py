"""A damaged store says so: `semfs check`, `ingest --verify`, the mount's sha256 check, and an
engine that panics or aborts on damaged files reported in one line (real Edge stores)."""

from __future__ import annotations

import json
import random
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from semfs.ingest.errors import StoreDamagedError
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.schema import ChunkPoint, chunk_id
from tests.helpers.mounting import ingest_hash, mounted, semfs


def damage_text(store: Path, path: str) -> None:
    """Change one chunk's stored text in place, same length: what bit rot looks like."""
    with open_store(CollectionAddress(store=store)) as s:
        rec = s.get_document(path)
        assert rec is not None and rec.chunks > 0
        chunk = s.get_chunks(path, rec.gen, [rec.chunks - 1])[0]
        text = chunk.text
        i = next(k for k, ch in enumerate(text) if ch.isalpha())
        bad = text[:i] + ("X" if text[i] != "X" else "Y") + text[i + 1 :]
        dim = s.read_meta().dimension  # type: ignore[union-attr]
        s.upsert_chunks([ChunkPoint(replace(chunk, text=bad), [0.1] * dim, [1], [1.0])])


def drop_chunk(store: Path, path: str) -> None:
    with open_store(CollectionAddress(store=store)) as s:
        rec = s.get_document(path)
        assert rec is not None
        shard = s.shard  # type: ignore[attr-defined]
        import qdrant_edge as qe

        shard.update(qe.UpdateOperation.delete_points([chunk_id(path, rec.gen, 0)]))


def test_check_finds_damage_and_verify_repairs_it(sample_copy: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    assert semfs("check", "--store", str(store)).stdout.startswith("ok: ")
    damage_text(store, "quickstart.mdx")
    drop_chunk(store, "components/tabs.mdx")

    proc = semfs("check", "--store", str(store), check=False)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines == [
        "damaged store: the last ingest left 42 documents and 377 chunks, the store now holds "
        "42 and 376",
        "damaged: components/tabs.mdx: chunk 0 of generation 1 is missing",
        "damaged: quickstart.mdx: its chunks do not hash to its sha256 (the stored text was "
        "changed)",
        # Before (issue 39.0): nothing said how to repair it.
        "note: to repair, re-ingest the damaged documents from their folder: semfs check "
        f"--repair {sample_copy} --store {store} (or --prune to delete them)",
    ], lines
    # A plain ingest trusts the hashes: the source did not change.
    plain = json.loads(semfs("ingest", str(sample_copy), "--store", str(store), "--json").stdout)
    assert plain["updated"] == 0
    verified = semfs("ingest", str(sample_copy), "--store", str(store), "--verify", "--json")
    report = json.loads(verified.stdout)
    assert report["repaired"] == ["components/tabs.mdx", "quickstart.mdx"]
    assert semfs("check", "--store", str(store)).stdout.startswith("ok: ")


def test_check_repair_and_prune(sample_copy: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    damage_text(store, "quickstart.mdx")
    found = json.loads(semfs("check", "--store", str(store), "--json", check=False).stdout)
    suggested = shlex.split(found["repair"])  # the command check suggests, as it is
    assert suggested[:4] == ["semfs", "check", "--repair", str(sample_copy)]
    out = semfs(*suggested[1:]).stdout
    assert "repaired: quickstart.mdx" in out and out.splitlines()[-1].startswith("ok: ")
    damage_text(store, "index.mdx")
    out = semfs("check", "--store", str(store), "--prune").stdout
    assert "pruned: index.mdx" in out and out.splitlines()[-1].startswith("ok: ")
    with open_store(CollectionAddress(store=store)) as s:
        assert s.get_document("index.mdx") is None
    # The pruned document is counted out: not a damaged store.
    assert semfs("status", "--store", str(store)).returncode == 0


@pytest.mark.mount
def test_mount_logs_a_sha256_mismatch_after_a_full_read(sample_copy: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    damage_text(store, "quickstart.mdx")
    expect = ["do not match its sha256"]
    with mounted(tmp_path / "mnt", "--store", str(store), expect_log=expect) as m:
        (m.path / "index.mdx").read_bytes()  # sound: nothing logged
        served = (m.path / "quickstart.mdx").read_bytes()
    assert served != (sample_copy / "quickstart.mdx").read_bytes()
    log = m.log_text()
    bad = [line for line in log.splitlines() if "do not match its sha256" in line]
    assert len(bad) == 1 and "quickstart.mdx" in bad[0] and "semfs check" in bad[0], log


def _segment(store: Path) -> Path:
    return next((store / "docs" / "shard" / "segments").iterdir())


def _garble(path: Path, seed: int) -> None:
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    at = rng.randrange(len(data) // 2)
    data[at : at + 16] = bytes(rng.randrange(256) for _ in range(16))
    path.write_bytes(data)


@pytest.mark.mount
@pytest.mark.parametrize("damage", ["truncated status.dat", "garbled id tracker"])
def test_an_engine_crash_is_one_line_and_check_rebuilds(
    damage: str, sample_copy: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    seg = _segment(store)
    if damage == "truncated status.dat":
        next(seg.rglob("status.dat")).write_bytes(b"")  # Rust panic before
    else:
        _garble(next(seg.glob("*id_tracker.mappings")), 1)  # a 45 GB allocation abort before
    for args in (["status"], ["search", "deploy"], ["check"]):
        proc = semfs(*args, "--store", str(store), check=False)
        assert proc.returncode == 1, (args, proc.returncode, proc.stderr[-3000:])
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f"store {store / 'docs'} is damaged" in proc.stderr
        assert "semfs check" in proc.stderr
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    proc = semfs("mount", str(mnt), "--store", str(store), check=False)
    assert proc.returncode == 1 and "is damaged" in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr

    out = semfs("check", "--store", str(store), "--repair", str(sample_copy), "-m", "hash")
    assert out.stdout.splitlines()[-1].startswith("ok: ")
    assert semfs("status", "--store", str(store)).returncode == 0


@pytest.mark.mount
def test_a_truncated_id_tracker_is_not_an_empty_store(sample_copy: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    next(_segment(store).glob("*id_tracker.mappings")).write_bytes(b"")
    proc = semfs("status", "--store", str(store), check=False)
    assert proc.returncode == 1
    assert "is damaged: the last ingest left" in proc.stderr and "semfs check" in proc.stderr
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    proc = semfs("mount", str(mnt), "--store", str(store), check=False)
    assert proc.returncode == 1 and "is damaged" in proc.stderr
    semfs("check", "--store", str(store), "--repair", str(sample_copy))
    assert semfs("status", "--store", str(store)).returncode == 0


def test_an_engine_error_at_a_deferred_load_is_one_line(sample_copy: Path, tmp_path: Path) -> None:
    """Opened from its manifest, a store loads its shard on first need; if the engine then
    fails, the error names the store in one line instead of the engine's bare exception."""
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    with open_store(CollectionAddress(store=store)) as s:
        config = next(store.glob("*/shard/edge_config.json"))
        config.write_text("{broken")  # after the open's probe: only the load can see it
        # Bytes the engine cannot decode are damage: the line names the file and the way out.
        with pytest.raises(StoreDamagedError, match=r"is damaged: .*edge_config.*check --rebuild"):
            s.get_document("quickstart.mdx")


def test_an_ok_says_what_it_does_not_verify(sample_copy: Path, tmp_path: Path) -> None:
    """Issue 29: flipped bytes in the dense vectors or the text index passed `semfs check`,
    whose ok said nothing of what it had not looked at."""
    store = tmp_path / "store"
    ingest_hash(sample_copy, store)
    ok = semfs("check", "--store", str(store)).stdout
    assert "not verified: the dense vectors' values, the keyword index" in ok
    checked = json.loads(semfs("check", "--store", str(store), "--json").stdout)
    assert [w.split(" (")[0] for w in checked["not_verified"]] == [
        "the dense vectors' values",
        "the keyword index",
    ]


def test_files_stored_as_they_are_pass_check_and_read(tmp_path: Path) -> None:
    """Issue 46 attack 7: a PNG and a PDF no extractor opens, served byte for byte, were
    reported damaged by `semfs check` ("its chunks hold 0 bytes"); `--prune` deleted them and
    `Collection.read()` refused them. Their stored bytes are what check verifies."""
    from semfs.ingest.collection import open_collection
    from tests.helpers.docfixtures import make_bad

    src = tmp_path / "src"
    make_bad(tmp_path / "bad")
    src.mkdir()
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
    (src / "logo.png").write_bytes(png)
    (src / "broken.pdf").write_bytes((tmp_path / "bad" / "broken.pdf").read_bytes())
    (src / "notes.md").write_text("# Notes\n\nA plain note.\n")
    store = tmp_path / "store"
    report = ingest_hash(src, store)
    assert {s.path for s in report.unsearched} >= {"broken.pdf"}
    out = semfs("check", "--store", str(store)).stdout
    assert out.startswith("ok: 3 documents"), out
    pruned = semfs("check", "--store", str(store), "--prune").stdout
    assert "pruned" not in pruned, pruned
    with open_collection(CollectionAddress(store=store)) as c:
        assert c.read("logo.png") == png
        assert c.read("broken.pdf") == (src / "broken.pdf").read_bytes()
    # Damage to such bytes is still found.
    with open_store(CollectionAddress(store=store)) as s:
        rec = s.get_document("logo.png")
        assert rec is not None and rec.as_is
        s.put_blob("logo.png", rec.gen, b"\x89PNG not the bytes that were ingested")
    found = semfs("check", "--store", str(store), check=False)
    assert found.returncode != 0 and "logo.png: its stored original logo.png" in found.stdout


def test_counts_taken_before_an_ingest_commits_are_not_damage(tmp_path: Path) -> None:
    """A status or a mount start counts the documents, then an ingest commits its last ones
    and writes its meta: against the meta read before the counts, that is no damage (a status
    at the end of a 103k-chunk first pass said 'damaged: ... left 6217 documents ..., the store
    now holds 6212'). A store that really lost points is still damage."""
    from semfs.ingest.store.check import require_counts

    src = tmp_path / "src"
    src.mkdir()
    for name in ("a", "b"):
        (src / f"{name}.md").write_text(f"# {name}\n\nthe {name} page, with words of its own.\n")
    store = tmp_path / "store"
    ingest_hash(src, store)
    with open_store(CollectionAddress(store=store)) as s:
        meta = s.read_meta()
        documents, chunks = len(s.list_documents()), s.count_chunks()
    (src / "c.md").write_text("# c\n\nthe last page, committed after the counts were taken.\n")
    ingest_hash(src, store)
    with open_store(CollectionAddress(store=store)) as s:
        require_counts(s, documents, chunks, meta)
        require_counts(s, documents + 1, chunks + 1)  # counted after the commit: no race
        with pytest.raises(StoreDamagedError, match="left 3 documents"):
            require_counts(s, documents, chunks)  # the meta read after the counts
