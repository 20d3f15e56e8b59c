"""Helpers for the end-to-end tests: kubectl wrappers and the objects they apply."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
import yaml

from devtools.sandbox import Layout, Sandbox
from webhook.decision.karmada.capacity import room
from webhook.decision.karmada.terms import fill_tiers

T = TypeVar("T")

DEMO = ("member-se", "member-fr", "member-pl")  # greenest first
DECISION = "carbonshift.io/decision"
ENABLED = "carbonshift.io/enabled"
WEIGHTED = {"carbonshift.io/strategy": "weighted"}
"""Static carbon weights instead of the default ordered fill."""
CLUSTERS = "clusters.cluster.karmada.io"
BINDINGS = "resourcebindings.work.karmada.io"


def unavailable(reason: str) -> NoReturn:
    """Fail under CI (a component that cannot be built or started is a failure), skip
    elsewhere."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def build_binaries(
    layout: Layout, log: Path, *names: str, script_name: str = "build-binaries.sh"
) -> None:
    """``hack/build-binaries.sh [NAME ...]`` (or another build script of ``hack/`` taking
    names: ``build-ocm.sh``; cached by version stamps: a warm run builds nothing), its
    output in ``log``; :func:`unavailable` when it cannot run or fails."""
    script = layout.root / "hack" / script_name
    built = all((layout.bin / name).is_file() for name in names or ("kube-apiserver",))
    if shutil.which("go") is None and not built:
        unavailable("Go is not installed, so the control-plane binaries cannot be built")
    with log.open("w") as out:
        result = subprocess.run(
            [str(script), *names], stdout=out, stderr=subprocess.STDOUT, check=False, timeout=3600
        )
    if result.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        unavailable(f"hack/{script_name} failed ({result.returncode}):\n{tail}")


class Kube:
    """Thin helpers over kubectl for the tests."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.sandbox.kubectl(*args, stdin=stdin, check=False)

    def ok(self, *args: str, stdin: str | None = None) -> str:
        result = self.run(*args, stdin=stdin)
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result.stdout

    def apply(self, obj: Mapping[str, Any], *extra: str) -> str:
        return self.ok("apply", *extra, "-f", "-", stdin=yaml.safe_dump(dict(obj)))

    def apply_json(self, obj: Mapping[str, Any], *extra: str) -> dict[str, Any]:
        """Apply and return the object the API server answered with."""
        out = self.ok("apply", *extra, "-o", "json", "-f", "-", stdin=yaml.safe_dump(dict(obj)))
        result: dict[str, Any] = json.loads(out)
        return result

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        args = ["get", resource, name, "-o", "json"]
        if namespace:
            args += ["-n", namespace]
        result: dict[str, Any] = json.loads(self.ok(*args))
        return result

    def on(self, member: str) -> MemberKube:
        """The same helpers against a member cluster's API server (its kubeconfig context)."""
        return MemberKube(self.sandbox, member)

    def namespace(self, *, enabled: bool) -> str:
        name = f"e2e-{uuid.uuid4().hex[:8]}"
        labels = {ENABLED: "true"} if enabled else {}
        self.apply({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels}})  # fmt: skip
        return name


class MemberKube(Kube):
    """:class:`Kube` against one member cluster."""

    def __init__(self, sandbox: Sandbox, member: str) -> None:
        super().__init__(sandbox)
        self.member = member

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return super().run(f"--context={self.member}", *args, stdin=stdin)

    def find(self, resource: str, name: str, namespace: str) -> dict[str, Any] | None:
        """The object, or None when the member does not have it."""
        result = self.run("get", resource, name, "-n", namespace, "-o", "json")
        if result.returncode != 0:
            assert "NotFound" in result.stderr, result.stderr
            return None
        found: dict[str, Any] = json.loads(result.stdout)
        return found


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def propagation_policy(
    name: str,
    namespace: str,
    *,
    labels: Mapping[str, str] | None = None,
    placement: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A PropagationPolicy for Deployment ``name``; Divided over any cluster by default."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": meta,
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "placement": dict(
                placement or {"replicaScheduling": {"replicaSchedulingType": "Divided"}}
            ),
        },
    }


def deployment(
    name: str,
    namespace: str,
    *,
    replicas: int,
    cpu: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Deployment of ``replicas`` pause containers, each asking for ``cpu`` (if any)."""
    labels = {"app": name}
    container: dict[str, Any] = {"name": "app", "image": "registry.k8s.io/pause:3.10"}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": dict(annotations or {})},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }  # fmt: skip


def cluster_propagation_policy(name: str, *, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterPropagationPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                   "labelSelector": {"matchLabels": {"e2e": name}}}],
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}},
        },
    }  # fmt: skip


def nodepool(name: str, strategy: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": name,
            "labels": {ENABLED: "true"},
            "annotations": {"carbonshift.io/strategy": strategy},
        },
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                 "name": "default"},
                "requirements": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In",
                     "values": ["eu-north-1a", "eu-west-3a", "europe-central2-a"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In",
                     "values": ["on-demand"]},
                ],
            }},
            "limits": {"cpu": "100"},
        },
    }  # fmt: skip


def static_weights(policy: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``staticWeightList`` of a (Cluster)PropagationPolicy (empty when none)."""
    scheduling = policy["spec"]["placement"].get("replicaScheduling", {})
    entries: list[dict[str, Any]] = scheduling.get("weightPreference", {}).get(
        "staticWeightList", []
    )
    return entries


def weights(policy: Mapping[str, Any]) -> dict[str, int]:
    """Cluster name -> static weight, for the entries that name clusters."""
    out: dict[str, int] = {}
    for entry in static_weights(policy):
        for cluster in entry["targetCluster"].get("clusterNames", []):
            out[cluster] = entry["weight"]
    return out


def carbon_order(policy: Mapping[str, Any]) -> list[str]:
    """The clusters carbonshift placed, greenest first: the ordered fill's tiers, or the
    static weights from heaviest (empty when carbonshift wrote neither)."""
    tiers = fill_tiers(policy["spec"]["placement"])
    if tiers is not None:
        return [name for tier in tiers for name in tier]
    got = weights(policy)
    return sorted(got, key=lambda c: -got[c])


def annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def carbonshift_marks(obj: Mapping[str, Any]) -> dict[str, str]:
    """Every carbonshift.io/ annotation on the object."""
    return {k: v for k, v in annotations(obj).items() if k.startswith("carbonshift.io/")}


def eventually(probe: Callable[[], T | None], what: str, timeout: float = 90.0) -> T:
    """Poll ``probe`` until it returns something other than None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value is not None:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout:g}s waiting for {what}")


PASSES = 'carbonshift_controller_passes_total{controller="rebalance"}'
"""A leading replica's runs of the keepers after the re-evaluation (the rebalancer and the
carbon price keeper; every ``reevaluate.interval_seconds``, as each managed object is
looked at again, and once a change is decided): what :func:`more_passes` reads from its
/metrics."""


def more_passes(passes: Callable[[], float | None], count: int, timeout: float = 60.0) -> None:
    """Until ``passes()`` (the leader's :data:`PASSES`) has grown by ``count``: what a test
    waits for before asserting that the passes changed nothing. Passes, not seconds: a
    busy machine runs fewer of them in a second, and a sleep would then prove less."""
    start = passes() or 0.0
    deadline = time.monotonic() + timeout
    while (now := passes() or 0.0) < start + count:
        assert time.monotonic() < deadline, (
            f"{count} more passes not run in {timeout:g} s: {start:g} -> {now:g}"
        )
        time.sleep(0.2)


def rooms(kube: Kube, cpu: str = "1") -> dict[str, int]:
    """Replicas of ``cpu`` each demo member can still take, as Karmada's general estimator
    sees it."""
    listed = json.loads(kube.ok("get", CLUSTERS, "-o", "json"))["items"]
    return {
        c["metadata"]["name"]: room((c.get("status") or {}).get("resourceSummary"), {"cpu": cpu})
        or 0
        for c in listed
        if c["metadata"]["name"] in DEMO
    }


def wait_rooms(
    kube: Kube, want: Mapping[str, int], *, at_least: bool = False, timeout: float = 120.0
) -> None:
    """Until each member in ``want`` has exactly (``at_least``: at least) that many one-CPU
    replicas of room."""
    last: dict[str, int] = {}

    def reached() -> bool | None:
        last.update(rooms(kube))
        fits = (last.get(m, 0) >= n if at_least else last.get(m) == n for m, n in want.items())
        return True if all(fits) else None

    try:
        eventually(reached, f"room {dict(want)}", timeout=timeout)
    except BaseException:
        print(f"room now {last}")
        raise


def no_binding_terminating(kube: Kube) -> None:
    """Until no ResourceBinding is being deleted: karmada-scheduler keeps counting a
    binding's assumed replicas (``SchedulingOvercommitProtection``) until the binding is
    gone, even once its member Pods are and the summaries show the room again."""
    left: list[str] = []

    def gone() -> bool | None:
        listed = json.loads(kube.ok("get", BINDINGS, "-A", "-o", "json"))["items"]
        left[:] = [
            f"{b['metadata']['namespace']}/{b['metadata']['name']}"
            for b in listed
            if b["metadata"].get("deletionTimestamp")
        ]
        return True if not left else None

    try:
        eventually(gone, "no ResourceBinding being deleted", timeout=120.0)
    except BaseException:
        print(f"being deleted: {left}")
        raise


def print_bindings(kube: Kube) -> None:
    """Every ResourceBinding's placement and the members' room, for a failure's report."""
    listed = json.loads(kube.ok("get", BINDINGS, "-A", "-o", "json"))["items"]
    for b in listed:
        meta = b["metadata"]
        print(meta["namespace"], meta["name"], meta.get("deletionTimestamp"),
              b["spec"].get("clusters"))  # fmt: skip
    print(f"room now {rooms(kube)}")
