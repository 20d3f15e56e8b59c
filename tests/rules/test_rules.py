"""The alerting rules pass ``promtool check rules`` and their unit tests
(``promtool test rules``); promtool comes from hack/build-prometheus.sh. Skipped when it
is not built, except under CI=true, where a missing promtool fails."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.rules.promtool import ROOT, run

RULES = ROOT / "charts" / "carbonshift" / "rules" / "carbonshift-rules.yaml"
TESTS = Path(__file__).with_name("carbonshift-rules-test.yaml")


def test_the_rules_are_valid() -> None:
    assert "SUCCESS: 9 rules found" in run("check", "rules", str(RULES))


def test_the_rules_unit_tests_pass() -> None:
    assert "SUCCESS" in run("test", "rules", TESTS.name, cwd=TESTS.parent)


def test_every_alert_the_issue_asks_for() -> None:
    doc = yaml.safe_load(RULES.read_text())
    names = {r["alert"] for g in doc["groups"] for r in g["rules"]}
    assert names == {
        "CarbonshiftIntensityStale", "CarbonshiftProviderCircuitOpen",
        "CarbonshiftAdmissionsFailingOpen", "CarbonshiftAdmissionsShed", "CarbonshiftNoLeader",
        "CarbonshiftReevaluationWritesFailing", "CarbonshiftInventoryNotSynced",
        "CarbonshiftZoneDataMissing", "CarbonshiftKueueWorkloadsWaiting",
    }  # fmt: skip
