"""`semfs mount` without click: the start of a mount is paid every time one starts.

Importing click and the commands (:mod:`semfs.fusefs.cli.group`) costs ~30 ms, a fifth of a
small collection's mount → first ls, and the daemon needs neither. :func:`try_mount` recognises
the plain forms of `semfs mount MOUNTPOINT [options]` and starts the mount directly, with
the parameters click would have given; for anything else (--help, an option whose value click
converts, an unusual spelling, a path click would refuse) it returns False and the caller runs
the click command, so help, examples and usage errors stay click's. Both read the mount's
parameters from one table (:data:`semfs.fusefs.cli.options.MOUNT`: flags, defaults,
environment variables), and both build the mount through :func:`run_mount` (tests compare
their parameters).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from semfs.fusefs.cli.options import MOUNT, collection_names

if TYPE_CHECKING:
    from semfs.ingest.sources import SourceOptions
    from semfs.ingest.store.address import CollectionAddress

# Every parameter of the click `mount` command, at its default (what a parse starts from).
DEFAULTS: Mapping[str, Any] = {param.name: param.initial for param in MOUNT}
_ARGUMENT = next(param for param in MOUNT if not param.flags)
_BY_FLAG = {flag: param for param in MOUNT for flag in param.flags}


def parse(args: Sequence[str], environ: Mapping[str, str] = os.environ) -> dict[str, Any] | None:
    """The `mount` command's parameters for ``args`` (after the word ``mount``), as click
    would pass them, or None when only click should answer.

    Taken here: flags, and options whose value click passes on as it is (a string, or a path
    after click.Path's checks); a value click converts (a number, a choice) is left to click,
    so a value click would refuse is never taken."""
    params = dict(DEFAULTS)
    for param in MOUNT:
        setting = environ.get(param.envvar) if param.envvar else None
        if setting is not None:
            if not setting or param.converted:
                return None
            params[param.name] = setting
    gathered: dict[str, list[str]] = {}
    given: set[str] = set()
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-"):
            positional.append(arg)
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        option = _BY_FLAG.get(name)
        if option is None or option.converted:
            return None  # --help, -fo..., --, a number: click's
        if option.is_flag:
            if eq:
                return None
            params[option.name] = True
            continue
        if not eq:
            if i == len(args):
                return None  # click says the option needs a value
            value = args[i]
            i += 1
        if not value or value.startswith("-"):
            return None
        if option.multiple:
            gathered.setdefault(option.name, []).append(value)
        elif option.name in given:
            return None  # given twice: click's error (never silently the last)
        else:
            given.add(option.name)
            params[option.name] = value
    if len(positional) != 1:
        return None
    params[_ARGUMENT.name] = positional[0]
    for key, values in gathered.items():
        params[key] = tuple(values)
    for param in MOUNT:
        if param.path is not None and params[param.name] is not None:
            path = _as_click_path(params[param.name], *param.path)
            if path is None:
                return None
            params[param.name] = path
    return params


def _as_click_path(value: str, file_ok: bool, dir_ok: bool) -> Path | None:
    """``Path(value)`` when click.Path(file_okay, dir_okay, path_type=Path) takes it as is."""
    if not value:
        return None
    try:
        st = os.stat(value)
    except OSError:
        return Path(value)
    if (not file_ok and stat.S_ISREG(st.st_mode)) or (not dir_ok and stat.S_ISDIR(st.st_mode)):
        return None
    return Path(value) if os.access(value, os.R_OK) else None


def run_mount(params: Mapping[str, Any], verbose: int) -> None:
    """Mount with the `mount` command's parameters; in the background, exit once it answers."""
    from semfs.fusefs.mount.daemon import MountConfig, parse_options
    from semfs.fusefs.mount.logfile import configure_logging, default_log_file
    from semfs.fusefs.mount.start import mount
    from semfs.fusefs.view.searchdir import check_folder_name
    from semfs.ingest.request import SearchRequest
    from semfs.ingest.store.address import CollectionAddress

    p = dict(params)
    # The mount's defaults for its search folders, checked before forking.
    search = SearchRequest(k=p["k"], mode=p["mode"], min_score=p["min_score"])
    check_folder_name(p["search_dir"])
    address = CollectionAddress(
        p["collection"], p["store_path"], p["url"], p["api_key"], p["connect_timeout"]
    )
    several = tuple(
        address.named(name)
        for name in collection_names(
            p["collections"], p["all_collections"], lambda: _catalog_names(address)
        )
    )
    address = several[0] if several else address
    if p["log_file"] is None and not p["foreground"]:
        # A background mount has no terminal: keep its log where `semfs status` says.
        p["log_file"] = default_log_file(address, creating=p["watch"] is not None)
    configure_logging(p["log_file"], verbose, p["foreground"])
    mount(
        MountConfig(
            mountpoint=p["mountpoint"],
            address=address,
            options=parse_options(p["options"]),
            foreground=p["foreground"],
            log_file=p["log_file"],
            search_dir=p["search_dir"],
            search=search,
            watch=p["watch"],
            views=not p["no_views"],
            writable=p["writable"],
            source=_source_options(p),
            collections=several,
        )
    )
    if not p["foreground"]:
        _leave_to_the_daemon()


def _catalog_names(address: CollectionAddress) -> list[str]:
    """The collections of ``address``'s store or server (``--all``), sorted."""
    from semfs.ingest.store.backends import open_catalog

    with open_catalog(address) as catalog:
        return catalog.names()


def _source_options(p: Mapping[str, Any]) -> SourceOptions | None:
    """How --watch reads its folder; None without --watch (nothing is read, and the reading
    machinery is not imported: a mount's start pays each module)."""
    if p["watch"] is None:
        return None
    from semfs.ingest.sources import SourceOptions

    return SourceOptions(
        p["model"],
        p["include"],
        p["exclude"],
        p["batch_size"],
        p["max_bytes"],
        p["follow_symlinks"],
        p["jobs"],
    )


def _leave_to_the_daemon() -> NoReturn:
    """Exit at once, as daemon(3)'s parent does, now that the forked daemon serves the mount:
    finalizing this interpreter (every module, the log handlers) would only delay the
    shell's prompt, and whatever waits on `semfs mount` to list the mount."""
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def try_mount(args: Sequence[str]) -> bool:
    """Run `semfs mount ARGS` without click if it is a plain one (then return True, or exit
    on failure with click's message and status); False: the caller runs click."""
    params = parse(args)
    if params is None:
        return False
    from semfs.ingest.logs import configure_logging

    configure_logging(0)  # what the click group does first
    try:
        run_mount(params, 0)
    except KeyboardInterrupt:
        _fail(None)
    except Exception as exc:
        _fail(exc)
    except BaseException as exc:  # the engine's panics (pyo3) are BaseExceptions
        if type(exc).__name__ != "PanicException":
            raise
        _fail(exc)
    return True


def _fail(error: BaseException | None) -> NoReturn:
    """Report ``error`` (None: Ctrl-C) exactly as the click command would: one line, its
    exit status."""
    import click

    from semfs.fusefs.cli.common import translate_errors

    def again() -> NoReturn:
        if error is None:
            click.echo(file=sys.stderr)  # as click's main does on Ctrl-C
            raise click.Abort()
        raise error

    try:
        translate_errors(again)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("Aborted!", file=sys.stderr)
        sys.exit(1)
    raise AssertionError("unreachable")
