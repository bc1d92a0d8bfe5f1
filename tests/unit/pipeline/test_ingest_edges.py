"""Ingest at the edges: links leaving the source, files unreadable for one run, UTF-16,
errors as JSON and as one line."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from semfs.ingest.pipeline import ingest
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store
from tests.helpers import SEMFS


def write(root: Path, rel: str, data: str | bytes) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def test_symlinks_leaving_the_source_are_skipped_unless_asked(
    tmp_path: Path, store_dir: Path
) -> None:
    secret = write(tmp_path, "private/secret.txt", "the password is hunter2\n")
    src = tmp_path / "src"
    write(src, "good.md", "fine\n")
    os.symlink(secret, src / "absolute.md")
    os.symlink("../private/secret.txt", src / "relative.md")
    os.symlink("good.md", src / "inside.md")
    write(src, "sub/x.md", "x\n")
    os.symlink("../good.md", src / "sub" / "up-inside.md")
    os.symlink("relative.md", src / "chain.md")  # inside, but leads outside in the end
    with open_store(CollectionAddress(store=store_dir)) as store:
        r = ingest(src, store, model="hash")
        reasons = {s.path: s.reason for s in r.skipped}
        # Up out of its own folder, even inside the source: the link rule (issue 29).
        assert "outside the link's own folder" in reasons.pop("sub/up-inside.md")
        assert sorted(reasons) == ["absolute.md", "chain.md", "relative.md"]
        for reason in reasons.values():
            assert f"symlink to {secret}, outside the source" in reason
            assert "--follow-symlinks" in reason
        assert sorted(r.added) == ["good.md", "inside.md", "sub/x.md"]
        assert sorted(d.path for d in store.list_documents()) == sorted(r.added)

        r = ingest(src, store, follow_symlinks=True)
        followed = ["absolute.md", "chain.md", "relative.md", "sub/up-inside.md"]
        assert sorted(r.added) == followed and not r.skipped
        r = ingest(src, store)  # the default again: what leaves the source is dropped
        assert sorted(r.deleted) == followed

    out = subprocess.run(
        [SEMFS, "ingest", str(src), "--follow-symlinks", "--json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["added"] == 4


def test_a_link_is_followed_below_its_folder_through_folders_all_may_enter(
    tmp_path: Path, store_dir: Path
) -> None:
    """The link rule (issue 29): the target is served under the link's path, where readers
    pass only the link's folders, so nothing on the way to it may shut anyone out."""
    src = tmp_path / "src"
    write(src, "d/open/a.md", "open text\n")
    write(src, "d/shut/b.md", "shut text\n")
    (src / "d" / "open").chmod(0o755)
    (src / "d" / "shut").chmod(0o750)  # the group and others: no way in
    os.symlink("open/a.md", src / "d" / "a-link.md")
    os.symlink(str(src / "d" / "open" / "a.md"), src / "d" / "abs-link.md")
    os.symlink("shut/b.md", src / "d" / "b-link.md")
    os.symlink("../d/open/../shut/b.md", src / "d" / "open" / "around.md")
    with open_store(CollectionAddress(store=store_dir)) as store:
        r = ingest(src, store, model="hash")
    reasons = {s.path: s.reason for s in r.skipped}
    assert sorted(r.added) == ["d/a-link.md", "d/abs-link.md", "d/open/a.md", "d/shut/b.md"]
    assert (
        reasons["d/b-link.md"] == "symlink through a folder not everyone may enter (not followed)"
    )
    assert "outside the link's own folder" in reasons["d/open/around.md"]


def test_utf16_is_named(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    write(src, "le.txt", "hello\n".encode("utf-16"))  # with a BOM
    write(src, "be.txt", "\ufeffhello\n".encode("utf-16-be"))
    with open_store(CollectionAddress(store=store_dir)) as store:
        r = ingest(src, store, model="hash")
    assert {s.path: s.reason for s in r.unsearched} == {
        "be.txt": "UTF-16 text is not supported (convert it to UTF-8)",
        "le.txt": "UTF-16 text is not supported (convert it to UTF-8)",
    }


# Root reads anything: run root's command without the capabilities that bypass permissions.
_NO_DAC = "-dac_override,-dac_read_search"


def _as_reader(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` so that file permissions apply to it, even when we are root."""
    if os.geteuid() == 0:
        cmd = ["setpriv", f"--bounding-set={_NO_DAC}", f"--inh-caps={_NO_DAC}", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_a_file_unreadable_for_one_run_keeps_its_version(tmp_path: Path) -> None:
    src, store = tmp_path / "src", tmp_path / "store"
    write(src, "a.md", "alpha\n")
    write(src, "sub/b.md", "beta\n")
    write(src, "c.md", "gamma\n")
    cmd = [SEMFS, "ingest", str(src), "--store", str(store), "--model", "hash", "--json"]
    first = _as_reader(cmd)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["added"] == 3

    (src / "a.md").chmod(0)
    (src / "sub").chmod(0)
    second = _as_reader(cmd)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["deleted"] == 0 and report["deleted_paths"] == []
    reasons = {s["path"]: s["reason"] for s in report["skipped"]}
    assert reasons["a.md"].startswith("unreadable: Permission denied")
    assert reasons["a.md"].endswith("(kept the ingested version)")
    assert reasons["sub"].startswith("unreadable directory")
    assert reasons["sub"].endswith("(kept 1 ingested documents)")

    (src / "a.md").chmod(0o644)
    (src / "sub").chmod(0o755)
    write(src, "a.md", "alpha, edited\n")
    (src / "c.md").unlink()
    third = json.loads(_as_reader(cmd).stdout)
    assert (third["updated_paths"], third["deleted_paths"]) == (["a.md"], ["c.md"])
    assert third["skipped"] == []


def test_json_errors_are_json_on_stdout(tmp_path: Path) -> None:
    for args in (
        ["ingest", str(tmp_path / "missing"), "--json"],
        ["status", "--json"],
        ["search", "anything", "--json"],
    ):
        r = subprocess.run([SEMFS, *args], capture_output=True, text=True)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        error = json.loads(r.stdout)["error"]
        assert error and "\n" not in error
        assert r.stderr.strip() == f"Error: {error}"  # the same line, for people


@pytest.fixture
def web_server() -> Iterator[str]:
    """An HTTP server that is not Qdrant (it serves an empty folder)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_url_that_is_not_qdrant_is_one_line(web_server: str) -> None:
    r = subprocess.run([SEMFS, "status", "--url", web_server], capture_output=True, text=True)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"Error: {web_server} does not answer like a Qdrant server")
