"""The ``@`` parameters of a search folder, as one table: ``.search/@keyword/@k=3/QUESTION/``.

:data:`PARAMETERS` is the only place a parameter is described. Built from it:

* the parser, :meth:`SearchOptions.with_parameter` and :meth:`SearchOptions.parameter_problem`
  (what :mod:`semfs.fusefs.view.searchdir` calls for each ``@`` folder);
* the parameter lines (:func:`parameter_lines`) of the search folder's ``README.md``, of
  ``semfs mount --help`` (its epilog) and of the agent guide (``semfs guide``);
* through those two, the generated README and docs/cli.md sections (``cog``,
  scripts/cli_reference.py).

A row's default is not written in the table: it is read from :class:`SearchOptions` (whose
``k`` is :data:`semfs.ingest.store.DEFAULT_K`), or from a mount's own defaults
(``semfs mount --k 7``) in that mount's ``README.md``.

It lives in the view, beside the parser, not in ``semfs.ingest.search``: ``@`` folders are a
syntax of the tree, and the library's search takes plain arguments (``k``, ``mode``,
``min_score``, ``more``). The front ends that show the syntax (the mount, its ``--help``, the
guide) all sit above the view.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from semfs.ingest.errors import SemfsError
from semfs.ingest.store import DEFAULT_K, MAX_K, MODES

PARAMETER_PREFIX = "@"
# The results file of a query folder, whatever k: it sorts before every link ("001-" too).
# Defined here, not in searchdir (which uses it), because @full's meaning names it.
RESULTS_NAME = "00-results.md"


@dataclass(frozen=True)
class SearchOptions:
    """How a query runs: the mount's defaults, changed by parameter folders."""

    mode: str = "hybrid"
    k: int = DEFAULT_K
    min_score: float | None = None
    full: bool = False
    more: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SemfsError(f"unknown search mode {self.mode!r}: use one of {', '.join(MODES)}")
        if not 1 <= self.k <= MAX_K:
            raise SemfsError(f"k must be between 1 and {MAX_K}, not {self.k}")
        if self.min_score is not None and not math.isfinite(self.min_score):
            raise SemfsError(f"the score floor must be a finite number, not {self.min_score}")

    def with_parameter(self, name: str) -> SearchOptions | None:
        """These options changed by a parameter folder name (``@keyword``, ``@k=3``,
        ``@min=0.02``, ``@more``, ``@full``: see :data:`PARAMETERS`); None when the name is
        not a valid parameter."""
        key, sep, value = name.removeprefix(PARAMETER_PREFIX).partition("=")
        param = BY_NAME.get(key)
        if param is None or bool(sep) != param.takes_value:
            return None
        try:
            return replace(self, **{param.field: param.parse(value)})
        except (SemfsError, ValueError):
            return None

    def parameter_problem(self, name: str) -> str:
        """Why ``name`` (which :meth:`with_parameter` refused) is not a parameter folder."""
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

    def describe(self) -> str:
        """``hybrid · k 5``, then only the options set: ``· min 0.2``, ``· more``,
        ``· full passages``."""
        out = f"{self.mode} · k {self.k}"
        if self.min_score is not None:
            out += f" · min {self.min_score:g}"
        if self.more:
            out += " · more"
        if self.full:
            out += " · full passages"
        return out


@dataclass(frozen=True)
class Parameter:
    """One row: ``@NAME`` (a word alone) or ``@NAME=METAVAR`` (a word and a value).

    ``field`` is the :class:`SearchOptions` field it sets: to ``value`` for a word alone, to
    ``convert(the written value)`` otherwise; ``value_rule`` says what a written value must be.
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

    def default(self, defaults: SearchOptions) -> str | None:
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


_MODE_MEANINGS = {
    "hybrid": "meaning and words, dense + BM25 scores fused",
    "semantic": "meaning only, dense vectors",
    "keyword": "exact words only (BM25): names, flags, error messages",
    "symbol": "the definition of a name in code: NAME or Class.method, exact",
}
assert set(_MODE_MEANINGS) == set(MODES), "a search mode without its @ folder, or the reverse"

PARAMETERS: tuple[Parameter, ...] = (
    *(Parameter(mode, "mode", _MODE_MEANINGS[mode], value=mode) for mode in MODES),
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


def parameter_lines(defaults: SearchOptions | None = None, indent: int = 4) -> str:
    """One line per parameter, ``@k=N   how many documents, 1-100 (default 5)``, in table
    order, without a last newline; ``defaults``: the options a query has before any folder
    (the code's, or a mount's)."""
    defaults = defaults or SearchOptions()
    width = max(len(p.syntax) for p in PARAMETERS) + 3
    lines = []
    for p in PARAMETERS:
        default = p.default(defaults)
        meaning = f"{p.meaning} ({default})" if default else p.meaning
        lines.append(f"{' ' * indent}{p.syntax:<{width}}{meaning}")
    return "\n".join(lines)
