"""`semfs search -c docs -c code` searches both collections as one (it searched `code` alone:
click kept the last -c), each hit naming its collection, in --json and in the results text."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.mounting import semfs

FILLER = "Nothing to see here: setup notes, a changelog entry, a list of links.\n"


def _collection(root: Path, planted: str, text: str) -> Path:
    root.mkdir()
    for n in range(4):
        (root / f"other{n}.md").write_text(f"# Other page {n}\n\n{FILLER * 3}")
    page = root / planted
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    return root


def test_search_with_two_collections_finds_a_page_of_each(tmp_path: Path) -> None:
    docs = _collection(
        tmp_path / "docs",
        "guide/retention.md",
        "# Retention\n\nThe glorbix retention window keeps backups for 30 days.\n",
    )
    code = _collection(
        tmp_path / "code",
        "src/quux.py",
        'def frobnicate_quux(path):\n    """Frobnicate the quux at path."""\n    return path\n',
    )
    for source, name in ((docs, "docs"), (code, "code")):
        semfs("ingest", str(source), "-c", name, "-m", "hash")
    query = ("search", "glorbix retention frobnicate quux", "--mode", "keyword")

    listed = json.loads(semfs(*query, "-c", "docs", "-c", "code", "--json").stdout)
    found = {(hit["collection"], hit["path"]) for hit in listed}
    assert {("docs", "guide/retention.md"), ("code", "src/quux.py")} <= found, listed
    assert [hit["rank"] for hit in listed] == list(range(1, len(listed) + 1))

    text = semfs(*query, "-c", "docs", "-c", "code").stdout
    assert "docs/guide/retention.md" in text and "code/src/quux.py" in text, text

    paths = semfs(*query, "-c", "code", "-c", "docs", "--paths").stdout.splitlines()
    assert str(docs / "guide/retention.md") in paths and str(code / "src/quux.py") in paths

    # One collection: as before, its hits only (each still naming it in --json).
    alone = json.loads(semfs(*query, "-c", "docs", "--json").stdout)
    assert {hit["collection"] for hit in alone} == {"docs"}, alone
