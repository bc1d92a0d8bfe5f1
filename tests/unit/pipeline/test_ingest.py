"""Ingest: mirror semantics, bad input, model guard, crash safety (real kill -9), the CLI."""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from semfs.fusefs.cli.group import cli
from semfs.ingest import densepass, writer
from semfs.ingest.errors import ModelMismatchError, SourceError
from semfs.ingest.pipeline import ingest
from semfs.ingest.store import DelegatingStore, Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.edge import store as edge_store
from semfs.ingest.store.edge.store import EdgeStore
from semfs.ingest.store.schema import DocumentRecord
from tests.helpers import SEMFS


def write(root: Path, rel: str, data: str | bytes) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_bytes(data.encode())
    return p


def stored_text(store: Store, path: str) -> str:
    """A document's text as a reader sees it: its committed generation's chunks in order."""
    rec = store.get_document(path)
    assert rec is not None, path
    chunks = store.get_chunks(path, rec.gen, list(range(rec.chunks)))
    assert len(chunks) == rec.chunks
    assert rec.offsets is not None and tuple(rec.offsets) == tuple(c.start for c in chunks)
    return "".join(c.text for c in chunks)


def test_mirror_semantics(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    write(src, "a.md", "# A\n\nalpha text\n")
    write(src, "dir/b.md", "# B\n\nbeta text\n")
    write(src, "c.txt", "gamma\n")
    with open_store(CollectionAddress(store=store_dir)) as store:
        r1 = ingest(src, store, model="hash")
        assert sorted(r1.added) == ["a.md", "c.txt", "dir/b.md"] and r1.chunks_embedded >= 3
        r2 = ingest(src, store)
        assert r2.chunks_embedded == 0 and len(r2.unchanged) == 3
        write(src, "a.md", "# A\n\nalpha text, edited\n")
        (src / "c.txt").unlink()
        write(src, "new.md", "new\n")
        r3 = ingest(src, store)
        assert r3.updated == ["a.md"] and r3.deleted == ["c.txt"] and r3.added == ["new.md"]
        assert r3.chunks_embedded == 2  # only the edited and the new file
        assert stored_text(store, "a.md") == "# A\n\nalpha text, edited\n"
        assert sorted(d.path for d in store.list_documents()) == ["a.md", "dir/b.md", "new.md"]
        assert store.chunk_versions() == {(d.path, d.gen) for d in store.list_documents()}


def test_chunks_reassemble_byte_for_byte(sample_copy: Path, store_dir: Path) -> None:
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(sample_copy, store, model="hash")
        for f in sample_copy.rglob("*"):
            if f.is_file():
                rel = f.relative_to(sample_copy).as_posix()
                assert stored_text(store, rel).encode() == f.read_bytes(), rel


def test_touch_updates_mtime_without_embedding(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    p = write(src, "a.md", "hello\n")
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash")
        os.utime(p, (1_000_000_000, 1_000_000_000))
        r = ingest(src, store)
        assert r.chunks_embedded == 0
        rec = store.get_document("a.md")
        assert rec is not None and rec.mtime == 1_000_000_000


def test_include_exclude_and_vcs(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    for rel in ["a.md", "b.mdx", "c.txt", "drafts/d.md", ".git/config", "sub/.hg/x", "docs.json"]:
        write(src, rel, "x\n")
    with open_store(CollectionAddress(store=store_dir)) as store:
        r = ingest(src, store, model="hash", include=["*.md", "*.mdx"], exclude=["drafts"])
        assert sorted(r.added) == ["a.md", "b.mdx"]
        r = ingest(src, store)
        assert sorted(r.added) == ["c.txt", "docs.json", "drafts/d.md"]  # mirrors again


def test_bad_input_is_skipped_with_reasons(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    write(src, "good.md", "fine\n")
    write(src, "binary.dat", b"\x89PNG\r\n\x00\x00data")
    write(src, "latin1.txt", "caf\xe9\n".encode("latin-1"))
    write(src, "empty.md", "")
    write(src, "big.txt", "x" * 2000)
    os.symlink("nowhere", src / "broken-link.md")
    os.symlink("loop2", src / "loop1")
    os.symlink("loop1", src / "loop2")
    os.symlink("good.md", src / "link-to-good.md")
    weird = ["with space.md", "new\nline.md", "ünïcödé ✓.md", "-leading-dash.md"]
    for name in weird:
        write(src, name, f"name {name!r}\n")
    unreadable = write(src, "secret.md", "no\n")
    unreadable.chmod(0)
    with open_store(CollectionAddress(store=store_dir)) as store:
        r = ingest(src, store, model="hash", max_bytes=1000)
    reasons = {s.path: s.reason for s in r.skipped}
    # Stored as they are (a mount serves every file), not searched, and why.
    stored = {s.path: s.reason for s in r.unsearched}
    assert "binary" in stored["binary.dat"]
    assert "not UTF-8" in stored["latin1.txt"]
    assert not set(stored) & set(reasons)
    assert "broken symlink" in reasons["broken-link.md"]
    assert "symlink loop" in reasons["loop1"] and "symlink loop" in reasons["loop2"]
    assert "too large" in reasons["big.txt"]
    if os.geteuid() != 0:  # root reads anything
        assert "unreadable" in reasons["secret.md"]
    assert set(r.added) >= {"good.md", "empty.md", "link-to-good.md", *weird}
    with open_store(CollectionAddress(store=store_dir)) as store:
        empty = store.get_document("empty.md")
        assert empty is not None and empty.size == 0 and empty.chunks == 0
        assert stored_text(store, "new\nline.md") == "name 'new\\nline.md'\n"


def test_missing_source_and_model_guard(tmp_path: Path, store_dir: Path) -> None:
    with open_store(CollectionAddress(store=store_dir)) as store:
        with pytest.raises(SourceError, match="does not exist"):
            ingest(tmp_path / "nope", store, model="hash")
        src = tmp_path / "src"
        write(src, "a.md", "a\n")
        ingest(src, store, model="hash")
        with pytest.raises(ModelMismatchError, match="built with model 'hash'"):
            ingest(src, store, model="hash:64")
        assert store.read_meta() is not None and store.read_meta().model == "hash"  # type: ignore[union-attr]


def _make_corpus(root: Path, n: int, version: str) -> dict[str, str]:
    rng = random.Random(n)
    texts = {}
    for i in range(n):
        paras = [
            f"{version} doc {i} para {j} " + " ".join(rng.choice("abcdefgh") * 3 for _ in range(60))
            for j in range(4)
        ]
        texts[f"d{i:03d}.md"] = "# Title\n\n" + "\n\n".join(paras) + "\n"
    for rel, text in texts.items():
        write(root, rel, text)
    return texts


def test_kill_9_leaves_every_document_old_or_new(tmp_path: Path, store_dir: Path) -> None:
    """Real SIGKILLs at several points of an ingest; every document stays whole."""
    src = tmp_path / "src"
    old = _make_corpus(src, 150, "old")
    with open_store(CollectionAddress(store=store_dir)) as store:
        ingest(src, store, model="hash")
    delays = [0.05, 0.15, 0.3, 0.5, 0.8, 1.2]
    kills = 0
    for round_, delay in enumerate(delays):
        new = _make_corpus(src, 150, f"new{round_}")
        env = {**os.environ, "SEMFS_STORE": str(store_dir)}
        proc = subprocess.Popen(
            [SEMFS, "ingest", str(src), "--batch-size", "4"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        with open_store(CollectionAddress(store=store_dir)) as store:
            # A mount would read its tree from this: never a manifest of another state.
            manifest = store.read_manifest()
            meta = store.read_meta()
            assert manifest is None or (manifest.meta == meta and meta is not None)
            if manifest is not None:
                docs = sorted(store.list_documents(), key=lambda d: d.path)
                assert [(d.path, d.gen, d.sha256) for d in manifest.documents] == [
                    (d.path, d.gen, d.sha256) for d in docs
                ]
            for rel in old:
                text = stored_text(store, rel)
                assert text in (old[rel], new[rel]), f"{rel} is neither old nor new after kill"
        old = dict(new)
        # Whatever was killed, the last round's text is the target; finish the job.
        with open_store(CollectionAddress(store=store_dir)) as store:
            report = ingest(src, store)
            assert not report.skipped
            assert all(stored_text(store, rel) == new[rel] for rel in new)
            assert store.chunk_versions() == {(d.path, d.gen) for d in store.list_documents()}
            assert store.read_meta().dirty is False  # type: ignore[union-attr]
    assert kills >= 3, "the ingests finished before most kills: make the corpus bigger"


# --- the CLI -------------------------------------------------------------------------------


def test_every_command_has_help_with_an_example() -> None:
    runner = CliRunner()
    for name, cmd in cli.commands.items():
        result = runner.invoke(cli, [name, "--help"], catch_exceptions=False)
        assert result.exit_code == 0, name
        assert "Example" in result.output and cmd.help, name
    assert CliRunner().invoke(cli, ["--version"]).output.startswith("semfs, version")


def test_cli_ingest_status_search_json(sample_copy: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(
        cli, ["ingest", str(sample_copy), "--model", "hash", "--json"], catch_exceptions=False
    )
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["added"] == 42 and report["skipped"] == [] and report["chunks_embedded"] > 42
    assert {"updated", "unchanged", "deleted", "seconds"} <= set(report)
    st = json.loads(runner.invoke(cli, ["status", "--json"], catch_exceptions=False).output)
    assert st["documents"] == 42 and st["backend"] == "embedded" and st["model"] == "hash"
    assert st["dimension"] == 384 and st["chunks"] == report["chunks_embedded"]
    assert st["disk_bytes"] > 0
    hits = json.loads(
        runner.invoke(
            cli, ["search", "custom domain DNS", "-k", "3", "--json"], catch_exceptions=False
        ).output
    )
    assert len(hits) == 3 and [h["rank"] for h in hits] == [1, 2, 3]
    assert set(hits[0]) >= {"rank", "path", "score", "start_line", "end_line", "text"}
    assert len({h["path"] for h in hits}) == 3  # documents, not chunks
    under = json.loads(
        runner.invoke(cli, ["search", "custom domain", "--under", "deploy", "--json"]).output
    )
    assert under and all(h["path"].startswith("deploy/") for h in under)


def test_cli_errors_are_one_line(tmp_path: Path, store_dir: Path) -> None:
    r = subprocess.run([SEMFS, "ingest", str(tmp_path / "missing")], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0
    assert "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([SEMFS, "status"], capture_output=True, text=True)
    assert r.returncode == 1 and "semfs ingest" in r.stderr and "Traceback" not in r.stderr
    src = tmp_path / "src"
    write(src, "a.md", "a\n")
    holder = EdgeStore(store_dir, "docs")
    holder.create(384)
    try:
        r = subprocess.run(
            [SEMFS, "ingest", str(src), "--model", "hash"], capture_output=True, text=True
        )
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert f"in use by pid {os.getpid()}" in r.stderr and str(store_dir) in r.stderr
    finally:
        holder.close()


def test_search_paths_work_from_any_folder(tmp_path: Path) -> None:
    """The --help example `semfs search ... --paths | xargs grep` from another folder."""
    src = tmp_path / "src"
    write(src, "guides/retries.md", "# Retries\n\nWebhook retries back off for an hour.\n")
    write(src, "other.md", "# Other\n\nNothing here.\n")
    store = tmp_path / "store"
    subprocess.run(
        [SEMFS, "ingest", str(src), "--model", "hash", "--store", str(store)],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    search = [SEMFS, "search", "webhook retries", "--mode", "keyword", "--paths", "-k", "1"]
    out = subprocess.run(
        [*search, "--store", str(store)], cwd=elsewhere, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{src.resolve()}/guides/retries.md\n"
    grep = subprocess.run(
        ["xargs", "-d", "\n", "grep", "-n", "back off"],
        input=out.stdout,
        cwd=elsewhere,
        capture_output=True,
        text=True,
    )
    assert grep.returncode == 0 and grep.stdout.startswith("3:Webhook retries back off")


def test_dry_run_says_what_a_run_would_do_and_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src, "a.md", "# A\n")
    write(src, "b.md", "# B\n")
    store = tmp_path / "store"
    args = ["--store", str(store), "--model", "hash"]
    first = subprocess.run([SEMFS, "ingest", str(src), *args, "--dry-run"], capture_output=True)
    assert first.returncode == 0 and not store.exists()
    subprocess.run([SEMFS, "ingest", str(src), *args], check=True, capture_output=True)
    write(src, "a.md", "# A, changed\n")
    (src / "b.md").unlink()
    write(src, "c.md", "# C\n")
    out = subprocess.run(
        [SEMFS, "ingest", str(src), *args, "--dry-run", "--json"], capture_output=True, text=True
    )
    report = json.loads(out.stdout)
    assert report["dry_run"] and report["added_paths"] == ["c.md"]
    assert report["updated_paths"] == ["a.md"] and report["deleted_paths"] == ["b.md"]
    with open_store(CollectionAddress(store=store)) as opened:
        assert sorted(d.path for d in opened.list_documents()) == ["a.md", "b.md"]
        a = opened.get_document("a.md")
        assert a is not None and a.size == len("# A\n")


def test_skips_still_exit_zero(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src, "ok.md", "fine\n")
    write(src, "bad.bin", b"\x00\x01")
    os.symlink("nowhere", src / "broken.md")
    r = subprocess.run(
        [SEMFS, "ingest", str(src), "--model", "hash"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "skipped 1" in r.stdout and "broken.md: broken symlink" in r.stdout
    assert "Stored as they are, not searched (1: 1 not a document):\n  bad.bin: not a document" in (
        r.stdout
    )


@pytest.mark.model
def test_unchanged_rerun_does_not_import_torch(tmp_path: Path) -> None:
    """With the real default model: the second run must not load it. The first embeds, on
    torch (when the run's model cache has no export yet) or on the checked ONNX export (when
    an earlier test made it): either way it loads a model, which the second must not."""
    src = tmp_path / "src"
    write(src, "a.md", "# Hello\n\nworld\n")
    code = (
        "import sys, pathlib\n"
        "from semfs.ingest.pipeline import ingest\n"
        "from semfs.ingest.store.address import CollectionAddress\n"
        "from semfs.ingest.store.backends import open_store\n"
        "s = open_store(CollectionAddress())\n"
        "r = ingest(pathlib.Path(sys.argv[1]), s); s.close()\n"
        "print(r.chunks_embedded, any(m in sys.modules for m in ('torch', 'onnxruntime')))\n"
    )
    first = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, text=True)
    assert first.stdout.split() == ["1", "True"], first.stderr
    second = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, text=True)
    assert second.stdout.split() == ["0", "False"], second.stderr


class _CompactCounter(DelegatingStore):
    """Counts compactions, passing every call on to the real store."""

    compactions = 0

    def compact(self) -> bool:
        self.compactions += 1
        return self.inner.compact()


def test_a_long_ingest_compacts_as_it_goes_and_reads_whole(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every COMPACT_EVERY_CHUNKS chunks the run seals what it wrote (Edge holds an appendable
    segment in RAM whole), and the dense pass every COMPACT_EVERY_VECTORS vectors (an update
    copies a sealed chunk into the appendable segment): documents committed before a
    compaction and after it read whole."""
    monkeypatch.setattr(writer, "COMPACT_EVERY_CHUNKS", 8)
    monkeypatch.setattr(writer, "WINDOW_CHUNKS", 8)
    monkeypatch.setattr(writer, "BM25_SAMPLE_CHUNKS", 8)
    monkeypatch.setattr(densepass, "COMPACT_EVERY_VECTORS", 8)
    src = tmp_path / "src"
    texts = {
        f"d{i}.md": "".join(f"## part {i}.{s}\n\nwords of part {s} in {i}\n\n" for s in range(6))
        for i in range(20)
    }
    for rel, text in texts.items():
        write(src, rel, text)
    with open_store(CollectionAddress(store=store_dir)) as inner:
        store = _CompactCounter(inner)
        report = ingest(src, store, model="hash", batch_size=1)
        assert report.chunks_embedded >= 40
        # Windows of 8 chunks (batch 1 x 8) in each pass: a compaction after each of them,
        # and the one at the end of the keyword pass.
        assert store.compactions >= 2 * (report.chunks_embedded // 8)
        for rel, text in texts.items():
            assert stored_text(inner, rel) == text


def _sealed_segments(store_dir: Path) -> set[str]:
    """The immutable segments of the collection ``docs`` (those with a dense matrix file)."""
    segments = store_dir / "docs" / "shard" / "segments"
    return {
        s.name for s in segments.iterdir() if (s / "vector_storage-dense" / "matrix.dat").exists()
    }


def test_the_keyword_pass_seals_each_part_once(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each compaction of a first ingest's keyword pass seals what was written since the last
    one into a segment of its own, and leaves the segments it sealed before as they are: Edge's
    merge optimizer counts a segment's size in dense vectors, which the pass has not written
    yet, so it used to join every sealed segment again at each compaction (at the end of a
    120k-chunk pass, the whole collection rewritten: 2 GB mapped, issue 45.4). Edge seals an
    appendable segment only past its indexing threshold: lowered here to seal a few chunks."""
    monkeypatch.setattr(edge_store, "INDEXING_THRESHOLD_KB", 1)
    monkeypatch.setattr(writer, "COMPACT_EVERY_CHUNKS", 40)
    monkeypatch.setattr(writer, "WINDOW_CHUNKS", 40)
    monkeypatch.setattr(writer, "BM25_SAMPLE_CHUNKS", 40)
    src = tmp_path / "src"
    words = " ".join(f"word{w}" for w in range(150))  # a chunk per section
    texts = {
        f"d{i:02d}.md": "".join(f"## part {i}.{s}\n\n{words} {i} {s}\n\n" for s in range(4))
        for i in range(50)
    }
    for rel, text in texts.items():
        write(src, rel, text)
    seen: list[set[str]] = []

    class _Watch(DelegatingStore):
        def compact(self) -> bool:
            done = self.inner.compact()
            seen.append(_sealed_segments(store_dir))
            return done

    with open_store(CollectionAddress(store=store_dir)) as inner:
        report = ingest(src, _Watch(inner), model="hash", dense=False)
        assert report.chunks_written >= 160
        for rel, text in texts.items():
            assert stored_text(inner, rel) == text
    assert len(seen) >= 4, seen
    for before, after in itertools.pairwise(seen):
        assert before <= after, "a compaction rewrote a segment an earlier one had sealed"
    assert len(seen[-1]) >= len(seen) - 1


class _StaleDeleteCounter(DelegatingStore):
    """Counts a committed document's deletes of its older chunks (not a killed run's
    clean-up, which keeps no generation), passing every call on."""

    stale_deletes = 0

    def delete_stale_chunks(self, path: str, keep_gen: int | None) -> None:
        self.stale_deletes += keep_gen is not None
        self.inner.delete_stale_chunks(path, keep_gen)


def test_a_store_without_records_skips_the_deletes_of_older_chunks(
    tmp_path: Path, store_dir: Path
) -> None:
    """Nothing is older than a first run's chunks, also after a killed first run (its chunks
    without a record are cleaned first); a run over a store with records deletes as before."""
    src = tmp_path / "src"
    _make_corpus(src, 5, "one")
    with open_store(CollectionAddress(store=store_dir)) as inner:
        with pytest.raises(RuntimeError):
            ingest(src, _DiesAtFirstCommit(inner), model="hash", batch_size=1)
        assert inner.chunk_versions() and not inner.list_documents()
    with open_store(CollectionAddress(store=store_dir)) as inner:
        store = _StaleDeleteCounter(inner)
        report = ingest(src, store, model="hash")
        assert len(report.added) == 5 and store.stale_deletes == 0
        assert inner.chunk_versions() == {(d.path, d.gen) for d in inner.list_documents()}
    texts = _make_corpus(src, 5, "two")
    with open_store(CollectionAddress(store=store_dir)) as inner:
        store = _StaleDeleteCounter(inner)
        report = ingest(src, store, model="hash")
        assert len(report.updated) == 5 and store.stale_deletes >= 5
        assert inner.chunk_versions() == {(d.path, d.gen) for d in inner.list_documents()}
        assert all(stored_text(inner, rel) == text for rel, text in texts.items())


class _DiesAtFirstCommit(DelegatingStore):
    """A run killed after writing chunks, before committing any document."""

    def put_document(self, record: DocumentRecord) -> None:
        raise RuntimeError("killed")
