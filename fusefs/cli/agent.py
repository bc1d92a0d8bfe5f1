"""The agents' commands: `semfs mcp` (the tools as an MCP server), `semfs token` (scoped tokens
for its HTTP transport) and `semfs guide` (what to tell an agent about a mount). None needs a
mount; `guide` reads one when given."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from types import FrameType

import click

from semfs.fusefs.agent import DEFAULT_BUDGET, SESSION_TIMEOUT
from semfs.fusefs.agent.guide import guide
from semfs.fusefs.cli.common import Command, Group, handle_errors, params, store_options
from semfs.fusefs.cli.options import COLLECTIONS, collection_names
from semfs.fusefs.view.searchdir import DEFAULT_NAME
from semfs.ingest.store.address import CollectionAddress


@click.command(cls=Command, name="mcp")
@store_options
@params(COLLECTIONS)
@click.option(
    "--http",
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; every request "
    "needs a bearer token (see --token-file and `semfs token`).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The admin token for --http: read from this file (owner-only), made there if "
    "missing [default: mcp.token in the collection's folder].",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="A Host name clients may use for --http besides loopback, the bound address and "
    "this machine's name (DNS-rebinding check); repeatable.",
)
@click.option(
    "--session-timeout",
    default=SESSION_TIMEOUT,
    show_default=True,
    type=click.FloatRange(1),
    help="Close an HTTP session after this many seconds without a request.",
)
@click.option(
    "--budget",
    default=DEFAULT_BUDGET,
    show_default=True,
    type=click.IntRange(1000),
    help="Bytes per tool result (text and structured content); longer results are cut with a note.",
)
@click.option(
    "--writable",
    is_flag=True,
    help="Offer the write tool to stdio and the admin token: it writes text files into the "
    "collection's source folder and indexes them (scoped tokens need `token create --write`).",
)
@click.pass_context
@handle_errors
def mcp_cmd(
    ctx: click.Context,
    address: CollectionAddress,
    collections: str | None,
    all_collections: bool,
    http: str | None,
    token_file: Path | None,
    allow_hosts: tuple[str, ...],
    session_timeout: float,
    budget: int,
    writable: bool,
) -> None:
    """Serve a collection to AI agents as MCP tools: search, read, grep, list, status, write.

    Speaks MCP on stdin/stdout (what Claude Code, Cursor, Codex and smolagents launch),
    or streamable HTTP with --http. grep answers like `grep -rn` over a mount, with the
    text filtered in Qdrant first. Runs beside a mount of the same store, or on its own.
    Over HTTP every request needs `Authorization: Bearer TOKEN`: the admin token (made on
    first use, owner-only; the start-up line says where) sees everything, a scoped token
    (`semfs token create`) only its folders. stdio needs none: it runs as you.
    The write tool (notes, long command outputs, searchable once written) is refused unless
    the server was started --writable or the token was made --write.
    With --collections docs,code (or --all) one server holds several collections, each a
    top-level folder (docs/..., code/...), each with its own model: search searches them
    all, and every tool takes an optional collection. Its tokens are the store's
    (`semfs token create NAME --several --under docs`), its admin token STORE/mcp.token;
    a collection's own scoped tokens (-c docs) see their folders below it (docs/...).

    \b
    Example:
        semfs mcp
        semfs mcp --store ~/.local/share/semfs -c docs
        semfs mcp --http 127.0.0.1:8765
        semfs mcp --http 0.0.0.0:8765 --allow-host docs.example.lan
        semfs mcp --writable
        semfs mcp --collections docs,code
        claude mcp add docs -- semfs mcp -c docs
        claude mcp add --transport http docs http://127.0.0.1:8765/mcp \\
            --header "Authorization: Bearer $(cat ~/.local/share/semfs/docs/mcp.token)"
    """
    from semfs.fusefs.agent.mcp import parse_http_address
    from semfs.fusefs.agent.several import SeveralToolbox, open_toolboxes
    from semfs.fusefs.agent.tokens import several_token_folder, token_folder
    from semfs.fusefs.agent.toolbox import Toolbox, open_toolbox
    from semfs.ingest.collection import collections as stored

    if http is not None:
        parse_http_address(http)  # a bad address fails before the store is opened
    names = collection_names(collections, all_collections, lambda: stored(address))
    if names and ctx.get_parameter_source("collection") == click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("give -c NAME or --collections/--all, not both")
    sigterm = _SigtermStop()
    try:
        opening: contextlib.AbstractContextManager[Toolbox | SeveralToolbox] = (
            open_toolboxes([address.named(n) for n in names], budget)
            if names
            else open_toolbox(address, budget)
        )
        with opening as box:
            from semfs.fusefs.agent.mcp import serve

            box.writable = writable
            serve(
                box,
                http,
                token_file=token_file,
                tokens_folder=several_token_folder(address) if names else token_folder(address),
                allowed_hosts=allow_hosts,
                session_timeout=session_timeout,
                # A server of several also takes each collection's own scoped tokens.
                collection_tokens={n: token_folder(address.named(n)) for n in names},
            )
            sigterm.closing = True  # the client left (stdin's end): the store closes next
        # Closed. What is left is the interpreter's exit, which gives SIGTERM its default
        # action back: a late one (the SDK's, 2 s after it closed our stdin) would kill it.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        # Stopped (Ctrl-C, SIGTERM): the store is closed and its socket and token removed by
        # now. The MCP SDK reads stdin in a worker thread, which a read blocked on an open pipe
        # keeps alive, and the interpreter would wait for it at exit forever: leave now. The
        # SDK's stdio transport may have closed stdout already (its client left first).
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(ValueError, OSError):
                stream.flush()
        os._exit(130)


@click.group(cls=Group, name="token")
def token_group() -> None:
    """Scoped tokens for `semfs mcp --http`: each sees only the folders it was made for.

    Tokens belong to one collection (--store/--url and -c pick it) and take effect without
    a restart. The admin token (mcp.token, made by the first `semfs mcp --http`) sees
    everything and is not listed here. With --several they are the store's, for servers of
    several collections (`semfs mcp --collections`): each --under names a collection first.

    \b
    Example:
        semfs token create ci --under deploy --under api-reference > ci.token
        semfs token create team --several --under docs --under code/src > team.token
        semfs token list
        semfs token revoke ci
    """


@token_group.command(name="create")
@click.argument("name")
@click.option(
    "--under",
    "under",
    multiple=True,
    required=True,
    metavar="DIR",
    help="A folder of the collection the token may see (relative to its root); repeatable.",
)
@click.option(
    "--write", is_flag=True, help="The token may also write files there (the MCP write tool)."
)
@click.option(
    "--several",
    is_flag=True,
    help="The store's tokens, for `semfs mcp --collections`/--all (not one collection's).",
)
@store_options
@handle_errors
def token_create(
    name: str,
    under: tuple[str, ...],
    write: bool,
    several: bool,
    address: CollectionAddress,
) -> None:
    """Make a token NAME that sees only the folders given with --under; print it once.

    With --write it may also write text files there (the MCP write tool). With --several
    it is for servers of several collections: each --under is COLLECTION or COLLECTION/DIR
    (--under docs sees all of docs), and it sees no collection it does not name.

    Only its SHA-256 is kept: save what is printed, it cannot be shown again.

    \b
    Example:
        semfs token create ci --under deploy > ci.token
        semfs token create support --under guides --under faq -c docs
        semfs token create agent --under notes --write > agent.token
        semfs token create team --several --under docs --under code/src
    """
    from semfs.fusefs.agent.tokens import ScopedTokens
    from semfs.ingest.store import check_collection_name

    if several:
        for folder in under:  # its first part names a collection
            check_collection_name(folder.strip("/").partition("/")[0])
    token = ScopedTokens(_tokens_folder(address, several)).create(name, under, write)
    click.echo(token)
    does = "sees and writes" if write else "sees"
    click.echo(f"token {name!r} {does} {', '.join(sorted(set(under)))} only", err=True)


@token_group.command(name="list")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list (no secrets in it).")
@click.option(
    "--several",
    is_flag=True,
    help="The store's tokens, for `semfs mcp --collections`/--all (not one collection's).",
)
@handle_errors
def token_list(address: CollectionAddress, as_json: bool, several: bool) -> None:
    """List the scoped tokens: name, when made, read or write, and the folders each sees.

    \b
    Example:
        semfs token list -c docs
        semfs token list --json
        semfs token list --several
    """
    import json

    from semfs.fusefs.agent.tokens import ScopedTokens

    tokens = ScopedTokens(_tokens_folder(address, several)).list()
    if as_json:
        # Named fields only: whatever else a token's entry holds (its hash) stays in its file.
        shown = [
            {
                "name": t["name"],
                "created": t["created"],
                "write": bool(t["write"]),
                "under": list(t["under"]),
            }
            for t in tokens
        ]
        click.echo(json.dumps(shown, indent=2))
        return
    if not tokens:
        click.echo("no scoped tokens (the admin token in mcp.token sees everything)", err=True)
    for t in tokens:
        right = "write" if t["write"] else "read"
        click.echo(f"{t['name']}\t{t['created']}\t{right}\t{' '.join(t['under'])}")


@token_group.command(name="revoke")
@click.argument("name")
@click.option(
    "--several",
    is_flag=True,
    help="The store's tokens, for `semfs mcp --collections`/--all (not one collection's).",
)
@store_options
@handle_errors
def token_revoke(name: str, several: bool, address: CollectionAddress) -> None:
    """Revoke the scoped token NAME: the next request with it is refused (401).

    To change the admin token, delete mcp.token and restart `semfs mcp --http`.

    \b
    Example:
        semfs token revoke ci
    """
    from semfs.fusefs.agent.tokens import ScopedTokens
    from semfs.ingest.errors import TokenError

    if not ScopedTokens(_tokens_folder(address, several)).revoke(name):
        raise TokenError(f"no token named {name!r}: `semfs token list` shows them")
    click.echo(f"revoked {name!r}", err=True)


def _tokens_folder(address: CollectionAddress, several: bool) -> Path:
    """The tokens file's folder: the collection's, or (``several``) the store's."""
    from semfs.fusefs.agent.tokens import several_token_folder, token_folder

    return several_token_folder(address) if several else token_folder(address)


def _interrupted(exc: BaseException) -> bool:
    """``exc`` is KeyboardInterrupt, alone or in the exception groups of anyio's task groups
    (a SIGTERM raised while the stdio server's tasks run arrives wrapped in one)."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    inner = getattr(exc, "exceptions", None)
    return isinstance(inner, tuple) and bool(inner) and all(_interrupted(e) for e in inner)


class _SigtermStop:
    """SIGTERM (a supervisor, `kill`) stops the server as Ctrl-C does: the store it owns is
    closed and its daemon.sock, daemon.token and owner.json removed, instead of the process
    dying with them left behind (uvicorn installs its own handler for --http, which also
    returns normally).

    Once the server is closing (``closing`` set, or a first SIGTERM), another SIGTERM is not
    raised: an MCP client's SDK closes our stdin, and 2 s later sends SIGTERM, while the store
    may still be closing (its dense pass ends its window). Raised there, it broke the close off
    half-way and the process died with "terminate called without an active exception"."""

    def __init__(self) -> None:
        self.closing = False
        signal.signal(signal.SIGTERM, self._stop)

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        if not self.closing:
            self.closing = True
            raise KeyboardInterrupt


@click.command(cls=Command, name="guide")
@click.argument("mountpoint", required=False, type=click.Path(path_type=Path))
@click.option(
    "--search-dir",
    metavar="NAME",
    help="The search folder's name [default: what the mount at MOUNTPOINT answers, else "
    f"{DEFAULT_NAME}].",
)
@handle_errors
def guide_cmd(mountpoint: Path | None, search_dir: str | None) -> None:
    """Print the agent guide: what to put in an agent's system prompt to use a mount well.

    MOUNTPOINT, if given, must be a semfs mount; its absolute path replaces DOCS in the text,
    and its search folder (semfs mount --search-dir) replaces .search.

    \b
    Example:
        semfs guide ~/mnt/docs >> AGENTS.md
        semfs guide --search-dir .find
    """
    from semfs.fusefs.mount.unmount import (
        FSTYPE,
        mount_collections,
        mount_fstype,
        mount_search_dir,
    )
    from semfs.fusefs.view.searchdir import check_folder_name

    collections: list[str] = []
    if mountpoint is not None:
        with contextlib.suppress(FileNotFoundError):  # no list of mounts here: not checked
            fstype = mount_fstype(mountpoint)
            if fstype != FSTYPE:
                what = "nothing is mounted there" if fstype is None else f"it is a {fstype} mount"
                raise click.ClickException(
                    f"{mountpoint} is not a semfs mount ({what}): mount it first "
                    f"(semfs mount {mountpoint}), or run `semfs guide` without a path"
                )
        search_dir = search_dir or mount_search_dir(mountpoint)
        collections = mount_collections(mountpoint)
    folder = check_folder_name(search_dir or DEFAULT_NAME)
    # Absolute: the text goes into an agent's prompt, read from wherever the agent runs.
    where = os.path.abspath(mountpoint) if mountpoint is not None else None
    click.echo(guide(where, folder, collections), nl=False)


def register(group: click.Group) -> None:
    """Add `mcp`, `token` and `guide` to ``group``."""
    group.add_command(mcp_cmd)
    group.add_command(token_group)
    group.add_command(guide_cmd)
