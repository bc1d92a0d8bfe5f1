"""The options the commands share, as data: one table from which both the click decorators
(:mod:`semfs.fusefs.cli.common`) and the click-free `semfs mount` parser
(:mod:`semfs.fusefs.cli.fastmount`) are built, so a default, an environment variable or a help
text is stated once.

No click here: a plain `semfs mount` imports this module and must start without it. A
:class:`Param` says what click needs to build the option (flags, default, envvar, help, type);
the click type is derived from ``path``, ``number`` and ``choices``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from semfs.fusefs.view.searchdir import DEFAULT_NAME
from semfs.ingest.embedding.embedder import DEFAULT_BATCH_SIZE
from semfs.ingest.errors import SemfsError
from semfs.ingest.limits import DEFAULT_MAX_BYTES
from semfs.ingest.request import DEFAULT_MODE
from semfs.ingest.store import (
    DEFAULT_COLLECTION,
    DEFAULT_K,
    MAX_K,
    MODES,
    check_collection_name,
    default_store_path,
)


@dataclass(frozen=True)
class Param:
    """One command-line parameter: an option, or the positional argument when ``flags`` is
    empty. Its value is a ``str`` unless ``path`` (a ``Path``, click.Path's checks:
    (file_okay, dir_okay)), ``number`` (``int`` or ``float``, within ``bounds``), ``choices``
    or ``is_flag`` say otherwise; ``multiple`` gathers a tuple."""

    name: str
    flags: tuple[str, ...] = ()
    default: Any = None
    envvar: str | None = None
    help: str | None = None
    metavar: str | None = None
    show_default: bool = False
    is_flag: bool = False
    multiple: bool = False
    path: tuple[bool, bool] | None = None
    number: type[int] | type[float] | None = None
    bounds: tuple[float | None, float | None] | None = None
    choices: tuple[str, ...] | None = None
    required: bool = True  # an argument's; options never are
    # What shell completion offers for the value: "collections" (the store's collection names;
    # semfs.fusefs.cli.common), else click's own (paths, choices).
    complete: str | None = None

    @property
    def converted(self) -> bool:
        """Whether click does more to the value than take the string (or check the path)."""
        return self.number is not None or self.choices is not None

    @property
    def initial(self) -> Any:
        """The value click passes when the parameter is not given (nor its envvar set)."""
        if self.multiple:
            return tuple(self.default or ())
        return False if self.is_flag and self.default is None else self.default

    def with_help(self, help: str) -> Param:
        return dataclasses.replace(self, help=help)


# --store / --url / --api-key / --collection: every command that opens a store.
STORE = (
    Param(
        "store_path",
        ("--store",),
        envvar="SEMFS_STORE",
        path=(False, True),
        help=f"Embedded store directory [env SEMFS_STORE; default {default_store_path()}].",
    ),
    Param(
        "url",
        ("--url",),
        envvar="QDRANT_URL",
        help="Qdrant server URL instead of the embedded store [env QDRANT_URL].",
    ),
    Param(
        "api_key",
        ("--api-key",),
        envvar="QDRANT_API_KEY",
        help="Qdrant API key [env QDRANT_API_KEY].",
    ),
    Param(
        "collection",
        ("-c", "--collection"),
        default=DEFAULT_COLLECTION,
        envvar="SEMFS_COLLECTION",
        show_default=True,
        help="Collection name [env SEMFS_COLLECTION].",
        complete="collections",
    ),
)
# Where the collections are (`semfs collections`): the store options but --collection.
CATALOG = STORE[:3]
# --collections / --all: several collections at once (`semfs mount`, `semfs mcp`), each a
# top-level folder named after it; with neither, -c names the one.
COLLECTIONS = (
    Param(
        "collections",
        ("--collections",),
        metavar="NAME[,NAME...]",
        help="Several collections at once, comma-separated, each a top-level folder "
        "named after it (instead of -c).",
        complete="collections",
    ),
    Param(
        "all_collections",
        ("--all",),
        is_flag=True,
        help="Every collection of the store, each a top-level folder (instead of -c).",
    ),
)


def collection_names(
    collections: str | None, every: bool, catalog: Callable[[], Sequence[str]]
) -> tuple[str, ...]:
    """The collections ``--collections A,B`` or ``--all`` name, in the order given (``--all``:
    ``catalog()``, the store's, sorted); empty when neither is given (-c names the one).
    SemfsError for both, for none named, or for a bad name."""
    if collections is not None and every:
        raise SemfsError("give --collections NAME[,NAME...] or --all, not both")
    if every:
        names = tuple(catalog())
        if not names:
            raise SemfsError("--all: the store has no collection yet: `semfs ingest DIR` first")
        return names
    if collections is None:
        return ()
    names = tuple(dict.fromkeys(n.strip() for n in collections.split(",") if n.strip()))
    if not names:
        raise SemfsError("--collections: name one or more, e.g. --collections docs,code")
    return tuple(check_collection_name(name) for name in names)


# `semfs search`'s: -c repeats, each a collection searched.
STORES = (
    *CATALOG,
    dataclasses.replace(
        STORE[3],
        default=(DEFAULT_COLLECTION,),
        multiple=True,
        help="Collection name; repeat to search several as one (-c docs -c code) "
        "[env SEMFS_COLLECTION, names separated by spaces].",
    ),
)

# -k / --mode / --min-score: `semfs search`'s, and `semfs mount`'s defaults for its folders.
# Each command gives its own help (with_help).
K = Param("k", ("-k", "--k"), default=DEFAULT_K, show_default=True, number=int, bounds=(1, MAX_K))
MODE = Param("mode", ("--mode",), default=DEFAULT_MODE, show_default=True, choices=tuple(MODES))
# What each mode matches, from the one table of modes: `semfs search --mode`'s help.
MODE_MEANINGS = "; ".join(f"{mode}: {row.meaning}" for mode, row in MODES.items()) + "."
MIN_SCORE = Param("min_score", ("--min-score",), number=float)

# How a source folder is read: `semfs ingest` and `semfs mount --watch`.
SOURCE = (
    Param(
        "model",
        ("-m", "--model"),
        help="sentence-transformers model name or path [default: the store's, "
        "else all-MiniLM-L6-v2, the packaged model, in fp32 on ONNX Runtime, no torch]. "
        "Any other model runs on torch: pip install 'semfs[torch]'. "
        "@onnx-int8 (all-MiniLM-L6-v2@onnx-int8) runs it int8 on ONNX Runtime: starts "
        "and answers queries faster, in less memory; @onnx: fp32. "
        "'hash' is a fast non-semantic stand-in for tests.",
    ),
    Param(
        "include",
        ("--include",),
        multiple=True,
        metavar="GLOB",
        help="Only files matching GLOB (repeatable).",
    ),
    Param(
        "exclude",
        ("--exclude",),
        multiple=True,
        metavar="GLOB",
        help="Skip files or folders matching GLOB (repeatable).",
    ),
    Param(
        "batch_size",
        ("--batch-size",),
        default=DEFAULT_BATCH_SIZE,
        show_default=True,
        number=int,
        bounds=(1, 4096),
        help="Chunks per encode call (a torch model's batch; the default model runs each "
        "chunk alone, one per core at once: faster on a CPU).",
    ),
    Param(
        "max_bytes",
        ("--max-size",),
        default=DEFAULT_MAX_BYTES,
        show_default=True,
        number=int,
        bounds=(1, None),
        help="Skip files larger than this many bytes.",
    ),
    Param(
        "follow_symlinks",
        ("--follow-symlinks",),
        is_flag=True,
        help="Also ingest files that symlinks lead to outside SOURCE (skipped by default).",
    ),
    Param(
        "jobs",
        ("-j", "--jobs"),
        number=int,
        bounds=(1, 64),
        metavar="N",
        help="Files read and converted at once, each PDF, Word, HTML, ... file in a bounded "
        "worker process of its own [default: one per core].",
    ),
)

# `semfs mount`'s parameters, in the order of its --help.
MOUNT = (
    Param("mountpoint", path=(True, True)),
    *STORE,
    *COLLECTIONS,
    Param(
        "foreground",
        ("-f", "--foreground"),
        is_flag=True,
        help="Stay in the foreground, logging to stderr; Ctrl-C unmounts.",
    ),
    Param(
        "options",
        ("-o",),
        multiple=True,
        metavar="OPT[,OPT...]",
        help="FUSE mount options, comma-separated, repeatable: allow_other, "
        "entry_timeout=S, attr_timeout=S, uid=N, gid=N, nonempty, debug, ...",
    ),
    Param(
        "log_file",
        ("--log-file",),
        path=(True, False),
        help="Append the daemon's log (INFO and up) here, created 0600, cut at 4 MiB "
        "[default: STORE/COLLECTION/mount.log in the background, stderr with -f].",
    ),
    Param(
        "search_dir",
        ("--search-dir",),
        default=DEFAULT_NAME,
        show_default=True,
        metavar="NAME",
        help="The search folder every directory answers (listed nowhere).",
    ),
    Param(
        "no_views",
        ("--no-views",),
        is_flag=True,
        help="Hide the text views of PDFs, Word, PowerPoint, HTML and EPUB files (report.pdf.md "
        "beside report.pdf): the tree is then the source folder exactly (diff -r is empty).",
    ),
    K.with_help("Documents per search; @k=N changes it per query."),
    MODE.with_help(
        "Search mode; " + ", ".join(f"@{mode}" for mode in MODES) + " change it per query."
    ),
    MIN_SCORE.with_help("Drop hits whose match strength (0-1) is below this; @min=X per query."),
    Param(
        "connect_timeout",
        ("--connect-timeout",),
        default=10.0,
        show_default=True,
        number=float,
        bounds=(0.1, None),
        help="Seconds to wait for a Qdrant server before giving up.",
    ),
    Param(
        "watch",
        ("-w", "--watch"),
        path=(False, True),
        metavar="DIR",
        help="Follow DIR: ingest what changed since the last run, then every change as it "
        "happens (the options below say how DIR is read, as for `semfs ingest`).",
    ),
    Param(
        "writable",
        ("--writable",),
        is_flag=True,
        help="With --watch DIR: writes through the mount go to DIR, with the writer's "
        "permissions, and are searchable once closed (search folders and text views stay "
        "read-only).",
    ),
    *SOURCE,
)
