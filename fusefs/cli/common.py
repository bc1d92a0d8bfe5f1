"""What every command shares: library errors as one line (:func:`handle_errors`), the end of a
pipe's reader as SIGPIPE, the shared option groups (built from the table in
:mod:`semfs.fusefs.cli.options`) and opening a store for the length of a command."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from semfs.fusefs.cli.options import CATALOG, MIN_SCORE, MODE, SOURCE, STORE, STORES, K, Param
from semfs.ingest.errors import SemfsError, engine_damage
from semfs.ingest.store import DEFAULT_COLLECTION
from semfs.ingest.store.address import CollectionAddress
from semfs.ingest.store.backends import open_catalog

if TYPE_CHECKING:
    pass

F = TypeVar("F", bound=Callable[..., Any])


def one_line(message: str) -> str:
    return " ".join(message.split())


def handle_errors(func: F) -> F:
    """Library errors become one line and exit 1; a traceback only with -v.

    A command called with ``--json`` (its ``as_json`` parameter) also prints the error as
    ``{"error": "..."}`` on stdout, so a script reading stdout always gets JSON.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return translate_errors(func, *args, **kwargs)
        except click.ClickException as exc:
            if kwargs.get("as_json"):
                click.echo(json.dumps({"error": exc.format_message()}, ensure_ascii=False))
            raise

    return wrapper  # type: ignore[return-value]


def translate_errors(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, its library errors raised as one-line ClickExceptions."""
    try:
        return func(*args, **kwargs)
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except BrokenPipeError:
        if not _stdout_gone():
            raise click.ClickException("the connection closed (BrokenPipeError)") from None
        _end_as_sigpipe()
        raise  # not reached
    except SemfsError as exc:
        raise click.ClickException(one_line(str(exc))) from exc
    except Exception as exc:
        ctx = click.get_current_context(silent=True)
        if ctx is not None and ctx.find_root().meta.get("semfs.verbose", 0) > 0:
            raise
        damage = engine_damage(exc)  # undecodable points: damage, with the way out
        if damage is not None:
            raise click.ClickException(one_line(damage)) from exc
        raise click.ClickException(
            one_line(f"{type(exc).__name__}: {exc} (run with -v for details)")
        ) from exc
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":  # Qdrant Edge's Rust panics (pyo3)
            raise
        raise click.ClickException(one_line(engine_damage(exc) or str(exc))) from exc


def _stdout_gone() -> bool:
    """Whether our stdout is a pipe whose reader went away (``semfs search ... | head -1``)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _end_as_sigpipe() -> None:
    """End the way cat or grep end when their reader leaves: silently, by SIGPIPE (the shell
    sees 141). Python ignores the signal, so it is restored and sent to ourselves."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush into the dead pipe
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)


class _OnceEach:
    """A command whose options that take one value refuse to be given twice: click's parser
    keeps the last (``-c docs -c code`` searched only ``code``), which silently drops what the
    user asked for. Options that gather (``multiple``), count (``-vv``) or are flags may repeat.
    Every semfs command and group is one (``cls=Command``, ``cls=Group``; a group's
    subcommands are by default); tests/cli/test_group.py checks that none is missed."""

    def make_parser(self, ctx: click.Context) -> Any:
        parser = super().make_parser(ctx)  # type: ignore[misc]
        parse = parser.parse_args

        def parse_once(args: list[str]) -> Any:
            opts, rest, order = parse(args=args)
            if not ctx.resilient_parsing:  # shell completion parses half a line: never fail
                _refuse_repeats(ctx, order)
            return opts, rest, order

        parser.parse_args = parse_once
        return parser


def _refuse_repeats(ctx: click.Context, order: Iterable[click.Parameter]) -> None:
    seen: set[str | None] = set()
    for param in order:
        if not isinstance(param, click.Option) or param.multiple or param.count:
            continue
        if param.is_flag:
            continue
        if param.name in seen:
            flag = max(param.opts, key=len)
            raise click.UsageError(f"{flag} given twice", ctx)
        seen.add(param.name)


class Command(_OnceEach, click.Command):
    """A semfs command: see :class:`_OnceEach`."""


class Group(_OnceEach, click.Group):
    """A semfs command group: its options, and its subcommands' (made with ``group.command``),
    refuse a single-value option given twice (see :class:`_OnceEach`)."""

    command_class = Command
    group_class = type  # a subgroup is a Group too


def _click_type(param: Param) -> Any:
    if param.path is not None:
        file_okay, dir_okay = param.path
        return click.Path(file_okay=file_okay, dir_okay=dir_okay, path_type=Path)
    if param.choices is not None:
        return click.Choice(param.choices)
    if param.number is not None and param.bounds is not None:
        low, high = param.bounds
        if param.number is int:
            return click.IntRange(
                None if low is None else int(low), None if high is None else int(high)
            )
        return click.FloatRange(low, high)
    return param.number


def complete_collections(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[click.shell_completion.CompletionItem]:
    """Shell completion of ``-c``: the names of the collections in the store that the command
    line (``--store``, ``--url``) or the environment names; none when it cannot be read (a
    completion never prints an error into the shell)."""
    from click.shell_completion import CompletionItem

    try:
        address = CollectionAddress(
            store=ctx.params.get("store_path"),
            url=ctx.params.get("url"),
            api_key=ctx.params.get("api_key"),
        )
        with open_catalog(address) as catalog:
            names = catalog.names()
    except Exception:  # any failure: offer nothing rather than break the user's shell
        return []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


_COMPLETERS = {"collections": complete_collections}


def _decorator(param: Param) -> Callable[[F], F]:
    """The click.option (click.argument, for a parameter without flags) for ``param``."""
    if not param.flags:
        return click.argument(param.name, type=_click_type(param), required=param.required)
    # Only what the table sets: click's own defaults (a flag's False, a multiple's ()) stay its.
    settings: dict[str, Any] = {
        "default": param.default,
        "envvar": param.envvar,
        "help": param.help,
        "metavar": param.metavar,
        "show_default": param.show_default or None,
        "multiple": param.multiple or None,
        "is_flag": param.is_flag or None,
        "type": None if param.is_flag else _click_type(param),
        "shell_complete": _COMPLETERS[param.complete] if param.complete else None,
    }
    return click.option(
        *param.flags, param.name, **{k: v for k, v in settings.items() if v is not None}
    )


def params(table: Iterable[Param]) -> Callable[[F], F]:
    """Decorate a command with ``table``'s parameters, listed in its order."""

    def decorate(func: F) -> F:
        for param in reversed(tuple(table)):
            func = _decorator(param)(func)
        return func

    return decorate


def _as_address(func: F) -> F:
    """``func`` called with one ``address`` (a :class:`CollectionAddress`) for the store
    options' values (``store_path``, ``url``, ``api_key``, and ``collection`` if given)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        pieces = {name: kwargs.pop(name, None) for name in ("store_path", "url", "api_key")}
        collection = kwargs.pop("collection", DEFAULT_COLLECTION)
        address = CollectionAddress(
            collection, pieces["store_path"], pieces["url"], pieces["api_key"]
        )
        return func(*args, address=address, **kwargs)

    return wrapper  # type: ignore[return-value]


def store_options(func: F) -> F:
    """--store / --url / --api-key / --collection, shared by every command that opens a store:
    the command takes them as one ``address: CollectionAddress``."""
    return params(STORE)(_as_address(func))


def _as_addresses(func: F) -> F:
    """``func`` called with ``addresses``: one :class:`CollectionAddress` per collection named
    (``collection``: a tuple; a name given twice counts once), in the order given."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        pieces = [kwargs.pop(name, None) for name in ("store_path", "url", "api_key")]
        names = dict.fromkeys(kwargs.pop("collection", None) or (DEFAULT_COLLECTION,))
        addresses = tuple(CollectionAddress(name, *pieces) for name in names)
        return func(*args, addresses=addresses, **kwargs)

    return wrapper  # type: ignore[return-value]


def stores_options(func: F) -> F:
    """The store options with -c repeatable: the command takes ``addresses``, a tuple of
    :class:`CollectionAddress`, one per collection named."""
    return params(STORES)(_as_addresses(func))


def catalog_options(func: F) -> F:
    """--store / --url / --api-key: where the collections are (no --collection); the command
    takes them as one ``address: CollectionAddress`` (its collection the default)."""
    return params(CATALOG)(_as_address(func))


def search_options(k_help: str, mode_help: str, min_score_help: str) -> Callable[[F], F]:
    """-k / --mode / --min-score, shared by `semfs search` and `semfs mount` (its defaults)."""
    return params(
        (K.with_help(k_help), MODE.with_help(mode_help), MIN_SCORE.with_help(min_score_help))
    )


def source_options(func: F) -> F:
    """--model / --include / --exclude / --batch-size / --max-size / --follow-symlinks: how a
    source is read, shared by `semfs ingest` and `semfs mount --watch`."""
    return params(SOURCE)(func)


def waiting(holder: str) -> None:
    """Say, on stderr, that a command waits for another writer of its collection."""
    click.echo(f"Waiting for {holder}, which is writing this collection ...", err=True)
