"""``carbonshift report`` against the real API server after a scripted grid change.

A leading ``carbonshift serve --kubeconfig`` replica accounts a managed policy every 2 s
(re-evaluation and rebalancing off, so the replicas stay where Karmada put them) while the
fake Electricity Maps server changes its values once. ``carbonshift report -o json``
(reading the accounting ConfigMap from the sandbox's kube-apiserver) must show the
avoided emissions the test computes on its own: replica-hours x the intensity difference
between the user's own placement (a plain Divided policy over three members: an even
split) and where Karmada really put the replicas (the binding's ``spec.clusters``), at
2.12 W per requested vCPU, phase by phase.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import test_schedulers
from e2e_support import Kube, unique
from test_fleet_labels import eventually, holder
from test_prometheus import remove, settings, workload
from test_reevaluate_karmada import scheduled
from test_reevaluate_policies import MEMBERS, ZONES, Grid, follower

from devtools.sandbox import Sandbox
from webhook.model.vocabulary import parse_time

pytestmark = pytest.mark.timeout(300)

karmada = test_schedulers.karmada  # the real Karmada (module fixture)

INTERVAL = 2.0
REPLICAS = 6
"""One CPU each: an even split over the three members is two each."""
KWH_PER_REPLICA_HOUR = 2.12 * 1 / 1000
BEFORE = {"FR": 100.0, "PL": 800.0, "SE-SE3": 25.0}
AFTER = {"FR": 100.0, "PL": 200.0, "SE-SE3": 300.0}
"""The change moves the difference a lot wherever Karmada put the replicas."""
PHASE_SECONDS = 16.0


def difference(actual: dict[str, int], values: dict[str, float]) -> float:
    """g per kWh-per-replica: counterfactual (two replicas on each member) minus actual."""
    even = REPLICAS // len(MEMBERS)
    counterfactual = sum(even * values[ZONES[m]] for m in MEMBERS)
    return counterfactual - sum(n * values[ZONES[c]] for c, n in actual.items())


def report(sandbox: Sandbox, configmap: str) -> dict[str, object]:
    command = [*sandbox.carbonshift_command, "report", "-o", "json", "--since", "1h",
               f"--kubeconfig={sandbox.kubeconfig}", "--namespace=default",
               f"--configmap={configmap}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_reports_avoided_figure_is_replica_hours_times_the_intensity_difference(
    karmada: Sandbox, kube: Kube, tmp_path: Path
) -> None:
    namespace, name = workload(kube, REPLICAS, "1")
    actual = scheduled(kube, namespace, name)
    assert actual is not None
    assert sum(actual.values()) == REPLICAS
    extra = settings(
        accounting={"interval_seconds": INTERVAL, "configmap": unique("report")},
        reevaluate={"enabled": False}, rebalance={"enabled": False},
    )  # fmt: skip
    configmap = extra["accounting"]["configmap"]
    grid = Grid()
    grid.values.update(BEFORE)
    try:
        with grid, follower(karmada, tmp_path, grid, "none", extra) as replica:
            eventually(lambda: holder(kube, replica.name) == replica.name, 30.0, "leadership")
            time.sleep(PHASE_SECONDS)
            grid.values.update(AFTER)  # the scripted grid change
            changed = time.time()
            time.sleep(PHASE_SECONDS)
            assert scheduled(kube, namespace, name) == actual  # nothing moved meanwhile
            doc = report(karmada, configmap)
            (row,) = [w for w in doc["workloads"]  # type: ignore[attr-defined]
                      if w["namespace"] == namespace and w["name"] == name]  # fmt: skip
            since = parse_time(str(doc["accounting_since"])).timestamp()
            hours = row["hours"]
            before_h = (changed - since) / 3600
            after_h = hours - before_h
            want = KWH_PER_REPLICA_HOUR * (
                before_h * difference(actual, BEFORE) + after_h * difference(actual, AFTER)
            )
            # The interval spanning the change is counted at the intensity of its end, and
            # the feed takes up to a refresh (1 s) to see the new values.
            slack = (
                KWH_PER_REPLICA_HOUR
                * (INTERVAL + 2.0)
                / 3600
                * abs(difference(actual, BEFORE) - difference(actual, AFTER))
            )
            assert abs(row["avoided_g"] - want) <= slack, (row, want, slack)
            unchanged = KWH_PER_REPLICA_HOUR * hours * difference(actual, BEFORE)
            assert abs(row["avoided_g"] - unchanged) > slack  # the change shows
            assert row["replica_hours"] == pytest.approx(hours * REPLICAS, rel=1e-6)
            assert row["method"] == "coefficient"
            print(f"\nreport: avoided {row['avoided_g']:.5f} g over {hours * 3600:.1f} s "
                  f"(independent: {want:.5f} g +- {slack:.5f}); placement {actual}")  # fmt: skip
    finally:
        kube.run("delete", "configmap", configmap, "-n", "default", "--wait=false")
        remove(kube, namespace)
