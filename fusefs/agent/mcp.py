"""``semfs mcp``: the collection as MCP tools, for agents that cannot mount anything.

Six tools with fixed names and parameters (clients and tests rely on them):
``search(query, path="", k, mode, more=False, details=False)`` (``k`` and ``mode`` default to
a :class:`~semfs.ingest.request.SearchRequest`'s, as every front end's),
``read(path, start_line=1, end_line=None, pages="")``,
``grep(pattern, path="", regex=False, ignore_case=False, max_results=100)``,
``list(path="", recursive=False, pattern=None, map=False, page=1)``, ``status()`` and, when the
server or the token may write, ``write``. The work is
:class:`semfs.fusefs.agent.toolbox.Toolbox`'s; this module only describes the tools for an agent,
turns library errors into tool errors (one line, the server keeps running) and picks a transport:
stdio, or streamable HTTP at ``HOST:PORT`` (path ``/mcp``).

With ``semfs mcp --collections docs,code`` (or ``--all``) it serves several collections, each a
top-level folder (:class:`semfs.fusefs.agent.several.SeveralToolbox`): every tool then also
takes ``collection``, and search searches them all unless told otherwise.

Store access is the mount's: an embedded store that a mount (or another ``semfs mcp``)
owns is reached through its daemon socket; otherwise this process opens it, and serves the
same socket so that ``semfs ingest`` and further ``semfs mcp`` processes can use it. With
``--url`` any number of processes share the server's collection.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import importlib
import inspect
import logging
import os
import re
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from semfs.fusefs.agent import SESSION_TIMEOUT
from semfs.fusefs.agent.connections import ACCEPT_BURST, guarded_protocol, quiet_accept_errors
from semfs.fusefs.agent.grep import DEFAULT_MAX_RESULTS, MAX_CONTEXT
from semfs.fusefs.agent.sessions import FairSessions, quiet_sdk_logs
from semfs.fusefs.agent.several import SeveralToolbox
from semfs.fusefs.agent.tokens import (
    ADMIN,
    ADMIN_TOKEN,
    Grant,
    ScopedTokens,
    TokenVerifier,
    admin_token,
    grant_of,
)
from semfs.fusefs.agent.toolbox import Scope, Toolbox, ToolOutput
from semfs.ingest import __version__
from semfs.ingest.errors import SemfsError
from semfs.ingest.request import DEFAULT_MODE
from semfs.ingest.store import DEFAULT_K, MAX_K, MODES

logger = logging.getLogger(__name__)
# The search tool's k and mode: the request's bounds, the one table of modes.
K_DESCRIPTION = f"How many documents (1-{MAX_K})."
MODE_DESCRIPTION = "; ".join(
    f"{mode}{' (default)' if mode == DEFAULT_MODE else ''}: {row.meaning}"
    for mode, row in MODES.items()
)
WILDCARDS = ("0.0.0.0", "::", "")
# HTTP sessions: one costs ~50 KB (its streams and task group) until it ends, and a client
# that goes away without DELETE never ends it. So a session idle this long (seconds without a
# request) is closed (a client that comes back gets 404 and, as the spec says, starts a new
# one), at most MAX_SESSIONS are open at once (~13 MB), and at most SESSIONS_PER_TOKEN per
# token: a client past its own cap loses its own longest-idle session (see .sessions).
MAX_SESSIONS = 256
SESSIONS_PER_TOKEN = 16


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
# The SDK's settings also read a `.env` file in the working directory: the server would take
# FASTMCP_* options from whatever folder an agent starts it in (a repository it does not
# trust), and fail to start where that folder is not readable (run as another user). Its
# options come from our flags (and the SDK's environment variables) only.
_sdk_settings = getattr(importlib.import_module(_Server.__module__), "Settings", None)
if _sdk_settings is not None:
    _sdk_settings.model_config["env_file"] = None

GUIDE = """\
This server is a document collection (semfs): files you can search by meaning, grep, list
and read. Paths are relative to the collection root.
How to work:
0. When you do not know the collection, start with list(map=true): the root's folders with
   how many documents each holds, and its documents with titles, in about 2 KB (a folder's
   own map: list(path="some/dir", map=true)). Then search inside the folder that fits.
1. Search with search(query), a few words in the docs' own terms ("rotate API key"; the
   feature, setting or error, not the story of what broke): it ranks documents by meaning
   and keywords together (match 0-1: strong >= 0.5, fair >= 0.2, else weak) and shows the
   lines of the best ones that answer it, numbered as in the file. It starts with the best
   answer ("Answer: 1. PATH lines 41-44 [its section]" and those lines): when that hit is
   strong and its lines say what you asked, that is enough: stop. Narrow with
   path="some/dir" when you know the product; mode="keyword" for exact terms. In source
   code a hit names its definition ("src/upload.py:120 · class Uploader › def retry_upload",
   its signature first); mode="symbol" finds where a name is defined (query="retry_upload",
   or "Uploader.retry_upload"), exactly, without ranking words.
2. Use grep(pattern) when you know the exact text (a function name, an error message, a
   setting): it returns every matching line as path:line:text, like grep -rn. Literal by
   default; regex=true for an extended regular expression; ignore_case=true for -i.
3. read(path, start_line, end_line) to read the lines around a hit, ten or so, never the
   whole document: results are line-numbered; a long file comes in parts and says how to
   continue. grep(pattern="WORD", path=PATH, context=3) checks a page in one call: each line
   that says WORD with 3 lines around it. grep(pattern="^#", regex=true, path=PATH) is a
   page's outline. A PDF, Word,
   PowerPoint, HTML or EPUB file is read as its text view (report.pdf.md, whose hits name
   the page or slide); read(path, pages="3-5") reads its pages, slides or chapters.
4. list(path) shows a directory with sizes; recursive=true or pattern="*.md" to find files.
Every result is cut at a size budget and then says how to narrow the call."""


# The guide's first lines on a server of several collections.
SEVERAL = """\
This server holds several collections, each a top-level folder: {names}. A path's first part
names its collection (docs/guide/keys.md), and every tool also takes collection="NAME" (its
path is then inside that collection). search(query) searches them all and each hit's path
starts with its collection; list(map=true) shows each with its size; narrow with
path="NAME" or collection="NAME".
"""
COLLECTION_DESCRIPTION = (
    "A collection of this server: the path is then inside it. Default: a path's first part "
    "names its collection (the root: all of them)."
)
Served = Toolbox | SeveralToolbox

WRITE_REFUSED = (
    "write is refused: this server is read-only for you (start it with `semfs mcp --writable`, "
    "or use a token made with `semfs token create NAME --under DIR --write`)"
)


def may_write(box: Served, grant: Grant | None) -> bool:
    """Whether a caller may use the write tool: stdio and the admin token when the server
    was started --writable; a scoped token when it was made --write (in its folders)."""
    # The admin token's grant sees everything; a scoped token has folders (one named like it
    # in a tokens file older than the name keeps only its own right).
    if grant is None or (grant.name == ADMIN and grant.everything):
        return box.writable
    return grant.write


def _tool(
    fn: Callable[..., ToolOutput],
    authenticated: bool,
    allowed: Callable[[Grant | None], bool] | None = None,
    several: bool = False,
) -> Callable[..., Any]:
    """A Toolbox call as a tool body: run off the event loop (so that one slow call does not
    hold up the others), within the caller's scope, returning text for the agent and data as
    structured content; library errors become one-line tool errors.

    ``fn`` takes the tool's parameters and then ``scope``; the tool's schema shows only the
    parameters. With ``authenticated`` (HTTP) the scope is the bearer token's, and a call
    without one is refused (the SDK's middleware lets none through: this is a second lock).
    ``allowed(grant)`` False (None: stdio) refuses the call (the write tool). ``collection``
    is a parameter of the tool only on a server of ``several`` collections.
    """
    # Annotations evaluated here, where their names are (the SDK would evaluate the strings
    # in its own module): a description may then name a constant of this module.
    signature = inspect.signature(fn, eval_str=True)
    params = list(signature.parameters.values())
    assert params[-1].name == "scope"

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
        scope: Scope = ()
        grant = None
        if authenticated:
            grant = grant_of(get_access_token())
            if grant is None:
                raise ToolError("not authenticated: send Authorization: Bearer TOKEN")
            scope = grant.under
        if allowed is not None and not allowed(grant):
            raise ToolError(WRITE_REFUSED)
        try:
            out = await anyio.to_thread.run_sync(
                functools.partial(fn, *args, scope=scope, **kwargs)
            )
        except SemfsError as exc:
            raise ToolError(_wire_text(str(exc))) from exc
        except OSError as exc:  # the system's own words (a full disk, a permission)
            raise ToolError(f"{fn.__name__} failed: {exc.strerror or exc}") from exc
        except Exception as exc:
            # A bug, not the caller's input (that is a SemfsError): the log has the details,
            # the caller gets no Python names.
            logger.error(
                "%s failed: %s: %s",
                fn.__name__,
                type(exc).__name__,
                exc,
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )
            raise ToolError(
                f"{fn.__name__} failed on the server (its log says why); try again, or "
                "narrow the call"
            ) from exc
        # The wire's camelCase names: the spelling both SDK majors accept. No data, no
        # structured content (search by default): see Toolbox.search.
        result: dict[str, Any] = {"content": [{"type": "text", "text": _wire_text(out.text)}]}
        if out.data:
            result["structuredContent"] = _wire_data(out.data)
        return CallToolResult.model_validate(result)

    hidden = {"scope"} if several else {"scope", "collection"}
    shown = [p for p in params if p.name not in hidden]
    wrapper.__signature__ = signature.replace(parameters=shown)  # type: ignore[attr-defined]
    return wrapper


def _wire_text(text: str) -> str:
    """``text`` as JSON can carry it: a file name that is not UTF-8 (a surrogate escape) or a
    lone surrogate is shown escaped (``\\udcff``), where the SDK would fail to send the reply."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _wire_data(value: Any) -> Any:
    """:func:`_wire_text` on every string of a structured result."""
    if isinstance(value, str):
        return _wire_text(value)
    if isinstance(value, dict):
        return {_wire_text(str(k)): _wire_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_wire_data(v) for v in value]
    return value


def build_server(
    box: Served,
    host: str = "127.0.0.1",
    port: int = 8765,
    verifier: TokenVerifier | None = None,
    allowed_hosts: Sequence[str] = (),
    session_timeout: float = SESSION_TIMEOUT,
) -> Any:
    """An MCP server (the SDK's MCPServer or FastMCP) whose tools (six, with write) call ``box``.

    ``host`` and ``port`` are for streamable HTTP (mcp 1 takes them here). With a
    ``verifier`` every HTTP request needs a bearer token it accepts (the SDK's auth
    middleware), and each call sees the token's folders only; ``allowed_hosts`` are the Host
    names (beside the loopback ones) the SDK's DNS-rebinding check lets through.
    """
    several = box.several
    guide = GUIDE
    if several:
        guide = SEVERAL.format(names=", ".join(box.names)) + GUIDE

    def at(collection: str | None) -> dict[str, Any]:
        return {"collection": collection} if several else {}

    options: dict[str, Any] = {"instructions": guide, "log_level": "WARNING"}
    if MCP2:
        options["version"] = __version__
    else:
        options.update(
            host=host,
            port=port,
            transport_security=transport_security(host, allowed_hosts),
            session_idle_timeout=session_timeout,
            max_sessions=MAX_SESSIONS,
        )
    if verifier is not None:
        # A resource server only: no OAuth routes; the issuer is never contacted.
        here = f"http://{_url_host(host)}:{port}"
        options["token_verifier"] = verifier
        options["auth"] = AuthSettings(issuer_url=here, resource_server_url=None)  # type: ignore[arg-type]
    server = _Server("semfs", **options)
    if not MCP2:
        # mcp 1's FastMCP takes no version and reports the SDK's own (1.30.0) to clients;
        # its low-level server, which answers initialize, does take one.
        server._mcp_server.version = __version__
        if verifier is not None:
            # Our session table in place of the SDK's one-for-all (made lazily by
            # streamable_http_app, with these same settings).
            server._session_manager = FairSessions(
                app=server._mcp_server,
                event_store=server._event_store,
                retry_interval=server._retry_interval,
                json_response=server.settings.json_response,
                stateless=server.settings.stateless_http,
                security_settings=server.settings.transport_security,
                max_request_body_size=server.settings.max_request_body_size,
                session_idle_timeout=session_timeout,
                max_sessions=MAX_SESSIONS,
                admin=verifier.admin_subject,
                alive=verifier.alive,
                per_token=SESSIONS_PER_TOKEN,
            )
    read_only = ToolAnnotations.model_validate(
        {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}
    )

    def search(
        query: Annotated[str, Field(description="A question or topic, in words.")],
        path: Annotated[str, Field(description="Search only inside this directory.")] = "",
        k: Annotated[int, Field(description=K_DESCRIPTION)] = DEFAULT_K,
        mode: Annotated[str, Field(description=MODE_DESCRIPTION)] = DEFAULT_MODE,
        more: Annotated[
            bool,
            Field(description="Answering lines from more of the hits (about 3x): as @more."),
        ] = False,
        details: Annotated[
            bool,
            Field(
                description="Add structured content as `semfs search --json` (each hit's "
                "passage and answering lines); default: the text alone."
            ),
        ] = False,
        collection: Annotated[str | None, Field(description=COLLECTION_DESCRIPTION)] = None,
        scope: Scope = (),
    ) -> ToolOutput:
        return box.search(
            query, path, details=details, k=k, mode=mode, more=more, scope=scope, **at(collection)
        )

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
        collection: Annotated[str | None, Field(description=COLLECTION_DESCRIPTION)] = None,
        scope: Scope = (),
    ) -> ToolOutput:
        return box.read(
            path,
            start_line=start_line,
            end_line=end_line,
            pages=pages,
            scope=scope,
            **at(collection),
        )

    def grep(
        pattern: Annotated[str, Field(description="Text to find in lines.")],
        path: Annotated[str, Field(description="A directory or file to search in.")] = "",
        regex: Annotated[
            bool, Field(description="Pattern is an extended regular expression (grep -E).")
        ] = False,
        ignore_case: Annotated[bool, Field(description="Ignore case (grep -i).")] = False,
        max_results: Annotated[
            int, Field(description="Stop after this many matching lines.")
        ] = DEFAULT_MAX_RESULTS,
        context: Annotated[
            int,
            Field(
                description=f"Lines shown before and after each match (grep -C), 0-{MAX_CONTEXT}."
            ),
        ] = 0,
        collection: Annotated[str | None, Field(description=COLLECTION_DESCRIPTION)] = None,
        scope: Scope = (),
    ) -> ToolOutput:
        return box.grep(
            pattern,
            path,
            max_results=max_results,
            regex=regex,
            ignore_case=ignore_case,
            context=context,
            scope=scope,
            **at(collection),
        )

    def list_(
        path: Annotated[str, Field(description="The directory to list; default: root.")] = "",
        recursive: Annotated[bool, Field(description="Include everything below.")] = False,
        pattern: Annotated[
            str | None,
            Field(description="Glob on file names ('*.md'), or on paths if it has a '/'."),
        ] = None,
        map: Annotated[
            bool,
            Field(
                description="The folder's map instead: its subfolders with document counts, "
                "then its documents with title and description, about 2 KB a page."
            ),
        ] = False,
        page: Annotated[int, Field(description="The map's page (map=true).")] = 1,
        collection: Annotated[str | None, Field(description=COLLECTION_DESCRIPTION)] = None,
        scope: Scope = (),
    ) -> ToolOutput:
        return box.list(
            path,
            map=map,
            page=page,
            recursive=recursive,
            pattern=pattern,
            scope=scope,
            **at(collection),
        )

    def status(
        collection: Annotated[str | None, Field(description=COLLECTION_DESCRIPTION)] = None,
        scope: Scope = (),
    ) -> ToolOutput:
        return box.status(scope=scope, **at(collection))

    def write(
        path: Annotated[str, Field(description="The text file to write, e.g. notes/build.log.")],
        text: Annotated[str, Field(description="The text to write.")],
        mode: Annotated[
            str, Field(description="append (default: add to the end) or replace (the whole file).")
        ] = "append",
        collection: Annotated[str | None, Field(description=COLLECTION_DESCRIPTION)] = None,
        scope: Scope = (),
    ) -> ToolOutput:
        return box.write(path, text, mode=mode, scope=scope, **at(collection))

    descriptions: dict[str, tuple[Callable[..., ToolOutput], str]] = {
        "search": (
            search,
            "Find the documents that answer a question, best first: the same ranking as "
            "`semfs search` and the mount's .search folders. Returns the mount's results file: "
            "the best answering lines first, then each document's path, match strength, title "
            "and answering lines (text only; details=true adds the JSON of `semfs search "
            "--json` as structured content). "
            "Use it first for anything asked in words; follow with read on "
            "the lines shown.\n\n" + guide,
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
            "(or 'dir/*/x.md' by path). map=true gives the folder's map instead: its "
            "subfolders with how many documents each holds, then its documents with title and "
            "one line of description, in about 2 KB (page=2, ... for more): start there when "
            "you do not know the collection.",
        ),
        "status": (
            status,
            "The collection: name, documents, chunks, bytes, model, generation, whether an "
            "ingest is running, and when the file list was last refreshed.",
        ),
    }
    for name, (fn, description) in descriptions.items():
        server.add_tool(
            _tool(fn, authenticated=verifier is not None, several=several),
            name=name,
            description=description,
            annotations=read_only,
            structured_output=False,
        )
    if verifier is not None or box.writable:  # else nobody could ever use it
        server.add_tool(
            _tool(write, verifier is not None, functools.partial(may_write, box), several),
            name="write",
            description="Write a text file into the collection (append, or replace it whole); "
            "it is searchable when this returns. Keep notes and long command outputs here, "
            "then search them instead of keeping them in context. Refused unless the server "
            "lets you write.",
            annotations=ToolAnnotations.model_validate(
                {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}
            ),
            structured_output=False,
        )
    return server


def parse_http_address(value: str) -> tuple[str, int]:
    """``"127.0.0.1:8765"`` -> ``("127.0.0.1", 8765)``; ``[::1]:8765`` for IPv6."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SemfsError(f"--http takes HOST:PORT, such as 127.0.0.1:8765, not {value!r}")
    return host.strip("[]"), int(port)


def transport_security(host: str, allowed_hosts: Sequence[str] = ()) -> Any:
    """The SDK's DNS-rebinding check for a server bound to ``host``: the Host header must name
    a loopback address, the bound address, this machine's name or an ``allowed_hosts`` entry
    (``NAME`` or ``NAME:PORT``), and an Origin, when sent, the same names over http(s)."""
    names = ["127.0.0.1", "localhost", "[::1]"]
    if host not in WILDCARDS:
        names.append(_url_host(host))
    else:
        names.append(socket.gethostname())
    hosts: list[str] = []
    for name in [*names, *allowed_hosts]:
        hosts.append(name if _has_port(name) else f"{name}:*")
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )


def _has_port(name: str) -> bool:
    return bool(re.search(r":\d+$", name)) and not (name.count(":") > 1 and "]" not in name)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or one line saying why there is none (a port in
    use included), before any server starts."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, socket.gaierror) as exc:
        raise SemfsError(
            f"cannot listen on {_url_host(host)}:{port}: {exc.strerror or exc}"
        ) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not past a live listener
        if family == socket.AF_INET6 and host in WILDCARDS:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise SemfsError(f"cannot listen on {_url_host(host)}:{port}: {why}") from exc
    sock.set_inheritable(True)
    return sock


def serve(
    box: Served,
    http: str | None = None,
    token_file: Path | None = None,
    tokens_folder: Path | None = None,
    allowed_hosts: Sequence[str] = (),
    session_timeout: float = SESSION_TIMEOUT,
    collection_tokens: Mapping[str, Path] | None = None,
) -> None:
    """Serve ``box`` on stdio, or on streamable HTTP at ``http`` (HOST:PORT), until stopped.

    HTTP always needs a bearer token: the admin token, in ``token_file`` (made on first use), or a
    scoped one from ``tokens_folder``'s ``mcp-tokens.json``, or (a server of several) from a
    served collection's own (``collection_tokens``: its name -> its tokens' folder), seeing
    folders of that collection only. stdio needs none: it runs as the user who started it,
    for that user.
    """
    quiet_sdk_logs()
    if http is None:
        build_server(box).run("stdio")
        return
    host, port = parse_http_address(http)
    folder = tokens_folder if tokens_folder is not None else Path(".")
    path = Path(os.path.abspath(token_file if token_file is not None else folder / ADMIN_TOKEN))
    scoped = [ScopedTokens(folder)] + [
        ScopedTokens(where, name) for name, where in (collection_tokens or {}).items()
    ]
    for tokens in scoped:
        tokens.list()  # an unsafe or damaged tokens file stops the start, not the first request
    # The port first: a start that cannot listen (port in use) leaves no new token behind.
    sock = listen(host, port)
    try:
        admin, made = admin_token(path)
    except BaseException:
        sock.close()
        raise
    verifier = TokenVerifier(admin, *scoped)
    server = build_server(box, host, port, verifier, allowed_hosts, session_timeout)
    app = (
        server.streamable_http_app()
        if not MCP2
        else server.streamable_http_app(
            transport_security=transport_security(host, allowed_hosts), host=host
        )
    )
    url = f"http://{_url_host(host)}:{port}/mcp"
    print(
        f"semfs mcp: serving {', '.join(map(repr, box.names))} at {url}; "
        f"{'new token' if made else 'token'} in {path} "
        f"(clients send Authorization: Bearer <its text>)",
        file=sys.stderr,
        flush=True,
    )
    if host in WILDCARDS:
        print(
            "semfs mcp: on all interfaces: anyone on the network with a token can read what "
            "it grants; Host names other than this machine's need --allow-host NAME",
            file=sys.stderr,
            flush=True,
        )
    protocol, guard = guarded_protocol(identify=verifier.subject_of, admin=verifier.admin_subject)
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=5,
        http=protocol,
        # asyncio accepts up to `backlog` connections at once before any is looked at:
        # uvicorn's 2048 would overshoot the cap by that many descriptors.
        backlog=ACCEPT_BURST,
    )

    async def run() -> None:
        quiet_accept_errors(asyncio.get_running_loop(), guard)
        await uvicorn.Server(config).serve([sock])

    try:
        anyio.run(run)
    finally:
        sock.close()
