"""The alerting rules pass ``promtool check rules`` and their unit tests
(``promtool test rules``); promtool comes from hack/build-prometheus.sh. Skipped when it
is not built, except under CI=true, where a missing promtool fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "carbonshift" / "rules" / "carbonshift-rules.yaml"
TESTS = Path(__file__).with_name("carbonshift-rules-test.yaml")
CACHE = Path(os.environ.get("CARBONSHIFT_CACHE") or ROOT / ".cache" / "bin")
PROMTOOL = CACHE / "promtool"


def promtool() -> Path:
    if PROMTOOL.exists():
        return PROMTOOL
    if os.environ.get("CI") == "true":
        pytest.fail(f"{PROMTOOL} is missing: run hack/build-prometheus.sh promtool")
    pytest.skip("promtool is not built (hack/build-prometheus.sh promtool)")


def run(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [str(promtool()), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_the_rules_are_valid() -> None:
    assert "SUCCESS: 7 rules found" in run("check", "rules", str(RULES))


def test_the_rules_unit_tests_pass() -> None:
    assert "SUCCESS" in run("test", "rules", TESTS.name, cwd=TESTS.parent)


def test_every_alert_the_issue_asks_for() -> None:
    doc = yaml.safe_load(RULES.read_text())
    names = {r["alert"] for g in doc["groups"] for r in g["rules"]}
    assert names == {
        "CarbonshiftIntensityStale", "CarbonshiftProviderCircuitOpen",
        "CarbonshiftAdmissionsFailingOpen", "CarbonshiftAdmissionsShed", "CarbonshiftNoLeader",
        "CarbonshiftReevaluationWritesFailing", "CarbonshiftInventoryNotSynced",
    }  # fmt: skip
