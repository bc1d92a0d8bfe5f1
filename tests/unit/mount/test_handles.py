"""A writable mount's open files per user (semfs.fusefs.mount.handles), by the module's rules
written out as numbers: with a 512 open-files limit, 64 are kept back, the other users share
448, each holds at most 112; the mount's own user is bound only by the limit."""

from __future__ import annotations

from semfs.fusefs.mount.handles import HandleQuota


def _take_all(quota: HandleQuota, uid: int, tries: int = 1000) -> int:
    return sum(quota.take(uid) for _ in range(tries))


def test_other_users_share_all_but_the_reserve_a_quarter_each() -> None:
    quota = HandleQuota(own_uid=0, limit=512)
    assert [_take_all(quota, uid) for uid in (1001, 1002, 1003, 1004, 1005)] == [
        112,
        112,
        112,
        112,
        0,  # 448 taken: the reserve of 64 is not theirs
    ]
    assert _take_all(quota, 0, 600) == 600  # the mount's own user: the limit's own bound
    quota.give_back(1001)
    assert quota.take(1005) and not quota.take(1005)
