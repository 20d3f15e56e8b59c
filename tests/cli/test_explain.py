"""``carbonshift explain KIND/NAME`` against an in-process API server (:mod:`tests.kubeapi`),
through the real Kubernetes client: the live object, its decision record and its line,
carbonshift's Events about it and the fleet's Clusters, printed as where it is placed and
why, each cluster's intensity and room, what would change it next and when, and who owns
each field; errors on one line with the statuses docs/cli.md gives."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import kubeapi
from tests.support import NOW, reading
from webhook import testing
from webhook.cli import kubectl_plugin, main, parser
from webhook.cli.explain import kind_of, target
from webhook.cli.explained import explain, render
from webhook.cli.preview import preview
from webhook.kinds import Context
from webhook.model.config import parse
from webhook.model.errors import UsageError
from webhook.model.vocabulary import (
    DECISION,
    ENABLED,
    INTENSITY_CLASS,
    INTENSITY_VALUE,
    REASON,
    format_time,
)

ZONES = {"member-se": "SE-SE3", "member-fr": "FR", "member-pl": "PL"}
GRID = {"SE-SE3": 23.4, "FR": 31.0, "PL": 565.0}
SETTINGS = {
    "zone": "PL",
    "clusters": {n: {"zone": z} for n, z in ZONES.items()},
    "hysteresis": {"margin": 0.1, "dwell_hours": 6},
    "reevaluate": {"min_interval_seconds": 1800, "forecast": "none"},
}
CONFIG = parse(SETTINGS)


def _ctx() -> Context:
    return Context(config=CONFIG, table={z: reading(z, v) for z, v in GRID.items()}, now=NOW)


def _admitted(obj: Mapping[str, Any]) -> dict[str, Any]:
    [done] = preview([obj], _ctx())
    stored = copy.deepcopy(dict(done.stored))
    assert DECISION in stored["metadata"]["annotations"], done.outcome
    return stored


def _policy(**annotations: str) -> dict[str, Any]:
    return _admitted(
        testing.propagation_policy(
            "web", namespace="shop", clusters=list(ZONES), annotations=annotations
        )
    )


def _fleet(kube: kubeapi.KubeApi) -> None:
    kube.add({"apiVersion": "v1", "kind": "Namespace",
              "metadata": {"name": "shop", "labels": {ENABLED: "true"}}})  # fmt: skip
    for name, zone in ZONES.items():
        kube.add(
            testing.cluster(
                name,
                zone=zone,
                labels={INTENSITY_CLASS: "high" if zone == "PL" else "low"},
                annotations={INTENSITY_VALUE: str(GRID[zone] + 1)},
                summary=testing.resource_summary(4, used=1.5),
            )
        )


def _event(obj: Mapping[str, Any], reason: str, note: str, at: str) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{reason.lower()}",
                     "namespace": meta.get("namespace") or "default"},
        "eventTime": at,
        "reason": reason,
        "type": "Normal",
        "note": note,
        "action": "Rebalance",
        "reportingController": "carbonshift.io/carbonshift",
        "reportingInstance": "carbonshift-0",
        "regarding": {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                      "name": meta["name"], "namespace": meta.get("namespace")},
    }  # fmt: skip


def _kubeconfig(kube: kubeapi.KubeApi, tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": kube.api.configuration.host}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


def _config(tmp_path: Path) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(SETTINGS))
    return str(path)


async def _explain(
    capsys: pytest.CaptureFixture[str], *argv: str, plugin: bool = False
) -> tuple[int, str, str]:
    """The command run as the console script runs it (its own event loop, in a thread,
    while the test's loop serves the API)."""
    if plugin:
        import sys  # noqa: PLC0415

        def run() -> int:
            saved = sys.argv
            sys.argv = ["kubectl-carbonshift", *argv]
            try:
                return kubectl_plugin()
            finally:
                sys.argv = saved

        code = await asyncio.to_thread(run)
    else:
        code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def test_a_policy_is_explained_from_the_live_object_its_events_and_the_fleet(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    policy = _policy(**{"carbonshift.io/max-intensity": "500"})
    async with kubeapi.serve() as kube:
        _fleet(kube)
        stored = kube.add(policy)
        kube.add(_event(stored, "CarbonRebalanced", "expected intensity 31 -> 23 gCO2eq/kWh",
                        "2026-01-01T12:30:00.000000Z"), "events")  # fmt: skip
        kube.add(_event(stored, "SomethingElse", "not carbonshift's", "2026-01-01T12:31:00Z"),
                 "events")  # fmt: skip
        args = ("explain", "pp/web", "-n", "shop", "--kubeconfig", _kubeconfig(kube, tmp_path),
                "--config", _config(tmp_path))  # fmt: skip
        code, out, err = await _explain(capsys, *args)
        assert (code, err) == (0, "")
        code, shown, err = await _explain(capsys, *args, "-o", "json")
        assert (code, err) == (0, "")
        code, plugged, err = await _explain(capsys, *args, plugin=True)
        assert (code, err) == (0, "")

    def timeless(text: str) -> list[str]:  # the earliest switch is now, on the wall clock
        return [x for x in text.splitlines() if "earliest switch" not in x]

    assert timeless(plugged) == timeless(out)
    assert out.startswith("PropagationPolicy shop/web\n")
    reason = stored["metadata"]["annotations"][REASON]
    assert f"  why: {reason}\n" in out
    assert reason.startswith("ordered fill: member-se (23 g) first, then member-fr (31 g);")
    assert "member-pl excluded: 565 g above max-intensity 500" in reason
    lines = out.splitlines()
    se = next(x for x in lines if x.strip().startswith("member-se"))
    assert se.split() == ["member-se", "SE-SE3", "23", "g", "tier", "0", "24", "g", "low",
                          "2.5", "of", "4", "cpu", "free"]  # fmt: skip
    pl = next(x for x in lines if x.strip().startswith("member-pl"))
    assert "excluded" in pl
    assert "CarbonRebalanced: expected intensity 31 -> 23 gCO2eq/kWh" in out
    assert "SomethingElse" not in out
    doc = json.loads(shown)
    assert doc["object"] == {"kind": "PropagationPolicy", "namespace": "shop", "name": "web"}
    assert [c["name"] for c in doc["clusters"]] == ["member-se", "member-fr", "member-pl"]
    fields = {f["field"]: f["owner"] for f in doc["ownership"]}
    assert fields == {
        "spec.placement.clusterAffinities": "carbonshift",
        "spec.placement.clusterAffinity": "carbonshift",
        "spec.placement.replicaScheduling": "carbonshift",
    }
    # the dwell and the minimum interval have long passed on the wall clock
    assert any(n.startswith("dwell: passed at ") for n in doc["next"])
    assert any("more than 10% lower (hysteresis.margin)" in n for n in doc["next"])


def test_what_changes_it_next_and_who_owns_each_field() -> None:
    policy = _policy()
    policy["metadata"]["creationTimestamp"] = format_time(NOW)
    edited = copy.deepcopy(policy)
    edited["spec"]["placement"]["replicaScheduling"] = {"replicaSchedulingType": "Duplicated"}
    row = kind_of("pp")
    doc = explain(edited, row, events=[], clusters=[], nodes=[], config=CONFIG,
                  now=NOW + timedelta(minutes=10))  # fmt: skip
    assert (
        "min interval: no rewrite before 2026-01-01T12:30:00Z"
        " (reevaluate.min_interval_seconds 1800)"
    ) in doc["next"]
    assert (
        "dwell: the placement in force since 2026-01-01T12:00:00Z stays until "
        "2026-01-01T18:00:00Z (hysteresis.dwell_hours 6)"
    ) in doc["next"]
    assert "earliest switch: 2026-01-01T18:00:00Z, at a leader pass (every 300 s)" in doc["next"]
    owners = {f["field"]: (f["owner"], f["note"]) for f in doc["ownership"]}
    assert owners["spec.placement.replicaScheduling"][0] == "user"
    assert owners["spec.placement.clusterAffinities"][0] == "carbonshift"
    text = render(doc)
    assert "spec.placement.replicaScheduling: user (edited since carbonshift wrote it" in text
    assert "  events: none\n" in text


def test_a_paused_nodepool_says_its_weight_and_when_the_pause_ends() -> None:
    pool = _admitted(testing.nodepool("np", enabled=True, strategy="weight,pause",
                                      limits={"cpu": "64"}))  # fmt: skip
    pool["metadata"]["annotations"]["carbonshift.io/max-pause"] = "6h"
    doc = explain(pool, kind_of("nodepools.karpenter.sh"), events=[], clusters=[], nodes=[],
                  config=CONFIG, now=NOW + timedelta(hours=1))  # fmt: skip
    assert doc["grid"] == {"zone": "PL", "g": 565.0, "class": "high"}
    assert "spec.weight 44" in doc["why"]
    assert any(
        "the pause ends at the forecast's cleaner hour, at the latest at 2026-01-01T18:00:00Z"
        in n for n in doc["next"]
    )  # fmt: skip
    assert "spec.weight follows the local grid's greenness at every leader pass" in doc["next"]
    owners = {f["field"]: f["owner"] for f in doc["ownership"]}
    assert owners["spec.weight"] == owners["spec.limits"] == "carbonshift"
    assert "local grid: PL 565 g (high)" in render(doc)


def test_a_namespace_offloading_reads_its_peers_from_the_virtual_nodes() -> None:
    nso = {
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading", "namespace": "shop"},
        "spec": {"podOffloadingStrategy": "Remote"},
    }  # fmt: skip
    [done] = preview([nso], _ctx())
    stored = dict(done.stored)
    assert "offloads to" in stored["metadata"]["annotations"][REASON]
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "liqo-member-se",
                         "labels": {"liqo.io/remote-cluster-id": "member-se",
                                    INTENSITY_CLASS: "low"},
                         "annotations": {INTENSITY_VALUE: "20.5"}}}  # fmt: skip
    doc = explain(stored, kind_of("NSO"), events=[], clusters=[], nodes=[node], config=CONFIG,
                  now=NOW)  # fmt: skip
    se = next(c for c in doc["clusters"] if c["name"] == "member-se")
    assert se["now"] == {"g": 20.5, "class": "low", "room": None}
    assert se["weight"] == 1


def test_kinds_are_read_as_kubectl_reads_them() -> None:
    assert kind_of("PropagationPolicies").kind == "PropagationPolicy"
    assert kind_of("cpp").kind == "ClusterPropagationPolicy"
    assert kind_of("clusterpropagationpolicy.policy.karmada.io").kind == "ClusterPropagationPolicy"
    assert kind_of("nodepool").kind == "NodePool"
    assert target("pp/web", None)[1:] == ("web", "default")
    assert target("nodepool/default", None)[1:] == ("default", None)
    with pytest.raises(UsageError, match="did you mean propagationpolicy"):
        kind_of("propagationpolicyy")
    with pytest.raises(UsageError, match="cluster-scoped: drop -n shop"):
        target("cpp/web", "shop")
    with pytest.raises(UsageError, match="expected KIND/NAME"):
        target("web", None)


@pytest.mark.parametrize(
    ("argv", "status", "says"),
    [
        (["explain", "web"], 2, "carbonshift: explain: expected KIND/NAME such as pp/web"),
        (
            ["explain", "deployment/web"],
            2,
            "carbonshift: explain: kind 'deployment' is not handled",
        ),
        (["explain", "pp/web", "--kubeconfig", "/nonexistent"], 2, "--kubeconfig: cannot load"),
    ],
)
def test_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], status: int, says: str
) -> None:
    assert main(argv) == status
    out, err = capsys.readouterr()
    assert out == ""
    assert says in err
    assert err.count("\n") == 1


async def test_an_object_carbonshift_does_not_manage_or_an_unreachable_server_is_status_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    async with kubeapi.serve() as kube:
        _fleet(kube)
        kube.add(testing.propagation_policy("plain", namespace="shop"))
        config = _kubeconfig(kube, tmp_path)
        code, out, err = await _explain(capsys, "explain", "pp/plain", "-n", "shop",
                                        "--kubeconfig", config)  # fmt: skip
    assert (code, out) == (1, "")
    assert err == (
        "carbonshift explain: PropagationPolicy shop/plain: not found among the objects "
        "carbonshift manages (none of that name carries carbonshift.io/decision)\n"
    )
    code, out, err = await _explain(capsys, "explain", "pp/web", "--kubeconfig", config)
    assert (code, out) == (1, "")
    assert err.startswith("carbonshift explain: cannot reach the API server http://127.0.0.1:")
    assert err.count("\n") == 1


def test_help_is_complete() -> None:
    sub = parser()._subparsers._group_actions[0].choices["explain"]  # type: ignore[union-attr,index]
    text = sub.format_help()
    for flag in ("KIND/NAME", "-n NS", "--kubeconfig", "--config", "-o {text,json}"):
        assert flag in text
    assert "kubectl carbonshift explain" in text
    plugin = parser("kubectl carbonshift").format_usage()
    assert plugin.startswith("usage: kubectl carbonshift ")
