"""Every evaluator name and every `not_evaluated` reason code (ARCHITECTURE.md section 5).

Both are contract: reports, span events, log records and metric labels carry them, and users
write them in configuration and alert rules. Extend, never rename. This module has no imports,
so any package may use it; the split of reasons into coverage gaps and the rest is at the
end.
"""

from __future__ import annotations

# --- Built-in evaluator names, in report order ---
SKILL_LOADED = "skill_loaded"
SKILL_SELECTION = "skill_selection"
SKILL_OMISSION = "skill_omission"
INSTRUCTION_FOLLOWING = "instruction_following"
OUTCOME = "outcome"
TRAJECTORY_VALIDITY = "trajectory_validity"
# The session's tool calls against a reference trajectory from its expectations.
TRAJECTORY_MATCH = "trajectory_match"
SIDE_EFFECTS = "side_effects"
COST = "cost"
ROBUSTNESS = "robustness"
# Opt-in (one verdict per tool call): built only when named in `evaluators`.
TOOL_SELECTION = "tool_selection"
TOOL_PARAMETERS = "tool_parameters"
# Judged against the natural-language assertions of the session's expectations.
GOAL_SUCCESS = "goal_success"
# `evaluators.custom` entries take their own names; this key holds them and is no evaluator.
CUSTOM_SECTION = "custom"

BUILTIN_EVALUATORS: tuple[str, ...] = (
    SKILL_LOADED,
    SKILL_SELECTION,
    SKILL_OMISSION,
    INSTRUCTION_FOLLOWING,
    OUTCOME,
    TRAJECTORY_VALIDITY,
    TRAJECTORY_MATCH,
    SIDE_EFFECTS,
    COST,
    ROBUSTNESS,
    GOAL_SUCCESS,
    TOOL_SELECTION,
    TOOL_PARAMETERS,
)
# goal_success is also on as soon as an expectation carries assertions (engine.Engine).
OPT_IN_EVALUATORS: tuple[str, ...] = (TOOL_SELECTION, TOOL_PARAMETERS, GOAL_SUCCESS)
# The evaluators that ask a judge (the heuristic one unless configured otherwise).
JUDGED_EVALUATORS: tuple[str, ...] = (
    SKILL_SELECTION,
    SKILL_OMISSION,
    INSTRUCTION_FOLLOWING,
    OUTCOME,
    TOOL_SELECTION,
    TOOL_PARAMETERS,
    GOAL_SUCCESS,
)

# --- Reason codes of `not_evaluated` verdicts ---
NO_EXPECTATION = "no_expectation"
NO_SKILL_INVOCATION = "no_skill_invocation"
NOT_INVOKED = "not_invoked"
BODY_NOT_RECORDED = "body_not_recorded"
LOAD_FAILED = "load_failed"
LOAD_UNRESOLVED = "load_unresolved"
JUDGE_ERROR = "judge_error"
SESSION_INCOMPLETE = "session_incomplete"
EVALUATOR_ERROR = "evaluator_error"
NO_CATALOGUE = "no_catalogue"
NO_FINAL_ANSWER = "no_final_answer"
NO_CONDITION = "no_condition"
# The question did not arise (e.g. skill_omission when a skill was used): left out of coverage.
NOT_APPLICABLE = "not_applicable"
NO_REQUEST = "no_request"
NO_OBSERVABLE_STEPS = "no_observable_steps"
INVALID_CONDITION = "invalid_condition"
NO_CONSTRAINTS = "no_constraints"
NO_BUDGET = "no_budget"
NO_THRESHOLDS = "no_thresholds"
NO_TOOL_CALLS = "no_tool_calls"
NOT_MEASURED = "not_measured"
# Earlier turns of the session never reached this process (e.g. resharded to another replica).
PRIOR_TURNS_MISSING = "prior_turns_missing"
# A judged evaluator's judge gave no verdict within its deadline (judges.<name>.deadline_s).
JUDGE_TIMEOUT = "judge_timeout"
# tool_parameters: the tool call's arguments are not in the spans (content capture off).
ARGUMENTS_NOT_RECORDED = "arguments_not_recorded"
# trajectory_match: the session's expectations hold no reference trajectory.
NO_TRAJECTORY = "no_trajectory"
# Left out by the evaluator's selection (spanjudge/sampling.py): outside the sample rate, or
# not matching its `when:` filter.
NOT_SAMPLED = "not_sampled"
FILTERED_OUT = "filtered_out"
# A free-text criterion (a custom evaluator, goal_success) with no LLM judge configured: the
# embedded heuristic judge cannot read one.
NO_JUDGE = "no_judge"
# The judge's hourly token or cost budget (judges.<name>.budget) is spent until the window rolls.
JUDGE_BUDGET = "judge_budget"

# --- Which `not_evaluated` reasons count against coverage ---
# Coverage = judged / what could have been judged (ARCHITECTURE.md section 5). Three kinds of
# reason are outside its denominator, and every front end (report, table, HTML page, --strict,
# the alert rules in collector-config/prometheus/) uses this one split. Every other reason is a
# coverage gap: evidence missing, a judge or evaluator failing, a session cut short.
# Nothing was configured to judge against: the operator's choice, not a loss of evidence.
NOT_CONFIGURED: frozenset[str] = frozenset(
    {
        NO_EXPECTATION,
        NO_CONDITION,
        NO_CONSTRAINTS,
        NO_BUDGET,
        NO_THRESHOLDS,
        NO_TRAJECTORY,
        NO_JUDGE,
    }
)
# The question did not arise in this session: no skill (or no tool) was used, so there is no
# instruction to follow, no selection and no call to judge. When that is itself the defect,
# skill_loaded or skill_omission says so, judged.
DID_NOT_ARISE: frozenset[str] = frozenset(
    {NOT_APPLICABLE, NOT_INVOKED, NO_SKILL_INVOCATION, NO_TOOL_CALLS}
)
# The session was left out on purpose by the evaluator's sample rate or `when:` filter: reports
# give the sampled share beside coverage, so a 10% sample never reads as 10% coverage.
NOT_SELECTED: frozenset[str] = frozenset({NOT_SAMPLED, FILTERED_OUT})
OUTSIDE_COVERAGE: frozenset[str] = NOT_CONFIGURED | DID_NOT_ARISE | NOT_SELECTED
