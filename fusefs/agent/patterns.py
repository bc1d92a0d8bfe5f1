"""How a grep pattern tests a line: RE2 (linear time) where it can, else a deadline.

A regular expression on Python's ``re`` can take exponential time on one line (``(-+)+$``
on a Markdown table rule ran for more than 11 minutes). So a pattern is run by
`google-re2 <https://github.com/google/re2>`_, whose time is linear in the line whatever the
pattern, after a rewrite of the classes whose meaning differs: Python's ``\\w \\d \\s`` are
Unicode, RE2's ASCII, so they become ``\\p{...}`` classes.

What RE2 cannot run with Python's meaning (backreferences, lookarounds, the ``\\<`` ``\\>``
word edges, ``\\b`` ``\\B`` (RE2's are ASCII), possessive repeats, ``{,n}``, lines that are not
valid UTF-8) runs on the ``regex`` module, which reads Python's syntax and can stop a search
at a deadline: the whole call gets :data:`FALLBACK_SECONDS` of CPU time, then raises
:class:`SlowPatternError` ("pattern too slow, narrow it").

Rules a caller may rely on:

* :meth:`LineMatcher.search` answers what ``compiled.search(line)`` would, for the
  ``re.Pattern`` it was made from (the same source and flags).
* No call spends more than about :data:`FALLBACK_SECONDS` of CPU in a match that is not
  linear (CPU, not wall time: that is what ``regex`` counts, and on a busy machine the wall
  time is longer by the load).
* A fixed string (not a regex) needs neither: it runs on ``re``, whose literal search has no
  backtracking to blow up.
"""

from __future__ import annotations

import re
import time
from typing import Any

import re2
import regex

from semfs.ingest.errors import SlowPatternError

# CPU seconds one call may spend matching with the backtracking engine (patterns RE2 cannot
# run): enough for a plain pattern over a whole collection, short enough that one bad pattern
# costs the agent a retry, not the session.
FALLBACK_SECONDS = 5.0
# What Python's \s matches in a str pattern (str.isspace), spelled for RE2.
_SPACE = (
    r"\t\n\x0b\f\r \x1c-\x1f\x85\xa0"
    r"\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)
_WORD = r"\p{L}\p{N}_"
_DIGIT = r"\p{Nd}"
# Escapes RE2 spells differently, outside and inside a bracket ([...]); None: not in RE2.
_OUTSIDE = {
    "w": f"[{_WORD}]",
    "W": f"[^{_WORD}]",
    "d": _DIGIT,
    "D": r"\P{Nd}",
    "s": f"[{_SPACE}]",
    "S": f"[^{_SPACE}]",
    "Z": r"\z",
    "b": None,
    "B": None,
}
_INSIDE = {"w": _WORD, "d": _DIGIT, "D": r"\P{Nd}", "s": _SPACE, "W": None, "S": None, "b": None}


def re2_source(source: str) -> str | None:
    """A Python regular expression's source as RE2 reads it with the same meaning, or None
    when that cannot be said (RE2 may still refuse what comes back: then it is None too)."""
    out: list[str] = []
    i, n = 0, len(source)
    in_class = False
    while i < n:
        c = source[i]
        if c == "\\" and i + 1 < n:
            nxt = source[i + 1]
            table = _INSIDE if in_class else _OUTSIDE
            if nxt.isdigit() and nxt != "0":
                return None  # a backreference
            if nxt in table:
                repl = table[nxt]
                if repl is None:
                    return None
                out.append(repl)
            else:
                out.append(c + nxt)
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[":
                return None  # Python warns and reads it literally; RE2 may not
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            # A leading ] (after an optional ^) is literal in both.
            if i < n and source[i] == "^":
                out.append("^")
                i += 1
            if i < n and source[i] == "]":
                out.append("]")
                i += 1
            continue
        if c == "{" and source.startswith("{,", i):
            return None  # Python: {0,n}; RE2: the literal text
        out.append(c)
        i += 1
    return "".join(out)


class LineMatcher:
    """Tests lines against one pattern: ``search(line)`` is truthy when the line matches.

    Thread-safe for one call: a :class:`LineMatcher` holds that call's deadline, so make one per
    grep call (with :func:`line_matcher`).
    """

    def __init__(
        self, compiled: re.Pattern[str], regex_syntax: bool, seconds: float = FALLBACK_SECONDS
    ) -> None:
        self.seconds = seconds
        self._plain = None if regex_syntax else compiled
        self._re2: Any = None
        self._slow: Any = None
        self._deadline: float | None = None
        self.engine = "re" if not regex_syntax else "re2"
        if regex_syntax:
            translated = re2_source(compiled.pattern)
            if translated is not None:
                options = re2.Options()
                options.log_errors = False  # a refusal is expected: it picks the fallback
                options.case_sensitive = not compiled.flags & re.IGNORECASE
                try:
                    self._re2 = re2.compile(translated, options)
                except re2.error:
                    self._re2 = None
            if self._re2 is None:
                self.engine = "regex"
            try:
                self._slow = regex.compile(compiled.pattern, compiled.flags & re.IGNORECASE)
            except regex.error as exc:
                if self._re2 is None:
                    raise SlowPatternError(f"cannot run {compiled.pattern!r}: {exc}") from exc

    def search(self, line: str) -> object:
        if self._plain is not None:
            return self._plain.search(line)
        if self._re2 is not None:
            try:
                return self._re2.search(line)
            except UnicodeEncodeError:  # a line that is not valid UTF-8 (surrogate escapes)
                if self._slow is None:
                    return self._re2.search(line.encode("utf-8", "replace").decode("utf-8"))
        return self._search_slow(line)

    def _search_slow(self, line: str) -> object:
        now = time.thread_time()  # the call runs on one thread: its CPU time
        if self._deadline is None:
            self._deadline = now + self.seconds
        left = self._deadline - now
        try:
            if left <= 0:
                raise TimeoutError
            return self._slow.search(line, timeout=left)
        except TimeoutError:
            raise SlowPatternError(
                f"pattern too slow, narrow it: {self._slow.pattern!r} ran {self.seconds:g} "
                "CPU seconds without finishing (nested repeats such as (a+)+ backtrack; RE2 "
                "could not run it because of a backreference, lookaround or \\b)"
            ) from None


def line_matcher(
    compiled: re.Pattern[str], regex_syntax: bool, seconds: float = FALLBACK_SECONDS
) -> LineMatcher:
    """A matcher for one grep call over ``compiled`` (the source :func:`compile_pattern` made)."""
    return LineMatcher(compiled, regex_syntax, seconds)
