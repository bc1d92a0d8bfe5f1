"""The formats table (semfs.ingest.formats): one place picks a file's extractor by suffix."""

from __future__ import annotations

import pytest

from semfs.ingest import formats
from semfs.ingest.formats import text


def test_a_name_the_table_does_not_list_is_read_as_text() -> None:
    for name in ("README.md", "notes", "a.b/c", "src/app.PY", ".hidden", "dir.pdf/file"):
        assert formats.extractor_for(name) is text.extract
        assert formats.view_path(name) is None


def test_the_table_is_chosen_by_suffix_case_insensitively(monkeypatch: pytest.MonkeyPatch) -> None:
    assert formats.format_of("a/Report.PDF") == "pdf"
    assert formats.view_path("a/Report.PDF") == "a/Report.PDF.md"
    monkeypatch.setitem(formats.EXTRACTORS, ".xyz", "html")
    got = formats.extract("dir/file.XYZ", b"<p>abc</p>", isolated=False)
    assert isinstance(got, formats.Extracted) and got.view and "abc" in got.text
    # Every row names a module of the package with an extract function.
    for module in set(formats.EXTRACTORS.values()):
        assert callable(formats.extractor_for(f"f.{module}" if module != "html" else "f.htm"))


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
    assert formats.extract("f.md", "# Tïtle\n".encode()) == formats.Extracted("# Tïtle\n")
