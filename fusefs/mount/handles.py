"""How many source files a writable mount holds open for each user.

Every file a process opens through a writable mount is a descriptor of the daemon's (the
source file, open until the last close), and the daemon has one open-files limit for all
its callers: without a bound, one user's processes take every descriptor (two nobody
processes held 19,983 of 20,000), and then every other user's ``cat`` through the mount, the
mounting user's included, fails with "Too many open files". :class:`HandleQuota` is the
bound, and a caller may rely on these rules:

* Of the daemon's soft ``RLIMIT_NOFILE`` (``limit``), a reserve of an eighth (at least
  :data:`MIN_RESERVE`) is never handed to other users: it is the daemon's own (the store's
  files, its sockets) and the mounting user's.
* Users other than the daemon's own share the rest, and each of them holds at most a quarter
  of it (``per_user``): with a 20,000 limit, 4,375 each and 17,500 together. An open past
  either bound fails with EMFILE ("Too many open files"), as the caller's own limit would.
* The daemon's own user (the one who mounted) is bound only by the limit itself.
* Refusals are logged at most once per :data:`LOG_EVERY` seconds, with the user, their
  count and the bound that fired.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from semfs.ingest import portable

logger = logging.getLogger(__name__)

MIN_RESERVE = 64
LOG_EVERY = 60.0


def open_files_limit() -> int:
    """This process's soft open-files limit (a large number when unlimited)."""
    return portable.open_files_limit() or 1 << 20


class HandleQuota:
    """Open source files counted per user, under the bounds of the module's rules."""

    def __init__(self, own_uid: int, limit: int | None = None) -> None:
        limit = open_files_limit() if limit is None else limit
        self.own_uid = own_uid
        self.reserve = max(MIN_RESERVE, limit // 8)
        self.shared = max(1, limit - self.reserve)
        self.per_user = max(1, self.shared // 4)
        self._held: Counter[int] = Counter()
        self._others = 0
        self._lock = threading.Lock()
        self._logged = -LOG_EVERY

    def take(self, uid: int) -> bool:
        """Count one more open file of ``uid``; False (nothing counted) past a bound."""
        with self._lock:
            if uid != self.own_uid:
                if self._held[uid] >= self.per_user:
                    return self._refuse(uid, f"its bound of {self.per_user}")
                if self._others >= self.shared:
                    return self._refuse(uid, f"all users' bound of {self.shared}")
                self._others += 1
            self._held[uid] += 1
            return True

    def give_back(self, uid: int) -> None:
        with self._lock:
            self._held[uid] -= 1
            if self._held[uid] <= 0:
                del self._held[uid]
            if uid != self.own_uid:
                self._others -= 1

    def held(self, uid: int) -> int:
        with self._lock:
            return self._held[uid]

    def _refuse(self, uid: int, bound: str) -> bool:
        now = time.monotonic()
        if now - self._logged >= LOG_EVERY:
            self._logged = now
            logger.warning(
                "user %d holds %d open files of the mount: refused another at %s "
                "(logged at most once a minute)",
                uid,
                self._held[uid],
                bound,
            )
        return False


__all__ = ["HandleQuota", "open_files_limit"]
