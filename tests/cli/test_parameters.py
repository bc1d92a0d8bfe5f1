"""The `@` parameters are one table (:mod:`semfs.fusefs.view.parameters`): the parser knows
exactly its rows, and `semfs mount --help`, `semfs guide` and a search folder's README.md list
exactly its rows, with the defaults the code has."""

from __future__ import annotations

import dataclasses
import re

from semfs.fusefs.view.parameters import PARAMETERS, parameter_problem, with_parameter
from semfs.fusefs.view.searchdir import search_readme
from semfs.ingest.request import SearchRequest
from semfs.ingest.store import DEFAULT_K, MAX_K
from tests.helpers.mounting import semfs

# A parameter line: indented, the syntax, two spaces or more, the meaning.
PARAMETER_LINE = re.compile(r"^ +(@[a-z]+(?:=[A-Z]+)?) {2,}(\S.*)$", re.MULTILINE)
# A value each row that takes one accepts, and the field value it gives.
SAMPLES = {"k": ("3", 3), "min": ("0.5", 0.5)}
SYNTAXES = [p.syntax for p in PARAMETERS]


def listed(text: str) -> dict[str, str]:
    """The parameter lines of a text, syntax to meaning; each syntax once."""
    lines = PARAMETER_LINE.findall(text)
    assert len(lines) == len(dict(lines)), f"a parameter listed twice: {lines}"
    return dict(lines)


def test_the_table_covers_every_option_once() -> None:
    # The question is the folder's name, and where it searches the folder it is in.
    fields = {f.name for f in dataclasses.fields(SearchRequest)} - {"query", "under"}
    assert {p.field for p in PARAMETERS} == fields, "an option no folder sets, or the reverse"
    assert len(SYNTAXES) == len({p.name for p in PARAMETERS}) == len(PARAMETERS)


def test_the_parser_knows_exactly_the_table() -> None:
    base = SearchRequest()
    for p in PARAMETERS:
        written, value = SAMPLES[p.name] if p.takes_value else ("", p.value)
        name = f"@{p.name}={written}" if p.takes_value else f"@{p.name}"
        changed = with_parameter(base, name)
        assert changed is not None, name
        assert getattr(changed, p.field) == value, name
        # The wrong shape (a value where none is taken, or none where one is) is refused.
        assert with_parameter(base, f"@{p.name}" if p.takes_value else f"@{p.name}=1") is None
    for other in ("@bogus", "@mode=keyword", "@min_score=0.5", "@K=3", "@top=3", "@"):
        assert with_parameter(base, other) is None, other
    hint = parameter_problem("@bogus")
    assert hint == f"unknown parameter '@bogus': use one of {', '.join(SYNTAXES)}"


def check_lines(text: str, mode: str, k: int, floor: str) -> None:
    lines = listed(text)
    assert list(lines) == SYNTAXES, text
    assert [s for s, meaning in lines.items() if meaning.endswith("(default)")] == [f"@{mode}"]
    assert lines["@k=N"].endswith(f"1-{MAX_K} (default {k})")
    assert lines["@min=X"].endswith(f"(default {floor})")


def test_mount_help_lists_the_table_with_the_code_defaults() -> None:
    check_lines(semfs("mount", "--help").stdout, "hybrid", DEFAULT_K, "none")


def test_the_guide_lists_the_table_with_the_code_defaults() -> None:
    check_lines(semfs("guide").stdout, "hybrid", DEFAULT_K, "none")


def test_a_search_folder_readme_lists_the_table_with_the_mount_defaults() -> None:
    check_lines(search_readme(".search", SearchRequest()).decode(), "hybrid", DEFAULT_K, "none")
    mounts = SearchRequest(mode="keyword", k=7, min_score=0.25)
    check_lines(search_readme(".find", mounts).decode(), "keyword", 7, "0.25")
