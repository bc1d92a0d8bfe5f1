"""An lxml tree of HTML as Markdown: markdownify's conversion rules (MIT, Matthew Tretter and
contributors; its notice, which this port keeps, is LICENSES/markdownify-MIT.txt), walked over
lxml's elements instead of a BeautifulSoup tree.

Why not markdownify itself: it converts only BeautifulSoup trees, and building one costs
two thirds of an HTML page's extraction (3.4 ms of CPU per chunk on Debian's documentation,
BENCHMARKS.md "HTML extraction"). lxml (BSD-3, already installed for Word and PowerPoint)
parses the same page in a fifteenth of the time. The rules below are markdownify 1.2's for
the options semfs uses (ATX headings, ``-`` bullets, images stripped, ``*`` and ``_``
escaped), rule by rule, so a page gives the Markdown it gave before; where lxml's parser
builds another tree than Python's ``html.parser`` (tags left open, whitespace between
blocks) the text may differ, as BENCHMARKS.md lists.

Elements are skipped, never removed: a skipped element's tail stays its own text node, as
after BeautifulSoup's ``decompose``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

# What a skipped element's tag becomes (an element of the page never has this name).
GONE = "semfs-gone"

_BLOCK = frozenset({
    "p", "blockquote", "article", "div", "section", "ol", "ul", "li", "dl", "dt", "dd",
    "table", "thead", "tbody", "tfoot", "tr", "td", "th",
})  # fmt: skip
_NOFORMAT = frozenset({"pre", "code", "kbd", "samp"})
_HN = re.compile(r"h(\d+)")
_LINK_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_WS = re.compile(r"[\t ]+")
_ALL_WS = re.compile(r"[\t \r\n]+")
_NEWLINE_WS = re.compile(r"[\t \r\n]*[\r\n][\t \r\n]*")
_LINE = re.compile(r"^(.*)", flags=re.MULTILINE)
_PRE_LSTRIP = re.compile(r"^[ \n]*\n")
_PRE_RSTRIP = re.compile(r"[ \n]*$")
_NEWLINES = re.compile(r"^(\n*)((?:.*[^\n])?)(\n*)$", flags=re.DOTALL)
_BACKTICKS = re.compile(r"`+")


class _Comment(str):
    """A comment or processing instruction among an element's children: never converted,
    but a sibling all the same (and false when empty, as BeautifulSoup's)."""


Node = Any  # an lxml element, a text (str) or a _Comment


def _inside(name: str | None) -> bool:
    """markdownify's should_remove_whitespace_inside: a block element's name."""
    return name is not None and (name in _BLOCK or _HN.match(name) is not None)


def _name(node: Node) -> str | None:
    return None if node is None or isinstance(node, str) else node.tag


def _outside(node: Node) -> bool:
    """markdownify's should_remove_whitespace_outside."""
    name = _name(node)
    return name == "pre" or _inside(name)


def _falsy(node: Node) -> bool:
    """BeautifulSoup's truth of a sibling: no sibling, or an empty string."""
    return node is None or (isinstance(node, str) and not node)


def _chomp(text: str) -> tuple[str, str, str]:
    prefix = " " if text and text[0] == " " else ""
    suffix = " " if text and text[-1] == " " else ""
    return prefix, suffix, text.strip()


def _permalink(link: Any, permalinks: frozenset[str]) -> bool:
    return "".join(link.itertext()).strip() in permalinks


def skip(element: Any) -> None:
    """Leave ``element`` out of the conversion, its tail kept (BeautifulSoup's decompose)."""
    element.clear(keep_tail=True)
    element.tag = GONE


class _Flags:
    """markdownify's parent_tags, as the few facts its rules ask of them."""

    __slots__ = ("heading", "inline", "li", "noformat", "pre")

    def __init__(self, pre: bool, noformat: bool, inline: bool, li: bool, heading: bool) -> None:
        self.pre = pre
        self.noformat = noformat
        self.inline = inline
        self.li = li
        self.heading = heading


_TOP = _Flags(False, False, False, False, False)


class Converter:
    """Markdown of an lxml subtree. ``permalinks``: the texts of a heading's links that are
    dropped (its own anchor); a heading's other links are unwrapped to their text."""

    def __init__(self, permalinks: frozenset[str]) -> None:
        self.permalinks = permalinks
        self._convert: dict[str, Callable[..., str] | None] = {}

    def convert(self, element: Any) -> str:
        return self._tag(element, _TOP, [element], 0)

    # The walk (markdownify's process_tag and process_text)

    def _children(self, element: Any, heading: bool) -> list[Node]:
        out: list[Node] = []
        if element.text:
            out.append(element.text)
        for child in element:
            tag = child.tag
            if tag == GONE:
                pass
            elif not isinstance(tag, str):
                out.append(_Comment(child.text or ""))
            elif heading and tag == "a":
                if not _permalink(child, self.permalinks):
                    out.extend(self._children(child, True))
            else:
                out.append(child)
            if child.tail:
                out.append(child.tail)
        return out

    def _tag(self, element: Any, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
        name = element.tag
        heading = flags.heading or name in _LINK_HEADINGS
        kids = self._children(element, heading)
        inside = _inside(name)
        last = len(kids) - 1
        child_flags = _Flags(
            flags.pre or name == "pre",
            flags.noformat or name in _NOFORMAT,
            flags.inline or name in ("td", "th") or _HN.match(name) is not None,
            flags.li or name == "li",
            heading,
        )
        strings: list[str] = []
        for i, kid in enumerate(kids):
            if isinstance(kid, _Comment):
                continue
            if isinstance(kid, str):
                if not kid.strip():
                    before = kids[i - 1] if i else None
                    after = kids[i + 1] if i < last else None
                    if inside and (_falsy(before) or _falsy(after)):
                        continue
                    if _outside(before) or _outside(after):
                        continue
                text = self._text(kid, child_flags, kids, i, inside)
            else:
                text = self._tag(kid, child_flags, kids, i)
            if text:
                strings.append(text)
        if name == "pre" or flags.pre:
            text = "".join(strings)
        else:
            collapsed = [""]
            for string in strings:
                match = _NEWLINES.match(string)
                assert match is not None
                leading, content, trailing = match.groups()
                if collapsed[-1] and leading:
                    previous = collapsed.pop()
                    leading = "\n" * min(2, max(len(previous), len(leading)))
                collapsed.extend((leading, content, trailing))
            text = "".join(collapsed)
        convert = self._converter(name)
        return text if convert is None else convert(element, text, flags, siblings, index)

    def _text(self, text: str, flags: _Flags, kids: list[Node], i: int, inside: bool) -> str:
        if not flags.pre:
            text = _WS.sub(" ", _NEWLINE_WS.sub("\n", text))
        if not flags.noformat and text:
            text = text.replace("*", r"\*").replace("_", r"\_")
        before = kids[i - 1] if i else None
        after = kids[i + 1] if i + 1 < len(kids) else None
        if _outside(before) or (inside and _falsy(before)):
            text = text.lstrip(" \t\r\n")
        if _outside(after) or (inside and _falsy(after)):
            text = text.rstrip()
        return text

    def _converter(self, name: str) -> Callable[..., str] | None:
        if name not in self._convert:
            found = _CONVERT.get(name)
            if found is None and name != "img":
                level = _HN.match(name)
                if level:
                    n = max(1, min(6, int(level.group(1))))
                    found = lambda el, text, flags, siblings, index: _heading(n, text, flags)  # noqa: E731
            self._convert[name] = found
        return self._convert[name]


# markdownify's convert_* functions: (element, text of its children, its parent's flags,
# its siblings, its index among them) -> its Markdown.


def _span(convert: Callable[[Any, str, str, str], str]) -> Callable[..., str]:
    """An inline element's rule: its text as it is inside code, else stripped of its outer
    spaces (prefix, suffix) for ``convert``, and nothing when nothing is left."""

    def rule(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
        if flags.noformat:
            return text
        prefix, suffix, text = _chomp(text)
        return convert(el, prefix, text, suffix) if text else ""

    return rule


def _inline(markup: str) -> Callable[..., str]:
    return _span(lambda el, prefix, text, suffix: f"{prefix}{markup}{text}{markup}{suffix}")


def _heading(n: int, text: str, flags: _Flags) -> str:
    if flags.inline:
        return text
    return f"\n\n{'#' * n} {_ALL_WS.sub(' ', text.strip())}\n\n"


@_span
def _a(el: Any, prefix: str, text: str, suffix: str) -> str:
    href = el.get("href")
    title = el.get("title")
    if text.replace(r"\_", "_") == href and not title:
        return f"<{href}>"
    title_part = ' "' + title.replace('"', r"\"") + '"' if title else ""
    return f"{prefix}[{text}]({href}{title_part}){suffix}" if href else text


def _blockquote(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    text = (text or "").strip(" \t\r\n")
    if flags.inline:
        return " " + text + " "
    if not text:
        return "\n"
    return "\n" + _LINE.sub(lambda m: "> " + m.group(1) if m.group(1) else ">", text) + "\n\n"


def _br(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    if flags.inline:
        return text + " " if text else " "
    return "  \n" + text


@_span
def _code(el: Any, prefix: str, text: str, suffix: str) -> str:
    most = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    if most > 0:
        text = " " + text + " "
    fence = "`" * (most + 1)
    return f"{prefix}{fence}{text}{fence}{suffix}"


def _div(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    if flags.inline:
        return " " + text.strip() + " "
    text = text.strip()
    return f"\n\n{text}\n\n" if text else ""


def _dd(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    text = (text or "").strip()
    if flags.inline:
        return " " + text + " "
    if not text:
        return "\n"
    text = _LINE.sub(lambda m: "    " + m.group(1) if m.group(1) else "", text)
    return ":" + text[1:] + "\n"


def _dt(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    text = _ALL_WS.sub(" ", (text or "").strip())
    if flags.inline:
        return " " + text + " "
    return f"\n\n{text}\n" if text else "\n"


def _hr(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    return "\n\n---\n\n"


def _video(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    if flags.inline:
        return text
    src = el.get("src") or ""
    if not src:
        for source in el.iter("source"):
            if source.get("src") is not None:
                src = source.get("src") or ""
                break
    poster = el.get("poster") or ""
    if src and poster:
        return f"[![{text}]({poster})]({src})"
    if src:
        return f"[{text}]({src})"
    if poster:
        return f"![{text}]({poster})"
    return text


def _list(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    before_paragraph = False
    for sibling in siblings[index + 1 :]:
        if isinstance(sibling, _Comment) or (isinstance(sibling, str) and not sibling.strip()):
            continue
        before_paragraph = _name(sibling) not in ("ul", "ol")
        break
    if flags.li:
        return "\n" + text.rstrip()
    return "\n\n" + text + ("\n" if before_paragraph else "")


def _li(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    text = (text or "").strip()
    if not text:
        return "\n"
    parent = el.getparent()
    if parent is not None and parent.tag == "ol":
        start = parent.get("start")
        first = int(start) if start and start.isnumeric() else 1
        before = sum(1 for s in siblings[:index] if _name(s) == "li")
        bullet = "%s. " % (first + before)
    else:
        bullet = "- "
    indent = " " * len(bullet)
    text = _LINE.sub(lambda m: indent + m.group(1) if m.group(1) else "", text)
    return "%s\n" % (bullet + text[len(bullet) :])


def _p(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    text = text.strip(" \t\r\n")
    if flags.inline:
        return " " + text + " "
    return f"\n\n{text}\n\n" if text else ""


def _pre(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    if not text:
        return ""
    text = _PRE_RSTRIP.sub("", _PRE_LSTRIP.sub("", text))
    return f"\n\n```\n{text}\n```\n\n"


def _q(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    return '"' + text + '"'


def _nothing(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    return ""


def _table(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    return "\n\n" + text.strip() + "\n\n"


def _caption(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    return text.strip() + "\n\n"


def _figcaption(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    return "\n\n" + text.strip() + "\n\n"


def _colspan(cell: Any) -> int:
    span = cell.get("colspan")
    return max(1, min(1000, int(span))) if span is not None and span.isdigit() else 1


def _cell(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    return " " + text.strip().replace("\n", " ") + " |" * _colspan(el)


def _previous_tag(el: Any) -> Any:
    """BeautifulSoup's find_previous_sibling(): the previous element, comments and skipped
    elements not counted."""
    el = el.getprevious()
    while el is not None and (not isinstance(el.tag, str) or el.tag == GONE):
        el = el.getprevious()
    return el


def _tr(el: Any, text: str, flags: _Flags, siblings: Sequence[Node], index: int) -> str:
    cells = [cell for cell in el.iter("td", "th") if cell is not el]
    parent = el.getparent()
    parent_name = parent.tag if parent is not None else None
    first = not any(not isinstance(s, str) for s in siblings[:index])
    head = all(cell.tag == "th" for cell in cells) or (
        parent_name == "thead" and sum(1 for _ in parent.iter("tr")) == 1
    )
    grandparent = parent.getparent() if parent is not None else None
    head_missing = (first and parent_name != "tbody") or (
        first
        and parent_name == "tbody"
        and (
            grandparent is None or not any(t is not grandparent for t in grandparent.iter("thead"))
        )
    )
    columns = sum(_colspan(cell) for cell in cells)
    overline = underline = ""
    if head and first:
        underline = "| " + " | ".join(["---"] * columns) + " |\n"
    elif head_missing or (
        first
        and (parent_name == "table" or (parent_name == "tbody" and _previous_tag(parent) is None))
    ):
        overline = "| " + " | ".join([""] * columns) + " |\n"
        overline += "| " + " | ".join(["---"] * columns) + " |\n"
    return overline + "|" + text + "\n" + underline


_CONVERT: dict[str, Callable[..., str]] = {
    "a": _a,
    "b": _inline("**"),
    "strong": _inline("**"),
    "em": _inline("*"),
    "i": _inline("*"),
    "del": _inline("~~"),
    "s": _inline("~~"),
    "sub": _inline(""),
    "sup": _inline(""),
    "blockquote": _blockquote,
    "br": _br,
    "code": _code,
    "kbd": _code,
    "samp": _code,
    "div": _div,
    "article": _div,
    "section": _div,
    "dl": _div,
    "dd": _dd,
    "dt": _dt,
    "hr": _hr,
    "video": _video,
    "ul": _list,
    "ol": _list,
    "li": _li,
    "p": _p,
    "pre": _pre,
    "q": _q,
    "script": _nothing,
    "style": _nothing,
    "table": _table,
    "caption": _caption,
    "figcaption": _figcaption,
    "td": _cell,
    "th": _cell,
    "tr": _tr,
}
