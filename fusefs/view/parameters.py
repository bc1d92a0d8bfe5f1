"""The ``@`` parameters of a search folder, as one table: ``.search/@keyword/@k=3/QUESTION/``.

:data:`PARAMETERS` is the only place a parameter is described. Built from it:

* the parser, :func:`with_parameter` and :func:`parameter_problem` (what
  :mod:`semfs.fusefs.view.searchdir` calls for each ``@`` folder), which change a
  :class:`~semfs.ingest.request.SearchRequest`: the checks of a value are the request's;
* the parameter lines (:func:`parameter_lines`) of the search folder's ``README.md``, of
  ``semfs mount --help`` (its epilog) and of the agent guide (``semfs guide``);
* through those two, the generated README and docs/cli.md sections (``cog``,
  scripts/cli_reference.py).

A row's default is not written in the table: it is read from
:class:`~semfs.ingest.request.SearchRequest` (whose ``k`` is
:data:`semfs.ingest.store.DEFAULT_K`), or from a mount's own defaults (``semfs mount --k 7``) in
that mount's ``README.md``. The mode words and their meanings are
:data:`semfs.ingest.store.MODES`.

It lives in the view, beside the parser, not in the library: ``@`` folders are a syntax of the
tree. The front ends that show the syntax (the mount, its ``--help``, the guide) all sit above
the view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from semfs.ingest.errors import SemfsError
from semfs.ingest.request import SearchRequest
from semfs.ingest.store import MAX_K, MODES

PARAMETER_PREFIX = "@"
# The results file of a query folder, whatever k: it sorts before every link ("001-" too).
# Defined here, not in searchdir (which uses it), because @full's meaning names it.
RESULTS_NAME = "00-results.md"


def with_parameter(request: SearchRequest, name: str) -> SearchRequest | None:
    """``request`` changed by a parameter folder name (``@keyword``, ``@k=3``, ``@min=0.02``,
    ``@more``, ``@full``: see :data:`PARAMETERS`); None when the name is not a valid
    parameter."""
    key, sep, value = name.removeprefix(PARAMETER_PREFIX).partition("=")
    param = BY_NAME.get(key)
    if param is None or bool(sep) != param.takes_value:
        return None
    try:
        return replace(request, **{param.field: param.parse(value)})
    except (SemfsError, ValueError):
        return None


def parameter_problem(name: str) -> str:
    """Why ``name`` (which :func:`with_parameter` refused) is not a parameter folder."""
    key, sep, value = name.removeprefix(PARAMETER_PREFIX).partition("=")
    param = BY_NAME.get(key)
    if param is None:
        known = ", ".join(p.syntax for p in PARAMETERS)
        return f"unknown parameter {name!r}: use one of {known}"
    if not param.takes_value:
        return f"{PARAMETER_PREFIX}{key} takes no value"
    if not sep:
        return f"{PARAMETER_PREFIX}{key} needs a value: {param.syntax}"
    return f"{key} must be {param.value_rule}, not {value!r}"


@dataclass(frozen=True)
class Parameter:
    """One row: ``@NAME`` (a word alone) or ``@NAME=METAVAR`` (a word and a value).

    ``field`` is the :class:`~semfs.ingest.request.SearchRequest` field it sets: to ``value``
    for a word alone, to ``convert(the written value)`` otherwise; ``value_rule`` says what a
    written value must be.
    """

    name: str
    field: str
    meaning: str
    value: object = True
    metavar: str | None = None
    convert: Callable[[str], Any] | None = None
    value_rule: str = ""

    @property
    def takes_value(self) -> bool:
        return self.metavar is not None

    @property
    def syntax(self) -> str:
        """``@keyword``, ``@k=N``."""
        tail = f"={self.metavar}" if self.metavar is not None else ""
        return f"{PARAMETER_PREFIX}{self.name}{tail}"

    def parse(self, written: str) -> Any:
        """The field's new value; ValueError or SemfsError when ``written`` is not one."""
        if self.convert is None:
            return self.value
        return self.convert(written)

    def default(self, defaults: SearchRequest) -> str | None:
        """The default as the lines show it: ``default 5``, ``default none``; ``default`` for
        the word that is in effect when no folder names one (``@hybrid``); None for a word
        that is off by default (``@more``)."""
        current = getattr(defaults, self.field)
        if not self.takes_value:
            return "default" if current == self.value else None
        if current is None:
            return "default none"
        return f"default {current:g}" if isinstance(current, float) else f"default {current}"


def _whole(written: str) -> int:
    """``int`` for plain ASCII digits only: ``int`` takes ``+3``, `` 3`` and ``٣``."""
    if not (written.isascii() and written.isdigit()):
        raise ValueError(written)
    return int(written)


PARAMETERS: tuple[Parameter, ...] = (
    *(Parameter(mode, "mode", row.meaning, value=mode) for mode, row in MODES.items()),
    Parameter(
        "k",
        "k",
        f"how many documents, 1-{MAX_K}",
        metavar="N",
        convert=_whole,
        value_rule=f"a whole number from 1 to {MAX_K}",
    ),
    Parameter(
        "min",
        "min_score",
        "drop hits whose match strength (0-1) is below X",
        metavar="X",
        convert=float,
        value_rule="a number (a match strength, 0-1)",
    ),
    Parameter("more", "more", "answering lines from more of the hits (about 3x)"),
    Parameter("full", "full", f"whole passages in {RESULTS_NAME} instead of excerpts"),
)
BY_NAME = {p.name: p for p in PARAMETERS}


def parameter_lines(defaults: SearchRequest | None = None, indent: int = 4) -> str:
    """One line per parameter, ``@k=N   how many documents, 1-100 (default 5)``, in table
    order, without a last newline; ``defaults``: the options a query has before any folder
    (the code's, or a mount's)."""
    defaults = defaults or SearchRequest()
    width = max(len(p.syntax) for p in PARAMETERS) + 3
    lines = []
    for p in PARAMETERS:
        default = p.default(defaults)
        meaning = f"{p.meaning} ({default})" if default else p.meaning
        lines.append(f"{' ' * indent}{p.syntax:<{width}}{meaning}")
    return "\n".join(lines)
