""".gitignore and .ignore (semfs.ingest.ignores): the files a scan takes are the files git
and ripgrep take, checked against `git check-ignore` and `rg --files` on a planted tree."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from semfs.ingest.pipeline import ingest
from semfs.ingest.sources import scan, scan_paths
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_store

GITIGNORE = {
    ".gitignore": "*.log\nbuild/\n/secret.txt\n!important.log\ndocs/**/draft-*.md\n"
    "node_modules\n# a comment\n\\#hash.md\ncache/*\n!cache/keep.md\n*.sw[op]\n",
    "sub/.gitignore": "*.tmp\n!keep.tmp\n/local.md\nnested/\n",
    "sub/deeper/.gitignore": "!*.log\n",
    "docs/.gitignore": "*.draft\n",
}
FILES = [
    "README.md",
    "app.log",
    "important.log",
    "secret.txt",
    "sub/secret.txt",
    "build/out.md",
    "src/build",  # a file named like a folder pattern: `build/` matches folders only
    "src/build2/x.md",
    "src/main.py",
    "docs/guide.md",
    "docs/a/b/draft-1.md",
    "docs/a/final.md",
    "docs/notes.draft",
    "node_modules/pkg/index.js",
    "lib/node_modules/x.js",
    "#hash.md",
    "cache/tmp.md",
    "cache/keep.md",
    "edit.swp",
    "sub/a.tmp",
    "sub/keep.tmp",
    "sub/local.md",
    "sub/x/local.md",
    "sub/nested/file.md",
    "sub/deeper/trace.log",
    "sub/deeper/nested/y.md",
    "excluded-by-info.md",
    ".hidden.md",
]


def plant(root: Path) -> list[str]:
    for rel in FILES:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{rel}\n")
    for rel, rules in GITIGNORE.items():
        (root / rel).write_text(rules)
    return sorted([*FILES, *GITIGNORE])


def git_env(tmp_path: Path) -> dict[str, str]:
    """No user's or system's git configuration (a global excludes file would change the
    answer, and semfs reads none)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }


def git_repo(root: Path, env: dict[str, str]) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed (scripts/setup.sh installs it)")
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("excluded-by-info.md\n")


def taken(root: Path, ignored: list[str] | None = None) -> list[str]:
    files, skipped = scan(root, ignored=ignored)
    assert skipped == []
    return [f.path for f in files]


def test_scan_takes_what_git_check_ignore_does_not_ignore(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    every = plant(root)
    env = git_env(tmp_path)
    git_repo(root, env)
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="\n".join(every) + "\n",
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
    )
    assert checked.returncode in (0, 1), checked.stderr
    by_git = set(checked.stdout.split("\n")) - {""}
    # Files below an ignored folder: git leaves them out with the folder (check-ignore names
    # only what a pattern matches): the folder's walk is what ls-files shows.
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        check=True,
    ).stdout.split("\n")
    expected = sorted(set(listed) - {""})
    assert set(expected) <= set(every) - by_git
    ignored: list[str] = []
    assert taken(root, ignored) == expected
    # What was left out is reported: folders once (not entered), files by name.
    assert "build/" in ignored and "node_modules/" in ignored and "app.log" in ignored
    assert not any(p.startswith("build/") and p != "build/" for p in ignored)
    # Spot checks of git's rules, so a failure says which one.
    kept = set(expected)
    assert {"important.log", "src/build", "sub/keep.tmp", "sub/deeper/trace.log"} <= kept
    assert {"cache/keep.md", "sub/x/local.md", "docs/a/final.md", ".hidden.md"} <= kept
    assert not {"secret.txt", "excluded-by-info.md", "#hash.md", "docs/a/b/draft-1.md"} & kept
    assert "sub/secret.txt" in kept and "sub/local.md" not in kept


def test_each_path_alone_is_judged_as_the_walk_judges_it(tmp_path: Path) -> None:
    """A watcher's batch (scan_paths) takes exactly what a full scan takes."""
    root = tmp_path / "repo"
    every = plant(root)
    git_repo(root, git_env(tmp_path))
    full = set(taken(root))
    for rel in every:
        files, _ = scan_paths(root, [rel])
        assert ({f.path for f in files} == {rel}) == (rel in full), rel
    files, _ = scan_paths(root, ["sub", "docs/a"])
    assert {f.path for f in files} == {p for p in full if p.startswith(("sub/", "docs/a/"))}


def test_gitignore_applies_only_in_a_repository_and_ignore_always(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    plant(root)
    # No .git: ripgrep reads no .gitignore (its default), nor does semfs.
    assert "app.log" in taken(root)
    (root / ".ignore").write_text("*.log\n!important.log\n")
    (root / "sub" / ".ignore").write_text("*.md\n")
    names = taken(root)
    assert "app.log" not in names and "important.log" in names
    assert not [n for n in names if n.startswith("sub/") and n.endswith(".md")]


def test_ignore_files_beat_gitignore_as_in_ripgrep(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    plant(root)
    env = git_env(tmp_path)
    git_repo(root, env)
    # .ignore takes back what .gitignore leaves out, and leaves out what it keeps.
    (root / ".ignore").write_text("!app.log\nREADME.md\n")
    (root / "sub" / "deeper" / ".ignore").write_text("*.log\n")
    names = taken(root)
    assert "app.log" in names and "README.md" not in names
    assert "sub/deeper/trace.log" not in names
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed (scripts/setup.sh installs it for the tests)")
    listed = subprocess.run(
        ["rg", "--files", "--hidden", "--no-config", "-g", "!.git"],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        check=True,
    ).stdout.split("\n")
    assert names == sorted(p.removeprefix("./") for p in listed if p)


def test_a_source_inside_a_repository_reads_its_parents_rules(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    plant(root)
    git_repo(root, git_env(tmp_path))
    # The source is a folder of the repository: the root's .gitignore still applies.
    names = taken(root / "sub")
    assert "deeper/trace.log" in names  # sub/deeper/.gitignore takes *.log back
    assert "a.tmp" not in names and "keep.tmp" in names
    (root / "sub" / "plain.log").write_text("x\n")
    assert "plain.log" not in taken(root / "sub")  # the root's *.log


def test_a_changed_gitignore_re_reads_its_folder(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    plant(root)
    git_repo(root, git_env(tmp_path))
    with open_store(CollectionAddress(store=tmp_path / "store")) as store:
        report = ingest(root, store, model="hash")
        assert "sub/a.tmp" not in report.added and "sub/keep.tmp" in report.added
        assert "build/" in report.ignored
        (root / "sub" / ".gitignore").write_text("local.md\n")
        # A watcher's batch names only the rule file: its folder is read again.
        again = ingest(root, store, model="hash", paths=["sub/.gitignore"], keep_failed=True)
        assert again.added == ["sub/a.tmp", "sub/deeper/nested/y.md", "sub/nested/file.md"]
        assert again.deleted == ["sub/x/local.md"]
        paths = {d.path for d in store.list_documents()}
        # A rule file at the top re-reads the whole source.
        (root / ".gitignore").write_text("")
        top = ingest(root, store, model="hash", paths=[".gitignore"], keep_failed=True)
        assert {"app.log", "build/out.md", "node_modules/pkg/index.js"} <= set(top.added)
    assert "README.md" in paths and "sub/x/local.md" not in paths


AS_NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing")
@pytest.mark.parametrize(
    "plant",
    [
        {".ignore": "*\n"},
        {".gitignore": "*\n", ".git/HEAD": "ref: refs/heads/main\n"},
        {".git/info/exclude": "*\n"},
        {".ignore": "!secrets/\n"},
    ],
    ids=["ignore-all", "gitignore-all", "exclude-all", "take-back-secrets"],
)
def test_rule_files_another_user_plants_above_the_source_do_nothing(
    open_tmp: Path, plant: dict[str, str]
) -> None:
    """Issue 46.5: in a 1777 parent, nobody's rule files neither delete root's documents
    nor take back what the source's own .gitignore leaves out."""
    shared = open_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    src = shared / "src"
    for rel, text in {"a.md": "alpha\n", "docs/b.md": "bravo\n", "secrets/key.md": "k\n"}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    take_back = plant == {".ignore": "!secrets/\n"}
    if take_back:
        (src / ".git").mkdir()  # the source is its own repository, which leaves secrets/ out
        (src / ".gitignore").write_text("secrets/\n")
    with open_store(CollectionAddress(store=open_tmp / "store")) as store:
        ingest(src, store, model="hash")
        before = sorted(d.path for d in store.list_documents())
        assert ("secrets/key.md" in before) != take_back and "a.md" in before
        for rel, text in plant.items():
            script = 'mkdir -p "$(dirname "$1")" && printf "%s" "$2" > "$1"'
            planted = [*AS_NOBODY, "sh", "-c", script, "sh", str(shared / rel), text]
            subprocess.run(planted, check=True)
        report = ingest(src, store, model="hash")
        assert report.deleted == [] and report.added == []
        assert sorted(d.path for d in store.list_documents()) == before
    # The same files in a folder the user trusts (theirs, written by no one else) count.
    shared.chmod(0o755)
    subprocess.run(["chown", "-R", "root:root", str(shared)], check=True)
    names = taken(src)
    assert "secrets/key.md" in names if take_back else "a.md" not in names


def test_a_large_ignore_file_is_read_not_an_error(tmp_path: Path) -> None:
    """Issue 46 attack 4: an 82 KB `.ignore` of ~2,500 `*.extN` lines made pathspec's RE2
    backend raise re2.Error ("failed to compile Set"): `semfs ingest` failed, and a watch
    retried every 5 s. Its rules now hold, `!` included, through the command as a user runs it."""
    from tests.helpers.mounting import semfs

    root = tmp_path / "src"
    plant(root)
    (root / "data.ext7").write_text("left out\n")
    (root / "keep.ext9").write_text("taken back\n")
    lines = [f"*.ext{i}" for i in range(2500)] + ["!keep.ext9"]
    (root / ".ignore").write_text("\n".join(lines) + "\n")
    assert len((root / ".ignore").read_bytes()) > 20_000
    names = taken(root)
    assert "data.ext7" not in names and "keep.ext9" in names and "app.log" in names
    store = tmp_path / "store"
    run = semfs("ingest", str(root), "--store", str(store), "-m", "hash", check=False)
    assert run.returncode == 0, run.stderr
    with open_store(CollectionAddress(store=store)) as s:
        stored = {d.path for d in s.list_documents()}
    assert "keep.ext9" in stored and "data.ext7" not in stored
