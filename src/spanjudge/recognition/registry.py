"""The ordered list of recognition presets and the whole-session recognition pass."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from spanjudge.guard import Guard
from spanjudge.recognition.base import Recogniser, SessionFinaliser
from spanjudge.registry import Registry
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step


class RecogniserFactory(Protocol):
    """Builds a recogniser (a preset class is one). Third-party factories register in the
    `spanjudge.recognisers` entry-point group and are tried before the built-ins: a plugin
    exists to read what the built-in presets misread."""

    def __call__(self) -> Recogniser: ...


# name -> "module:class"; tried in this order (most specific first).
RECOGNISERS: Registry[RecogniserFactory] = Registry(
    "recogniser",
    "spanjudge.recognisers",
    {
        "claude_code": "spanjudge.recognition.claude_code:ClaudeCodeRecogniser",
        "haystack": "spanjudge.recognition.haystack:HaystackRecogniser",
        "smolagents": "spanjudge.recognition.smolagents:SmolagentsRecogniser",
        "openinference": "spanjudge.recognition.openinference:OpenInferenceRecogniser",
        "traceloop": "spanjudge.recognition.traceloop:TraceloopRecogniser",
        "genai": "spanjudge.recognition.genai:GenAIRecogniser",
    },
)


class RecogniserRegistry:
    """Presets tried in order; the first that claims a span (returns a list) wins."""

    def __init__(self, recognisers: Iterable[Recogniser]) -> None:
        self.recognisers: list[Recogniser] = list(recognisers)
        # Checked once here: isinstance against a Protocol is slow on a per-session path.
        self.finalisers: list[SessionFinaliser] = [
            r for r in self.recognisers if isinstance(r, SessionFinaliser)
        ]
        self.guard = Guard("spanjudge", "recognition preset")

    @classmethod
    def default(cls) -> RecogniserRegistry:
        """Plugins (entry-point group `spanjudge.recognisers`), then the built-in presets."""
        factories = RECOGNISERS.factories()
        plugins = RECOGNISERS.plugin_names()
        order = [*plugins, *(n for n in factories if n not in plugins)]
        return cls(factories[name]() for name in order)

    def recognise_span(self, span: SpanRecord) -> list[Step]:
        # spanjudge's own spans never get here: the pipeline skips them (`pipeline.is_own_span`).
        for recogniser in self.recognisers:
            try:
                steps = recogniser.recognise(span)
            except Exception:
                # A preset that chokes on one odd span must not cost the whole session.
                self._failed(recogniser.name, f"span {span.span_id} ({span.name!r})")
                return []
            if steps is not None:
                return steps
        return []

    def recognise_session(self, spans: Sequence[SpanRecord]) -> list[Step]:
        steps: list[Step] = []
        for span in spans:
            steps.extend(self.recognise_span(span))
        for finaliser in self.finalisers:
            try:
                steps = finaliser.finalise(steps, spans)
            except Exception:
                self._failed(getattr(finaliser, "name", "finaliser"), "finalise")
        return steps

    @property
    def errors(self) -> int:
        """Preset failures contained so far (each costs one span, or the finalising pass)."""
        return self.guard.errors

    def _failed(self, preset: str, what: str) -> None:
        self.guard.failed(preset, what)
