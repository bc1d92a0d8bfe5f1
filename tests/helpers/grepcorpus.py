"""A corpus for grep tests: the sample corpus plus unicode text and a line cut by chunks.

GNU grep over the source folder is the oracle (the mount is byte-identical to it; the MCP
tests compare against a real mount too). grep runs in the folder with no file operand, so
it prints paths relative to it, like the grep tool.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from semfs.ingest.store import Store
from tests.helpers import SAMPLE_CORPUS

UNICODE_TEXT = """\
# Grüße

Grüße aus München und Köln.
MÜNCHEN liegt in Bayern; münchen schreibt man groß.
naïve café, NAÏVE CAFÉ
日本語のテキスト: 検索 テスト
Straße und STRASSE
"""
LONG_WORDS = 1200  # one line of this many words: the stand-in model cuts it into ~7 chunks
LONG_PATH = "long/one-line.txt"

# (pattern, regex, ignore_case): literal, regex, -i, unicode; the boundary pattern is added
# per store (it depends on where the chunks were cut).
PATTERNS = [
    ("openapi", False, False),
    ("api key", False, False),
    ("API key", False, True),
    ("docs.json", False, False),  # '.' is literal: grep -F
    ("the custom domain", False, True),
    ("München", False, False),
    ("münchen", False, True),
    ("naïve café", False, True),
    ("日本語", False, False),
    ("zzz-not-anywhere", False, False),
    (r"mint(lify)?\.com", True, False),
    (r"^## [A-Z]", True, False),
    (r"[[:digit:]]{3,}px", True, False),
    (r"\<api\>", True, True),
    (r"(get|post)Started", True, True),
    (r"[0-9]+", True, False),  # no literal part: a scan
    (r"w0500 w050[0-9]", True, False),
]


def build(dst: Path) -> Path:
    """The corpus at ``dst``."""
    shutil.copytree(SAMPLE_CORPUS, dst)
    (dst / "unicode").mkdir()
    (dst / "unicode" / "grüße.md").write_text(UNICODE_TEXT, encoding="utf-8")
    (dst / "long").mkdir()
    words = " ".join(f"w{i:04d}" for i in range(LONG_WORDS))
    (dst / LONG_PATH).write_text(f"start\n{words}\nend\n")
    return dst


def boundary_pattern(store: Store) -> str:
    """Text that straddles the first chunk boundary inside the long line."""
    rec = store.get_document(LONG_PATH)
    assert rec is not None and rec.chunks > 2, "the long line must span several chunks"
    first, second = store.get_chunks(LONG_PATH, rec.gen, [1, 2])
    assert not first.text.endswith("\n"), "the boundary must fall inside the line"
    return first.text.rstrip().rsplit(" ", 1)[-1] + " " + second.text.split(" ", 1)[0]


def gnu_grep(
    root: Path,
    pattern: str,
    regex: bool,
    ignore_case: bool,
    path: str = "",
    mount_order: bool = True,
) -> list[str]:
    """What ``grep -rn`` prints in ``root`` (-F for a fixed string, -E for a regex).

    ``grep -r`` visits a directory in the order the file system lists it: on the mount that
    is sorted by name, elsewhere it is not, so by default the lines are put in the mount's
    order (files by path components, lines in file order).
    """
    flags = "-rn" + ("E" if regex else "F") + ("i" if ignore_case else "")
    cmd = ["grep", flags, "-H", "--", pattern] + ([path] if path else [])
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(cmd, cwd=root, capture_output=True, env=env, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    out = proc.stdout.decode("utf-8")
    lines = out.split("\n")[:-1] if out else []  # not splitlines(): \r and \f are not ends
    if not mount_order:
        return lines

    def key(line: str) -> tuple[list[str], int]:
        m = re.match(r"(.*?):(\d+):", line)
        assert m is not None, line
        return m.group(1).split("/"), int(m.group(2))

    return sorted(lines, key=key)
