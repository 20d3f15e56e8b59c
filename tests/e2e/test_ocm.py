"""Open Cluster Management places on carbonshift's scores: a real OCM hub
(``devtools.sandbox.ocm``: etcd, kube-apiserver with OCM's CRDs, OCM's placement controller
v1.2.1 built from its module, and ``carbonshift serve --kubeconfig`` as leader, scoring every
second, as its service account with the RBAC of ``manifests/base``) reading a local
Electricity Maps v3 server whose values the test changes.

Three ManagedClusters take their zones three ways (the ``carbonshift.io/zone`` label, the
cloud claims through the region table, the config). A ``Placement`` of one cluster ranked
``Exact``ly on the AddOn score ``carbon``/``intensity`` selects the greenest; a change inside
the hysteresis margin is not written; the grid flips and the PlacementDecision follows the
rewritten scores. With the leader Lease taken away no score is written, whatever the grid
does, until the Lease is free again.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from e2e_support import build_binaries, more_passes, unavailable
from test_fleet_labels import eventually
from test_reevaluate_policies import Grid

from devtools.sandbox import LOOPBACK, Layout, SandboxError
from devtools.sandbox.ocm import LEASE_NAMESPACE, OcmHub
from webhook.decision import ocm
from webhook.model.vocabulary import ZONE

APPS = "carbon-apps"
SET = "carbon"
SET_LABEL = "cluster.open-cluster-management.io/clusterset"
SCORES = "addonplacementscores.cluster.open-cluster-management.io"
DECISIONS = "placementdecisions.cluster.open-cluster-management.io"
CLUSTERS = {"ocm-se": "SE-SE3", "ocm-fr": "FR", "ocm-pl": "PL"}
"""ManagedCluster -> its grid zone: by label, by AWS claims (eu-west-3), by config."""
HUB = ("etcd", "kube-apiserver", "kubectl")
STEP = 1.0
"""ocm.interval_seconds and the feed's refresh: one pass a second."""


def managed_cluster(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": {SET_LABEL: SET, **labels}},
        "spec": {"hubAcceptsClient": True},
    }


def hub_objects() -> list[dict[str, Any]]:
    group = "cluster.open-cluster-management.io"
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                  for n in (APPS, *CLUSTERS)]  # fmt: skip
    placement = {
        "apiVersion": f"{group}/v1beta1",
        "kind": "Placement",
        "metadata": {"name": "greenest", "namespace": APPS},
        "spec": {
            "numberOfClusters": 1,
            "clusterSets": [SET],
            "prioritizerPolicy": {
                "mode": "Exact",
                "configurations": [{
                    "scoreCoordinate": {"type": "AddOn", "addOn": {
                        "resourceName": ocm.RESOURCE, "scoreName": ocm.INTENSITY_SCORE}},
                    "weight": 1,
                }],
            },
        },
    }  # fmt: skip
    return [
        *namespaces,
        managed_cluster("ocm-se", {ZONE: "SE-SE3"}),
        managed_cluster("ocm-fr", {}),
        managed_cluster("ocm-pl", {}),
        {"apiVersion": f"{group}/v1beta2", "kind": "ManagedClusterSet", "metadata": {"name": SET},
         "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}}},
        {"apiVersion": f"{group}/v1beta2", "kind": "ManagedClusterSetBinding",
         "metadata": {"name": SET, "namespace": APPS}, "spec": {"clusterSet": SET}},
        placement,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def grid() -> Iterator[Grid]:
    with Grid() as g:
        g.ahead = {"PL": 500.0}  # only PL has a forecast: its forecast score differs
        yield g


@pytest.fixture(scope="module")
def hub(grid: Grid, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OcmHub]:
    state = tmp_path_factory.mktemp("ocm")
    layout = Layout.default(state)
    build_binaries(layout, state / "build.log", *HUB)
    build_binaries(layout, state / "build-ocm.log", "placement", script_name="build-ocm.sh")
    token = state / "token"
    token.write_text("e2e\n")
    config = {
        "providers": ["electricitymaps"],
        "electricitymaps": {"url": f"{grid.fake.url}/v3", "token_file": str(token)},
        "feed": {"refresh_seconds": STEP, "min_ttl_seconds": 1, "max_ttl_seconds": 1,
                 "forecasts": True},
        "hysteresis": {"margin": 0.1},
        "reevaluate": {"enabled": False, "forecast": "provider"},
        "ocm": {"interval_seconds": STEP},
    }  # fmt: skip
    clusters = {"ocm-pl": {"zone": "PL"}}
    box = OcmHub(layout, config=config, clusters=clusters, log=lambda _msg: None)
    try:
        box.up()
    except SandboxError as exc:
        unavailable(f"the OCM hub did not start: {exc}")
    try:
        box.apply(hub_objects())
        claims = {"status": {"clusterClaims": [
            {"name": ocm.PLATFORM_CLAIM, "value": "AWS"},
            {"name": ocm.REGION_CLAIM, "value": "eu-west-3"},
        ]}}  # fmt: skip
        box.kubectl("patch", "managedcluster", "ocm-fr", "--subresource=status",
                    "--type=merge", "-p", json.dumps(claims))  # fmt: skip
        yield box
    except BaseException:
        for name in ("carbonshift", "placement"):
            print(f"--- {name}\n" + "\n".join(box.layout.log(name).read_text().splitlines()[-40:]))
        raise
    finally:
        box.down()


def scores(hub: OcmHub) -> dict[str, tuple[dict[str, int], str]]:
    """ManagedCluster -> (its ``carbon`` scores, the object's resourceVersion)."""
    out = hub.kubectl("get", SCORES, "-A", "-o", "json").stdout
    found = {}
    for item in json.loads(out)["items"]:
        meta = item["metadata"]
        if meta["name"] == ocm.RESOURCE:
            values = {s["name"]: s["value"] for s in (item.get("status") or {}).get("scores") or []}
            found[meta["namespace"]] = (values, meta["resourceVersion"])
    return found


def decided(hub: OcmHub) -> list[str]:
    out = hub.kubectl("get", DECISIONS, "-n", APPS, "-o", "json").stdout
    return sorted(
        d["clusterName"]
        for item in json.loads(out)["items"]
        for d in (item.get("status") or {}).get("decisions") or []
    )


def intensities(hub: OcmHub) -> dict[str, int]:
    return {c: v[ocm.INTENSITY_SCORE] for c, (v, _) in scores(hub).items()}


def take_lease(hub: OcmHub) -> None:
    """Someone else holds carbonshift's Lease for an hour."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {"holderIdentity": "e2e", "leaseDurationSeconds": 3600, "acquireTime": now,
             "renewTime": now}  # fmt: skip
    hub.kubectl("patch", "lease", "carbonshift-leader", "-n", LEASE_NAMESPACE, "--type=merge",
                "-p", json.dumps({"spec": lease}))  # fmt: skip


def metrics(hub: OcmHub) -> dict[str, float]:
    """carbonshift's ``/metrics``: series (name and labels as exposed) -> value."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    url = f"https://{LOOPBACK}:{hub.ports['carbonshift']}/metrics"
    with urllib.request.urlopen(url, context=context, timeout=5) as answer:
        lines = answer.read().decode().splitlines()
    found = {}
    for line in lines:
        if line.startswith("carbonshift_"):
            series, _, value = line.rpartition(" ")
            found[series] = float(value)
    return found


def leading(hub: OcmHub) -> float:
    """carbonshift's ``carbonshift_leader`` gauge: 1 while it holds the Lease, else 0."""
    return metrics(hub).get("carbonshift_leader", 0.0)


def passes(hub: OcmHub) -> float:
    """Passes of the placement scorer that have ended."""
    return metrics(hub).get('carbonshift_controller_passes_total{controller="ocm_scores"}', 0.0)


def intensity(hub: OcmHub, zone: str) -> float | None:
    """What carbonshift's feed holds for ``zone`` now."""
    label = f'zone="{zone}"'
    held = metrics(hub).items()
    found = [v for k, v in held if k.startswith("carbonshift_intensity_gco2eq") and label in k]
    return found[0] if found else None


def refreshes(hub: OcmHub) -> float:
    """Requests the feed has sent to the grid's provider: one more per refresh."""
    return sum(v for k, v in metrics(hub).items()
               if k.startswith("carbonshift_upstream_requests_total{"))  # fmt: skip


def test_placement_follows_the_carbon_scores_while_carbonshift_leads(
    hub: OcmHub, grid: Grid
) -> None:
    started = time.monotonic()
    # FR 100, PL 800 (forecast 500), SE-SE3 25.
    eventually(lambda: len(scores(hub)) == 3, 60, "a carbon score in each cluster namespace")
    first = scores(hub)
    assert first["ocm-se"][0] == {ocm.INTENSITY_SCORE: 95, ocm.FORECAST_SCORE: 95}
    assert first["ocm-fr"][0] == {ocm.INTENSITY_SCORE: 80, ocm.FORECAST_SCORE: 80}
    assert first["ocm-pl"][0][ocm.INTENSITY_SCORE] == -60
    # PL's forecast (500 for the next 24 h) scores its 24 h mean: about 0.
    assert -5 <= first["ocm-pl"][0][ocm.FORECAST_SCORE] <= 5
    eventually(lambda: decided(hub) == ["ocm-se"], 30, "the placement on the greenest")
    print(f"first decision after {time.monotonic() - started:.1f} s")

    # Inside the margin (PL 800 -> 840: +5 %; its score would be -68): nothing written.
    grid.values["PL"] = 840.0
    eventually(lambda: intensity(hub, "PL") == 840, 30, "carbonshift reading PL at 840")
    more_passes(lambda: passes(hub), 3)
    assert scores(hub)["ocm-pl"] == first["ocm-pl"]

    # The grid flips: SE-SE3 dirty, FR the greenest. The scores and then the decision follow.
    grid.values.update({"SE-SE3": 900.0, "FR": 20.0})
    flipped = time.monotonic()
    eventually(lambda: intensities(hub) == {"ocm-se": -80, "ocm-fr": 96, "ocm-pl": -60}, 30,
               "the flipped scores")  # fmt: skip
    eventually(lambda: decided(hub) == ["ocm-fr"], 30, "the decision on the new greenest")
    print(f"decision moved {time.monotonic() - flipped:.1f} s after the grid flipped")

    # Not the leader: the grid flips back but no score is written, the decision stays.
    take_lease(hub)
    # The replica notices at its next renewal (on a busy machine, later): not leading, it
    # writes no score from then on.
    eventually(lambda: leading(hub) == 0, 30, "carbonshift no longer leading")
    held = scores(hub)
    grid.values.update({"SE-SE3": 25.0, "FR": 900.0})
    eventually(lambda: intensity(hub, "FR") == 900, 30, "carbonshift reading FR at 900")
    more_passes(lambda: refreshes(hub), 1)  # a pass under way when the Lease went has ended
    stopped = passes(hub)
    more_passes(lambda: refreshes(hub), 3)  # a leader would have written by now
    assert passes(hub) == stopped
    assert scores(hub) == held
    assert decided(hub) == ["ocm-fr"]

    # The Lease free again: carbonshift leads and writes the scores the grid has meanwhile.
    hub.kubectl("delete", "lease", "carbonshift-leader", "-n", LEASE_NAMESPACE)
    eventually(lambda: intensities(hub)["ocm-se"] == 95, 60, "scores written again")
    eventually(lambda: decided(hub) == ["ocm-se"], 30, "the decision back on SE-SE3")
    print(f"test body took {time.monotonic() - started:.1f} s")


def test_intensity_lists_the_managed_clusters(hub: OcmHub) -> None:
    command = [
        *hub.carbonshift_command, "intensity", "--clusters", "--json",
        f"--config={hub.layout.carbonshift_config}", f"--kubeconfig={hub.kubeconfig}",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    rows: dict[str, dict[str, Any]] = {r["cluster"]: r for r in json.loads(result.stdout)}
    assert {name: (r["zone"], r["zone_source"], r["ready"]) for name, r in rows.items()} == {
        "ocm/ocm-fr": ("FR", "region-table", False),  # no registration agent: not Available
        "ocm/ocm-pl": ("PL", "config", False),
        "ocm/ocm-se": ("SE-SE3", "label", False),
    }
