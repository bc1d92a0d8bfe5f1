"""The tree manifest: exact round trip of every schema field, nothing half-decoded, the same
tree as the records on both backends, and the embedded store's open protocol around it."""

from __future__ import annotations

import dataclasses
import gzip
import logging
import os
import random
import struct
import zlib
from array import array
from pathlib import Path
from typing import Any

import pytest

from semfs.fusefs.view.tree import FileIds, InodeMap, Tree
from semfs.ingest.store import Store
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.edge import shardprobe
from semfs.ingest.store.edge.store import MANIFEST_NAME, EdgeStore
from semfs.ingest.store.manifest import (
    DIR_COLUMNS,
    DOC_COLUMNS,
    MAGIC,
    Manifest,
    OtherVersion,
    assemble,
    disassemble,
)
from semfs.ingest.store.schema import DirectoryRecord, DocumentRecord, StoreMeta
from semfs.ingest.store.server_store import ServerStore
from tests.helpers.mounting import ingest_hash, semfs

META = StoreMeta("hash", 384, generation=7, documents=2, chunks=2, bm25_avg_len=12.5)
DOCS = [
    DocumentRecord(
        "z/b.md",
        10,
        1.25,
        "ab" * 32,
        2,
        7,
        array("Q", [0, 4]),
        1_250_000_001,
        True,
        0o640,
        1000,
        100,
    ),
    DocumentRecord("a \udcff\n.md", 0, 2.0, "cd" * 32, 0, 3, array("Q")),  # optional fields None
]
DIRS = [DirectoryRecord("", 0o755, 0, 0, 5), DirectoryRecord("z/empty", 0o700, 1000, 100, 9)]


def _fields(record: Any) -> dict[str, Any]:
    """Every field, offsets too (which DocumentRecord's == leaves out)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def test_the_columns_are_the_schema_fields() -> None:
    # A field added to a record's payload is a dataclass field, hence a manifest column.
    assert set(DOC_COLUMNS) == set(DOCS[0].to_payload()) - {"kind"}
    assert set(DIR_COLUMNS) == set(DIRS[0].to_payload()) - {"kind"}


def test_round_trip_keeps_every_field() -> None:
    manifest = Manifest.of(META, DOCS, DIRS)
    again = Manifest.from_bytes(manifest.to_bytes())
    assert again.meta == META
    assert [d.path for d in again.documents] == ["a \udcff\n.md", "z/b.md"]  # sorted
    assert [_fields(d) for d in again.documents] == [_fields(DOCS[1]), _fields(DOCS[0])]
    assert [_fields(d) for d in again.directories] == [_fields(d) for d in DIRS]
    # Packed columns give back each value's own type (a bool is not 1, a float not an int).
    types = [{k: type(v) for k, v in _fields(d).items()} for d in again.documents]
    assert types == [{k: type(v) for k, v in _fields(d).items()} for d in (DOCS[1], DOCS[0])]
    assert again.generation == 7 and again.matches(META)
    assert not again.matches(dataclasses.replace(META, generation=8))
    assert not again.matches(dataclasses.replace(META, dirty=True))


def test_a_decoded_manifest_makes_each_record_when_asked() -> None:
    """Its documents stay columns (a mount's first tree needs no record per document); one
    record, or all of them, are the same as the round trip's, field for field and type."""
    docs = [*DOCS, dataclasses.replace(DOCS[0], path="z/c.md", offsets=None, mtime_ns=None)]
    again = Manifest.from_bytes(Manifest.of(META, docs, DIRS).to_bytes())
    assert again.columns is not None and again._documents is None
    assert list(again.paths) == ["a \udcff\n.md", "z/b.md", "z/c.md"]
    assert again.chunk_count == sum(d.chunks for d in docs)
    one_by_one = [again.document(i) for i in range(len(docs))]
    assert again._documents is None, "document(i) makes that record alone"
    want = sorted(docs, key=lambda d: d.path)
    for made in (one_by_one, again.documents):
        assert [_fields(d) for d in made] == [_fields(d) for d in want]
        types = [{k: type(v) for k, v in _fields(d).items()} for d in made]
        assert types == [{k: type(v) for k, v in _fields(d).items()} for d in want]
        assert all(d.offsets is None or d.offsets.typecode == "Q" for d in made)


def _body(**change: Any) -> bytes:
    body = disassemble(Manifest.of(META, DOCS, DIRS).to_bytes())
    body.update(change)
    return assemble(body)


def _offsets_lengths(lengths: list[int]) -> bytes:
    body = disassemble(Manifest.of(META, DOCS, DIRS).to_bytes())
    body["documents"]["offsets"]["lengths"] = lengths
    return assemble(body)


def _column(name: str, **change: Any) -> bytes:
    body = disassemble(Manifest.of(META, DOCS, DIRS).to_bytes())
    body["documents"][name].update(change)
    return assemble(body)


def _without_column(name: str) -> bytes:
    body = disassemble(Manifest.of(META, DOCS, DIRS).to_bytes())
    del body["documents"][name]
    return assemble(body)


def _framed(header: bytes) -> bytes:
    """A blob of this format around a header's (uncompressed) bytes, with no sections."""
    head = zlib.compress(header)
    return MAGIC + struct.pack("<Q", len(head)) + head


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not a manifest",
        gzip.compress(b"[1, 2]", mtime=0),
        gzip.compress(b'{"format": 99}', mtime=0),
        _framed(b"[1, 2]"),
        _framed(b'{"format": 99}'),
        _body(format=1),  # the format before folders were carried
        _body(format=4),  # the format before columns were sections of their own
        _without_column("mode"),  # another version's fields: never defaulted
        _body(directories={"path": ["a"]}),
        _offsets_lengths([0, 1]),  # offsets that do not add up
        _offsets_lengths([0]),
        _column("size", type="x"),  # a packed column of an unknown type
        _column("mode", nulls=[5]),  # a None beyond the column
        _column("mtime", data="AAAA"),  # bytes that are no whole number of floats
        _column("split_lines", data="AA"),  # a column decoded with the records: same
        _body(documents={**{c: [] for c in DOC_COLUMNS}, "path": ["a"]}),  # ragged
        Manifest.of(META, DOCS, DIRS).to_bytes()[:-8],  # torn
        Manifest.of(META, DOCS, DIRS).to_bytes()[:-8] + b"\0" * 8,  # damaged: the checksum
    ],
)
def test_anything_else_is_refused_before_a_record_is_made(data: bytes) -> None:
    """Refused by from_bytes, or (a column decoded with the first record) by every record,
    never half-used."""
    with pytest.raises(ValueError):
        manifest = Manifest.from_bytes(data)
        manifest.document(0)
    with pytest.raises(ValueError):
        Manifest.from_bytes(data).documents  # noqa: B018 (making them is the test)


def test_a_format_4_manifest_is_another_version() -> None:
    with pytest.raises(OtherVersion):
        Manifest.from_bytes(gzip.compress(b'{"format": 4}'))


# --- the same tree from the manifest as from the records ---------------------------------------


@pytest.fixture(params=["edge", "local"])
def ingested(request: pytest.FixtureRequest, sample_copy: Path, tmp_path: Path) -> Store:
    """The sample corpus with an empty folder and varied modes, ingested and reopened."""
    (sample_copy / "empty" / "deeper").mkdir(parents=True)
    os.chmod(sample_copy / "empty", 0o750)
    os.chmod(sample_copy / "index.mdx", 0o600)
    os.chmod(sample_copy / "quickstart.mdx", 0o755)
    if request.param == "edge":
        ingest_hash(sample_copy, tmp_path / "store")
        return open_store(CollectionAddress(store=tmp_path / "store"))
    url = f"file://{tmp_path / 'local'}"
    ingest_hash(sample_copy, url=url)
    return open_store(CollectionAddress(url=url))


def _nodes(tree: Tree) -> dict[str, tuple[Any, ...]]:
    out = {}
    for node in tree.nodes():
        doc = None if node.doc is None else _fields(dataclasses.replace(node.doc, offsets=None))
        out[node.path] = (node.kind, node.ino, dict(node.attrs), doc, sorted(node.children))
    return out


def test_a_manifest_tree_equals_a_listed_tree_field_for_field(ingested: Store) -> None:
    store = ingested
    try:
        manifest = store.read_manifest()
        assert manifest is not None, "ingest writes the manifest last"
        assert manifest.meta == store.read_meta()
        ids = FileIds(os.getuid(), os.getgid())
        from_manifest = Tree.build(manifest.documents, InodeMap(), ids, manifest.directories)
        # Sorted as the refresher sorts them: inode numbers follow the order.
        docs = sorted(store.list_documents(), key=lambda d: d.path)
        dirs = sorted(store.list_directories(), key=lambda d: d.path)
        listed = Tree.build(docs, InodeMap(), ids, dirs)
        assert from_manifest.lookup("empty/deeper") is not None
        assert _nodes(from_manifest) == _nodes(listed)
        # Each record whole, offsets included, as the store returns it one by one.
        for doc in manifest.documents:
            stored = store.get_document(doc.path)
            assert stored is not None and _fields(doc) == _fields(stored)
        assert list(manifest.directories) == sorted(store.list_directories(), key=lambda d: d.path)
    finally:
        store.close()


# --- the embedded store's protocol -------------------------------------------------------------


def _clean(store: Store, gen: int) -> None:
    store.write_meta(StoreMeta("hash:256", 256, generation=gen, dirty=False))


def _doc(path: str, gen: int) -> DocumentRecord:
    return DocumentRecord(path, 0, 1.5, "sha", 0, gen, array("Q"), mode=0o644)


@pytest.mark.parametrize("backend", ["edge", "local"])
def test_any_write_drops_the_manifest(backend: str, tmp_path: Path) -> None:
    if backend == "edge":
        store: Store = EdgeStore(tmp_path, "docs")
    else:
        store = ServerStore(CollectionAddress(url=f"file://{tmp_path / 'local'}"))
    try:
        store.create(256)
        store.write_meta(StoreMeta("hash:256", 256, generation=1, dirty=True))
        store.put_document(_doc("a.md", 1))
        _clean(store, 1)
        assert store.read_manifest() is None  # not written yet
        store.write_manifest(2)  # not the store's generation: nothing is written
        assert store.read_manifest() is None
        writes = [
            lambda: store.put_document(_doc("b.md", 1)),
            lambda: store.delete_documents(["b.md"]),
            lambda: store.put_directories([DirectoryRecord("d", 0o755, 0, 0, 1)]),
            lambda: store.delete_directories(["d"]),
            lambda: store.delete_stale_chunks("a.md", 1),
            lambda: _clean(store, 1),
        ]
        for write in writes:
            store.write_manifest(1)
            manifest = store.read_manifest()
            assert manifest is not None
            assert list(manifest.documents) == sorted(store.list_documents(), key=lambda d: d.path)
            write()
            assert store.read_manifest() is None, write
    finally:
        store.close()


def _ingested_edge(tmp_path: Path) -> tuple[Path, DocumentRecord]:
    store = EdgeStore(tmp_path, "docs")
    store.create(256)
    store.write_meta(StoreMeta("hash:256", 256, generation=1, dirty=True))
    rec = _doc("a.md", 1)
    store.put_document(rec)
    store.put_directories([DirectoryRecord("", 0o755, 0, 0, 1)])
    _clean(store, 1)
    store.write_manifest(1)
    store.close()
    return tmp_path / "docs", rec


def test_a_reopened_store_answers_from_its_manifest_before_the_shard_loads(
    tmp_path: Path,
) -> None:
    coll, rec = _ingested_edge(tmp_path)
    assert (coll / MANIFEST_NAME).stat().st_mode & 0o777 == 0o600
    again = EdgeStore(tmp_path, "docs")
    try:
        manifest = again.read_manifest()
        assert manifest is not None and _fields(manifest.documents[0]) == _fields(rec)
        assert again.read_meta() == StoreMeta("hash:256", 256, generation=1, dirty=False)
        assert again.exists()
        assert again._shard is None  # what the manifest saves is this load
        # Reads load the shard meanwhile.
        assert again.get_document("a.md") == rec
        assert again.list_documents() == [rec]
    finally:
        again.close()
    # Never loaded, so nothing changed: the next open needs no probe either.
    assert not shardprobe.needs_probe(coll, coll / "shard")


def test_a_shard_changed_since_its_clean_close_loses_its_manifest(tmp_path: Path) -> None:
    coll, _rec = _ingested_edge(tmp_path)
    # What a kill -9 after the manifest was written looks like: shard files changed.
    victim = next(p for p in (coll / "shard").rglob("*") if p.is_file())
    os.utime(victim, ns=(1, 1))
    assert shardprobe.needs_probe(coll, coll / "shard")
    again = EdgeStore(tmp_path, "docs")
    try:
        assert not (coll / MANIFEST_NAME).exists()
        assert again.read_manifest() is None
        assert [d.path for d in again.list_documents()] == ["a.md"]
    finally:
        again.close()
    # The probe's clean close counts: the next open trusts the shard again.
    assert not shardprobe.needs_probe(coll, coll / "shard")


def test_an_interrupted_run_leaves_no_manifest_behind(tmp_path: Path) -> None:
    _ingested_edge(tmp_path)
    first = EdgeStore(tmp_path, "docs")
    first.write_meta(StoreMeta("hash:256", 256, generation=2, dirty=True))
    first.put_document(_doc("b.md", 2))  # ... and the run stops here
    first.close()
    again = EdgeStore(tmp_path, "docs")
    try:
        assert again.read_manifest() is None  # the mount lists the records instead
        assert [d.path for d in again.list_documents()] == ["a.md", "b.md"]
    finally:
        again.close()


def test_a_corrupt_manifest_is_ignored(tmp_path: Path) -> None:
    coll, _rec = _ingested_edge(tmp_path)
    path = coll / MANIFEST_NAME
    path.write_bytes(path.read_bytes()[:20])
    again = EdgeStore(tmp_path, "docs")
    try:
        assert again.read_manifest() is None
        assert [d.path for d in again.list_documents()] == ["a.md"]
    finally:
        again.close()


def test_a_torn_server_manifest_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from semfs.ingest.store import server_store

    monkeypatch.setattr(server_store, "MANIFEST_PART_BYTES", 64)  # many parts
    store = ServerStore(CollectionAddress(url=f"file://{tmp_path / 'local'}"))
    try:
        store.create(256)
        for i in range(20):
            store.put_document(_doc(f"d{i}.md", 1))
        _clean(store, 1)
        store.write_manifest(1)
        manifest = store.read_manifest()
        assert manifest is not None and len(manifest.documents) == 20
        from semfs.ingest.store.schema import manifest_id

        store.client.delete(store.collection, points_selector=[manifest_id(1)])
        assert store.read_manifest() is None
    finally:
        store.close()


def test_a_manifest_of_another_version_is_passed_over_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    coll, _rec = _ingested_edge(tmp_path)
    (coll / MANIFEST_NAME).write_bytes(_body(format=2))  # from before an upgrade
    again = EdgeStore(tmp_path, "docs")
    try:
        assert again.read_manifest() is None
        assert [d.path for d in again.list_documents()] == ["a.md"]
    finally:
        again.close()
    assert "not using" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# --- damage of any kind: ignored, never fatal (issue 29) ---------------------------------------


def _flipped(data: bytes, rng: random.Random) -> bytes:
    """``data`` with 1 to 4 bytes changed, or cut short, at random places."""
    out = bytearray(data)
    if rng.random() < 0.2:
        return bytes(out[: rng.randrange(len(out))])
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(len(out))] ^= rng.randint(1, 255)
    return bytes(out)


def test_flipped_bytes_never_escape_decode(caplog: pytest.LogCaptureFixture) -> None:
    # A seeded loop, not a sample: the same 3,000 damages every run. Flips inside the deflate
    # stream raise zlib.error, which was not a ValueError and stopped every command.
    good = Manifest.of(META, DOCS, DIRS).to_bytes()
    rng = random.Random(29)
    refused = 0
    for _ in range(3000):
        got = Manifest.decode(_flipped(good, rng), "fuzz")
        if got is None:
            refused += 1
        else:  # a flip the checks cannot see (in the magic's length bytes) decodes whole
            assert len(got.documents) == len(DOCS)
    assert refused > 2500


@pytest.mark.parametrize(
    "data",
    [
        # a header whose deflate stream is broken (zlib.error)
        MAGIC + struct.pack("<Q", 30) + b"\xff" * 30,
        _framed(b"[" * 100_000),  # nesting deeper than json follows (RecursionError)
        _framed(b'{"format": 5, "meta": 1e999, "crc32": 0, "documents": {}}'),
        MAGIC + b"\x01",  # no room for the header's length (struct.error)
    ],
    ids=["zlib-error", "too-deep", "infinite", "short"],
)
def test_what_the_decoder_raises_is_refused_as_damage(data: bytes) -> None:
    with pytest.raises(ValueError):
        Manifest.from_bytes(data)
    assert Manifest.decode(data, "test") is None


def test_a_store_with_a_damaged_manifest_answers_every_command(tmp_path: Path) -> None:
    # The report: status, search and ingest printed "Error -3 while decompressing".
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nthe quick brown fox\n")
    store = tmp_path / "store"
    semfs("ingest", str(src), "--store", str(store), "-m", "hash")
    manifests = list(store.rglob(MANIFEST_NAME))
    assert len(manifests) == 1
    data = bytearray(manifests[0].read_bytes())
    data[20:40] = b"\xff" * 20  # inside the header's deflate stream: zlib.error
    manifests[0].write_bytes(bytes(data))
    with pytest.raises(ValueError):
        Manifest.from_bytes(bytes(data))
    for args in (("status",), ("search", "fox"), ("ingest", str(src))):
        proc = semfs(*args, "--store", str(store), check=False)
        assert proc.returncode == 0, proc.stderr
        assert "Error:" not in proc.stderr and "ignoring the manifest" in proc.stderr
    assert "a.md" in semfs("search", "fox", "--store", str(store)).stdout


def test_damage_the_list_does_not_name_still_means_no_manifest(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The decoder's last line of defence: an exception outside the known kinds of damage
    (here one the meta's decoding raises) makes the manifest unusable, logged, never a crash
    of the command that opened the store (before, removing that catch-all failed no test)."""
    blob = Manifest.of(META, DOCS).to_bytes()
    assert Manifest.decode(blob, "here") is not None

    def unforeseen(cls: type, payload: dict[str, Any]) -> StoreMeta:
        raise ArithmeticError("a kind of damage the list does not name")

    monkeypatch.setattr(StoreMeta, "from_payload", classmethod(unforeseen))
    with caplog.at_level(logging.WARNING, logger="semfs.ingest.store.manifest"):
        assert Manifest.decode(blob, "here") is None
    assert "ignoring the manifest of here: ArithmeticError: a kind of damage" in caplog.text
