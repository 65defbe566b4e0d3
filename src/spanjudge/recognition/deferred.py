"""Built-in presets imported only when a span shows their evidence (ARCHITECTURE.md section 2).

A file from one framework needs one or two of the presets; importing every preset module is
start-up cost `spanjudge eval` of a small file pays for nothing. A preset listed in `DEFERRED`
has its `claim_evidence` written here as data, the same as its class declares (a test compares
them): the registry routes spans by it and makes the preset when a span first shows that
evidence. A preset is listed only when, for a session with no span showing its evidence and
no step under its name, its `finalise` (if it has one) returns the steps unchanged: then a
preset never made and a preset made and not claiming anything give the same steps. (Steps under
its name can come from elsewhere: a declared convention or a plugin called by that name.)

Not listed: GenAI (it declares no evidence: asked about every span) and OpenInference (its
finaliser reads every session's steps, whatever preset made them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from spanjudge import semconv
from spanjudge.recognition.base import ClaimEvidence
from spanjudge.spans.record import SpanRecord
from spanjudge.trajectory.steps import Step

if TYPE_CHECKING:
    from spanjudge.recognition.base import Recogniser

# name -> the evidence its class declares (`claim_evidence`), as data
DEFERRED: dict[str, ClaimEvidence] = {
    "claude_code": ClaimEvidence(name_prefixes=(semconv.CC_SPAN_PREFIX,)),
    "haystack": ClaimEvidence(name_prefixes=(semconv.HAYSTACK_PREFIX,)),
    "smolagents": ClaimEvidence(scopes=(semconv.SMOLAGENTS_SCOPE,)),
    "traceloop": ClaimEvidence(attributes=(semconv.TRACELOOP_SPAN_KIND,)),
}


class DeferredPreset:
    """A built-in preset made (its module imported) the first time it is needed: asked about a
    span, or `made` by the registry when a span's name or scope shows its evidence. Until then
    its `finalise` leaves a session's steps as they are, as the preset's own would, unless a
    step carries its name (then it is made and finalises them)."""

    __slots__ = ("_factory", "_made", "claim_evidence", "name")

    def __init__(
        self, name: str, claim_evidence: ClaimEvidence, factory: Callable[[], Recogniser]
    ) -> None:
        self.name = name
        self.claim_evidence = claim_evidence
        self._factory = factory
        self._made: Recogniser | None = None

    @property
    def made(self) -> Recogniser:
        """The preset itself (made now if it was not)."""
        made = self._made
        if made is None:
            made = self._made = self._factory()
        return made

    @property
    def is_made(self) -> bool:
        return self._made is not None

    def recognise(self, span: SpanRecord) -> list[Step] | None:
        return self.made.recognise(span)

    def finalise(self, steps: list[Step], spans: Sequence[SpanRecord]) -> list[Step]:
        made: Any = self._made
        if made is None:  # no span showed its evidence: a step under its name still may
            name = self.name
            for step in steps:
                if step.preset == name:
                    made = self.made
                    break
            else:
                return steps
        finalise = getattr(made, "finalise", None)
        if finalise is None:  # nothing to finalise
            return steps
        result: list[Step] = finalise(steps, spans)
        return result

    def __repr__(self) -> str:
        return f"<preset {self.name} ({'made' if self._made is not None else 'not made yet'})>"
