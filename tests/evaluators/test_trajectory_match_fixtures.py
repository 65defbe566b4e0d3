"""`trajectory_match` in its three modes on every fixture set whose generator kept a call log.

Each reference is written from the generator's own log of the calls its tools really ran
(`scenarios.json`, written by `fixtures/generate/*`, or the genai_manual generator's loop run
again: `tests/support/call_logs.py`), never from spanjudge's output; what each mode must say
about it follows from the mode's definition. The ADK and Claude Code generators keep no call log
(and need their frameworks to run), so their sets are not here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from spanjudge.config import parse_config
from spanjudge.emit.collecting import CollectingSink
from spanjudge.engine import Engine
from spanjudge.evaluators.base import EvaluationContext
from spanjudge.evaluators.trajectory_match import TrajectoryMatch
from spanjudge.expectations import ExpectationResolver, parse_entries
from spanjudge.offline import run_offline
from spanjudge.trajectory.model import Trajectory
from spanjudge.values import Verdict
from tests.support.call_logs import compared as _compared
from tests.support.call_logs import logged_calls as _logged
from tests.support.call_logs import marks_loads as _marks_loads
from tests.support.call_logs import reference_entries as _log
from tests.support.call_logs import with_call_log
from tests.support.fixture_reports import RECORDS

LOGGED = [(d, r) for d, r in ((d, with_call_log(Path(d), r)) for d, r in RECORDS) if _log(r)]
ORDERED = [(d, r) for d, r in LOGGED if r["scenario"] != "parallel_tools"]
MARKED = [(d, r) for d, r in ORDERED if _marks_loads(r)]


@cache
def _trajectories(directory: str) -> dict[str, Trajectory]:
    sink = CollectingSink()
    inputs = sorted(str(p) for p in Path(directory).glob("*.jsonl"))
    run_offline(inputs, Engine(parse_config({})), sink)
    return {sid: result.trajectory for sid, result in sink.by_session().items()}


def _verdict(directory: str, session_id: str, trajectory: dict[str, Any]) -> Verdict:
    """The verdict for ``session_id`` with ``trajectory`` as its expectation, as a user writes
    it in an expectations file."""
    entries = parse_entries({"sessions": {session_id: {"trajectory": trajectory}}}, "test")
    recorded = _trajectories(directory)[session_id]
    expectation = ExpectationResolver(entries).resolve(recorded)
    [verdict] = TrajectoryMatch().evaluate(
        EvaluationContext(trajectory=recorded, expectation=expectation)
    )
    return verdict


def _ids(pairs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [r["session_id"] for _, r in pairs]


@pytest.mark.parametrize(("directory", "record"), ORDERED, ids=_ids(ORDERED))
def test_exact_passes_on_the_call_log(directory: str, record: dict[str, Any]) -> None:
    log = _log(record)
    verdict = _verdict(directory, record["session_id"], {"match": "exact", "tools": log})
    assert verdict.outcome == "pass", verdict.explanation
    assert verdict.score == 1.0
    assert verdict.details is not None
    assert verdict.details["missing"] == verdict.details["extra"] == []
    assert verdict.details["out_of_order"] == []


@pytest.mark.parametrize(("directory", "record"), ORDERED, ids=_ids(ORDERED))
def test_exact_names_a_call_the_agent_never_made_as_missing(
    directory: str, record: dict[str, Any]
) -> None:
    log = _log(record)
    assert log is not None
    tools = [*log, {"tool": "never_called_tool"}]
    verdict = _verdict(directory, record["session_id"], {"match": "exact", "tools": tools})
    assert verdict.outcome == "fail"
    assert verdict.details is not None
    assert [m["expected"] for m in verdict.details["missing"]] == ["never_called_tool"]
    assert "missing never_called_tool" in verdict.explanation


@pytest.mark.parametrize(("directory", "record"), MARKED, ids=_ids(MARKED))
def test_exact_names_an_unlisted_tool_call_as_extra(directory: str, record: dict[str, Any]) -> None:
    logged = _logged(record)
    assert logged is not None
    log = [c.entry() for c in logged]
    calls = [i for i, c in enumerate(logged) if c.skill is None]
    if not calls:
        pytest.skip("the log holds no tool call, only skill loads")
    dropped = log[calls[-1]]
    tools = log[: calls[-1]] + log[calls[-1] + 1 :]
    verdict = _verdict(directory, record["session_id"], {"match": "exact", "tools": tools})
    assert verdict.outcome == "fail"
    assert verdict.details is not None
    assert [e["tool"].endswith(dropped["tool"]) for e in verdict.details["extra"]] == [True]
    assert verdict.details["missing"] == []


WITH_LOADS = [(d, r) for d, r in MARKED if any(c.skill for c in _logged(r) or ())]


@pytest.mark.parametrize(("directory", "record"), WITH_LOADS, ids=_ids(WITH_LOADS))
def test_skill_loads_count_only_where_listed(directory: str, record: dict[str, Any]) -> None:
    logged = _logged(record)
    assert logged is not None
    # the log without its skill loads: the loads are left out of the comparison, unless a
    # listed tool is also a loader (then its loads are calls of that tool, and extra)
    tools = [c.entry() for c in logged if c.skill is None or c.completes_load]
    unlisted_loads = [c for c in logged if c.skill and not c.completes_load]
    verdict = _verdict(directory, record["session_id"], {"match": "exact", "tools": tools})
    counted = [c for c in unlisted_loads if _compared(c, tools)]
    assert verdict.details is not None
    assert len(verdict.details["extra"]) == len(counted), verdict.explanation
    assert verdict.outcome == ("fail" if counted else "pass"), verdict.explanation
    # listed by skill, they count: the whole log passes
    whole = _verdict(directory, record["session_id"], {"match": "exact", "tools": _log(record)})
    assert whole.outcome == "pass", whole.explanation


@pytest.mark.parametrize(("directory", "record"), ORDERED, ids=_ids(ORDERED))
def test_in_order_passes_on_a_subsequence_and_fails_on_a_reversal(
    directory: str, record: dict[str, Any]
) -> None:
    log = _log(record)
    assert log is not None
    every_other = log[::2]
    verdict = _verdict(directory, record["session_id"], {"match": "in_order", "tools": every_other})
    assert verdict.outcome == "pass", verdict.explanation
    assert verdict.score == 1.0
    assert verdict.details is not None
    if "calls" in record:  # a log that marks its skill loads
        # what the subsequence left out was still called: allowed, and listed as extra
        logged = _logged(record)
        assert logged is not None
        left_out = [c for c in logged[1::2] if _compared(c, every_other)]
        assert len(verdict.details["extra"]) == len(left_out)
    first, last = log[0], log[-1]
    if first == last:
        return
    reversed_pair = [last, first]
    verdict = _verdict(
        directory, record["session_id"], {"match": "in_order", "tools": reversed_pair}
    )
    assert verdict.outcome == "fail", verdict.explanation
    assert verdict.details is not None
    assert len(verdict.details["out_of_order"]) == 1
    assert verdict.details["missing"] == []


@pytest.mark.parametrize(("directory", "record"), LOGGED, ids=_ids(LOGGED))
def test_any_order_passes_on_the_log_reversed(directory: str, record: dict[str, Any]) -> None:
    log = _log(record)
    assert log is not None
    verdict = _verdict(directory, record["session_id"], {"match": "any_order", "tools": log[::-1]})
    assert verdict.outcome == "pass", verdict.explanation
    assert verdict.score == 1.0
    assert verdict.details is not None
    assert verdict.details["missing"] == verdict.details["extra"] == []
    assert verdict.details["out_of_order"] == []
    # one more call listed than were made: one is missing
    doubled = [*log, log[-1]]
    verdict = _verdict(directory, record["session_id"], {"match": "any_order", "tools": doubled})
    assert verdict.outcome == "fail", verdict.explanation
    assert verdict.details is not None
    assert len(verdict.details["missing"]) == 1
