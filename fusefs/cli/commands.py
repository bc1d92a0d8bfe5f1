"""The full ``semfs`` command (click): the store commands from :mod:`semfs.fusefs.cli.store` plus
mount
commands. :mod:`semfs.fusefs.cli` (the console script's entry point) runs it, except for a plain
`semfs mount`, which it starts without click (:mod:`semfs.fusefs.cli.fastmount`).

It lives here, not in ``ingest``, because data flows one way: fusefs may import ingest,
never the reverse.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from types import FrameType

import click

from semfs.fusefs.agent.guide import guide
from semfs.fusefs.cli.store import cli, handle_errors, search_options, source_options, store_options
from semfs.fusefs.view.searchdir import DEFAULT_NAME

# semfs.fusefs.mount.daemon (FUSE bindings, the store backends, the watcher) is imported by the
# commands
# that use it: `semfs --version`, `--help` and the store commands start without it.

MOUNT_EPILOG = """\b
Search as directories: every folder answers .search (--search-dir), listed nowhere,
so ls -a, find, grep -r and diff -r see only your documents:
    ls ~/mnt/docs/.search/"how do I rotate an api key"/
    ls ~/mnt/docs/deploy/.search/"serve docs under a subpath"/  # only inside deploy/
    cat ~/mnt/docs/.search/"rotate api key"/00-results.md     # ranked list + answering lines
    cat ~/mnt/docs/.search/"rotate api key"/01-*              # the best document, whole
    ls -U ~/mnt/docs/.search/                                 # recent queries, newest first
    cat ~/mnt/docs/.search/README.md                          # this syntax, in the mount

\b
A query folder holds 00-results.md, then one symlink per document, best first
(01-NAME, 02-NAME, ...; relative, so cat, grep and editors reach the real file).
Per-query options are parameter folders before the question, in any order:
    @hybrid @semantic @keyword   the mode (hybrid: dense + BM25, scores fused)
    @k=N                         how many documents (1-100)
    @min=X                       drop hits whose match strength (0-1) is below X
    @more                        answering lines from more of the hits (about 3x)
    @full                        whole passages in 00-results.md instead of excerpts
    e.g. ls ~/mnt/docs/.search/@keyword/@k=3/"nginx subpath"/
A parameter folder that is none of these (@k=500, @min=x, @bogus) is not found;
the mount's log says why. 00-results.md keeps its name whatever k.
The question is one file name: type '/' as U+2215 or U+FF0F, at most 255 bytes. Names starting with
'.' are not queries (.DS_Store, .git probes); '@' starts a parameter; for a question
that starts with either, begin the name with a space. Results are cached per question
and refreshed when the collection changes.

\b
System mount (mount -t semfs, /etc/fstab), after a one-time install of the helper:
    sudo ln -s "$(command -v mount.semfs)" /sbin/mount.semfs
    sudo mount -t semfs ~/.local/share/semfs ~/mnt/docs -o collection=docs
    sudo umount ~/mnt/docs

\b
An /etc/fstab line that lets you (not only root) run `mount ~/mnt/docs`:
    /home/me/.local/share/semfs  /home/me/mnt/docs  semfs  noauto,user,collection=docs  0 0
For a Qdrant server, give its URL instead of the store folder (or -o url=URL).
"""


@cli.command(name="mount", epilog=MOUNT_EPILOG)
@click.argument("mountpoint", type=click.Path(path_type=Path))
@store_options
@click.option(
    "-f",
    "--foreground",
    is_flag=True,
    help="Stay in the foreground, logging to stderr; Ctrl-C unmounts.",
)
@click.option(
    "-o",
    "options",
    multiple=True,
    metavar="OPT[,OPT...]",
    help="FUSE mount options, comma-separated, repeatable: allow_other, "
    "entry_timeout=S, attr_timeout=S, uid=N, gid=N, nonempty, debug, ...",
)
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append the daemon's log (INFO and up) here, created 0600, cut at 4 MiB "
    "[default: STORE/COLLECTION/mount.log in the background, stderr with -f].",
)
@click.option(
    "--search-dir",
    default=DEFAULT_NAME,
    show_default=True,
    metavar="NAME",
    help="The search folder every directory answers (listed nowhere).",
)
@click.option(
    "--no-views",
    is_flag=True,
    help="Hide the text views of PDFs, Word, PowerPoint, HTML and EPUB files (report.pdf.md "
    "beside report.pdf): the tree is then the source folder exactly (diff -r is empty).",
)
@search_options(
    k_help="Documents per search; @k=N changes it per query.",
    mode_help="Search mode; @semantic, @keyword, @hybrid change it per query.",
    min_score_help="Drop hits whose match strength (0-1) is below this; @min=X per query.",
)
@click.option(
    "--connect-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds to wait for a Qdrant server before giving up.",
)
@click.option(
    "-w",
    "--watch",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Follow DIR: ingest what changed since the last run, then every change as it "
    "happens (the options below say how DIR is read, as for `semfs ingest`).",
)
@source_options
@click.pass_context
@handle_errors
def mount_cmd(
    ctx: click.Context,
    mountpoint: Path,
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    foreground: bool,
    options: tuple[str, ...],
    log_file: Path | None,
    search_dir: str,
    no_views: bool,
    k: int,
    mode: str,
    min_score: float | None,
    connect_timeout: float,
    watch: Path | None,
    model: str | None,
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    batch_size: int,
    max_bytes: int,
    follow_symlinks: bool,
) -> None:
    """Show a collection as a read-only directory tree at MOUNTPOINT.

    The tree mirrors the ingested folder, file for file and byte for byte, so ls, cat,
    grep -r, rg, find, diff -r and editors work on it. A PDF, Word, PowerPoint, HTML or
    EPUB file also has its text view beside it (report.pdf.md, with "## Page N" headings);
    diff -r SRC MNT then lists only the views (--no-views hides them). Goes to the
    background once the mount answers. `semfs ingest` into the same collection while
    mounted updates the tree within about a second. Each folder also answers
    `.search/QUESTION/` with the documents that best answer QUESTION (see below).
    Unmount with `semfs umount MOUNTPOINT`.
    With --watch DIR the daemon keeps the collection mirroring DIR while mounted (creating
    it if need be): each change shows within about a second; `semfs status` says how fresh.

    \b
    Example:
        semfs mount ~/mnt/docs
        ls -l ~/mnt/docs; grep -rn "api key" ~/mnt/docs; diff -r ./docs ~/mnt/docs
        semfs mount ~/mnt/acme --url http://localhost:6333 --collection acme -o allow_other
        semfs mount -f ~/mnt/docs --log-file /tmp/semfs.log
        semfs mount ~/mnt/docs --k 5 --mode keyword --search-dir .find
        semfs mount ~/mnt/docs --watch ./docs --exclude drafts/
        semfs mount ~/mnt/docs --no-views; diff -r ./docs ~/mnt/docs
        semfs umount ~/mnt/docs
    """
    from semfs.fusefs.cli.fastmount import run_mount

    run_mount(ctx.params, ctx.find_root().meta.get("semfs.verbose", 0))


@cli.command(name="umount")
@click.argument("mountpoint", type=click.Path(path_type=Path))
@click.option("-z", "--lazy", is_flag=True, help="Detach now even if busy (fusermount -uz).")
@click.option(
    "--force", is_flag=True, help="Unmount even what is not a semfs mount (any filesystem)."
)
@handle_errors
def umount_cmd(mountpoint: Path, lazy: bool, force: bool) -> None:
    """Unmount a semfs mount (or a stale one) and wait for its daemon to exit.

    Refuses anything that is not a semfs mount (type fuse.semfs) unless --force. Uses
    fusermount3 / fusermount on Linux and umount on macOS. With --lazy the daemon keeps
    serving files still open under the mount and exits when they are closed; the command
    says so.

    \b
    Example:
        semfs umount ~/mnt/docs
        semfs umount --lazy ~/mnt/docs
    """
    from semfs.fusefs.mount.daemon import unmount

    note = unmount(mountpoint, lazy=lazy, force=force)
    if note is not None:
        click.echo(note, err=True)


@cli.command(name="mcp")
@store_options
@click.option(
    "--http",
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; every request "
    "needs a bearer token (see --token-file and `semfs token`).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The owner token for --http: read from this file (owner-only), made there if "
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
    default=600.0,
    show_default=True,
    type=click.FloatRange(1),
    help="Close an HTTP session after this many seconds without a request.",
)
@click.option(
    "--budget",
    default=30_000,
    show_default=True,
    type=click.IntRange(1000),
    help="Bytes per tool result (text and structured content); longer results are cut with a note.",
)
@click.pass_context
@handle_errors
def mcp_cmd(
    ctx: click.Context,
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
    http: str | None,
    token_file: Path | None,
    allow_hosts: tuple[str, ...],
    session_timeout: float,
    budget: int,
) -> None:
    """Serve a collection to AI agents as MCP tools: search, read, grep, list, status.

    Speaks MCP on stdin/stdout (what Claude Code, Cursor, Codex and smolagents launch),
    or streamable HTTP with --http. grep answers like `grep -rn` over a mount, with the
    text filtered in Qdrant first. Runs beside a mount of the same store, or on its own.
    Over HTTP every request needs `Authorization: Bearer TOKEN`: the owner token (made on
    first use, owner-only; the start-up line says where) sees everything, a scoped token
    (`semfs token create`) only its folders. stdio needs none: it runs as you.

    \b
    Example:
        semfs mcp
        semfs mcp --store ~/.local/share/semfs -c docs
        semfs mcp --http 127.0.0.1:8765
        semfs mcp --http 0.0.0.0:8765 --allow-host docs.example.lan
        claude mcp add docs -- semfs mcp -c docs
        claude mcp add --transport http docs http://127.0.0.1:8765/mcp \\
            --header "Authorization: Bearer $(cat ~/.local/share/semfs/docs/mcp.token)"
    """
    from semfs.fusefs.agent.mcp import parse_http_address
    from semfs.fusefs.agent.tokens import token_folder
    from semfs.fusefs.agent.toolbox import open_toolbox

    if http is not None:
        parse_http_address(http)  # a bad address fails before the store is opened
    _stop_on_sigterm()
    try:
        with open_toolbox(store_path, url, api_key, collection, budget) as box:
            from semfs.fusefs.agent.mcp import serve

            serve(
                box,
                http,
                token_file=token_file,
                tokens_folder=token_folder(store_path, url, collection),
                allowed_hosts=allow_hosts,
                session_timeout=session_timeout,
            )
    except KeyboardInterrupt:
        # Stopped (Ctrl-C, SIGTERM): the store is closed and its socket and token removed by
        # now. The MCP SDK reads stdin in a worker thread, which a read blocked on an open pipe
        # keeps alive, and the interpreter would wait for it at exit forever: leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


@cli.group(name="token")
def token_group() -> None:
    """Scoped tokens for `semfs mcp --http`: each sees only the folders it was made for.

    Tokens belong to one collection (--store/--url and -c pick it) and take effect without
    a restart. The owner token (mcp.token, made by the first `semfs mcp --http`) sees
    everything and is not listed here.

    \b
    Example:
        semfs token create ci --under deploy --under api-reference > ci.token
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
@store_options
@handle_errors
def token_create(
    name: str,
    under: tuple[str, ...],
    store_path: Path | None,
    url: str | None,
    api_key: str | None,
    collection: str,
) -> None:
    """Make a token NAME that sees only the folders given with --under; print it once.

    Only its SHA-256 is kept: save what is printed, it cannot be shown again.

    \b
    Example:
        semfs token create ci --under deploy > ci.token
        semfs token create support --under guides --under faq -c docs
    """
    from semfs.fusefs.agent.tokens import ScopedTokens, token_folder

    token = ScopedTokens(token_folder(store_path, url, collection)).create(name, under)
    click.echo(token)
    click.echo(f"token {name!r} sees {', '.join(sorted(set(under)))} only", err=True)


@token_group.command(name="list")
@store_options
@handle_errors
def token_list(
    store_path: Path | None, url: str | None, api_key: str | None, collection: str
) -> None:
    """List the scoped tokens: name, when made, and the folders each sees.

    \b
    Example:
        semfs token list -c docs
    """
    from semfs.fusefs.agent.tokens import ScopedTokens, token_folder

    tokens = ScopedTokens(token_folder(store_path, url, collection)).list()
    if not tokens:
        click.echo("no scoped tokens (the owner token in mcp.token sees everything)", err=True)
    for t in tokens:
        click.echo(f"{t['name']}\t{t['created']}\t{' '.join(t['under'])}")


@token_group.command(name="revoke")
@click.argument("name")
@store_options
@handle_errors
def token_revoke(
    name: str, store_path: Path | None, url: str | None, api_key: str | None, collection: str
) -> None:
    """Revoke the scoped token NAME: the next request with it is refused (401).

    To change the owner token, delete mcp.token and restart `semfs mcp --http`.

    \b
    Example:
        semfs token revoke ci
    """
    from semfs.fusefs.agent.tokens import ScopedTokens, token_folder
    from semfs.ingest.errors import TokenError

    if not ScopedTokens(token_folder(store_path, url, collection)).revoke(name):
        raise TokenError(f"no token named {name!r}: `semfs token list` shows them")
    click.echo(f"revoked {name!r}", err=True)


def _stop_on_sigterm() -> None:
    """SIGTERM (a supervisor, `kill`) stops the server as Ctrl-C does: the store it owns is
    closed and its daemon.sock, daemon.token and owner.json removed, instead of the process
    dying with them left behind (uvicorn installs its own handler for --http, which also
    returns normally)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


@cli.command(name="guide")
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

    MOUNTPOINT, if given, must be a semfs mount; its path replaces DOCS in the text, and its
    search folder (semfs mount --search-dir) replaces .search.

    \b
    Example:
        semfs guide ~/mnt/docs >> AGENTS.md
        semfs guide --search-dir .find
    """
    from semfs.fusefs.mount.daemon import FSTYPE, mount_fstype, mount_search_dir
    from semfs.fusefs.view.searchdir import check_folder_name

    if mountpoint is not None:
        with contextlib.suppress(FileNotFoundError):  # no mountinfo (macOS): not checked
            fstype = mount_fstype(mountpoint)
            if fstype != FSTYPE:
                what = "nothing is mounted there" if fstype is None else f"it is a {fstype} mount"
                raise click.ClickException(
                    f"{mountpoint} is not a semfs mount ({what}): mount it first "
                    f"(semfs mount {mountpoint}), or run `semfs guide` without a path"
                )
        search_dir = search_dir or mount_search_dir(mountpoint)
    folder = check_folder_name(search_dir or DEFAULT_NAME)
    where = str(mountpoint) if mountpoint is not None else None
    click.echo(guide(where, folder), nl=False)


def main() -> None:
    cli(prog_name="semfs")
