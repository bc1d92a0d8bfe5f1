"""How the commands show numbers, times and flags to a person (``--json`` keeps them raw).

Sizes are binary (1 KiB = 1024 bytes), as ``ls -lh`` and ``du -h`` count them; times are
local, to the second, with how long ago. A few lines of code, not a dependency: these four
formats are all the commands need.
"""

from __future__ import annotations

import time

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")


def size(n: int | None) -> str:
    """``1473076`` -> ``1.4 MiB``; under 1 KiB in bytes; None -> ``unknown``."""
    if n is None:
        return "unknown"
    value = float(n)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{n} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def yes_no(flag: bool | None) -> str:
    return "unknown" if flag is None else "yes" if flag else "no"


def duration(seconds: float) -> str:
    """``2.94`` -> ``2.9 s``; ``192`` -> ``3 min 12 s``; ``7384`` -> ``2 h 3 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def ago(seconds: float) -> str:
    """How long ago, roughly: ``12 s ago``, ``3 min ago``, ``5 h ago``, ``2 days ago``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s ago"
    if s < 3600:
        return f"{s // 60} min ago"
    if s < 2 * 86400:
        return f"{s // 3600} h ago"
    return f"{s // 86400} days ago"


def when(timestamp: float | None, now: float | None = None) -> str:
    """``2026-12-01 08:40:12 (3 min ago)`` in local time; None -> ``never``."""
    if timestamp is None:
        return "never"
    now = time.time() if now is None else now
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))
    return f"{stamp} ({ago(now - timestamp)})"
