"""The map of a folder in one small read: ``D/.map.md`` in every directory ``D``.

An agent that does not know a collection would otherwise list every file name (hundreds of KB
on a large tree) or search blind. The map says, in at most :data:`MAP_BYTES` bytes, what a
folder holds: its subfolders with how many documents each has below it (and their own first
subfolders), then its documents, one a line, with the title and one line of description the
ingest recorded on each chunk (``ChunkRecord.title``/``description``: extractive, front
matter or the first heading and paragraph; no model runs here). What does not fit goes on
the next page, ``D/.map.2.md``, ``.map.3.md``, ..., which the footer names.

The name: ``.map.md`` is unlisted like the search folder (``ls``, ``find`` and ``grep -r``
see exactly the source tree), so it starts with a dot as ``.search`` does; it is Markdown,
like the results file, so ``cat`` shows it as is. ``llms.txt`` was the other candidate: agents
know it, but documentation sites ship real ``llms.txt`` files (which would shadow the map,
since a real entry of the same name wins), and its format is a site's list of URLs, not a
folder's. A real ``.map.md`` in the source wins here too.

Cost: a map is built from the tree (one count of documents per folder, made once per tree)
plus one chunk read per document shown (at most a page's worth, ~15), and is cached per tree
and page; titles are cached by document version, so a refresh re-reads only what changed.
A page past the first lays out the pages before it (bounded by ``MAX_PAGE``).
"""

from __future__ import annotations

import logging
import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from semfs.fusefs.view.tree import DIR, FILE, FILE_MODE, Node, Tree, node_attrs
from semfs.ingest.store.schema import ChunkRecord, DocumentRecord

logger = logging.getLogger(__name__)

MAP_NAME = ".map.md"
MAP_BYTES = 2048  # a page, header and footer included
# A document's line at most (name, title, description): ~12 documents a page; as short as
# MIN_LINE_BYTES when that fits a folder's documents in one page (~28).
LINE_BYTES = 150
MIN_LINE_BYTES = 64
FOOTER_BYTES = 120
# A folder's line at most: its name and count, then its own subfolders while they fit.
FOLDER_LINE_BYTES = 200
MAX_PAGE = 1000  # .map.1000.md at most: ~14k documents of one folder
# Pages kept (~2 KB each) and document titles kept (~200 B each).
CACHE_PAGES = 256
CACHE_TITLES = 8192
_PAGE_NAME = re.compile(r"\.map(?:\.([1-9][0-9]{0,3}))?\.md")
# A converted original's text view is its path plus this (semfs.ingest.formats.VIEW_SUFFIX).
_VIEW_SUFFIX = ".md"
_SECTIONS = {DIR: "\n## Folders\n", FILE: "\n## Documents\n"}


class ChunkReader(Protocol):
    """:meth:`semfs.ingest.store.Store.get_chunks`, or anything called like it."""

    def __call__(self, path: str, gen: int, indexes: list[int]) -> list[ChunkRecord]: ...


def page_name(page: int) -> str:
    return MAP_NAME if page == 1 else f".map.{page}.md"


def parse_page(name: str) -> int | None:
    """The page ``name`` asks for (``.map.md`` is 1, ``.map.3.md`` 3), or None."""
    found = _PAGE_NAME.fullmatch(name)
    if found is None:
        return None
    page = int(found.group(1) or 1)
    return page if 1 <= page <= MAX_PAGE and (page > 1 or found.group(1) is None) else None


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-8 bytes, ending with an ellipsis when cut."""
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= limit:
        return text
    return raw[: max(0, limit - 3)].decode("utf-8", "ignore").rstrip() + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _documents_below(tree: Tree) -> Mapping[str, int]:
    """Each folder's documents at and below it, counted once per tree (a converted file and
    its text view are one document)."""
    return tree.documents_below


class FolderMaps:
    """Renders and caches folder maps; thread-safe. ``chunks`` reads a document's chunks by
    its path in the tree (the title and description are on each; the first is read).
    ``tools``: the map the MCP ``list`` tool returns, whose pointers name its calls instead
    of files. ``about``: a line on a folder of the root (tree, folder -> text or None); a
    mount of several collections says there what each collection is (its root then lists
    them under "Collections")."""

    def __init__(
        self,
        chunks: ChunkReader,
        tools: bool = False,
        about: Callable[[Tree, str], str | None] | None = None,
    ) -> None:
        self._chunks = chunks
        self.tools = tools  # for the MCP list tool: name its calls, not files
        self.about = about
        self._lock = threading.Lock()
        self._tree: Tree | None = None
        self._pages: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._titles: OrderedDict[tuple[str, int], tuple[str, str]] = OrderedDict()

    # -- nodes ----------------------------------------------------------------------------

    def resolve(self, tree: Tree, rel: str) -> Node | None:
        """The map node at ``rel`` (``D/.map.md``, ``D/.map.2.md``), or None: the folder must
        be a directory of the tree, and the page must exist (page 1 always does)."""
        folder, _, name = rel.rpartition("/")
        page = parse_page(name)
        if page is None:
            return None
        node = tree.lookup(folder)
        if node is None or node.kind != DIR:
            return None
        data = self.page(tree, folder, page)
        if data is None:
            return None
        from semfs.fusefs.view.searchdir import virtual_ino

        ino = virtual_ino(FILE, rel)
        mode = FILE_MODE
        if not tree.readable_by_all(folder):  # it quotes titles: the owner's only, as search
            mode &= ~0o077
        root = tree.root.attrs
        when = root["st_mtime"]
        attrs = node_attrs(ino, stat.S_IFREG | (mode & 0o777), 1, len(data), when, tree.ids)
        return Node(FILE, rel, ino, attrs, data=data)

    # -- rendering ------------------------------------------------------------------------

    def page(self, tree: Tree, folder: str, page: int = 1) -> bytes | None:
        """Page ``page`` of the map of ``folder`` (a directory of ``tree``), or None past the
        last page."""
        with self._lock:
            if tree is not self._tree:
                self._tree = tree
                self._pages.clear()
            cached = self._pages.get((folder, page))
            if cached is not None:
                self._pages.move_to_end((folder, page))
                return cached
        pages = self._layout(tree, folder, page)
        if len(pages) < page:
            return None
        with self._lock:
            if tree is self._tree:
                for number, data in enumerate(pages, 1):
                    self._pages[(folder, number)] = data
                    self._pages.move_to_end((folder, number))
                while len(self._pages) > CACHE_PAGES:
                    self._pages.popitem(last=False)
        return pages[page - 1]

    def text(self, tree: Tree, folder: str, page: int = 1) -> str | None:
        data = self.page(tree, folder, page)
        return None if data is None else data.decode("utf-8", "surrogateescape")

    def _layout(self, tree: Tree, folder: str, upto: int) -> list[bytes]:
        """Pages 1..``upto`` (fewer when the map is shorter), each within MAP_BYTES."""
        node = tree.lookup(folder)
        assert node is not None and node.kind == DIR
        counts = _documents_below(tree)
        shown = f"{folder}/" if folder else "/"
        subdirs = [c for c in node.children.values() if c.kind == DIR]
        about = self.about if not folder else None
        folders = "collections" if about is not None else "folders"
        head = f"# {shown} — {counts.get(folder, 0):,} documents"
        head += f", {len(subdirs)} {folders}\n" if subdirs else "\n"
        notes = [about(tree, sub.path) if about is not None else None for sub in subdirs]
        folder_lines = [_folder_line(s, counts, n) for s, n in zip(subdirs, notes, strict=True)]
        sections = {**_SECTIONS, DIR: f"\n## {folders.capitalize()}\n"}
        docs = self._documents(tree, node)
        # Shorter lines when that fits every document on the first page (a name and a title
        # say most): the room left beside the folders, shared by the documents.
        room = MAP_BYTES - FOOTER_BYTES - len(head) - sum(len(x) + 1 for x in folder_lines) - 30
        width = max(MIN_LINE_BYTES, min(LINE_BYTES, room // max(1, len(docs)) - 1))
        lines = self._lines(folder_lines, docs, width)
        pages: list[bytes] = []
        line = next(lines, None)
        while line is not None and len(pages) < upto:
            number = len(pages) + 1
            body = [head if number == 1 else f"# {shown} — map page {number}\n"]
            size = len(body[0].encode())
            reserve = FOOTER_BYTES
            section = ""
            while line is not None:
                kind, text = line
                add = "" if kind == section else sections[kind]
                cost = len((add + text).encode("utf-8", "surrogateescape")) + 1
                if size + cost + reserve > MAP_BYTES and len(body) > 1:
                    break
                body.append(add + text + "\n")
                size += cost
                section = kind
                line = next(lines, None)
            if line is not None:
                body.append(_more(folder, number + 1, self.tools))
            elif number == 1:
                body.append(_footer(folder, self.tools, bool(subdirs)))
            pages.append("".join(body).encode("utf-8", "surrogateescape"))
        if not pages and upto >= 1:  # an empty folder: the header alone
            pages.append((head + "\n(empty)\n").encode())
        return pages

    def _documents(self, tree: Tree, node: Node) -> list[tuple[str, DocumentRecord]]:
        docs = []
        for child in node.children.values():
            if child.kind != FILE or child.doc is None:
                continue
            rec = child.doc
            if rec.blob and tree.lookup(child.path + _VIEW_SUFFIX) is not None:
                continue  # its text view is listed (the same document, and what to read)
            docs.append((child.path, rec))
        return docs

    def _lines(
        self, folder_lines: list[str], docs: list[tuple[str, DocumentRecord]], width: int
    ) -> Iterator[tuple[str, str]]:
        """The entries in order, made as the pages ask (a document's costs a chunk read)."""
        for text in folder_lines:
            yield DIR, text
        for path, rec in docs:
            yield FILE, self._document_line(path, rec, width)

    def _document_line(self, path: str, rec: DocumentRecord, width: int) -> str:
        name = path.rpartition("/")[2]
        title, description = self._describe(path, rec)
        text = f"- {name}"
        if title and title != name:
            text += f" — {title}"
        if description and description != title:
            text += f": {description}"
        return _cut(text, width)

    def _describe(self, shown: str, rec: DocumentRecord) -> tuple[str, str]:
        """The title and description recorded with the chunks of ``rec``, shown at ``shown``
        in the tree ("" when none)."""
        path = shown + _VIEW_SUFFIX if rec.blob else shown
        key = (path, rec.gen)
        with self._lock:
            got = self._titles.get(key)
            if got is not None:
                self._titles.move_to_end(key)
                return got
        got = ("", "")
        if rec.chunks or rec.blob:
            try:
                found = self._chunks(path, rec.gen, [0])
            except Exception as exc:  # a map is an aid: a store failure shows names only
                logger.warning("map: cannot read the title of %r: %s", shown, exc)
                return got
            if found:
                got = (_one_line(found[0].title), _one_line(found[0].description))
        with self._lock:
            self._titles[key] = got
            while len(self._titles) > CACHE_TITLES:
                self._titles.popitem(last=False)
        return got


def _prefix(folder: str) -> str:
    return f"{folder}/" if folder else ""


def _more(folder: str, page: int, tools: bool) -> str:
    if tools:
        return f"\nMore: list(path={folder!r}, map=true, page={page})\n"
    return f"\nMore: {_prefix(folder)}{page_name(page)}\n"


def _footer(folder: str, tools: bool, subfolders: bool) -> str:
    if tools:
        text = f"\nSearch here: search(query, path={folder!r})"
        if subfolders:
            text += "; a subfolder's map: list(path=FOLDER, map=true)"
    else:
        text = f'\nSearch here: "{_prefix(folder)}.search/QUESTION/"'
        if subfolders:
            text += f"; a subfolder's map: {_prefix(folder)}FOLDER/{MAP_NAME}"
    return text + "\n"


def _folder_line(sub: Node, counts: Mapping[str, int], about: str | None = None) -> str:
    text = f"- {sub.name}/ ({counts.get(sub.path, 0):,})"
    if about:
        text += f" — {about}"
    inner = [c for c in sub.children.values() if c.kind == DIR]
    if inner:
        parts = [f"{c.name}/ {counts.get(c.path, 0):,}" for c in inner]
        kept: list[str] = []
        for part in parts:
            more = ", …" if len(kept) + 1 < len(parts) else ""
            trial = text + ": " + ", ".join([*kept, part]) + more
            if len(trial.encode("utf-8", "surrogateescape")) > FOLDER_LINE_BYTES:
                break
            kept.append(part)
        if kept:
            text += ": " + ", ".join(kept) + (", …" if len(kept) < len(parts) else "")
    return text
