"""The embedded default judge: deterministic, explainable, no network.

It reads only what the user asked (requests, the catalogue) and what the agent did (tool names,
order, status, final answer). Tool outputs are never read, so text planted in them cannot steer it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache

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
    short,
    tokens,
    tool_names,
    trigger_topics,
)
from spanjudge.reasons import BODY_NOT_RECORDED, NO_CATALOGUE, NO_OBSERVABLE_STEPS, NO_REQUEST
from spanjudge.trajectory.steps import CatalogueEntry, Step

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
        if request.kind in ("tool_selection", "tool_parameters"):
            # opt-in: imported when asked (from the module: `from spanjudge.judges import ...`
            # would ask the package, whose __getattr__ runs its type-checking block)
            from spanjudge.judges.heuristic_tools import judge_tool_parameters, judge_tool_selection

            if request.kind == "tool_selection":
                return judge_tool_selection(request, lambda load: self._fits(request, load))
            return judge_tool_parameters(request)
        from spanjudge.judges.heuristic_outcome import judge_outcome  # needs a reference or task

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

        judged: dict[tuple[int, int], bool] = {}  # align asks about pairs again: judged once

        def matches(st: SkillStep, ev: Step) -> bool:
            key = (st.index, id(ev))
            found = judged.get(key)
            if found is None:
                found = judged[key] = self._matches(st, ev, known)
            return found

        pairs = align(observable, events, matches)
        in_order = {st.index: ev for st, ev in pairs}
        out_of_order = {
            st.index: next(e for e in events if matches(st, e))
            for st in observable
            if st.index not in in_order and any(matches(st, e) for e in events)
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
        lines = []
        for st in doc.steps:
            label = f"step {st.index} ({short(st.text)})"
            if st not in observable:
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

    # --- outcome ----------------------------------------------------------------------------


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


HEURISTIC = HeuristicJudge()
