"""The results text: a search's hits as the compact Markdown an agent reads in one go.

One form for every front end: a ``.search`` directory's ``00-results.md``, the MCP ``search``
tool and ``semfs search``. It is sized to the answer, not to a fixed budget:

* a title line (``# Search: QUESTION``, a long question cut to ``QUERY_CHARS``) and one
  line of settings and scope;
* the best passage, answer first: ``Answer: RANK. PATH lines A-B [section path]`` and the
  lines of the best line of all the hits with its window (about 400 bytes, see
  :data:`semfs.ingest.search.excerpts.LEAD_CHARS`); a code hit names its definition instead
  of a section. Its lines are not shown again below;
* a ranked list, one line a document: rank, path, match strength (0-1 and its label), and
  the title where it says more than the path does;
* then the other windows that answer the question: per hit that has any, ``## RANK. PATH``, then
  its lines, each prefixed with its line number as ``sed -n`` counts, under a ``[heading
  path]`` label wherever the section changes. The windows' size is the search's choice
  (:mod:`semfs.ingest.search.excerpts` stops when the next line would add little), so
  this module only lays them out.

No legend: the agent guide (``semfs guide``) says what the figures mean, once. With ``full``,
each hit's best passage follows whole instead of its windows (fenced, verbatim).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from semfs.ingest.labels import dedupe_path, heading_label
from semfs.ingest.limits import NAME_MAX
from semfs.ingest.store import MODES
from semfs.ingest.store.schema import OutlineEntry

if TYPE_CHECKING:
    from semfs.ingest.request import SearchRequest
    from semfs.ingest.search import Hit

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_BACKTICKS = re.compile(r"`+")
_WORD = re.compile(r"[a-z0-9]+")
# Characters of one heading level in a window's label.
LABEL_LEVEL_CHARS = 40
# Between the levels of a code label: not ">" (C++ and Rust names hold it), and one a reader
# takes for "inside" (as Sourcegraph and IDE breadcrumbs show it).
CODE_SEPARATOR = " \u203a "
# Characters of a title in the ranked list: one line, not a paragraph.
TITLE_CHARS = 60
# Characters of the query in the title line: the agent wrote it (and a query directory is
# named after it), so the file names it only to be recognised; long questions cost ~150 B
# whole, ~20 B more at 60 than at 40 (most of the public sets' questions are longer).
QUERY_CHARS = 40


def render(
    query: str,
    hits: Sequence[Hit],
    settings: str,
    full: bool = False,
    links: Sequence[str] = (),
    empty_note: str = "",
    empty_hint: str = "Name the folder after a question.",
    miss: str = "",
) -> str:
    """The results text for ``hits`` of ``query``. ``settings`` is the second line (mode, k,
    scope); ``links`` the names of the hits' links where there are any (``@full`` shows
    them); ``empty_note`` a line to add when nothing matched (e.g. why); ``empty_hint`` what
    to do when the query is empty (front ends ask for it differently); ``miss`` what the
    search's mode adds when nothing matched (its row's ``miss``)."""
    n = len(hits)
    shown = query if len(query) <= QUERY_CHARS else query[: QUERY_CHARS - 1].rstrip() + "…"
    lines = [
        f"# Search: {shown}" if query else "# Search: (empty query)",
        f"{settings} · {n} document" + ("" if n == 1 else "s"),
        "",
    ]
    if not hits:
        lines.append("No documents match." if query else empty_hint)
        if empty_note:
            lines.append(empty_note)
        if query and miss:
            lines.append(miss)
        return "\n".join(lines) + "\n"
    if not full:
        lines += answer(hits)
    lines += [list_entry(hit) for hit in hits]
    lines.append("")
    for i, hit in enumerate(hits):
        if full:
            lines += _full_passage(hit, links[i] if i < len(links) else "")
        elif rest := tuple(e for e in hit.excerpts if not e.lead):
            # The best passage's section is not labelled again right under it.
            lead = [e for e in hit.excerpts if e.lead]
            seen = short_heading(lead[-1].heading, hit.title) if lead else None
            lines += windows(replace(hit, excerpts=rest), seen)
    return "\n".join(lines).rstrip("\n") + "\n"


def answer(hits: Sequence[Hit]) -> list[str]:
    """The best passage first (the excerpts marked ``lead``, in one hit): ``Answer: RANK.
    PATH lines A-B [section path]`` (a code hit: ``PATH:LINE · definition``, then its
    signature), then its numbered lines and a blank line; nothing when no hit has one."""
    for hit in hits:
        lead = [e for e in hit.excerpts if e.lead]
        if not lead:
            continue
        first, last = lead[0].start_line, lead[-1].end_line
        where = lead[0].definition
        if where is not None:
            out = [f"Answer: {hit.rank}. {hit.path}:{where.line} · {code_label(where.label)}"]
            if where.line < first:
                out.append(f"{where.line}: {where.signature}")
        else:
            span = f"line {first}" if first == last else f"lines {first}-{last}"
            place = f" ({hit.place})" if hit.place else ""
            head = short_heading(lead[0].heading, hit.title)
            out = [f"Answer: {hit.rank}. {hit.path}{place} {span}" + (f" [{head}]" if head else "")]
        for ex in lead:
            out += [f"{number}: {line}" for number, line in ex.lines]
        return [*out, ""]
    return []


def list_entry(hit: Hit) -> str:
    """``1. deploy/domains.mdx (0.93 strong) Custom domains``: the title only where it holds a
    word the path does not (a title that restates the file name costs bytes and says
    nothing)."""
    entry = f"{hit.rank}. {hit.path} ({hit.strength:.2f} {hit.strength_label})"
    title = one_line(hit.title)
    if title and not set(_WORD.findall(title.lower())) <= set(_WORD.findall(hit.path.lower())):
        if len(title) > TITLE_CHARS:
            title = title[: TITLE_CHARS - 1].rstrip() + "…"
        entry += f" {title}"
    return entry


def windows(hit: Hit, shown: str | None = None) -> list[str]:
    """A hit's windows: ``## RANK. PATH`` (and its place, for a converted document), then
    numbered lines, a ``[section]`` label wherever the heading path changes (the title's
    level left out: the list shows it). Source code names its definitions instead: see
    :func:`code_windows`. ``shown``: the section the reader saw last (not labelled again)."""
    if any(ex.definition is not None for ex in hit.excerpts):
        return code_windows(hit)
    # A converted document's place (a page, a slide) tells where its text view came from.
    out = [f"## {hit.rank}. {hit.path}" + (f" ({hit.place})" if hit.place else "")]
    for ex in hit.excerpts:
        head = short_heading(ex.heading, hit.title)
        if head != shown:
            if head or shown is not None:
                out.append(f"[{head or '(before the first heading)'}]")
            shown = head
        out += [f"{number}: {line}" for number, line in ex.lines]
    out.append("")
    return out


def code_windows(hit: Hit) -> list[str]:
    """A source code hit's windows: ``## RANK. PATH:LINE · LABEL`` (the definition of its
    best lines, at its signature's line; see :func:`code_label`), then that signature as its
    first line, then those lines; then its other lines in file order. Where the lines move
    to another definition, its label in brackets and its signature come first."""
    # The best lines' definition first (it names the hit), then the others in file order.
    best = next((e for e in hit.excerpts if e.best and e.definition), None)
    best = best or next(e for e in hit.excerpts if e.definition)
    ordered = [best, *(e for e in hit.excerpts if e is not best)]
    where = best.definition
    assert where is not None
    out = [f"## {hit.rank}. {hit.path}:{where.line} · {code_label(where.label)}"]
    shown: OutlineEntry | None = where
    signed: set[OutlineEntry] = set()
    for ex in ordered:
        where = ex.definition
        if where != shown:
            out.append(f"[{code_label(where.label)}]" if where else "[(outside definitions)]")
            shown = where
        if where is not None and where not in signed and where.line < ex.start_line:
            out.append(f"{where.line}: {where.signature}")
        if where is not None:
            signed.add(where)
        out += [f"{number}: {line}" for number, line in ex.lines]
    out.append("")
    return out


def code_label(label: str) -> str:
    """A definition's label path as a results file shows it, its levels joined by
    :data:`CODE_SEPARATOR` (``class Uploader`` U+203A ``def f``): its last three levels, each
    cut to ``LABEL_LEVEL_CHARS``."""
    parts = [one_line(p) for p in label.split(" > ") if p.strip()]
    cut = [p if len(p) <= LABEL_LEVEL_CHARS else p[: LABEL_LEVEL_CHARS - 1] + "…" for p in parts]
    return CODE_SEPARATOR.join((["…"] if len(cut) > 3 else []) + cut[-3:])


def short_heading(heading: str, title: str) -> str:
    """A heading path for a label: without the document's title (the list shows it), its
    last two levels, each cut to ``LABEL_LEVEL_CHARS``; outer levels left out show as ``…``."""
    parts = dedupe_path([one_line(heading_label(p)) for p in heading.split(" > ") if p.strip()])
    parts = [p for p in parts if p]
    if parts and parts[0] == one_line(title):
        parts = parts[1:]
    cut = [p if len(p) <= LABEL_LEVEL_CHARS else p[: LABEL_LEVEL_CHARS - 1] + "…" for p in parts]
    return " > ".join((["…"] if len(cut) > 2 else []) + cut[-2:])


def one_line(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())


def _full_passage(hit: Hit, link: str) -> list[str]:
    """A hit's best chunk, whole: its line range, score, link, section, then the passage."""
    out = [
        f"## {hit.rank}. {hit.path} (lines {hit.start_line}-{hit.end_line}) score {hit.score:.4f}",
        "",
    ]
    meta = f"link: {link}" if link else ""
    if hit.heading:
        meta += (" · " if meta else "") + f"section: {one_line(hit.heading)}"
    if meta:
        out += [meta, ""]
    passage = hit.text.strip("\n")
    # A fence longer than any backtick run inside, so the passage cannot close it.
    longest = max((len(m) for m in _BACKTICKS.findall(passage)), default=0)
    fence = "`" * max(3, longest + 1)
    return [*out, fence, passage, fence, ""]


def link_names(hits: tuple[Hit, ...], k: int, shown: Callable[[str], str] = str) -> tuple[str, ...]:
    """``01-fonts.mdx``, ...: the rank keeps names unique and makes ``ls`` order rank order.
    ``shown``: where the tree shows a hit's document (a hidden view's original)."""
    width = max(2, len(str(k)))
    return tuple(_fit(f"{h.rank:0{width}d}-", shown(h.path).rpartition("/")[2]) for h in hits)


def _fit(prefix: str, name: str) -> str:
    """``prefix + name`` cut to NAME_MAX bytes, keeping a short extension."""
    full = prefix + name
    if len(full.encode("utf-8", "surrogateescape")) <= NAME_MAX:
        return full
    stem, dot, ext = name.rpartition(".")
    suffix = dot + ext if stem and len(ext) <= 16 else ""
    base = name[: len(name) - len(suffix)]
    while (
        base and len((prefix + base + "…" + suffix).encode("utf-8", "surrogateescape")) > NAME_MAX
    ):
        base = base[:-1]
    return prefix + base + "…" + suffix


def results_file(
    request: SearchRequest,
    hits: tuple[Hit, ...],
    names: tuple[str, ...],
    *,
    where: str | None = None,
    tools: bool = False,
) -> bytes:
    """The results file: :func:`semfs.ingest.search.results.render` with the request's
    settings line (see that module for the form; ``where`` says where it looked, by default
    the request's folder); ``tools``: for the MCP search tool, which has no folders to name."""
    text, floor = request.text, request.min_score
    note = (
        f"Every hit scored below the floor {floor:g} (@min)." if text and floor is not None else ""
    )
    body = render(
        text,
        hits,
        request.describe(where),
        full=request.full,
        links=names,
        empty_note=note,
        empty_hint=_EMPTY_HINT[tools],
        miss=MODES[request.mode].miss,
    )
    return body.encode("utf-8", "surrogateescape")


# What an empty query asks for: a mount's folder, or (``tools``) the MCP search tool's query.
_EMPTY_HINT = {False: "Name the folder after a question.", True: "Give a question as query."}


def with_status_line(results: bytes, line: str | None) -> bytes:
    """The results file with ``line`` as its second line, right under the title."""
    if not line:
        return results
    title, sep, rest = results.partition(b"\n")
    return title + sep + b"\n" + line.encode("utf-8", "surrogateescape") + b"\n" + rest


def similar_file(request: SearchRequest, hits: Sequence[Hit], names: Sequence[str]) -> bytes:
    """The results file of ``.similar/PATH/``: the documents nearest to ``request.query`` (a
    document's path), titled so."""
    body = render(request.query, hits, request.describe(), links=names)
    _, _, rest = body.partition("\n")
    return (f"# Similar to: {request.query}\n" + rest).encode("utf-8", "surrogateescape")
