"""`run_offline` is also a library call (calibration, tests, users' scripts): it leaves the
process's garbage-collector thresholds as it found them, whether it finishes or fails."""

from __future__ import annotations

import gc
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from spanjudge.emit.report import JsonReportWriter
from spanjudge.engine import Engine
from spanjudge.errors import InputError
from spanjudge.offline import run_offline


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(555, 7, 9)
    yield (555, 7, 9)
    gc.set_threshold(*before)


def test_gc_thresholds_are_restored_after_a_run(
    tmp_path: Path, thresholds: tuple[int, int, int]
) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n", encoding="utf-8")
    run_offline([str(path)], Engine(), JsonReportWriter(io.StringIO()))
    assert gc.get_threshold() == thresholds


def test_gc_thresholds_are_restored_after_a_failed_run(
    tmp_path: Path, thresholds: tuple[int, int, int]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(InputError):
        run_offline([str(path)], Engine(), JsonReportWriter(io.StringIO()))
    assert gc.get_threshold() == thresholds


def test_collection_switched_off_by_threshold_zero_stays_off(tmp_path: Path) -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []

    class Spy(JsonReportWriter):
        def begin(self) -> None:
            seen.append(gc.get_threshold())
            super().begin()

    gc.set_threshold(0)
    try:
        path = tmp_path / "empty.jsonl"
        path.write_text("\n", encoding="utf-8")
        run_offline([str(path)], Engine(), Spy(io.StringIO()))
    finally:
        gc.set_threshold(*before)
    assert seen and seen[0][0] == 0


def test_gc_thresholds_are_restored_when_runs_in_two_threads_overlap(
    tmp_path: Path, thresholds: tuple[int, int, int]
) -> None:
    """A service judging uploads in worker threads: the first run ends while a second one is
    still going; once both are done the process's thresholds are its own again."""
    import threading

    path = tmp_path / "empty.jsonl"
    path.write_text("\n", encoding="utf-8")
    started = [threading.Event(), threading.Event()]
    release = [threading.Event(), threading.Event()]

    class Held(JsonReportWriter):
        def __init__(self, which: int) -> None:
            super().__init__(io.StringIO())
            self.which = which

        def begin(self) -> None:
            started[self.which].set()
            assert release[self.which].wait(10)
            super().begin()

    def run(which: int) -> None:
        run_offline([str(path)], Engine(), Held(which))

    first = threading.Thread(target=run, args=(0,))
    second = threading.Thread(target=run, args=(1,))
    first.start()
    assert started[0].wait(10)
    second.start()
    assert started[1].wait(10)
    release[0].set()  # the first run ends while the second is under way
    first.join(10)
    release[1].set()
    second.join(10)
    assert gc.get_threshold() == thresholds
