"""`semfs check` reports documents whose folder has no record (issue 46.1): such a folder is
served 0555, so a 0700 folder's files would be open to every user of a shared mount."""

from __future__ import annotations

from pathlib import Path

from semfs.ingest.pipeline import ingest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from semfs.ingest.store.check import check_store


def test_check_names_a_folder_without_its_record_and_an_ingest_repairs_it(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    (src / "priv" / "deep").mkdir(parents=True)
    (src / "priv" / "deep" / "p.md").write_text("papa\n")
    (src / "a.md").write_text("alpha\n")
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        ingest(src, store, model="hash")
        assert check_store(store).ok
        store.delete_directories(["priv", "priv/deep"])  # as a run killed before it wrote them
        report = check_store(store)
        assert not report.ok
        (problem,) = report.problems
        assert problem.path == "" and "2 folders" in problem.reason
        assert "'priv'" in problem.reason and "semfs ingest" in problem.reason
        ingest(src, store, model="hash")
        assert check_store(store).ok
