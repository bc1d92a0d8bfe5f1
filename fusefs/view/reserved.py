"""The names semfs shows in every folder of a mount, which no write may make.

``D/.search/`` (the search folders; a mount may rename it with ``--search-dir``),
``D/.similar/`` and ``D/.map.md`` (with its pages ``D/.map.2.md``, ...) are semfs's own, and a
real entry of the same name would stand in for them (a real entry wins, so that a source's own
``.map.md`` is not hidden). A reader trusts what they show as semfs's answer, so a writer must
not be able to plant one: the writable mount and the MCP write tool refuse every path with such
a name in it, as a file, a folder, a link or a rename's target (the mount: EROFS, as for every
other change under what semfs adds; the write tool: one line).

Rules a caller may rely on:

* :func:`reserved_part` is the first reserved name of a '/'-separated path, or None; it looks
  at every component, so ``a/.search/q/00-results.md`` and ``a/.map.md`` are both refused.
* Names that only look alike are not reserved (``.search.md``, ``.map.x.md``, ``.Search``).
"""

from __future__ import annotations

from semfs.fusefs.view.foldermap import parse_page
from semfs.fusefs.view.searchdir import DEFAULT_NAME
from semfs.fusefs.view.similardir import SIMILAR_NAME


def is_reserved(name: str, search_dir: str = DEFAULT_NAME) -> bool:
    """Whether ``name`` (one path component) is a name semfs shows in every folder."""
    return name in (search_dir, DEFAULT_NAME, SIMILAR_NAME) or parse_page(name) is not None


def reserved_part(rel: str, search_dir: str = DEFAULT_NAME) -> str | None:
    """The first component of ``rel`` that is reserved, or None."""
    return next((part for part in rel.split("/") if is_reserved(part, search_dir)), None)


__all__ = ["is_reserved", "reserved_part"]
