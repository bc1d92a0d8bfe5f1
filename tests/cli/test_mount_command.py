"""`semfs mount` and `semfs umount` as commands: mount(8)'s arguments translated, help, one-line
refusals, and the click-free start (the same parameters as click, no click imported)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from semfs.fusefs.cli import fastmount
from semfs.fusefs.cli.group import cli
from semfs.fusefs.cli.mounthelper import translate
from semfs.fusefs.cli.options import collection_names
from semfs.ingest.errors import SemfsError
from tests.helpers import SEMFS


def test_mount_helper_translates_mount8_arguments() -> None:
    args = translate(
        [
            "/srv/store",
            "/mnt/docs",
            "-o",
            "rw,noauto,user,_netdev,collection=acme,allow_other,x-systemd.automount,attr_timeout=2",
        ]
    )
    assert args == [
        "mount",
        "/mnt/docs",
        "--store",
        "/srv/store",
        "--collection",
        "acme",
        "-o",
        "allow_other,attr_timeout=2",
    ]
    assert translate(["http://q:6333", "/mnt/d", "-o", "collection=c", "-v"]) == [
        "-v",
        "mount",
        "/mnt/d",
        "--url",
        "http://q:6333",
        "--collection",
        "c",
    ]
    assert translate(["qdrant", "/mnt/d", "-ourl=http://q:6333,api_key=k", "-t", "semfs"]) == [
        "mount",
        "/mnt/d",
        "--url",
        "http://q:6333",
        "--api-key",
        "k",
    ]
    assert translate(["/s", "/m", "-f", "-o", "collection=x"]) is None  # mount -f: fake
    with pytest.raises(SystemExit):
        translate(["/only-one"])


def test_commands_have_help() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["mount", "--help"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "Example:" in result.output and "mount.semfs" in result.output
    assert "noauto,user,collection=docs" in result.output
    result = runner.invoke(cli, ["umount", "--help"], catch_exceptions=False)
    assert result.exit_code == 0 and "Example:" in result.output


def test_umount_of_something_not_mounted_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["umount", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: {tmp_path} is not mounted"


def test_umount_refuses_a_non_semfs_mount_in_one_line() -> None:
    result = CliRunner().invoke(cli, ["umount", "/proc"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: /proc is a proc mount, not semfs: not unmounting it (--force to do it anyway)"
    )


def _click_params(args: list[str]) -> dict[str, Any]:
    command = cli.commands["mount"]
    with command.make_context("mount", list(args)) as ctx:
        return dict(ctx.params)


@pytest.mark.parametrize(
    "args",
    [
        ["MNT"],
        ["MNT", "--store", "STORE", "--log-file", "LOG"],
        ["--store=STORE", "MNT", "-c", "notes", "-f", "-o", "allow_other,uid=1", "-o", "debug"],
        ["MNT", "--collection=x", "--foreground", "--search-dir", ".find", "--log-file=LOG"],
        ["MNT", "--url", "http://q:6333", "--api-key=secret", "--no-views"],
        ["MNT", "-w", "src", "--include", "*.md", "--include=*.txt", "-m", "hash"],
        ["MNT", "--watch=src", "--exclude", "drafts/", "--follow-symlinks"],
        ["MNT", "--collections", "docs,code", "--store", "STORE"],
        ["MNT", "--all"],
    ],
)
def test_plain_mount_arguments_parse_without_click_as_click_does(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`semfs mount`'s click-free start (semfs.fusefs.cli.fastmount) passes what click would."""
    for name in ("SEMFS_STORE", "SEMFS_COLLECTION", "QDRANT_URL", "QDRANT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "STORE").mkdir()
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path)
    assert fastmount.parse(args, os.environ) is not None
    assert fastmount.parse(args, os.environ) == _click_params(args)
    monkeypatch.setenv("SEMFS_STORE", "elsewhere")
    monkeypatch.setenv("SEMFS_COLLECTION", "c2")
    monkeypatch.setenv("QDRANT_URL", "http://elsewhere:6333")
    assert fastmount.parse(args, os.environ) == _click_params(args)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--help"],
        ["MNT", "-h"],
        ["MNT", "OTHER"],
        ["MNT", "-k", "3"],
        ["MNT", "--mode=keyword"],
        ["MNT", "--connect-timeout", "5"],
        ["MNT", "--watch", "FILE"],  # click: a file, not a folder
        ["MNT", "--no-views=yes"],
        ["MNT", "-fo", "debug"],
        ["MNT", "--store"],
        ["MNT", "--store", "--log-file"],
        ["MNT", "--store", "FILE"],  # click: a file, not a folder
        ["MNT", "--log-file", "."],  # click: a folder, not a file
        ["MNT", "--", "x"],
        ["MNT", "--store="],
    ],
)
def test_mount_arguments_the_fast_start_is_unsure_of_go_to_click(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QDRANT_URL", raising=False)
    monkeypatch.delenv("QDRANT_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("x")
    assert fastmount.parse(args, os.environ) is None
    assert fastmount.parse(["MNT"], {"SEMFS_STORE": ""}) is None


def test_the_mount_start_does_not_import_click() -> None:
    """What a plain `semfs mount` imports before it forks (the console script's own path);
    the daemon imports the engine when it opens the store."""
    code = (
        "import sys\n"
        "from semfs.fusefs import cli\nfrom semfs.fusefs.cli import fastmount\n"
        "assert fastmount.parse(['/mnt/x'], {}) is not None\n"
        "import semfs.fusefs.mount.logfile, semfs.fusefs.mount.start\n"
        "ours = ('click', 'semfs', 'qdrant_edge', 'zipfile', 'uuid', 'tree_sitter')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ours))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = set(ast.literal_eval(out))
    assert {
        "semfs.fusefs.cli",
        "semfs.fusefs.cli.fastmount",
        "semfs.fusefs.mount.daemon",
        "semfs.fusefs.mount.start",
        "semfs.fusefs.mount.logfile",
    } <= loaded
    assert (
        not {"click", "semfs.fusefs.cli.group", "semfs.fusefs.cli.common", "qdrant_edge"} & loaded
    )
    # Nor what only a search or a followed folder needs: each module is paid at every start.
    reading = {"semfs.ingest.sources", "semfs.ingest.formats", "zipfile", "uuid"}
    reading |= {"semfs.ingest.syntax", "tree_sitter"}  # the code parser: only an ingest
    assert not (reading | {"semfs.ingest.search"}) & loaded


@pytest.mark.mount
def test_the_console_script_leaves_help_and_usage_errors_to_click(tmp_path: Path) -> None:
    """`semfs mount` through the installed script: what the fast start does not take is
    click's, word for word."""

    def mount(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SEMFS, "mount", *args], capture_output=True, text=True, timeout=60)

    shown = mount("--help")
    assert shown.returncode == 0 and shown.stdout.startswith("Usage: semfs mount [OPTIONS]")
    assert "Example:" in shown.stdout
    bad = mount(str(tmp_path), "--bogus")
    assert bad.returncode == 2 and "No such option '--bogus'" in bad.stderr
    missing = mount()
    assert missing.returncode == 2 and "Missing argument 'MOUNTPOINT'" in missing.stderr


def test_collections_and_all_name_the_collections_mounted_as_folders() -> None:
    """--collections A,B names them in order (a repeat once); --all the store's; neither: -c.
    Both, none named, or a bad name: one line."""
    store = lambda: ["code", "docs", "notes"]  # noqa: E731 - the store's, sorted
    assert collection_names("docs, code,docs", False, store) == ("docs", "code")
    assert collection_names(None, True, store) == ("code", "docs", "notes")
    assert collection_names(None, False, store) == ()
    for bad in (("a", True, store), (",", False, store), ("../x", False, store)):
        with pytest.raises(SemfsError):
            collection_names(*bad)
    with pytest.raises(SemfsError, match="no collection yet"):
        collection_names(None, True, list)
