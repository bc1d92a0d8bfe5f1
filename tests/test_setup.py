"""scripts/setup.sh installs every external command the tests run, on a fresh Debian.

A developer's machine has tools a fresh one lacks (ripgrep was one): this reads the commands
out of the tests themselves and checks each against what setup.sh installs or what Debian
always has (Essential packages).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

# Commands from Essential: yes packages (coreutils, diffutils, findutils, grep, sed, dash,
# tar, util-linux), present on every Debian system; fusermount comes with fuse3, which setup.sh
# installs for everyone.
ESSENTIAL = {
    "cat",
    "chmod",
    "chown",
    "cmp",
    "cp",
    "dd",
    "diff",
    "du",
    "find",
    "grep",
    "head",
    "ls",
    "mkdir",
    "mv",
    "sed",
    "seq",
    "setpriv",
    "sh",
    "sleep",
    "tail",
    "tar",
    "true",
    "wc",
    "xargs",
}
SETUP_ALWAYS = {"fusermount", "fusermount3"}
SETUP = REPO / "scripts" / "setup.sh"
INSTALL_DOC = REPO / "docs" / "install.md"
# run("cmd", ...), run(["cmd", ...]), Popen(["cmd", ...]), same_output("cmd", ...), and the
# commands of an `sh -c "..."` line.
_CALL = re.compile(r'\b(?:run|Popen|same_output)\(\s*\[?\s*"([A-Za-z0-9_.-]+)"')
_SHELL = re.compile(r'"sh",\s*"-c",\s*"([^"]*)"')


def commands_the_tests_run() -> set[str]:
    found: set[str] = set()
    for path in (REPO / "tests").rglob("*.py"):
        if path.name == Path(__file__).name:
            continue  # the examples in this file's comments
        text = path.read_text()
        found.update(_CALL.findall(text))
        for line in _SHELL.findall(text):
            found.update(part.split()[0] for part in line.split("|") if part.split())
    found.discard("sh")  # listed in ESSENTIAL; its own commands were added above
    return found | {"sh"}


def setup_tools() -> set[str]:
    text = (REPO / "scripts" / "setup.sh").read_text()
    match = re.search(r'^TEST_TOOLS="([^"]*)"', text, re.M)
    assert match, "scripts/setup.sh has no TEST_TOOLS line"
    return {pair.split(":")[0] for pair in match.group(1).split()}


def test_setup_installs_every_command_the_tests_run() -> None:
    commands = commands_the_tests_run()
    assert {"diff", "rg", "find"} <= commands  # the scan itself works
    missing = commands - ESSENTIAL - SETUP_ALWAYS - setup_tools()
    assert not missing, f"add these to TEST_TOOLS in scripts/setup.sh: {sorted(missing)}"


def test_setup_installs_every_library_the_tests_load() -> None:
    """A library a test loads by name (``CDLL("libbsd.so.0")``) is in setup.sh's TEST_LIBS,
    so the test runs in CI instead of skipping."""
    loaded = set()
    for path in (REPO / "tests").rglob("*.py"):
        loaded.update(re.findall(r'CDLL\(\s*"(lib[\w.+-]+\.so[.\d]*)"', path.read_text()))
    assert "libbsd.so.0" in loaded  # the scan itself works
    text = (REPO / "scripts" / "setup.sh").read_text()
    match = re.search(r'^TEST_LIBS="([^"]*)"', text, re.M)
    assert match, "scripts/setup.sh has no TEST_LIBS line"
    installed = {pair.split(":")[0] for pair in match.group(1).split()}
    assert loaded <= installed, f"add these to TEST_LIBS in scripts/setup.sh: {loaded - installed}"


def test_the_tools_tests_skip_without_are_installed() -> None:
    """Tests that skip when a command is missing (ps, sysctl, setpriv, mkfs.ext4) have it
    installed by setup.sh, so CI runs them rather than skipping (the credential switch's only
    test was one)."""
    assert {"ps", "sysctl", "setpriv", "mkfs.ext4"} <= setup_tools()


def test_this_machine_has_them() -> None:
    """What the suite needs is here: a failure names the tool instead of a FileNotFoundError."""
    absent = sorted(c for c in commands_the_tests_run() - SETUP_ALWAYS if shutil.which(c) is None)
    assert not absent, f"missing {absent}: run scripts/setup.sh test"


# Commands the docs show that are neither Essential nor installed with FUSE or semfs: each
# must be in setup.sh's DOC_TOOLS (the README told readers to run getfattr, which setup did
# not install).
NON_ESSENTIAL_DOC_COMMANDS = {"getfattr", "setfattr", "xattr", "attr", "rg", "jq", "tree", "strace"}


def test_setup_installs_the_commands_the_docs_show() -> None:
    text = (REPO / "scripts" / "setup.sh").read_text()
    match = re.search(r'^DOC_TOOLS="([^"]*)"', text, re.M)
    assert match, "scripts/setup.sh has no DOC_TOOLS line"
    installed = {pair.split(":")[0] for pair in match.group(1).split()} | setup_tools()
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    shown = set()
    for doc in docs:
        for span in re.findall(r"`([^`\n]+)`", doc.read_text()):
            first = span.split()[0] if span.split() else ""
            if first in NON_ESSENTIAL_DOC_COMMANDS:
                shown.add((first, doc.name))
    missing = sorted(f"{cmd} (in {name})" for cmd, name in shown if cmd not in installed)
    assert not missing, f"the docs show commands setup.sh does not install: {missing}"


def test_the_installed_man_page_is_current() -> None:
    """man/semfs.1 (installed as share/man/man1/semfs.1) says what the commands' --help says:
    after changing a help text, `scripts/manpage.py --write` (land.sh runs this test)."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "manpage.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_man_finds_the_page_beside_the_venvs_commands() -> None:
    """`man semfs` with the venv's bin/ on PATH (activated, pipx, uv tool): man-db looks in
    bin/../share/man, where the wheel installs the page and setup.sh links it."""
    venv_bin = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}
    env.pop("MANPATH", None)
    proc = subprocess.run(
        ["man", "-w", "semfs"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).resolve() == (REPO / "man" / "semfs.1").resolve()


def test_the_install_guides_manpath_line_finds_the_page_without_the_venv_on_path() -> None:
    """pipx before 1.3 (Debian 12's 1.1.0) links the command but no man page: the install
    guide's MANPATH line, with this venv in place of pipx's, finds it (the trailing colon keeps the
    system's pages)."""
    line = re.search(
        r'MANPATH="\$HOME/\.local/pipx/venvs/semfs(/share/man:)"', INSTALL_DOC.read_text()
    )
    assert line is not None, "docs/install.md names no MANPATH line for an older pipx"
    env = {**os.environ, "MANPATH": f"{sys.prefix}{line.group(1)}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        ["man", "-w", "semfs"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).resolve() == (REPO / "man" / "semfs.1").resolve()
    assert subprocess.run(["man", "-w", "ls"], env=env, capture_output=True).returncode == 0


def test_apt_waits_for_another_apts_lock() -> None:
    """unattended-upgrades holds the dpkg lock on a fresh machine: every apt-get of setup.sh
    waits for it (up to 10 minutes) instead of failing at once."""
    calls = [
        line
        for line in SETUP.read_text().splitlines()
        if "apt-get " in line and not line.lstrip().startswith(("#", "echo"))
    ]
    calls = [line for line in calls if "command -v apt-get" not in line]
    assert len(calls) == 2, calls
    assert all('"${wait_lock[@]}"' in line for line in calls), calls
    assert "wait_lock=(-o DPkg::Lock::Timeout=600)" in SETUP.read_text()
