"""The embedded default judge: deterministic, explainable, no network.

It reads what the user asked (requests, the catalogue) and what the agent did (tool names, order,
status, arguments, final answer). Tool outputs are read only as words an argument or a reply may
have come from, never as instructions to the judge.

- skill selection and omission: the request's content words against each catalogue entry's name
  and description, weighted by how rare a word is in the catalogue;
- instruction following: the loaded SKILL.md's steps aligned in order with the tool calls and the
  final answer that came after the load;
- tool selection: a tool the agent was not offered (when the offer was recorded) is wrong; a tool
  a loaded SKILL.md tells it to use is right when that skill fits the request; otherwise the tool
  must be about the request: its name or description shares a word (or a related one) with the
  request, or its arguments carry a value the request or an earlier tool output gave;
- tool parameters: the arguments must satisfy the tool's recorded schema (required names, no
  unknown ones where the schema forbids them, types, enums); a call that failed with an argument
  error is wrong; and every short identifier-like value (a path, an id, a name) must come from the
  context: the requests, earlier tool arguments and outputs, or a loaded SKILL.md (a path may also
  sit under a directory the context names);
- outcome: does the final answer agree with the reference? Numbers first (every figure of the
  reference must be in the answer), words otherwise; and an answer is no better than what backs
  it: a file it points to must hold its figures, and it must not claim a path the reference does
  not.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from spanjudge.errors import JudgeError
from spanjudge.judges.base import BINARY, LEVELS, Judgement, JudgeRequest
from spanjudge.judges.evidence import check_evidence
from spanjudge.judges.lexicon import related
from spanjudge.judges.text import (
    SkillStep,
    align,
    closest_name,
    entry_terms,
    parse_skill,
    tokens,
    tool_names,
    trigger_topics,
)
from spanjudge.reasons import BODY_NOT_RECORDED, NO_CATALOGUE, NO_OBSERVABLE_STEPS, NO_REQUEST
from spanjudge.trajectory.steps import CatalogueEntry, Step
from spanjudge.trajectory.toolnames import SEPARATORS

NAME = "heuristic"
# Omission: a catalogue entry "fits" a request that names it (every word of the skill's name),
# shares at least this many distinct content words with its name and description (a related
# word counts once one word matches itself), or whose matching words, related ones included, make
# up half of the request. Two shared words alone proved too loose ("sales" + "total" is not yet a
# request for a report).
_OMISSION_MIN_TERMS = 3
_PRIOR_WEIGHT = 0.5
# A related word ("jacket" for "wear") counts, but less than the word itself.
_RELATED_WEIGHT = 0.5
# Skipping a step the SKILL.md insists on caps the rating, however many other steps match.
_REQUIRED_CAP = "partially"
# A reply that repeats none of its step's words still follows it when it reports on the session
# in at least this many content words.
_REPLY_MIN_WORDS = 3

_ARG_ERROR = re.compile(
    r"invalid|missing|required|unknown (?:argument|parameter|field)|unexpected (?:argument|keyword)"
    r"|validation|no such file|not found|does not exist|permission denied|out of scope",
    re.IGNORECASE,
)
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
}
# Longer argument values are content the agent wrote (a report, a message), not identifiers.
_IDENTIFIER_MAX = 200
_DIRECTORY = re.compile(r"(?:^|[\s'\"(`])\.{0,2}/?[\w.-]+/")
_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?(?:z|[+-]\d{2}:?\d{2})?)?$"
)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_PATH = re.compile(r"(?<![\w/])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w+")


def _level(in_order: float, reordered: bool) -> str:
    """Fraction of steps evidenced in order -> level; any out-of-order step costs one level."""
    names = list(LEVELS)  # fully .. not_followed
    if in_order <= 0:
        return "not_followed"
    if in_order >= 1:
        index = 0
    elif in_order >= 0.75:
        index = 1
    elif in_order >= 0.5:
        index = 2
    else:
        index = 3
    if reordered:
        index = min(index + 1, 3)
    return names[index]


# The characters of a catalogue whose weights are kept (64 catalogues): a few megabytes at most.
_IDF_CHARS = 1 << 14


@lru_cache(maxsize=64)
def _idf(entries: tuple[CatalogueEntry, ...]) -> Mapping[str, float]:
    # Words every entry shares tell the skills apart poorly: weight by rarity (idf).
    counts: dict[str, int] = {}
    for entry in entries:
        for term in tokens(entry.name) | tokens(entry.description):
            counts[term] = counts.get(term, 0) + 1
    n = len(entries)
    return {term: math.log(1 + n / df) for term, df in counts.items()}


class HeuristicJudge:
    """`Judge` implementation; stateless and thread-safe."""

    name = NAME

    def judge(self, request: JudgeRequest) -> Judgement:
        check_evidence(request)
        if request.kind == "skill_selection":
            return self._selection(request)
        if request.kind == "skill_omission":
            return self._omission(request)
        if request.kind == "instruction_following":
            return self._following(request)
        if request.kind == "tool_selection":
            return judge_tool_selection(request, lambda load: self._fits(request, load))
        if request.kind == "tool_parameters":
            return judge_tool_parameters(request)
        return judge_outcome(request)

    def _fits(self, request: JudgeRequest, load: Step) -> bool | None:
        """Whether skill ``load`` suits the request, or None when that cannot be judged."""
        question = replace(request, kind="skill_selection", skill=load.skill, tool_call=None)
        question = replace(question, skill_body=load.skill_body, skill_span_id=load.span_id)
        try:
            return self.judge(question).rating == "yes"
        except JudgeError:
            return None

    # --- selection and omission -------------------------------------------------------------

    @staticmethod
    def _weights(entries: Sequence[CatalogueEntry]) -> Mapping[str, float]:
        # Every session of an agent offers the same catalogue: weighed once (read-only).
        key = tuple(entries)
        if sum(len(e.name) + len(e.description or "") for e in key) > _IDF_CHARS:
            return _idf.__wrapped__(key)  # a catalogue this large is not kept
        try:
            return _idf(key)
        except TypeError:  # an entry that cannot be hashed (a plugin's): weighed each time
            return _idf.__wrapped__(key)

    @staticmethod
    def _score(
        entry: CatalogueEntry, current: set[str], prior: set[str], weights: Mapping[str, float]
    ) -> tuple[float, list[str]]:
        name_terms, terms = entry_terms(entry.name, entry.description)
        score = 0.0
        matched = []
        for term in sorted(terms & (current | prior)):
            weight = weights.get(term, 1.0) * (2.0 if term in name_terms else 1.0)
            score += weight if term in current else weight * _PRIOR_WEIGHT
            matched.append(term)
        return score, matched

    @staticmethod
    def _candidates(request: JudgeRequest) -> tuple[list[CatalogueEntry], str, str]:
        """Candidate skills, the chosen name as offered, and a note when it was not offered."""
        entries = list(request.catalogue)
        chosen = (request.skill or "").strip()
        names = {e.name.lower(): e.name for e in entries}
        if chosen.lower() in names:
            return entries, names[chosen.lower()], ""
        if entries:
            # A name the catalogue does not offer cannot be the right choice, however close.
            close = closest_name(chosen.lower(), tuple(names))
            hint = f"; closest offered: {names[close]!r}" if close is not None else ""
            return entries, chosen, f" (not in the catalogue{hint})"
        description = parse_skill(request.skill_body).description if request.skill_body else None
        if not description:
            # A bare name is no evidence either way: judging it would be a guess.
            raise JudgeError(
                "no skill catalogue and no skill description recorded", error_type=NO_CATALOGUE
            )
        return [CatalogueEntry(name=chosen, description=description)], chosen, ""

    def _selection(self, request: JudgeRequest) -> Judgement:
        if not request.request:
            raise JudgeError("no user request recorded", error_type=NO_REQUEST)
        entries, chosen, note = self._candidates(request)
        if note:
            why = f"the agent invoked {chosen!r}{note}"
            return Judgement(rating="no", score=0.0, rationale=why, judge=NAME)
        current = tokens(request.request)
        prior = set().union(*(tokens(p) for p in request.prior_context)) - current
        weights = self._weights(entries)
        scored = {e.name: self._score(e, current, prior, weights) for e in entries}
        mine, mine_terms = scored[chosen]
        best_name, (best, best_terms) = max(
            scored.items(), key=lambda kv: (kv[1][0], kv[0] == chosen)
        )
        ranking = sorted(((round(s, 3), n) for n, (s, _) in scored.items()), reverse=True)
        details: dict[str, object] = {"scores": {n: s for s, n in ranking}, "matched": mine_terms}
        if mine <= 0:
            rating = "no"
            why = f"the request shares no content word with {chosen!r}'s name or description{note}"
            if best > 0:
                why += f"; {best_name!r} matches {', '.join(best_terms)}"
        elif best_name == chosen or mine >= best:
            rating = "yes"
            why = f"{chosen!r}{note} best matches the request (matched: {', '.join(mine_terms)})"
        else:
            rating = "no"
            why = (
                f"{best_name!r} fits the request better (matched: {', '.join(best_terms)}; "
                f"score {best:.2f}) than {chosen!r}{note} (matched: {', '.join(mine_terms)}; "
                f"score {mine:.2f})"
            )
        return Judgement(
            rating=rating, score=BINARY[rating], rationale=why, judge=NAME, details=details
        )

    @staticmethod
    def _related_matches(entry: CatalogueEntry, words: set[str], direct: set[str]) -> list[str]:
        """Request words that match none of the entry's words but a related one ("jacket" for
        "what to wear"), shown as ``word~related``."""
        terms = entry_terms(entry.name, entry.description)[1]
        out = []
        for word in sorted(words - direct):
            hits = sorted(related(word) & terms)
            if hits:
                out.append(f"{word}~{hits[0]}")
        return out

    def _omission(self, request: JudgeRequest) -> Judgement:
        if not request.request:
            raise JudgeError("no user request recorded", error_type=NO_REQUEST)
        if not request.catalogue:
            raise JudgeError("no skill catalogue recorded", error_type=NO_CATALOGUE)
        current = tokens(request.request)
        prior = set().union(*(tokens(p) for p in request.prior_context)) - current
        weights = self._weights(request.catalogue)
        best: tuple[tuple[bool, float], list[str], CatalogueEntry] | None = None
        for entry in request.catalogue:
            score, matched = self._score(entry, current, prior, weights)
            direct = set(matched) & current
            near = self._related_matches(entry, current, direct)
            name_terms = entry_terms(entry.name, entry.description)[0]
            hits = len(direct) + len(near)
            half = hits * 2 >= len(current)
            fits = (
                len(direct) >= _OMISSION_MIN_TERMS
                or (bool(name_terms) and name_terms <= current)
                or (bool(direct) and hits >= _OMISSION_MIN_TERMS)
                or (hits >= 2 and half)
                or _asks_about(entry, current)
            )
            rank = (fits, score + _RELATED_WEIGHT * len(near))
            if best is None or rank > best[0]:
                best = (rank, [*matched, *near], entry)
        assert best is not None
        (fits, _), matched, entry = best
        if fits:
            why = (
                f"the request matches skill {entry.name!r} ({', '.join(matched)}) but none was used"
            )
            return Judgement(rating="yes", score=1.0, rationale=why, judge=NAME, skill=entry.name)
        shown = f" (closest: {entry.name!r}, matched: {', '.join(matched)})" if matched else ""
        why = f"no catalogue skill fits the request{shown}; answering without one was right"
        return Judgement(rating="no", score=0.0, rationale=why, judge=NAME)

    # --- instruction following --------------------------------------------------------------

    @staticmethod
    def _matches(
        step: SkillStep, event: Step, known: Callable[[], frozenset[str]] = frozenset
    ) -> bool:
        if step.answer:
            # An answer step asks for something ("the ticket id and the probable cause"): a reply
            # that says what the step names, or reports what the session dealt with (``known``:
            # the request, tool arguments and outputs) in a sentence, followed it; a bare "Yes."
            # only ended the turn.
            if event.kind != "final_answer":
                return False
            said = tokens(event.text)
            if not step.subject or any(related(w) & step.subject for w in said):
                return True
            return len(said) >= _REPLY_MIN_WORDS and bool(said & known())
        if event.kind != "tool_call":
            return False
        name = event.name.lower()
        if step.tools:
            names, suffixes = tool_names(step.tools)
            return name in names or name.endswith(suffixes)
        name_terms = tokens(event.name)
        return bool(name_terms) and len(name_terms & tokens(step.text)) * 2 >= len(name_terms)

    def _following(self, request: JudgeRequest) -> Judgement:
        if not request.skill_body:
            raise JudgeError("the SKILL.md body was not recorded", error_type=BODY_NOT_RECORDED)
        doc = parse_skill(request.skill_body)
        # A turn's final answer is the last thing in it, whatever its span's start time says.
        ordered = [
            step
            for _, _, _, step in sorted(
                (s.turn, s.kind == "final_answer", i, s) for i, s in enumerate(request.steps)
            )
        ]
        start = 0
        for i, step in enumerate(ordered):
            if step.kind == "skill_load" and step.span_id == request.skill_span_id:
                start = i + 1
                break
        # Failed calls do not evidence a step; the successful retry does.
        events = [
            s
            for s in ordered[start:]
            if (s.kind == "tool_call" and not s.failed) or (s.kind == "final_answer" and s.text)
        ]
        every_tool = [s for s in request.steps if s.kind == "tool_call"]
        observable = [
            st
            for st in doc.steps
            if st.answer or st.tools or any(self._matches(st, e) for e in every_tool)
        ]
        if not observable:
            raise JudgeError(
                f"no step of {request.skill!r} names a tool or an answer that spans could show",
                error_type=NO_OBSERVABLE_STEPS,
            )
        words: list[frozenset[str]] = []  # read only for a reply that names no subject word

        def known() -> frozenset[str]:
            if not words:
                words.append(_known_words(request))
            return words[0]

        # every (step, event) pair judged once: the alignment reads each pair, some twice
        hits = [[self._matches(st, ev, known) for ev in events] for st in observable]
        in_order = {observable[i].index: events[j] for i, j in align(hits)}
        out_of_order = {
            st.index: events[next(j for j, hit in enumerate(row) if hit)]
            for st, row in zip(observable, hits, strict=True)
            if st.index not in in_order and any(row)
        }
        fraction = len(in_order) / len(observable)
        rating = _level(fraction, bool(out_of_order))
        skipped_required = [
            st
            for st in observable
            if st.required and st.index not in in_order and st.index not in out_of_order
        ]
        if skipped_required and LEVELS[rating] > LEVELS[_REQUIRED_CAP]:
            rating = _REQUIRED_CAP
        counted = {st.index for st in observable}
        lines = []
        for st in doc.steps:
            label = f"step {st.index} ({_short(st.text)})"
            if st.index not in counted:
                lines.append(f"{label}: not observable in spans, not counted")
            elif st.index in in_order:
                ev = in_order[st.index]
                lines.append(f"{label}: matched {ev.kind} {ev.name!r} span {ev.span_id}")
            elif st.index in out_of_order:
                ev = out_of_order[st.index]
                lines.append(f"{label}: out of order, {ev.kind} {ev.name!r} span {ev.span_id}")
            elif st.required:
                lines.append(f"{label}: required, no evidence")
            else:
                lines.append(f"{label}: no evidence")
        capped = (
            f", required step {', '.join(str(st.index) for st in skipped_required)} skipped "
            f"(at most {_REQUIRED_CAP})"
            if skipped_required
            else ""
        )
        why = (
            f"{len(in_order)}/{len(observable)} steps evidenced in order"
            + (f", {len(out_of_order)} out of order" if out_of_order else "")
            + capped
            + f" -> {rating}; "
            + "; ".join(lines)
        )
        evidence = tuple(ev.span_id for ev in [*in_order.values(), *out_of_order.values()])
        details = {
            "matched": {str(k): v.span_id for k, v in in_order.items()},
            "out_of_order": {str(k): v.span_id for k, v in out_of_order.items()},
            "steps": len(doc.steps),
            "observable_steps": len(observable),
        }
        return Judgement(
            rating=rating,
            score=LEVELS[rating],
            rationale=why,
            judge=NAME,
            evidence=tuple(dict.fromkeys(evidence)),
            details=details,
        )


def _known_words(request: JudgeRequest) -> frozenset[str]:
    """What the session dealt with: the requests and the successful tool calls' arguments and
    outputs."""
    words = set().union(*(tokens(p) for p in (request.request, *request.prior_context) if p))
    for step in request.steps:
        if step.kind == "tool_call" and not step.failed:
            words |= tokens(json.dumps(step.arguments, default=str)) | tokens(step.result)
    return frozenset(words)


def _asks_about(entry: CatalogueEntry, words: set[str]) -> bool:
    """The description says when to use the skill ("use when the user asks about the weather")
    and the request is about one of those things."""
    topics = trigger_topics(entry.description or "")
    return topics is not None and any(related(word, strong=True) & topics for word in words)


def _short(text: str, limit: int = 48) -> str:
    """``text`` cut to ``limit`` characters, "..." marking the cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- tool selection and parameters -----------------------------------------------------------


def _answer(rating: str, why: str, evidence: tuple[str, ...] = ()) -> Judgement:
    return Judgement(
        rating=rating, score=BINARY[rating], rationale=why, judge=NAME, evidence=evidence
    )


def _before(request: JudgeRequest) -> list[Step]:
    call = request.tool_call
    return [s for s in request.steps if call is None or s.span_id != call.span_id]


def _context_text(request: JudgeRequest) -> str:
    parts = [p for p in (request.request, *request.prior_context) if p]
    for step in _before(request):
        if step.kind in ("tool_call", "skill_load") and not step.failed:
            parts.append(json.dumps(step.arguments, default=str))
            parts.append(step.result or "")
        if step.skill_body:
            parts.append(step.skill_body)
    return "\n".join(parts)


def _values(arguments: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(arguments, Mapping):
        for key, value in arguments.items():
            if isinstance(value, (Mapping, list)):
                for sub, inner in _values(value):
                    yield f"{key}.{sub}", inner
            else:
                yield str(key), value
    elif isinstance(arguments, list):
        for i, value in enumerate(arguments):
            for sub, inner in _values(value):
                yield f"{i}.{sub}", inner


def _grounded(value: str, context: str, words: set[str]) -> bool:
    lowered = context.lower()
    needle = value.strip().lower()
    if needle in lowered or _TIMESTAMP.match(needle):
        # A time the agent worked out ("since 09:40" -> an ISO timestamp) is not an identifier.
        return True
    if "/" in needle:
        parent, name = needle.rsplit("/", 1)
        if parent and (parent + "/") in lowered:
            return True
        if _DIRECTORY.search(lowered):
            return False  # the context names where things are, and this is elsewhere
        # A file the agent creates may be new, but is named after what it was asked for.
        stem = tokens(name.rsplit(".", 1)[0])
        if stem and all(related(w) & words for w in stem):
            return True
    own = tokens(value)
    return bool(own) and own <= words


def judge_tool_parameters(request: JudgeRequest) -> Judgement:
    """Schema, argument errors, then grounding of each short identifier-like value."""
    call = request.tool_call
    assert call is not None  # check_evidence
    args = call.arguments
    schema = request.tool_schemas.get(call.name)
    if isinstance(schema, Mapping):
        problem = _schema_problem(args, schema)
        if problem:
            return _answer("no", f"{call.name}: {problem} (the tool's schema)", (call.span_id,))
    if call.failed and call.error and _ARG_ERROR.search(call.error):
        short = " ".join(call.error.split())[:120]
        return _answer("no", f"{call.name} failed on its arguments: {short!r}", (call.span_id,))
    context = _context_text(request)
    words = tokens(context)
    checked = []
    for key, value in _values(args if isinstance(args, (Mapping, list)) else {"": args}):
        if not isinstance(value, str) or not value.strip():
            continue
        if len(value) > _IDENTIFIER_MAX or any(c.isspace() for c in value.strip()):
            continue  # content the agent wrote (a report, a message): not an identifier
        if not _grounded(value, context, words):
            why = (
                f"{call.name}: argument {key or 'value'}={value!r} comes from nothing in the "
                "request, the earlier tool calls or the loaded skill"
            )
            return _answer("no", why, (call.span_id,))
        checked.append(f"{key}={value!r}" if key else repr(value))
    shown = f"; grounded: {', '.join(checked)}" if checked else ""
    return _answer("yes", f"{call.name}: arguments fit the schema and the context{shown}")


def _schema_problem(args: Any, schema: Mapping[str, Any]) -> str | None:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return None
    given = args if isinstance(args, Mapping) else {}
    missing = [r for r in schema.get("required") or () if r not in given]
    if missing:
        return f"missing required argument {', '.join(map(str, missing))}"
    if schema.get("additionalProperties") is False:
        unknown = [k for k in given if k not in props]
        if unknown:
            return f"unknown argument {', '.join(map(str, unknown))}"
    for key, value in given.items():
        spec = props.get(key)
        if not isinstance(spec, Mapping):
            continue
        want = _TYPES.get(str(spec.get("type")))
        if want and (not isinstance(value, want) or (bool not in want and value is True)):
            return f"argument {key} should be {spec.get('type')}, got {type(value).__name__}"
        enum = spec.get("enum")
        if isinstance(enum, list) and value not in enum:
            return f"argument {key}={value!r} is not one of {enum}"
    return None


def judge_tool_selection(
    request: JudgeRequest, skill_fits: Callable[[Step], bool | None]
) -> Judgement:
    """``skill_fits(skill_load_step) -> bool | None``: whether a loaded skill suits the request."""
    call = request.tool_call
    assert call is not None  # check_evidence
    for earlier in _before(request):
        if (
            earlier.kind == "tool_call"
            and earlier.name == call.name
            and not earlier.failed
            and earlier.arguments == call.arguments
            and call.arguments
        ):
            why = f"{call.name} repeats a call that had already succeeded with the same arguments"
            return _answer("no", why, (earlier.span_id, call.span_id))
    if request.tool_schemas and call.name not in request.tool_schemas:
        offered = ", ".join(sorted(request.tool_schemas)[:8])
        return _answer("no", f"{call.name} was not among the tools offered ({offered})")
    for load in _before(request):
        if load.kind != "skill_load" or not load.skill_body or load.failed:
            continue
        named = {t for st in parse_skill(load.skill_body).steps for t in st.tools}
        suffixes = tuple(sep + t for t in named for sep in ("_", *SEPARATORS))
        if call.name in named or call.name.endswith(suffixes):
            fits = skill_fits(load)
            if fits is False:
                return _answer(
                    "no",
                    f"{call.name} serves skill {load.skill!r}, which does not fit the request",
                    (call.span_id, load.span_id),
                )
            return _answer(
                "yes", f"{call.name} is a step of loaded skill {load.skill!r}", (load.span_id,)
            )
    asked = tokens(request.request) | set().union(*(tokens(p) for p in request.prior_context))
    schema = request.tool_schemas.get(call.name)
    about = tokens(call.name)
    if isinstance(schema, Mapping):
        about |= tokens(str(schema.get("description") or ""))
    shared = sorted(w for w in about if related(w) & asked)
    if shared:
        return _answer("yes", f"{call.name} is about the request ({', '.join(shared)})")
    values = [
        v
        for _, v in _values(call.arguments if isinstance(call.arguments, Mapping) else {})
        if isinstance(v, str) and len(v) <= _IDENTIFIER_MAX
    ]
    mentioned = sorted({w for v in values for w in tokens(v) if related(w) & asked})
    if mentioned:
        why = f"{call.name} works on what the request names ({', '.join(mentioned)})"
        return _answer("yes", why)
    context = _context_text(request)
    words = tokens(context)
    carried = [
        f"{k}={v!r}"
        for k, v in _values(call.arguments if isinstance(call.arguments, Mapping) else {})
        if isinstance(v, str)
        and v.strip()
        and len(v) <= _IDENTIFIER_MAX
        and _grounded(v, context, words)
    ]
    if carried:
        return _answer("yes", f"{call.name} works on what the context gave ({', '.join(carried)})")
    return _answer(
        "no",
        f"{call.name} is not about the request and works on nothing the request or earlier "
        "tool calls gave",
        (call.span_id,),
    )


# --- outcome -----------------------------------------------------------------------------------


def judge_outcome(request: JudgeRequest) -> Judgement:
    """Does the final answer agree with the reference answer? Numbers first, then words."""
    reference = request.reference_answer
    answer = request.final_answer
    if not reference or not answer:
        raise JudgeError("needs a final answer and a reference answer", error_type="no_reference")
    want_numbers = _numbers(reference)
    if want_numbers:
        missing = sorted(want_numbers - _numbers(answer))
        ok = not missing
        why = (
            f"every number of the reference ({', '.join(map(_fmt, sorted(want_numbers)))}) "
            "appears in the final answer"
            if ok
            else f"the final answer lacks {', '.join(map(_fmt, missing))} from the reference"
        )
        hollow = _hollow_file(request, answer, want_numbers) if ok else None
        if hollow:
            # The right figures in the reply, but the file it points to holds none of them.
            ok = False
            why = (
                f"the final answer points to {hollow}, but what the agent wrote there holds "
                "none of the reference's figures"
            )
    else:
        want = tokens(reference)
        got = tokens(answer)
        recall = len(want & got) / len(want) if want else 0.0
        ok = recall >= 0.6
        why = f"{recall:.0%} of the reference's content words appear in the final answer"
    extra = sorted(_paths(answer) - _paths(reference)) if _paths(reference) else []
    if ok and extra:
        ok = False
        why = f"the final answer also claims {', '.join(extra)}, which the reference does not"
    rating = "yes" if ok else "no"
    return Judgement(rating=rating, score=BINARY[rating], rationale=why, judge=NAME)


def _hollow_file(request: JudgeRequest, answer: str, figures: set[float]) -> str | None:
    """A path the answer names whose last write (a successful call with that path and text to
    write among its arguments) carries none of ``figures``."""
    for path in sorted(_paths(answer)):
        written = None
        for step in request.steps:
            args = step.arguments
            if step.kind != "tool_call" or step.failed or not isinstance(args, dict):
                continue
            values = [v for v in args.values() if isinstance(v, str)]
            if any(v.strip() == path for v in values):
                # Content, not another option: text with a space or a line break in it.
                texts = [v for v in values if v.strip() != path and any(c.isspace() for c in v)]
                if texts:
                    written = " ".join(texts)
        if written is not None and not figures & _numbers(written):
            return path
    return None


def _paths(text: str) -> set[str]:
    return {m.rstrip(".,;:") for m in _PATH.findall(text)}


def _numbers(text: str) -> set[float]:
    found = set()
    for raw in _NUMBER.findall(text):
        try:
            found.add(float(raw.replace(",", "")))
        except ValueError:
            continue
    return found


def _fmt(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


HEURISTIC = HeuristicJudge()
