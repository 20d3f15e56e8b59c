"""The Karmada fleet on every Karmada release the checkout pins: ``hack/tools``' (v1.18.2, the
session ``sandbox`` with carbonshift's scheduler plugin) and each ``hack/karmada-*/``'s
(v1.16.0: its own fleet of the same three members, with that release's CRDs and its stock
karmada-controller-manager, karmada-webhook and karmada-scheduler; etcd, kube-apiserver and
the members are the pinned ones).

v1.16.0's PropagationPolicy has no ``overflowAffinities``: the API server prunes them, so
carbonshift's ordered fill (one term, the greenest cluster inline, the others as overflow
tiers) cannot be stored there. On such an API carbonshift writes ordered ``clusterAffinities``
failover groups instead, each divided by ``dynamicWeight: AvailableReplicas``: term 0 the
greenest cluster, term 1 the greenest two, and so on. Karmada's scheduler tries the terms in
order and keeps the first whose clusters have room for every replica.

Ten one-CPU replicas on members that hold 4 (member-se), 8 (member-fr) and 64 (member-pl):

- where ``overflowAffinities`` are served (v1.18.2): member-se filled to its room, the rest
  to member-fr: 4 / 6 / 0;
- where they are not (v1.16.0): term 0 (member-se, room 4) cannot hold 10; term 1 (member-se
  and member-fr, room 4 + 8 = 12) can, and Karmada divides the 10 by the members' room
  (Webster over 4 : 8, i.e. 3.33 : 6.67): 3 / 7 / 0. Greenest first as far as that release
  allows: every replica placed, none on the dirtiest member while the greener two have room.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml
from e2e_support import (
    BINDINGS,
    DEMO,
    Kube,
    build_binaries,
    deployment,
    no_binding_terminating,
    propagation_policy,
    unavailable,
    unique,
    wait_rooms,
)
from test_capacity import CPU, FILL, FULL, settles

from devtools.sandbox import Layout, Sandbox, SandboxError
from devtools.sandbox.layout import KarmadaRelease, karmada_releases
from webhook.decision.karmada.terms import fill_tiers

pytestmark = pytest.mark.timeout(600)

GREENEST, MIDDLE, DIRTIEST = DEMO
RELEASES = karmada_releases()
"""Every Karmada release the checkout pins, by version (the pinned one first)."""
REPLICAS = 10
POLICIES_CRD = "propagationpolicies.policy.karmada.io"
CERT_RELOAD_SECONDS = 1.0

FILLED = {GREENEST: 4, MIDDLE: 6}
"""Ordered fill (``overflowAffinities``): member-se to its room, the rest to member-fr."""
FAILOVER = {GREENEST: 3, MIDDLE: 7}
"""Failover groups: the greenest two hold 4 + 8 = 12, Karmada divides 10 by 4 : 8."""


@pytest.fixture(scope="module", params=list(RELEASES))
def fleet(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sandbox]:
    """The fleet on one release: the session's for the pinned one, else a fleet of its own
    (its binaries built first: under ``CI=true`` a release that cannot be built or started
    fails the tests)."""
    release: KarmadaRelease = RELEASES[request.param]
    if release.pinned:
        yield request.getfixturevalue("sandbox")
        return
    state = tmp_path_factory.mktemp(f"karmada-{release.version}")
    layout = Layout.default(state)
    build_binaries(layout, state / "build.log", *release.binaries)
    box = Sandbox(
        layout,
        cert_reload_seconds=CERT_RELOAD_SECONDS,
        log=lambda _msg: None,
        quiet=True,
        karmada=release.version,
    )
    try:
        box.up()
    except SandboxError as exc:
        unavailable(f"the Karmada {release.version} sandbox did not start: {exc}")
    try:
        yield box
    finally:
        box.down()


@pytest.fixture
def kube(fleet: Sandbox) -> Kube:
    return Kube(fleet)


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """An opted-in namespace, on members that run nothing asking for CPU (deleted after)."""
    no_binding_terminating(kube)
    wait_rooms(kube, FULL)
    name = kube.namespace(enabled=True)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false")


def serves_overflow(kube: Kube) -> bool:
    """Whether the API server's PropagationPolicy has ``overflowAffinities``."""
    crd = kube.get("customresourcedefinitions", POLICIES_CRD)
    return "overflowAffinities" in json.dumps(crd["spec"]["versions"])


def component_version(fleet: Sandbox, component: str) -> str | None:
    """The ``GitVersion`` a Karmada component logged when it started."""
    for line in fleet.layout.log(component).read_text(errors="replace").splitlines():
        if f"{component} version:" in line and 'GitVersion:"' in line:
            return line.split('GitVersion:"', 1)[1].split('"', 1)[0]
    return None


def binding(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = kube.get(BINDINGS, f"{name}-deployment", namespace)
    return found


def cluster_groups(placement: Mapping[str, Any]) -> list[set[str]]:
    """The clusters each ``clusterAffinities`` term names, its overflow tiers included
    (empty for a term that names none)."""
    groups = []
    for term in placement.get("clusterAffinities") or []:
        names = set(term.get("clusterNames") or [])
        for tier in term.get("overflowAffinities") or []:
            names |= set(tier.get("clusterNames") or [])
        groups.append(names)
    return groups


def test_the_control_plane_runs_the_release(fleet: Sandbox, kube: Kube) -> None:
    """The Karmada components that started are the release's, and the API server serves its
    CRDs (the pinned scheduler is built from karmada-plugin/ and logs no release)."""
    release = fleet.karmada
    components = ["karmada-controller-manager", "karmada-webhook"]
    if not release.plugin:
        components.append("karmada-scheduler")
    seen = {c: component_version(fleet, c) for c in components}
    print(f"Karmada {release.version}: {seen}")
    assert seen == dict.fromkeys(components, release.version)
    crd = fleet.layout.crd(release.crds, "policy.karmada.io_propagationpolicies.yaml")
    assert serves_overflow(kube) == ("overflowAffinities" in crd.read_text())
    clusters = json.loads(kube.ok("get", "clusters.cluster.karmada.io", "-o", "json"))["items"]
    ready = {
        c["metadata"]["name"]: any(
            k["type"] == "Ready" and k["status"] == "True"
            for k in (c.get("status") or {}).get("conditions") or []
        )
        for c in clusters
    }
    assert ready == dict.fromkeys(DEMO, True), ready


def test_a_plain_divided_policy_places_every_replica_greenest_first(
    fleet: Sandbox, kube: Kube, namespace: str
) -> None:
    name = unique("release")
    overflow = serves_overflow(kube)
    policy = kube.apply_json(propagation_policy(name, namespace))
    kube.apply(deployment(name, namespace, replicas=REPLICAS, cpu=CPU))
    placement = policy["spec"]["placement"]
    print(f"Karmada {fleet.karmada.version}, overflowAffinities served: {overflow}")
    print(f"stored placement: {json.dumps(placement)}")
    assert placement.get("replicaScheduling") == FILL, placement
    terms = placement.get("clusterAffinities") or []
    if overflow:
        assert fill_tiers(placement) == [[GREENEST], [MIDDLE], [DIRTIEST]], placement
        want, chosen = FILLED, terms[0]["affinityName"]
    else:
        # Ordered failover groups, each greener group first and inside the next (terms
        # after the one with every member, e.g. one open to clusters carbonshift does not
        # know, are never reached while the members have room).
        assert cluster_groups(placement)[:3] == [
            {GREENEST}, {GREENEST, MIDDLE}, {GREENEST, MIDDLE, DIRTIEST}
        ], placement  # fmt: skip
        assert not any("overflowAffinities" in t for t in terms), placement
        want, chosen = FAILOVER, terms[1]["affinityName"]
    assert sum(want.values()) == REPLICAS
    settles(kube, namespace, name, want)
    assert kube.on(DIRTIEST).find("deployment", name, namespace) is None
    observed = binding(kube, namespace, name).get("status", {})
    print(f"binding status: {json.dumps(observed)}")
    assert observed.get("schedulerObservingAffinityName") == chosen, observed


def test_the_users_file_applies_again_on_the_release(kube: Kube, namespace: str) -> None:
    """The issue's own file (a Divided policy naming the three members, which carbonshift
    replaces with its ordered fill) applied again, client-side and as Flux applies it,
    stores nothing new and shows no diff, on every release's validating webhook."""
    for how in ((), ("--server-side", "--force-conflicts", "--field-manager=kustomize-controller")):
        placement = {
            "clusterAffinity": {"clusterNames": list(DEMO)},
            "replicaScheduling": {"replicaSchedulingType": "Divided"},
        }
        file = yaml.safe_dump(propagation_policy(unique("file"), namespace, placement=placement))
        kube.ok("apply", *how, "-f", "-", stdin=file)
        name = yaml.safe_load(file)["metadata"]["name"]
        first = kube.get(POLICIES_CRD, name, namespace)
        assert "clusterAffinity" not in first["spec"]["placement"], first
        for _ in range(2):
            kube.ok("apply", *how, "-f", "-", stdin=file)
            again = kube.get(POLICIES_CRD, name, namespace)
            assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        shown = kube.run("diff", *how, "-f", "-", stdin=file)
        assert shown.returncode == 0, f"kubectl diff {how}: {shown.stdout}{shown.stderr}"
