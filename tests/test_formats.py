"""The formats table (semfs.ingest.formats): one place picks a file's extractor by suffix."""

from __future__ import annotations

import pytest

from semfs.ingest import formats
from semfs.ingest.formats import text


def test_a_name_the_table_does_not_list_is_read_as_text() -> None:
    for name in ("README.md", "notes", "a.b/c", "src/app.PY", ".hidden"):
        assert formats.extractor_for(name) is text.extract


def test_the_table_is_chosen_by_suffix_case_insensitively(monkeypatch: pytest.MonkeyPatch) -> None:
    def upper(path: str, data: bytes) -> str:
        return data.decode().upper()

    monkeypatch.setitem(formats.EXTRACTORS, ".xyz", upper)
    assert formats.extract("dir/file.XYZ", b"abc") == "ABC"
    # A dot in a folder name is no suffix.
    assert formats.extractor_for("dir.xyz/file") is text.extract


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xff\xfeh\x00i\x00", "UTF-16 text is not supported (convert it to UTF-8)"),
        (b"a\x00b", "binary file (contains NUL bytes)"),
        (b"ok \xc3", "not UTF-8 text (invalid byte at offset 3)"),
    ],
)
def test_text_says_why_it_refuses(data: bytes, reason: str) -> None:
    assert formats.extract("f.md", data) == formats.Unsupported(reason)


def test_text_is_the_bytes_decoded() -> None:
    assert formats.extract("f.md", "# Tïtle\n".encode()) == "# Tïtle\n"
