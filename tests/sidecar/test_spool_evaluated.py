"""The spool remembers the revision of the `keep_evaluated` sessions evaluated last (a restart
continues their revisions above it) and forgets older ones, across restarts too."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from spanjudge.sessions.revisions import Completion
from spanjudge.sidecar.spool import Spool


def _complete(spool: Spool, first: int, count: int, revision: int = 3) -> None:
    """Record sessions k<first>..k<first+count-1> as evaluated at ``revision``, 100 at a time
    (the bounds the tests check fall between two calls: no two sessions share a time)."""
    for start in range(first, first + count, 100):
        spool.complete(
            [
                Completion(key=f"k{i}", revision=revision, groups=(f"s:k{i}",), upto=0)
                for i in range(start, min(first + count, start + 100))
            ]
        )


def test_the_most_recent_revisions_are_kept_and_older_ones_forgotten(tmp_path: Path) -> None:
    with closing(Spool(str(tmp_path / "spool.db"), max_bytes=1 << 20, keep_evaluated=100)) as spool:
        _complete(spool, 0, 1000)
        assert spool.revision("k999") == 3
        assert spool.revision("k900") == 3
        assert spool.revision("k899") == 0
        assert spool.revision("k0") == 0


def test_under_the_bound_every_revision_is_kept(tmp_path: Path) -> None:
    path = str(tmp_path / "spool.db")
    with closing(Spool(path, max_bytes=1 << 20, keep_evaluated=1500)) as spool:
        _complete(spool, 0, 1000)
        _complete(spool, 0, 1000, revision=4)  # the same sessions again: still 1000 rows
        assert spool.revision("k0") == 4
        assert spool.revision("k999") == 4


def test_a_restart_with_a_lower_bound_forgets_the_oldest(tmp_path: Path) -> None:
    path = str(tmp_path / "spool.db")
    with closing(Spool(path, max_bytes=1 << 20, keep_evaluated=5000)) as spool:
        _complete(spool, 0, 1000)
    with closing(Spool(path, max_bytes=1 << 20, keep_evaluated=1200)) as spool:
        assert spool.revision("k0") == 3  # remembered across the restart
        _complete(spool, 1000, 1000)
        assert spool.revision("k1999") == 3
        assert spool.revision("k800") == 3
        assert spool.revision("k799") == 0
        assert spool.revision("k0") == 0


def test_a_sidecar_restarted_often_still_forgets_the_oldest(tmp_path: Path) -> None:
    """Restarts that each come before a round of completions still keep the table at about
    `keep_evaluated` rows: it does not grow by every session ever evaluated."""
    path = str(tmp_path / "spool.db")
    for run in range(20):
        with closing(Spool(path, max_bytes=1 << 20, keep_evaluated=100)) as spool:
            spool.complete(
                [Completion(key=f"r{run}k{i}", revision=1, groups=(), upto=0) for i in range(999)]
            )
    with closing(Spool(path, max_bytes=1 << 20, keep_evaluated=100)) as spool:
        assert spool.revision("r19k998") == 1  # the latest are remembered
        assert spool.revision("r0k0") == 0  # the oldest forgotten
        assert spool.revision("r18k0") == 0


def test_a_lower_revision_confirmed_later_does_not_lower_the_recorded_one(tmp_path: Path) -> None:
    path = str(tmp_path / "spool.db")
    with closing(Spool(path, max_bytes=1 << 20)) as spool:
        assert spool.revision("k0") == 0
        _complete(spool, 0, 1, revision=5)
        _complete(spool, 0, 1, revision=2)  # an earlier revision's confirmation, late
        assert spool.revision("k0") == 5
        assert spool.revision("k1") == 0
    with closing(Spool(path, max_bytes=1 << 20)) as spool:
        assert spool.revision("k0") == 5
