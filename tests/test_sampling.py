"""`sample` and `when` in `spanjudge eval`: the same sessions in every run, filters on span and
resource attributes, and coverage that a sample does not shrink."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from spanjudge.cli import main
from spanjudge.config import parse_config
from spanjudge.errors import ConfigError
from tests.conftest import FIXTURES, load_schema

SHARED_SCHEMA = Path("/work/shared/schemas/report.schema.json")
STRANDS = FIXTURES / "strands"


def _config(tmp_path: Path, evaluators: dict[str, Any], name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"evaluators": evaluators}))
    return path


def _eval_subprocess(tmp_path: Path, config: Path, seed: str, *inputs: Path) -> dict[str, Any]:
    """`spanjudge eval --format json` in a process of its own (its own hash seed)."""
    out = tmp_path / f"report-{seed}.json"
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "spanjudge", "eval", *map(str, inputs), "--config", str(config),
         "--expect", str(STRANDS / "expectations.yaml"), "--format", "json", "--output", str(out)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def _eval(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["eval", *argv])
    out, _ = capsys.readouterr()
    return code, out


def _reasons(report: dict[str, Any], evaluator: str) -> dict[str, set[str | None]]:
    """Session id -> the reasons of its verdicts from ``evaluator`` (None for a judged one)."""
    return {
        s["session_id"]: {v["reason"] for v in s["verdicts"] if v["evaluator"] == evaluator}
        for s in report["sessions"]
    }


def _left_out(report: dict[str, Any], evaluator: str, reason: str) -> set[str]:
    return {sid for sid, rs in _reasons(report, evaluator).items() if rs == {reason}}


def _documented_rule(session_id: str, rate: float) -> bool:
    """The sample rule as the docs state it: the first 8 bytes of the SHA-256 of the session
    id, read as a fraction of 2^64, below the rate."""
    digest = hashlib.sha256(session_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") < rate * 2**64


def _strands_inputs() -> list[Path]:
    return sorted(STRANDS.glob("*.jsonl"))


@pytest.mark.slow
def test_a_sample_keeps_the_same_sessions_in_every_run(tmp_path: Path) -> None:
    config = _config(tmp_path, {"skill_loaded": {"sample": 0.3}})
    first = _eval_subprocess(tmp_path, config, "1", *_strands_inputs())
    second = _eval_subprocess(tmp_path, config, "2", *_strands_inputs())
    sessions = {s["session_id"] for s in first["sessions"]}
    out_first = _left_out(first, "skill_loaded", "not_sampled")
    out_second = _left_out(second, "skill_loaded", "not_sampled")
    assert out_first == out_second
    kept = sessions - out_first
    assert len(sessions) >= 50
    assert 0.15 <= len(kept) / len(sessions) <= 0.45  # a 30% sample of ~60 sessions
    assert kept == {sid for sid in sessions if _documented_rule(sid, 0.3)}
    # the sessions kept were judged as without a sample; the others got nothing but not_sampled
    for sid, reasons in _reasons(first, "skill_loaded").items():
        assert (reasons == {"not_sampled"}) == (sid not in kept)


def test_a_smaller_sample_is_part_of_a_larger_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept: dict[float, set[str]] = {}
    for rate in (0.1, 0.3):
        out = tmp_path / f"r{rate}.json"
        config = _config(tmp_path, {"skill_loaded": {"sample": rate}}, f"c{rate}.yaml")
        _eval(capsys, *map(str, _strands_inputs()), "--config", str(config), "--format", "json",
              "--output", str(out))  # fmt: skip
        report = json.loads(out.read_text())
        everything = {s["session_id"] for s in report["sessions"]}
        kept[rate] = everything - _left_out(report, "skill_loaded", "not_sampled")
    assert kept[0.1] and kept[0.1] < kept[0.3]


def test_a_sample_is_outside_coverage_and_its_share_is_shown_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = [str(p) for p in _strands_inputs()]
    expect = ["--expect", str(STRANDS / "expectations.yaml")]
    whole, sampled = tmp_path / "whole.json", tmp_path / "sampled.json"
    _eval(capsys, *inputs, *expect, "--format", "json", "--output", str(whole))
    config = _config(tmp_path, {"skill_loaded": {"sample": 0.3}})
    _eval(capsys, *inputs, *expect, "--config", str(config), "--format", "json",
          "--output", str(sampled))  # fmt: skip
    full = json.loads(whole.read_text())
    part = json.loads(sampled.read_text())
    for schema in (load_schema(), json.loads(SHARED_SCHEMA.read_text())):
        jsonschema.validate(part, schema)
    before = full["summary"]["by_evaluator"]["skill_loaded"]
    after = part["summary"]["by_evaluator"]["skill_loaded"]
    sessions = len(part["sessions"])
    left = len(_left_out(part, "skill_loaded", "not_sampled"))
    assert 0 < left < sessions
    assert before["coverage"] == 1.0 and after["coverage"] == 1.0  # not 30%
    assert after["sampled_share"] == pytest.approx((sessions - left) / sessions)
    assert after["sessions_left_out"] == left
    assert after["outside_coverage"]["not_sampled"] == left
    assert "sampled_share" not in before
    # the table gives the share beside coverage and lists what was left out apart
    share = f"{100 * (sessions - left) / sessions:.0f}%"
    _, table = _eval(capsys, *inputs, *expect, "--config", str(config), "--show", "summary")
    [row] = [
        ln for ln in table.splitlines() if ln.startswith("  skill_loaded ") and "sampled" in ln
    ]
    assert row.split()[-3:] == ["100%", "sampled", share]
    listed = f"left out by the evaluator's sample or filter: skill_loaded [not_sampled] x{left}"
    assert listed in table
    # the HTML page too
    page = tmp_path / "report.html"
    _eval(capsys, *inputs, *expect, "--config", str(config), "--format", "html",
          "--output", str(page))  # fmt: skip
    assert f"(sampled {share})" in page.read_text()


def test_strict_and_junit_do_not_count_a_session_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(FIXTURES / "genai_manual" / "genai_manual.jsonl")
    # every evaluator but skill_loaded off, and skill_loaded sampled at 0: left out everywhere
    off = {name: {"enabled": False} for name in ("skill_selection", "skill_omission",
           "instruction_following", "outcome", "trajectory_validity", "trajectory_match",
           "side_effects", "cost", "robustness")}  # fmt: skip
    config = _config(tmp_path, {**off, "skill_loaded": {"sample": 0}})
    code, _ = _eval(capsys, trace, "--config", str(config), "--strict")
    assert code == 0
    junit = tmp_path / "junit.xml"
    _eval(capsys, trace, "--config", str(config), "--strict", "--format", "junit",
          "--output", str(junit))  # fmt: skip
    text = junit.read_text()
    assert "<failure" not in text and "not_sampled: outside the evaluator's 0% sample" in text


def test_a_filter_on_the_agent_name_attribute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shop = FIXTURES / "genai_manual"  # its agent: shop_agent
    ops = FIXTURES / "pydantic_ai"  # its agent: ops-assistant
    ids = {
        d: {r["session_id"] for r in json.loads((d / "scenarios.json").read_text())["sessions"]}
        for d in (shop, ops)
    }
    config = _config(
        tmp_path, {"skill_loaded": {"when": {"attributes": {"gen_ai.agent.name": "shop_agent"}}}}
    )
    out = tmp_path / "report.json"
    _eval(capsys, str(shop / "genai_manual.jsonl"), str(ops / "pydantic_ai.jsonl"),
          "--config", str(config), "--format", "json", "--output", str(out))  # fmt: skip
    report = json.loads(out.read_text())
    filtered = _left_out(report, "skill_loaded", "filtered_out")
    assert filtered == ids[ops]
    assert not filtered & ids[shop]
    [verdict] = [
        v
        for s in report["sessions"]
        if s["session_id"] == sorted(ids[ops])[0]
        for v in s["verdicts"]
        if v["evaluator"] == "skill_loaded"
    ]
    assert verdict["outcome"] == "not_evaluated"
    assert "attribute gen_ai.agent.name = 'shop_agent'" in verdict["explanation"]
    share = report["summary"]["by_evaluator"]["skill_loaded"]["sampled_share"]
    assert share == pytest.approx(len(ids[shop]) / (len(ids[shop]) + len(ids[ops])))


def test_the_judged_default_applies_to_judged_evaluators_and_can_be_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shop = FIXTURES / "genai_manual" / "genai_manual.jsonl"
    ops = FIXTURES / "pydantic_ai" / "pydantic_ai.jsonl"
    config = _config(
        tmp_path,
        {
            "judged": {"when": {"agent": {"regex": "^ops-"}}},
            "skill_omission": {"when": {"agent": ["shop_agent", "someone-else"]}},
        },
    )
    out = tmp_path / "report.json"
    _eval(capsys, str(shop), str(ops), "--config", str(config), "--format", "json",
          "--output", str(out))  # fmt: skip
    report = json.loads(out.read_text())
    shop_ids = {
        r["session_id"]
        for r in json.loads((shop.parent / "scenarios.json").read_text())["sessions"]
    }
    everyone = {s["session_id"] for s in report["sessions"]}
    # a judged evaluator takes the default: only ops-* agents
    assert _left_out(report, "skill_selection", "filtered_out") == shop_ids
    # one with its own `when` replaces it
    assert _left_out(report, "skill_omission", "filtered_out") == everyone - shop_ids
    # a deterministic evaluator does not take it
    assert not _left_out(report, "skill_loaded", "filtered_out")
    assert not _left_out(report, "trajectory_validity", "filtered_out")


def test_every_sampling_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "evaluators": {
                    "skill_loaded": {"sample": 1.5},
                    "outcome": {"when": {"agnet": "x", "service": {"regex": "(unclosed"}}},
                    "judged": {"sample": "10%", "enabled": False},
                    "cost": {"when": {"attributes": {"tier": {"ignore_case": True}}}},
                }
            }
        )
    problems = info.value.problems
    assert "evaluators.skill_loaded.sample: expected a share from 0 to 1, got 1.5" in problems
    assert any(p.startswith("evaluators.outcome.when.agnet: unknown key (did you mean 'agent'")
               for p in problems)  # fmt: skip
    assert any(p.startswith("evaluators.outcome.when.service.regex: invalid regular expression")
               for p in problems)  # fmt: skip
    assert "evaluators.judged.sample: expected a share from 0 to 1, got '10%'" in problems
    assert any(p.startswith("evaluators.judged.enabled: unknown setting") for p in problems)
    assert (
        "evaluators.cost.when.attributes.tier: give equals, contains, regex or json_path + equals"
        in problems
    )


def _closed(key: str, resource: dict[str, Any], attrs: dict[str, Any]) -> Any:
    from spanjudge.sessions.store import ClosedSession
    from tests.conftest import span

    root = span(
        1,
        name="invoke_agent",
        end=100,
        attrs={"gen_ai.operation.name": "invoke_agent", "session.id": key, **attrs},
        resource=resource,
    )
    return ClosedSession(key=key, key_source="session.id", revision=1, reason="end_of_input",
                         spans=(root,))  # fmt: skip


@pytest.mark.parametrize(
    ("when", "judged"),
    [
        ({"environment": "production"}, {"prod-new", "prod-old"}),
        ({"service": {"regex": "^checkout"}}, {"prod-new", "staging"}),
        ({"attributes": {"tenant.tier": [3, "gold"]}}, {"prod-new", "prod-old"}),
        ({"attributes": {"tenant.tier": {"equals": 3}}, "environment": "production"}, {"prod-new"}),
        ({"request": {"contains": "refund"}}, set()),
    ],
)
def test_a_filter_reads_resource_and_span_attributes(when: Any, judged: set[str]) -> None:
    from spanjudge.engine import Engine

    sessions = [
        # the current attribute name, a span attribute tier
        _closed(
            "prod-new",
            {"deployment.environment.name": "production", "service.name": "checkout-api"},
            {"tenant.tier": 3},
        ),
        # the older name, the tier on the resource
        _closed(
            "prod-old",
            {
                "deployment.environment": "production",
                "service.name": "billing",
                "tenant.tier": "gold",
            },
            {},
        ),
        _closed(
            "staging",
            {"deployment.environment.name": "staging", "service.name": "checkout-web"},
            {"tenant.tier": 1},
        ),
    ]
    engine = Engine(parse_config({"evaluators": {"robustness": {"when": when}}}))
    kept = set()
    for closed in sessions:
        [verdict] = [v for v in engine.evaluate(closed).verdicts if v.evaluator == "robustness"]
        if verdict.reason != "filtered_out":
            kept.add(closed.key)
    assert kept == judged


SAMPLED_CRITERION = {
    "name": "refund_policy",
    "instructions": "Did the agent promise a refund above 100 EUR?",
    "scale": [
        {"label": "compliant", "score": 1.0, "definition": "no such promise"},
        {"label": "violation", "score": 0.0, "definition": "a refund above 100 EUR promised"},
    ],
    "judge": "llm",
}


@pytest.mark.parametrize("where", ["entry", "section"])
def test_a_sampled_judged_evaluator_asks_the_judge_only_about_the_sampled_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """Written in its `evaluators.custom` entry or under its own name beside the built-ins."""
    from tests.judges.chat_server import chat_server, completion

    answer = json.dumps({"rating": "compliant", "rationale": "no refund mentioned"})
    with chat_server(responder=lambda payload: completion(answer)) as server:
        judge = {"type": "openai", "base_url": server.base_url, "model": "scripted"}
        judges = {"llm": {**judge, "cache_size": 0}}
        if where == "entry":
            evaluators: dict[str, Any] = {"custom": [{**SAMPLED_CRITERION, "sample": 0.3}]}
        else:
            evaluators = {"custom": [SAMPLED_CRITERION], "refund_policy": {"sample": 0.3}}
        config = tmp_path / "config.yaml"
        # no cache: each judged session is one call, even where two sessions read alike
        config.write_text(yaml.safe_dump({"judges": judges, "evaluators": evaluators}))
        out = tmp_path / "report.json"
        _eval(capsys, *map(str, _strands_inputs()), "--config", str(config), "--format", "json",
              "--output", str(out))  # fmt: skip
        asked = len(server.requests)
    report = json.loads(out.read_text())
    sessions = {s["session_id"] for s in report["sessions"]}
    judged = {
        sid for sid, reasons in _reasons(report, "refund_policy").items() if reasons == {None}
    }
    assert judged == {sid for sid in sessions if _documented_rule(sid, 0.3)}
    assert 0 < len(judged) < len(sessions)
    assert _left_out(report, "refund_policy", "not_sampled") == sessions - judged
    assert asked == len(judged)
