"""What the write tool (and a writable mount) refuse to make, and what a replace keeps
(issue 46's breaks): a version-control folder at any depth, semfs's own names under a renamed
search folder, the replaced file's group. The real SourceWriter on a real store and source."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from semfs.fusefs.agent.writing import SourceWriter
from semfs.fusefs.view.reserved import is_reserved, reserved_part
from semfs.ingest.errors import PathError
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import NOBODY
from tests.helpers.mounting import ingest_hash, ingested_one


@pytest.mark.parametrize(
    "rel",
    [".git/config", "vendor/x/.git/hooks/pre-commit", "a/b/.hg/hgrc", "lib/.svn/entries"],
)
def test_no_write_lands_in_a_version_control_folder_at_any_depth(
    tmp_path: Path, store_dir: Path, rel: str
) -> None:
    src = tmp_path / "src"
    ingested_one(tmp_path, "a.md", "a\n", store_dir)
    with open_store(CollectionAddress(store=store_dir)) as store:
        writer = SourceWriter(store)
        with pytest.raises(PathError, match="version-control folder"):
            writer.write(rel, "#!/bin/sh\necho hi\n", "replace")
    assert not (src / rel).exists()


def test_a_renamed_search_folder_keeps_the_default_name_reserved() -> None:
    """A mount with --search-dir .find still shows .search/ (and .similar/, .map.md): none of
    them may be written, or a planted one would stand in for semfs's answer."""
    for rel in (".find/q/00-results.md", ".search/q/00-results.md", "a/.similar/x", "a/.map.md"):
        assert reserved_part(rel, ".find") is not None, rel
    assert is_reserved(".search", ".find") and is_reserved(".find", ".find")
    assert not is_reserved(".search.md", ".find") and reserved_part("a/find/x", ".find") is None


def test_replace_keeps_the_replaced_files_owner_and_group(tmp_path: Path, store_dir: Path) -> None:
    """As root, a new file is root:root: replacing a file of group nobody gives the new file
    that group (and its owner and mode) back, not the writer's."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to give a file another group")
    src = tmp_path / "src"
    src.mkdir()
    (src / "team.md").write_text("old\n")
    os.chown(src / "team.md", 0, NOBODY)
    (src / "team.md").chmod(0o664)
    (src / "mine.md").write_text("old\n")
    os.chown(src / "mine.md", NOBODY, NOBODY)
    ingest_hash(src, store_dir)
    with open_store(CollectionAddress(store=store_dir)) as store:
        writer = SourceWriter(store)
        assert writer.write("team.md", "new\n", "replace").indexed
        assert writer.write("mine.md", "new\n", "replace").indexed
    team, mine = (src / "team.md").stat(), (src / "mine.md").stat()
    assert (team.st_uid, team.st_gid, team.st_mode & 0o7777) == (0, NOBODY, 0o664)
    assert (mine.st_uid, mine.st_gid) == (NOBODY, NOBODY)
    assert (src / "team.md").read_text() == "new\n"


def test_concurrent_writes_each_answer_within_the_bound_from_their_arrival(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46 attack 9: one write runs at a time per server, and each waited its own 30 s
    for the collection's write lock, so 5 concurrent writes answered at 30, 60, ... 150 s.
    The bound now counts from each request's arrival: with another writer holding the lock,
    all four writes here answer (written, not indexed) within about one bound; before, the
    last answered after four. Generous: twice the bound."""
    import threading
    import time

    from semfs.fusefs.agent import writing
    from semfs.ingest.store.writelock import WRITE_LOCK, CollectionLock

    bound = 4.0
    monkeypatch.setattr(writing, "WRITE_WAIT", bound)
    src = tmp_path / "src"
    ingested_one(tmp_path, "a.md", "a\n", store_dir)
    with open_store(CollectionAddress(store=store_dir)) as store:
        writer = SourceWriter(store)
        writer.write("warm.md", "loads the model first\n", "append")
        holder = CollectionLock(store.lock_path(WRITE_LOCK), "keyword")
        assert holder.try_acquire()
        answers: dict[str, tuple[float, writing.Written | Exception]] = {}
        start = time.monotonic()

        def one(name: str) -> None:
            try:
                got: writing.Written | Exception = writer.write(name, f"{name}\n", "append")
            except Exception as exc:  # a refusal is an answer too
                got = exc
            answers[name] = (time.monotonic() - start, got)

        threads = [threading.Thread(target=one, args=(f"n{i}.md",)) for i in range(4)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=10 * bound)
        finally:
            holder.release()
    assert len(answers) == 4
    for name, (_elapsed, got) in answers.items():
        assert isinstance(got, writing.Written) and not got.indexed, (name, got)
        assert "try again later" in got.reason and (src / name).read_text() == f"{name}\n"
    last = max(elapsed for elapsed, _ in answers.values())
    assert last < 2 * bound, sorted(e for e, _ in answers.values())
