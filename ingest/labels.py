"""Heading labels: a Markdown heading's text as a reader wants it in a label or a heading path.

Used by the chunker (the heading path stored with each chunk) and by search (the ``[section]``
labels of a results file, which also read stores written before this cleaning existed).

Rules a caller may rely on:

* :func:`heading_label` keeps a heading's words and drops its markup: a Markdown link or
  image keeps its text (``[What is rustdoc?](#what-is-rustdoc)`` -> ``What is rustdoc?``), an
  HTML tag, a ``{#anchor}`` attribute, closing hashes and a permalink sign (``¶``, ``§``)
  go; whitespace is collapsed.
* :func:`dedupe_path` drops a segment equal to the one before it (``Cookies > Set Cookie >
  Set Cookie`` -> ``Cookies > Set Cookie``): a page whose title repeats as its first heading
  says it once.
"""

from __future__ import annotations

import re

# [text](target) and ![alt](src), target without spaces or with a quoted title.
_LINK = re.compile(r"!?\[([^\]]*)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
# [text][ref] reference links.
_REF_LINK = re.compile(r"!?\[([^\]]+)\]\[[^\]]*\]")
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_ATTRS = re.compile(r"\s*\{\s*[#.][^}]*\}\s*$")  # "Title {#anchor}" (Pandoc, MkDocs, kramdown)
_CLOSING = re.compile(r"(?:^|\s+)#+\s*$")
_PERMALINK = re.compile(r"\s*[¶§🔗]+\s*$")  # "#" only after a space (_CLOSING): "C#" stays


def heading_label(text: str) -> str:
    """``text`` (a heading's, without its leading ``#``) without links, anchors or tags."""
    out = _LINK.sub(r"\1", text)
    out = _REF_LINK.sub(r"\1", out)
    out = _TAG.sub("", out)
    out = _ATTRS.sub("", out)
    out = _CLOSING.sub("", out)
    out = _PERMALINK.sub("", out)
    return " ".join(out.split())


def dedupe_path(parts: list[str]) -> list[str]:
    """``parts`` without a segment equal to the one before it (case and spaces aside)."""
    out: list[str] = []
    for part in parts:
        if out and " ".join(out[-1].split()).casefold() == " ".join(part.split()).casefold():
            continue
        out.append(part)
    return out
