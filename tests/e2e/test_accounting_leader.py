"""Carbon accounting totals survive a leader change.

Two real ``carbonshift serve --kubeconfig`` replicas share a Lease and an accounting
ConfigMap (``accounting.interval_seconds: 2``); a managed Divided PropagationPolicy with a
Deployment runs on the real Karmada. The accounting leader is SIGKILLed (no chance to
hand over or save); the other replica takes the Lease, reads the ConfigMap and carries on:
the object's totals never go back, its counters on the new leader start from the
persisted totals, and the hours accounted cover the wall time since accounting began to
within one accounting interval (what the dead leader had not saved yet).
"""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import test_schedulers
from e2e_support import Kube, unique
from test_fleet_labels import Replica, eventually, holder
from test_prometheus import remove, settings, workload
from test_reevaluate_policies import Grid, follower, metric

from devtools.sandbox import Sandbox
from webhook.model.vocabulary import parse_time

pytestmark = pytest.mark.timeout(300)

karmada = test_schedulers.karmada  # the real Karmada (module fixture)

INTERVAL = 2.0


def ledger(kube: Kube, configmap: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(meta.json, totals.json) of the accounting ConfigMap (empty before the first save)."""
    found = kube.run("get", "configmap", configmap, "-n", "default", "-o", "json")
    if found.returncode != 0:
        return {}, {}
    data = json.loads(found.stdout).get("data") or {}
    return json.loads(data.get("meta.json") or "{}"), json.loads(data.get("totals.json") or "{}")


def totals_of(totals: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The object's one signal/method entry (None before it is accounted)."""
    entry = totals.get(key)
    if not entry or not entry.get("totals"):
        return None
    (only,) = entry["totals"].values()
    return only  # type: ignore[no-any-return]


def at(meta: dict[str, Any], field: str) -> datetime:
    return parse_time(str(meta[field]))


def saved_again(kube: Kube, configmap: str, count: int, timeout: float = 30.0) -> None:
    """Until the leader has saved the ledger ``count`` more times (its ``last`` moved):
    passes, not seconds (a busy machine runs fewer of them in a second)."""
    seen = [at(ledger(kube, configmap)[0], "last")]
    deadline = time.monotonic() + timeout
    while len(seen) <= count:
        assert time.monotonic() < deadline, f"{count} more saves not seen in {timeout:g} s: {seen}"
        time.sleep(0.2)
        last = at(ledger(kube, configmap)[0], "last")
        if last > seen[-1]:
            seen.append(last)


def test_a_new_leader_resumes_the_totals_after_the_leader_is_killed(
    karmada: Sandbox, kube: Kube, tmp_path: Path
) -> None:
    namespace, name = workload(kube)
    key = f"PropagationPolicy/{namespace}/{name}"
    extra = settings(accounting={"interval_seconds": INTERVAL, "configmap": unique("totals")})
    configmap = extra["accounting"]["configmap"]
    with Grid() as grid, follower(karmada, tmp_path, grid, "none", extra) as one:
        lease = one.name
        other = Replica(karmada, tmp_path, f"{lease}-b", tmp_path / "config.yaml", lease)
        replicas = {one.name: one, other.name: other}
        try:
            first = eventually(lambda: holder(kube, lease), 30.0, "a leader")
            eventually(
                lambda: (t := totals_of(ledger(kube, configmap)[1], key)) and t["hours"] > 0,
                30.0,
                "the first totals saved",
            )
            saved_again(kube, configmap, 3)  # a few more passes
            meta, before = ledger(kube, configmap)
            saved = totals_of(before, key)
            assert saved is not None
            replicas[first].process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            (second,) = set(replicas) - {first}
            eventually(lambda: holder(kube, lease) == second, 40.0, "the new leader")
            took_over = time.monotonic() - killed

            def resumed() -> tuple[dict[str, Any], dict[str, Any]] | None:
                now_meta, now_totals = ledger(kube, configmap)
                if not now_meta or at(now_meta, "last") <= at(meta, "last"):
                    return None
                got = totals_of(now_totals, key)
                return (now_meta, got) if got else None

            eventually(resumed, 30.0, "a pass of the new leader")
            saved_again(kube, configmap, 2)
            after_meta, latest = ledger(kube, configmap)
            after = totals_of(latest, key)
            assert after is not None
            # Resumed, not restarted: the totals only grow, from the same start.
            assert at(after_meta, "since") == at(meta, "since")
            assert after["grams"] > saved["grams"]
            assert after["counterfactual_grams"] > saved["counterfactual_grams"]
            assert after["kwh"] > saved["kwh"]
            # At most one interval lost: the hours accounted cover the time since the
            # object's first pass (the first pass of all only sets the clock).
            wall = (at(after_meta, "last") - at(after_meta, "since")).total_seconds()
            lost = wall - after["hours"] * 3600
            assert -0.01 <= lost <= INTERVAL, (wall, after["hours"] * 3600)  # nothing twice
            # The new leader's counters start from the persisted totals.
            exported = metric(
                replicas[second], "carbonshift_emissions_grams_total", namespace=namespace
            )  # the test's own namespace: its policy
            assert exported >= saved["grams"]
            events = [line for line in replicas[second].log.read_text().splitlines()
                      if "accounting_resumed" in line]  # fmt: skip
            assert events
            print(f"\nleader SIGKILLed: new leader after {took_over:.1f} s; accounted "
                  f"{after['hours'] * 3600:.1f} s of {wall:.1f} s (lost {max(lost, 0):.1f} s, "
                  f"interval {INTERVAL:g} s); emissions {saved['grams']:.4f} g -> "
                  f"{after['grams']:.4f} g")  # fmt: skip
        except BaseException:
            print(f"--- {other.name}\n" + "\n".join(other.log.read_text().splitlines()[-40:]))
            raise
        finally:
            other.stop()
            kube.run("delete", "configmap", configmap, "-n", "default", "--wait=false")
            remove(kube, namespace)
