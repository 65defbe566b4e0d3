"""`CollectingSink`: every session result kept in memory, for an agent's own tests."""

from __future__ import annotations

from typing import Any

from spanjudge.values import SessionResult, Verdict


class CollectingSink:
    """A sink that keeps each `SessionResult` it is handed, in order (revisions included).

    Pass it in ``sinks`` to judge an agent in its own tests, with no exporter::

        collected = CollectingSink()
        provider.add_span_processor(SpanJudgeProcessor(load_config(None), sinks=[collected]))
        # ... run the agent ...
        provider.force_flush()  # evaluates what is still open
        assert not [v for v in collected.verdicts() if v.outcome == "fail"]

    It is an offline report writer too (`spanjudge.offline.run_offline`), and what
    `spanjudge demo` prints from.
    """

    def __init__(self) -> None:
        self.results: list[SessionResult] = []

    def session_ids(self) -> list[str]:
        """The session id of each result, in order."""
        return [result.trajectory.session_id for result in list(self.results)]

    def by_session(self) -> dict[str, SessionResult]:
        """Each session's latest result (its last revision), by session id."""
        return {result.trajectory.session_id: result for result in list(self.results)}

    def verdicts(self, evaluator: str | None = None) -> list[Verdict]:
        """Every verdict of every result so far, or those of one ``evaluator``."""
        return [
            v
            for result in list(self.results)
            for v in result.verdicts
            if evaluator is None or v.evaluator == evaluator
        ]

    # --- Sink ---

    def emit(self, result: SessionResult) -> None:
        self.results.append(result)

    def flush(self, timeout_s: float) -> bool:
        return True

    def shutdown(self) -> None:
        """Nothing to release: the results stay readable."""

    # --- report writer (offline) ---

    def begin(self) -> None:
        """Nothing before the first session."""

    def session(self, result: SessionResult) -> None:
        self.results.append(result)

    def end(self, summary: Any, input_report: dict[str, Any]) -> None:
        """Nothing after the last session."""
