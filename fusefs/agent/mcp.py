"""``semfs mcp``: the collection as MCP tools, for agents that cannot mount anything.

Five tools with fixed names and parameters (clients and tests rely on them):
``search(query, path="", k=5, mode="hybrid")``,
``read(path, start_line=1, end_line=None, pages="")``,
``grep(pattern, path="", regex=False, ignore_case=False, max_results=100)``,
``list(path="", recursive=False, pattern=None)`` and ``status()``. The work is
:class:`semfs.fusefs.agent.toolbox.Toolbox`'s; this module only describes the tools for an agent,
turns library errors into tool errors (one line, the server keeps running) and picks a transport:
stdio, or streamable HTTP at ``HOST:PORT`` (path ``/mcp``).

Store access is the mount's: an embedded store that a mount (or another ``semfs mcp``)
owns is reached through its daemon socket; otherwise this process opens it, and serves the
same socket so that ``semfs ingest`` and further ``semfs mcp`` processes can use it. With
``--url`` any number of processes share the server's collection.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from semfs.ingest import __version__
from semfs.ingest.errors import SemfsError
from semfs.ingest.store import DEFAULT_K

from .toolbox import Toolbox, ToolOutput

logger = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., ToolOutput])


def _sdk() -> tuple[Any, type[Exception], bool]:
    """The SDK's high-level server class and tool error, and whether it is mcp 2.

    Both majors are supported: mcp 2 renamed FastMCP to MCPServer, while smolagents' MCP
    bridge (mcpadapt) still needs mcp 1 in the same environment.
    """
    try:
        server = importlib.import_module("mcp.server.mcpserver")
        errors = importlib.import_module("mcp.server.mcpserver.exceptions")
        return server.MCPServer, errors.ToolError, True
    except ImportError:
        server = importlib.import_module("mcp.server.fastmcp")
        errors = importlib.import_module("mcp.server.fastmcp.exceptions")
        return server.FastMCP, errors.ToolError, False


_Server, ToolError, MCP2 = _sdk()

GUIDE = """\
This server is a document collection (semfs): files you can search by meaning, grep, list
and read, all read-only. Paths are relative to the collection root.
How to work:
1. Start with search(query) for a question in words ("how do I rotate an API key"): it
   ranks documents by meaning and keywords together (match 0-1) and shows the lines of
   the best ones that answer it, with their line numbers. Narrow with path="some/dir";
   mode="keyword" for exact terms.
2. Use grep(pattern) when you know the exact text (a function name, an error message, a
   setting): it returns every matching line as path:line:text, like grep -rn. Literal by
   default; regex=true for an extended regular expression; ignore_case=true for -i.
3. read(path, start_line, end_line) to read the lines around a hit: results are
   line-numbered; a long file comes in parts and says how to continue.
4. list(path) shows a directory with sizes; recursive=true or pattern="*.md" to find files.
Every result is cut at a size budget and then says how to narrow the call."""


def _tool(fn: F) -> Callable[..., CallToolResult]:
    """A Toolbox method as a tool body: text for the agent, data as structured content,
    library errors as one-line tool errors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            out = fn(*args, **kwargs)
        except SemfsError as exc:
            raise ToolError(str(exc)) from exc
        except Exception as exc:
            logger.error(
                "%s failed: %s", fn.__name__, exc, exc_info=logger.isEnabledFor(logging.DEBUG)
            )
            raise ToolError(f"{fn.__name__} failed: {type(exc).__name__}: {exc}") from exc
        # The wire's camelCase names: the spelling both SDK majors accept.
        return CallToolResult.model_validate(
            {"content": [{"type": "text", "text": out.text}], "structuredContent": out.data}
        )

    return wrapper


def build_server(box: Toolbox, host: str = "127.0.0.1", port: int = 8765) -> Any:
    """An MCP server (the SDK's MCPServer or FastMCP) whose five tools call ``box``.
    ``host`` and ``port`` are for streamable HTTP (mcp 1 takes them here)."""
    options: dict[str, Any] = {"instructions": GUIDE, "log_level": "WARNING"}
    options.update({"version": __version__} if MCP2 else {"host": host, "port": port})
    server = _Server("semfs", **options)
    if not MCP2:
        # mcp 1's FastMCP takes no version and reports the SDK's own (1.30.0) to clients;
        # its low-level server, which answers initialize, does take one.
        server._mcp_server.version = __version__
    read_only = ToolAnnotations.model_validate(
        {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
    )

    @_tool
    def search(
        query: Annotated[str, Field(description="A question or topic, in words.")],
        path: Annotated[str, Field(description="Search only inside this directory.")] = "",
        k: Annotated[int, Field(description="How many documents (1-100).")] = DEFAULT_K,
        mode: Annotated[
            str, Field(description="hybrid (default), semantic (meaning) or keyword (BM25).")
        ] = "hybrid",
    ) -> ToolOutput:
        return box.search(query, path, k, mode)

    @_tool
    def read(
        path: Annotated[str, Field(description="A file, as search, grep or list show it.")],
        start_line: Annotated[int, Field(description="First line to show (1-based).")] = 1,
        end_line: Annotated[
            int | None, Field(description="Last line to show; default: to the end.")
        ] = None,
        pages: Annotated[
            str,
            Field(
                description="Pages (slides, chapters) of a PDF's, PowerPoint's or EPUB's text "
                "view (report.pdf.md) to show instead of lines: N or N-M."
            ),
        ] = "",
    ) -> ToolOutput:
        return box.read(path, start_line, end_line, pages)

    @_tool
    def grep(
        pattern: Annotated[str, Field(description="Text to find in lines.")],
        path: Annotated[str, Field(description="A directory or file to search in.")] = "",
        regex: Annotated[
            bool, Field(description="Pattern is an extended regular expression (grep -E).")
        ] = False,
        ignore_case: Annotated[bool, Field(description="Ignore case (grep -i).")] = False,
        max_results: Annotated[int, Field(description="Stop after this many lines.")] = 100,
    ) -> ToolOutput:
        return box.grep(pattern, path, regex, ignore_case, max_results)

    @_tool
    def list_(
        path: Annotated[str, Field(description="The directory to list; default: root.")] = "",
        recursive: Annotated[bool, Field(description="Include everything below.")] = False,
        pattern: Annotated[
            str | None,
            Field(description="Glob on file names ('*.md'), or on paths if it has a '/'."),
        ] = None,
    ) -> ToolOutput:
        return box.list(path, recursive, pattern)

    @_tool
    def status() -> ToolOutput:
        return box.status()

    descriptions = {
        "search": (
            search,
            "Find the documents that answer a question, best first: the same ranking as "
            "`semfs search` and the mount's .search folders. Returns each document's path, "
            "match strength, title and answering lines (structured content: the JSON of `semfs "
            "search --json`). Use it first for anything asked in words; follow with read on "
            "the lines shown.\n\n" + GUIDE,
        ),
        "read": (
            read,
            "Read a file's lines, numbered (number, tab, the line exactly as stored). Long "
            "files come in parts of up to 2000 lines or the size budget; the result then "
            "ends with the call that continues. Widen with start_line/end_line around a "
            "search or grep hit.",
        ),
        "grep": (
            grep,
            "Every line containing a text, as `path:line:text`: exactly what `grep -rn` (or "
            "-rnE with regex, -i with ignore_case) prints over the mounted collection, in "
            "the same order. Fast: the text is matched in the index first, so prefer grep "
            "over reading files to find exact words, names or messages. A regex with no "
            "literal part scans documents and says so.",
        ),
        "list": (
            list_,
            "A directory's entries with sizes in bytes (directories end in '/'); "
            "recursive=true lists everything below; pattern='*.md' finds files by name "
            "(or 'dir/*/x.md' by path).",
        ),
        "status": (
            status,
            "The collection: name, documents, chunks, bytes, model, generation, whether an "
            "ingest is running, and when the file list was last refreshed.",
        ),
    }
    for name, (fn, description) in descriptions.items():
        server.add_tool(
            fn,
            name=name,
            description=description,
            annotations=read_only,
            structured_output=False,
        )
    return server


def parse_http_address(value: str) -> tuple[str, int]:
    """``"127.0.0.1:8765"`` -> ``("127.0.0.1", 8765)``; ``[::1]:8765`` for IPv6."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SemfsError(f"--http takes HOST:PORT, such as 127.0.0.1:8765, not {value!r}")
    return host.strip("[]"), int(port)


def serve(box: Toolbox, http: str | None = None) -> None:
    """Serve ``box`` on stdio, or on streamable HTTP at ``http`` (HOST:PORT), until stopped."""
    if http is None:
        build_server(box).run("stdio")
        return
    host, port = parse_http_address(http)
    if host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning(
            "serving %s on %s: anyone who can reach it can read it", box.store.location, http
        )
    server = build_server(box, host, port)
    if MCP2:
        server.run("streamable-http", host=host, port=port)
    else:
        server.run("streamable-http")
