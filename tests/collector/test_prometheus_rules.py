"""collector-config/prometheus/: promtool accepts and tests the rules; names are spanjudge's."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from spanjudge.reasons import OUTSIDE_COVERAGE
from tests.collector.promnames import KNOWN_LABELS, emitted_series, label_names, metric_names
from tests.conftest import unavailable

PROM_DIR = Path(__file__).resolve().parents[2] / "collector-config" / "prometheus"
RULES = PROM_DIR / "spanjudge-alerts.yaml"
RULE_TESTS = PROM_DIR / "spanjudge-alerts.test.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.usefixtures("_promtool_installed")


@pytest.fixture
def _promtool_installed() -> None:
    if PROMTOOL is None:
        unavailable("promtool", "promtool is not installed (Debian package `prometheus`)")


# The alerts the operator was promised, by what they watch.
REQUIRED_ALERTS = {
    "SpanjudgeRequiredSkillLoadRateLow",  # required-skill load rate below a threshold
    "SpanjudgeSkillLoadFailuresRising",  # skill_loaded failures rising
    "SpanjudgeEvaluationCoverageLow",  # coverage falling
    "SpanjudgeJudgeErrors",  # judge_error verdicts
    "SpanjudgeSpansDropped",  # dropped spans
    "SpanjudgeVerdictsDropped",  # verdicts the export dropped
    "SpanjudgeSpoolNearFull",  # spool near full
}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=PROM_DIR, capture_output=True, text=True, timeout=120, check=False
    )


def _alerts() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


@needs_promtool
def test_promtool_check_rules() -> None:
    result = _promtool("check", "rules", RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_check_config() -> None:
    result = _promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_test_rules() -> None:
    result = _promtool("test", "rules", RULE_TESTS.name)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_test_rules_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    # The unit tests can fail: claim the 50% skill load rate is 60%.
    text = RULE_TESTS.read_text(encoding="utf-8").replace("only 50% of", "only 60% of")
    (tmp_path / "rules.yaml").write_text(RULES.read_text(encoding="utf-8"), encoding="utf-8")
    broken = tmp_path / "broken.test.yaml"
    broken.write_text(text.replace("- spanjudge-alerts.yaml", "- rules.yaml"), encoding="utf-8")
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "test", "rules", broken.name], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "60%" in result.stdout + result.stderr


def test_required_alerts_exist() -> None:
    assert {rule["alert"] for rule in _alerts()} >= REQUIRED_ALERTS


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    doc = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in doc["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in _alerts()}
    assert names <= firing, f"never seen firing: {names - firing}"
    assert names <= quiet, f"never seen quiet: {names - quiet}"


def test_rules_use_only_metric_names_spanjudge_emits() -> None:
    emitted = emitted_series()
    for rule in _alerts():
        used = metric_names(rule["expr"])
        assert used, rule["alert"]
        assert used <= emitted, f"{rule['alert']}: unknown metrics {used - emitted}"
        labels = label_names(rule["expr"])
        assert labels <= KNOWN_LABELS, f"{rule['alert']}: unknown labels {labels - KNOWN_LABELS}"


def test_name_check_rejects_a_misspelt_metric() -> None:
    used = metric_names('sum(rate(spanjudge_verdict_total{spanjudge_outcome="fail"}[5m])) > 0')
    assert used == {"spanjudge_verdict_total"}
    assert not used <= emitted_series()


def test_the_coverage_alert_leaves_out_exactly_what_the_report_leaves_out() -> None:
    # One coverage rule: the reasons the alert does not count as a gap are the report's.
    [rule] = [r for r in _alerts() if r["alert"] == "SpanjudgeEvaluationCoverageLow"]
    excluded = re.findall(r'spanjudge_reason!~"([^"]*)"', rule["expr"])
    assert excluded, rule["expr"]
    for pattern in excluded:
        assert set(pattern.split("|")) == OUTSIDE_COVERAGE, pattern
