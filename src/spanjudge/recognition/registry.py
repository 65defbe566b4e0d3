"""The ordered list of recognition presets and the whole-session recognition pass."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeGuard

from spanjudge.guard import Guard
from spanjudge.recognition.base import (
    ClaimEvidence,
    Recogniser,
    RecogniserFactory,
    SessionFinaliser,
)
from spanjudge.registry import Registry
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step

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
        # last: spans no convention claimed, read from their shape
        "shape": "spanjudge.recognition.shapes:ShapeRecogniser",
    },
)


# Routes kept per (scope name, span name): far fewer than spans; dropped all at once when full.
_ROUTES_MAX = 4096
_SCOPE_TYPES = (str, type(None))
# A preset asked about every span (None), or only about spans carrying one of these attributes.
_Asked = tuple[tuple[Recogniser, tuple[str, ...] | None], ...]
# The presets to ask, the attributes any of them claims by, and those asked about every span
# (all there are to ask about a span carrying none of those attributes: most spans).
_Route = tuple[_Asked, frozenset[str], _Asked]


def _finalises(recogniser: Recogniser) -> TypeGuard[SessionFinaliser]:
    """A `finalise` that is not None, found as plain attribute lookup finds it (`isinstance`
    against the Protocol looks past `__getattr__` since Python 3.12)."""
    return getattr(recogniser, "finalise", None) is not None


class RecogniserRegistry:
    """Presets tried in order; the first that claims a span (returns a list) wins.

    A preset that declares `claim_evidence` is not asked about a span that carries none of
    it (it would answer None: not mine): which presets remain for a span is worked out once
    per instrumentation scope and span name, and the attributes they need are looked up in
    the span. Presets without one (plugins, declared conventions, GenAI) are asked always."""

    def __init__(self, recognisers: Iterable[Recogniser]) -> None:
        self.recognisers: list[Recogniser] = list(recognisers)
        self.finalisers: list[SessionFinaliser] = [r for r in self.recognisers if _finalises(r)]
        self.guard = Guard("spanjudge", "recognition preset")
        self._planned: list[Recogniser] = []
        self._plan: list[tuple[Recogniser, ClaimEvidence | None]] = []
        self._routes: dict[tuple[str | None, str], _Route] = {}
        self._every: _Route = ((), frozenset(), ())

    @classmethod
    def default(cls, first: Iterable[Recogniser] = ()) -> RecogniserRegistry:
        """``first`` (declared conventions), plugins (entry-point group
        `spanjudge.recognisers`), then the built-in presets in `RECOGNISERS` order."""
        factories = RECOGNISERS.factories()
        plugins = RECOGNISERS.plugin_names()
        order = [*plugins, *(n for n in factories if n not in plugins)]
        return cls([*first, *(factories[name]() for name in order)])

    def recognise_span(self, span: SpanRecord) -> list[Step]:
        # spanjudge's own spans never get here: the pipeline skips them (`pipeline.is_own_span`).
        self._check_plan()
        return self._recognise(span)

    def _check_plan(self) -> None:
        if self._planned != self.recognisers:  # (`recognisers` is a public, mutable list)
            self._planned = list(self.recognisers)
            self._plan = [(r, _claim_evidence(r)) for r in self._planned]
            every = tuple((r, None) for r in self._planned)
            self._every = (every, frozenset(), every)
            self._routes = {}

    def _route(self, key: tuple[str | None, str]) -> _Route:
        scope, name = key
        route: list[tuple[Recogniser, tuple[str, ...] | None]] = []
        for recogniser, evidence in self._plan:
            if evidence is None or _named_by(evidence, scope, name):
                route.append((recogniser, None))
            elif evidence.attributes:
                route.append((recogniser, evidence.attributes))
        if len(self._routes) >= _ROUTES_MAX:
            self._routes = {}
        asked = tuple(route)
        claimed_by = frozenset(a for _, needed in asked for a in needed or ())
        always = tuple(entry for entry in asked if entry[1] is None) if claimed_by else asked
        found = self._routes[key] = (asked, claimed_by, always)
        return found

    def _recognise(self, span: SpanRecord) -> list[Step]:
        key = (span.scope_name, span.name)
        if key[1].__class__ is not str or key[0].__class__ not in _SCOPE_TYPES:
            route = self._every  # an odd name (the SDK takes any): every preset, as always
        else:
            route = self._routes.get(key) or self._route(key)
        attributes = span.attributes
        asked, claimed_by, always = route
        if claimed_by and attributes.keys().isdisjoint(claimed_by):
            asked = always  # it carries none of what the others claim by: they would say None
        for recogniser, needed in asked:
            if needed is not None:
                for attribute in needed:
                    if attribute in attributes:
                        break
                else:
                    continue  # carries none of what this preset claims by: it would say None
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
        self._check_plan()
        for span in spans:
            steps.extend(self._recognise(span))
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


def _named_by(evidence: ClaimEvidence, scope: str | None, name: str) -> bool:
    return name.startswith(evidence.name_prefixes) or scope in evidence.scopes


def _claim_evidence(recogniser: Recogniser) -> ClaimEvidence | None:
    """The `claim_evidence` a preset declares, honoured only where it sits beside the
    `recognise` that is called: a subclass or an instance that replaces `recognise` is
    asked about every span unless it declares its own."""
    if "recognise" in getattr(recogniser, "__dict__", ()):
        return None
    for klass in type(recogniser).__mro__:
        if "recognise" in vars(klass):
            found = vars(klass).get("claim_evidence")
            return found if isinstance(found, ClaimEvidence) else None
    return None
