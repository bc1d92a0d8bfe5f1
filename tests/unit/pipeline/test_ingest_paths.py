"""A watcher's batch: ingest restricted to some paths finds what a full scan finds there,
and touches nothing else."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from semfs.ingest.pipeline import in_paths, ingest
from semfs.ingest.sources import scan, scan_paths
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.watch import limit_message


def make_tree(root: Path) -> Path:
    src = root / "src"
    for rel, text in {
        "a.md": "alpha\n",
        "b.txt": "bravo\n",
        "docs/c.md": "charlie\n",
        "docs/deep/d.md": "delta\n",
        "drafts/e.md": "echo\n",
        ".git/config": "[core]\n",
        "docs/.git/HEAD": "ref\n",
        "bin.md": "x\x00y",
    }.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (src / "linkdir").symlink_to(src / "docs", target_is_directory=True)
    (src / "link.md").symlink_to(src / "a.md")
    return src


@pytest.mark.parametrize(
    ("include", "exclude"), [((), ()), (("*.md",), ("drafts/",)), ((), ("deep",))]
)
def test_scan_paths_finds_what_scan_finds(
    tmp_path: Path, include: tuple[str, ...], exclude: tuple[str, ...]
) -> None:
    src = make_tree(tmp_path)
    full_files, full_skipped = scan(src, include, exclude)
    tops = os.listdir(src)
    files, skipped = scan_paths(src, tops, include, exclude)
    assert [f.path for f in files] == [f.path for f in full_files]
    assert sorted(skipped, key=lambda s: s.path) == sorted(full_skipped, key=lambda s: s.path)
    # Paths below what a scan never enters find nothing; missing paths nothing either.
    below = ["drafts/e.md"] if exclude == ("drafts/",) else ["docs/deep/d.md"]
    hidden = ["docs/.git/HEAD", "linkdir/c.md", "gone.md", "docs/gone/x.md"]
    found, _ = scan_paths(src, [*hidden, *(below if exclude else [])], include, exclude)
    assert found == []


def test_in_paths() -> None:
    only = {"docs", "a.md"}
    assert in_paths("a.md", only) and in_paths("docs/x/y.md", only)
    assert not in_paths("docsx/y.md", only) and not in_paths("b/a.md", only)


def test_a_restricted_run_touches_only_its_paths(tmp_path: Path) -> None:
    src = make_tree(tmp_path)
    store_dir = tmp_path / "store"
    with open_store(CollectionAddress(store=store_dir)) as store:
        first = ingest(src, store, model="hash")
        assert "docs/c.md" in first.added
        (src / "a.md").write_text("alpha two\n")
        (src / "b.txt").write_text("bravo two\n")  # changed, but outside the batch
        (src / "docs" / "deep" / "d.md").unlink()
        (src / "drafts" / "e.md").unlink()  # deleted, but outside the batch
        (src / "docs" / "new.md").write_text("new\n")
        report = ingest(src, store, model="hash", paths={"a.md", "docs"})
        assert report.updated == ["a.md"]
        assert report.added == ["docs/new.md"]
        assert report.deleted == ["docs/deep/d.md"]
        docs = {d.path: d for d in store.list_documents()}
        assert "drafts/e.md" in docs  # not in the batch: left alone
        assert "b.txt" in docs and docs["b.txt"].size == len("bravo\n")
        # The same change again embeds nothing.
        again = ingest(src, store, model="hash", paths={"a.md", "docs"})
        assert again.chunks_embedded == 0 and not again.added and not again.updated


def test_keep_failed_keeps_the_previous_version(tmp_path: Path) -> None:
    src = make_tree(tmp_path)
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        (src / "a.md").write_bytes(b"now\x00binary")
        report = ingest(src, store, model="hash", paths={"a.md"}, keep_failed=True)
        assert report.kept == ["a.md"] and report.deleted == []
        doc = store.get_document("a.md")
        assert doc is not None and doc.size == len("alpha\n")
        plain = ingest(src, store, model="hash", paths={"a.md"})
        # Without keep_failed it is stored as it is: served, not searched.
        assert plain.updated == ["a.md"] and plain.deleted == []
        stored = store.get_document("a.md")
        assert stored is not None and stored.as_is and stored.chunks == 0


def test_watch_limit_message_names_the_fix(tmp_path: Path) -> None:
    msg = limit_message(OSError(errno.ENOSPC, "inotify watch limit reached"), tmp_path)
    assert "fs.inotify.max_user_watches" in msg and "sudo sysctl" in msg
    assert str(tmp_path) in msg and "\n" not in msg
    msg = limit_message(OSError(errno.EMFILE, "inotify instance limit reached"), tmp_path)
    assert "fs.inotify.max_user_instances" in msg


def test_a_restricted_run_keeps_folder_records_in_step(tmp_path: Path) -> None:
    src = make_tree(tmp_path)
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        (src / "docs").rename(src / "manual")
        (src / "empty").mkdir()
        ingest(src, store, model="hash", paths={"docs", "manual", "empty"})
        folders = {d.path for d in store.list_directories()}
        assert {"manual", "manual/deep", "empty"} <= folders
        assert not {p for p in folders if p == "docs" or p.startswith("docs/")}
        assert "drafts" in folders  # outside the batch: left alone


def test_a_batch_records_the_folders_above_its_files(tmp_path: Path) -> None:
    """A watcher's batch that names a file in a new private folder (not the folder) writes
    the folder's record too: otherwise the mount serves it 0555 (issue 46.1)."""
    src = make_tree(tmp_path)
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        (src / "docs" / "private").mkdir(mode=0o700)
        (src / "docs" / "private" / "p.md").write_text("papa\n")
        (src / "docs" / "private").chmod(0o700)
        ingest(src, store, model="hash", paths={"docs/private/p.md"})
        assert store.get_document("docs/private/p.md") is not None
        folders = {d.path: d.mode for d in store.list_directories()}
        assert folders["docs/private"] == 0o700
