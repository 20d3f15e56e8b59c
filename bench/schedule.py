"""karmada-scheduler at scale, with and without the CarbonAware plugin.

A sandbox control plane (``devtools.sandbox``: kube-apiserver with the Karmada CRDs,
carbonshift with its fleet inventory, and the karmada-scheduler built with the
carbonshift plugin) gets 1,000 extra ``Cluster`` objects spread over the cloud regions
carbonshift knows (Ready, with API enablements and a resource summary, as
karmada-controller-manager would report them; the controller-manager is stopped so it
does not dial clusters that do not exist). Then, once with the plugin and once with
``--plugins=*,-CarbonAware`` (the same binary, the same run, the same machine), 500
ResourceBindings (their Deployments created beforehand) are created at once and the time
until each has ``spec.clusters`` is taken from a watch. Every binding is Divided by
available replicas over the clusters a ``spreadConstraints`` picks (3 by score), so every
scheduling cycle filters and scores all 1,003 clusters and asks carbonshift for their
scores.

Target: throughput with the plugin at least 90 % of the scheduler without it; p50 and
p99 of the time from creation to placement both ways.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import RESULTS, machine, write_table
from devtools.sandbox import Layout, Sandbox
from webhook.kube import client as kube_client
from webhook.runtime.tasks import closed

CLUSTERS = 1_000
BINDINGS = 500
TARGET_RATIO = 0.9
GROUP, VERSION = "work.karmada.io", "v1alpha2"
PLACES = [
    ("aws", "eu-north-1"), ("aws", "eu-west-3"), ("aws", "us-east-1"), ("aws", "eu-central-1"),
    ("aws", "ap-southeast-2"), ("gcp", "europe-west1"), ("gcp", "us-central1"),
    ("gcp", "asia-northeast1"), ("azure", "westeurope"), ("azure", "eastus"),
]  # fmt: skip
WITHOUT_PLUGIN = "--plugins=*,-CarbonAware"
POLICY_ID = "propagationpolicy.karmada.io/permanent-id"
POLICY = "6f1d3c2e-0b7a-4c1e-9a55-5c0de0bench"


def cluster(i: int) -> dict[str, Any]:
    provider, region = PLACES[i % len(PLACES)]
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": f"scale-{i:04d}", "labels": {"bench": "schedule"}},
        "spec": {"syncMode": "Push", "provider": provider, "region": region},
    }


STATUS = {
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "ClusterReady",
            "message": "bench",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ],
    "apiEnablements": [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}
    ],
    "resourceSummary": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"}},
}


def binding(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceBinding",
        # The scheduler takes only bindings a policy made (its permanent-id label).
        "metadata": {"name": name, "namespace": namespace, "labels": {POLICY_ID: POLICY}},
        "spec": {
            "resource": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "namespace": namespace,
                "name": name,
            },
            "replicas": 6,
            "schedulerName": "default-scheduler",  # what karmada-webhook defaults
            "placement": {
                "clusterAffinity": {"labelSelector": {"matchLabels": {"bench": "schedule"}}},
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 3, "minGroups": 1}],
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"dynamicWeight": "AvailableReplicas"},
                },
            },
        },
    }


def deployment(name: str, namespace: str) -> dict[str, Any]:
    labels = {"app": name}
    container = {"name": "app", "image": "registry.k8s.io/pause:3.10"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


async def _gather(limit: int, jobs: Sequence[Any]) -> None:
    queue = list(jobs)

    async def worker() -> None:
        while queue:
            await queue.pop()

    await asyncio.gather(*(worker() for _ in range(limit)))


async def create_clusters(kubeconfig: Path, count: int) -> None:
    from kubernetes_asyncio import client  # noqa: PLC0415

    api = await kube_client.connect(kube_client.Settings(kubeconfig, "default", "bench"))
    objects = client.CustomObjectsApi(api)

    async def one(i: int) -> None:
        body = cluster(i)
        group, version, plural = "cluster.karmada.io", "v1alpha1", "clusters"
        await objects.create_cluster_custom_object(group, version, plural, body)
        name = body["metadata"]["name"]
        status = [{"op": "add", "path": "/status", "value": STATUS}]  # a list: JSON Patch
        await objects.patch_cluster_custom_object_status(group, version, plural, name, status)

    try:
        await _gather(16, [one(i) for i in range(count)])
    finally:
        await closed(api.close())


async def schedule(kubeconfig: Path, namespace: str, count: int) -> dict[str, float]:
    """Create ``count`` bindings at once; seconds until all are placed and per binding."""
    from kubernetes_asyncio import client, watch  # noqa: PLC0415

    api = await kube_client.connect(kube_client.Settings(kubeconfig, "default", "bench"))
    core = client.CoreV1Api(api)
    objects = client.CustomObjectsApi(api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    created: dict[str, float] = {}
    placed: dict[str, float] = {}
    done = asyncio.Event()

    async def follow() -> None:
        stream = watch.Watch()
        async with stream.stream(
            objects.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            "resourcebindings",
            timeout_seconds=600,
        ) as events:
            async for event in events:
                obj = event["object"]
                name = obj["metadata"]["name"]
                if obj.get("spec", {}).get("clusters") and name not in placed:
                    placed[name] = time.monotonic()
                    if len(placed) == count:
                        done.set()
                        return

    # The templates exist, as they would (the plugin reads their carbonshift.io annotations).
    await _gather(16, [objects.create_namespaced_custom_object(
        "apps", "v1", namespace, "deployments", deployment(f"b-{i:04d}", namespace)
    ) for i in range(count)])  # fmt: skip
    follower = asyncio.create_task(follow())
    await asyncio.sleep(0.5)  # the watch is open before the first binding exists
    started = time.monotonic()

    async def one(i: int) -> None:
        name = f"b-{i:04d}"
        await objects.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "resourcebindings", binding(name, namespace)
        )
        created[name] = time.monotonic()

    try:
        await _gather(16, [one(i) for i in range(count)])
        await asyncio.wait_for(done.wait(), timeout=600)
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower  # its watch connection closed before the client
        await closed(api.close())
    latencies = sorted(placed[n] - created[n] for n in placed)
    makespan = max(placed.values()) - started
    return {
        "bindings": count,
        "seconds": makespan,
        "per_second": count / makespan,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def restart_scheduler(box: Sandbox, *, plugin: bool) -> None:
    component = box.components["karmada-scheduler"]
    component.argv = [a for a in component.argv if a != WITHOUT_PLUGIN]
    if not plugin:
        component.argv.append(WITHOUT_PLUGIN)
    box.stop("karmada-scheduler")
    box.start("karmada-scheduler")


def main(clusters: int = CLUSTERS, bindings: int = BINDINGS, **_: Any) -> dict[str, Any]:
    """Run the benchmark, print and record the results."""
    with tempfile.TemporaryDirectory() as tmp:
        box = Sandbox(Layout.default(Path(tmp) / "sandbox"), log=print, quiet=True)
        box.up()
        try:
            box.stop("karmada-controller-manager")  # it would dial the made-up clusters
            asyncio.run(create_clusters(box.kubeconfig, clusters))
            runs: dict[str, dict[str, float]] = {}
            # A B B A: each run leaves 500 more bindings behind, so the API server slows a
            # little from run to run; the mean of each mode's two runs cancels that drift.
            for mode, plugin in (("without", False), ("with", True), ("with2", True),
                                 ("without2", False)):  # fmt: skip
                restart_scheduler(box, plugin=plugin)
                print(f"[bench] scheduling {bindings} bindings {mode} the plugin")
                runs[mode] = asyncio.run(schedule(box.kubeconfig, f"bench-{mode}", bindings))
        finally:
            box.down()
    with_ = _mean(runs["with"], runs["with2"])
    without = _mean(runs["without"], runs["without2"])
    results: dict[str, Any] = {
        "machine": machine(),
        "clusters": clusters + len(box.members),
        "with_plugin": with_,
        "without_plugin": without,
        "runs": runs,
        "ratio": with_["per_second"] / without["per_second"],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "schedule.json").write_text(json.dumps(results, indent=2) + "\n")
    table = render(results)
    print(table)
    write_table("schedule", table)
    return results


def _mean(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """The mean of two runs of one mode."""
    return {key: (a[key] + b[key]) / 2 for key in a}


def render(r: dict[str, Any]) -> str:
    w, wo = r["with_plugin"], r["without_plugin"]
    met = "met" if r["ratio"] >= TARGET_RATIO else "NOT met"
    return "\n".join(
        [
            f"| {r['with_plugin']['bindings']:.0f} ResourceBindings, {r['clusters']:,} clusters"
            " | with CarbonAware | without | |",
            "|---|---:|---:|---:|",
            f"| bindings placed per second | {w['per_second']:.1f} | {wo['per_second']:.1f}"
            f" | {r['ratio']:.0%} of without (target >= {TARGET_RATIO:.0%}: {met}) |",
            f"| creation to placement, p50 | {w['p50_ms']:,.0f} ms | {wo['p50_ms']:,.0f} ms | |",
            f"| creation to placement, p99 | {w['p99_ms']:,.0f} ms | {wo['p99_ms']:,.0f} ms | |",
            "",
            f"Mean of two runs per mode, in the order without, with, with, without."
            f" Machine: {r['machine']}.",
        ]
    )
