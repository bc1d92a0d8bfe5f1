"""Document formats: how the bytes of a source file become the text that is chunked.

One table, :data:`EXTRACTORS`, chosen in one place (:func:`extractor_for`), as ratarmount picks
an archive backend: a file name's suffix -> the module that reads that format, with
:mod:`semfs.ingest.formats.text` (UTF-8 text: Markdown, plain text, source code) for every name
the table does not list. Each extractor module has one function,
``extract(path: str, data: bytes) -> Extracted | Unsupported``, which never raises for a bad
file: it returns the text, or an :class:`Unsupported` with the one-line reason the ingest
reports.

Rules a caller may rely on:

* The text of a text file *is* its bytes decoded: the chunker's byte spans index ``data``
  itself, so the mount serves the original file (its sha256 matches the source).
* Every other format gives a *text view* (``Extracted.view``): Markdown served at
  :func:`view_path` (``report.pdf`` -> ``report.pdf.md``), with marker headings for its pages,
  slides or chapters (:data:`MARKER`); the original bytes are stored and served beside it.
* A converted format is extracted in a worker process bounded in time and memory
  (:mod:`semfs.ingest.formats.worker`), never in the caller's.
* A file that is no document (:data:`AS_IS_SUFFIXES`), or whose bytes no extractor reads,
  is stored as its original and served as it is, without a view and without chunks.
* A format is added as one module here plus one row in :data:`EXTRACTORS`; nothing outside
  this package names a format.
"""

from __future__ import annotations

import importlib

from semfs.ingest.formats import text
from semfs.ingest.formats.base import MARKER, VIEW_SUFFIX, Extracted, Extractor, Unsupported

__all__ = [
    "AS_IS",
    "AS_IS_SUFFIXES",
    "EXTRACTORS",
    "MARKER",
    "VIEW_SUFFIX",
    "Extracted",
    "Extractor",
    "Unsupported",
    "extract",
    "extractor_for",
    "format_of",
    "stored_as_is",
    "view_path",
]

# Suffix (lower case, with the dot) -> the module of this package that reads it. Modules, not
# functions: the parent process never imports PDFium or lxml, only the worker does.
EXTRACTORS: dict[str, str] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".odt": "odt",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".epub": "epub",
}
# Files that are not documents: images, stylesheets, fonts, templates, archives, media and
# compiled files. They are stored as they are (served byte-identical) and never searched, as
# is any file whose bytes no extractor reads (binary, not UTF-8, a scanned PDF).
AS_IS_SUFFIXES = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".ico", ".tif", ".tiff", ".avif",
    ".svg", ".eps", ".psd",
    ".css", ".scss", ".sass", ".less", ".map",
    ".woff", ".woff2", ".ttf", ".otf", ".eot",
    ".j2", ".jinja", ".jinja2", ".tmpl", ".tpl", ".mustache", ".hbs", ".handlebars", ".njk",
    ".liquid",
    ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".tar", ".jar", ".whl",
    ".mp3", ".mp4", ".m4a", ".wav", ".ogg", ".webm", ".mov", ".avi",
    ".pyc", ".so", ".dll", ".exe", ".bin", ".wasm", ".o", ".a", ".class",
})  # fmt: skip
# What a file stored as it is records as its extractor (DocumentRecord.extractor).
AS_IS = "as-is"
# Bumped when an extractor's output changes: views made by another version are made again.
EXTRACTOR_VERSION = 2


def format_of(path: str) -> str | None:
    """The converted format (a module name of :data:`EXTRACTORS`) of ``path``, or None for
    text. By suffix, case-insensitively; a dot in a folder name is no suffix."""
    dot = path.rfind(".")
    if dot > path.rfind("/"):
        return EXTRACTORS.get(path[dot:].lower())
    return None


def stored_as_is(path: str) -> bool:
    """Whether ``path`` is no document by its suffix (:data:`AS_IS_SUFFIXES`): stored as
    its original bytes, not read and not searched."""
    dot = path.rfind(".")
    return dot > path.rfind("/") and path[dot:].lower() in AS_IS_SUFFIXES


def extractor_for(path: str) -> Extractor:
    """The extractor for ``path`` (a relative path in the source), run in this process."""
    module = format_of(path)
    if module is None:
        return text.extract
    found: Extractor = importlib.import_module(f"{__name__}.{module}").extract
    return found


def view_path(path: str) -> str | None:
    """Where the text view of ``path`` is served (``a/report.pdf`` -> ``a/report.pdf.md``),
    or None when ``path`` is text and served as itself."""
    return None if format_of(path) is None else path + VIEW_SUFFIX


def extractor_tag(path: str) -> str | None:
    """What made ``path``'s view ("pdf/1"), or None for text: a stored view made by another
    tag is extracted again even when the original did not change."""
    module = format_of(path)
    return None if module is None else f"{module}/{EXTRACTOR_VERSION}"


def extract(path: str, data: bytes, *, isolated: bool = True) -> Extracted | Unsupported:
    """``data`` (the whole file) as text, or why not. A converted format runs in the
    bounded worker process unless ``isolated`` is False (tests, benchmarks)."""
    module = format_of(path)
    if module is None:
        return text.extract(path, data)
    if not isolated:
        return extractor_for(path)(path, data)
    from semfs.ingest.formats import worker

    return worker.shared().extract(module, path, data)
