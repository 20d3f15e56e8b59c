"""Energy from Kepler, through a real Prometheus.

Two small HTTP servers stand in for Kepler v0.10 on two member clusters: they serve
Kepler's exposition text (``GET /metrics``, ``text/plain; version=0.0.4``; the metric
names, labels and ``zone`` values of Kepler's ``docs/user/metrics.md``)::

    # HELP kepler_pod_cpu_joules_total Energy consumption of cpu at pod level in joules
    # TYPE kepler_pod_cpu_joules_total counter
    kepler_pod_cpu_joules_total{node_name="n1",pod_id="...",pod_name="web-7d9c5b8f6d-aaaaa",pod_namespace="shop",state="running",zone="package"} 812.0
    # TYPE kepler_node_cpu_joules_total counter
    kepler_node_cpu_joules_total{node_name="n1",path="/sys/class/powercap/intel-rapl:0",zone="package"} 20300.0

Every counter grows at a fixed rate (joules per second) from the server's start, in the
overlapping RAPL zones ``package``, ``core`` and ``dram``. A real Prometheus scrapes both
every second, adding the label ``cluster`` (as a fleet's scrape configuration would); the
leader's accounting (against the in-process API server, ``tests/controllers/accounting_world``)
asks it for the joules of the interval it accounts. Energy must be the ``package`` zone's
only (summing the overlapping zones would count core energy twice), per workload (its own
pods, not those of a workload whose name starts the same or of another namespace), per
member cluster, with method ``kepler``; a workload Kepler does not cover everywhere is
estimated with the coefficient, saying so.
"""  # noqa: E501

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_support import Prometheus, running_prometheus

from devtools.sandbox.layout import free_port
from tests import kubeapi
from tests.controllers.accounting_world import (
    Clock,
    accountant,
    binding,
    configmap,
    kube,
    no_series,
    node,
    nodepool,
    policy,
    sample,
    seed,
)
from webhook.decision.accounting import workload_joules
from webhook.decision.ledger import Ledger
from webhook.prometheus.kepler import Kepler
from webhook.runtime import metrics

__all__ = ["kube", "no_series"]  # fixtures used by name

WINDOW = 6.0
"""Seconds of Kepler data each query covers (the accounting interval here)."""
ZONE_SHARES = {"package": 1.0, "core": 0.7, "dram": 0.2}
"""Each series' rate in a zone as a share of its package rate (the zones overlap)."""
# Package-zone watts per pod: (cluster, namespace, pod) -> W.
PODS = {
    ("green", "shop", "web-7d9c5b8f6d-aaaaa"): 4.0,
    ("green", "shop", "web-7d9c5b8f6d-bbbbb"): 6.0,
    ("green", "shop", "web-api-5f6d7c8b9d-ccccc"): 50.0,  # another workload
    ("green", "other", "web-7d9c5b8f6d-ddddd"): 70.0,  # same name, another namespace
    ("dirty", "shop", "web-7d9c5b8f6d-eeeee"): 5.0,
}
NODES = {("green", "n1"): 100.0, ("green", "n2"): 60.0, ("green", "n9"): 500.0}


class KeplerExporter:
    """Kepler's /metrics for one cluster: counters growing at the rates above."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.started = time.monotonic()
        self.port = free_port()
        self.runner: web.AppRunner | None = None

    def text(self) -> str:
        elapsed = time.monotonic() - self.started
        lines = [
            "# HELP kepler_pod_cpu_joules_total Energy consumption of cpu at pod level in joules",
            "# TYPE kepler_pod_cpu_joules_total counter",
        ]
        for (cluster, namespace, pod), watts in PODS.items():
            if cluster != self.cluster:
                continue
            for zone, share in ZONE_SHARES.items():
                labels = (f'node_name="n1",pod_id="uid-{pod}",pod_name="{pod}",'
                          f'pod_namespace="{namespace}",state="running",zone="{zone}"')  # fmt: skip
                lines.append(f"kepler_pod_cpu_joules_total{{{labels}}} {watts * share * elapsed}")
        lines += [
            "# HELP kepler_node_cpu_joules_total Energy consumption of cpu at node level in joules",
            "# TYPE kepler_node_cpu_joules_total counter",
        ]
        for (cluster, name), watts in NODES.items():
            if cluster != self.cluster:
                continue
            for k, (zone, share) in enumerate(ZONE_SHARES.items()):
                labels = (f'node_name="{name}",path="/sys/class/powercap/intel-rapl:0:{k}",'
                          f'zone="{zone}"')  # fmt: skip
                lines.append(f"kepler_node_cpu_joules_total{{{labels}}} {watts * share * elapsed}")
        return "\n".join(lines) + "\n"

    async def metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=self.text(), content_type="text/plain")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


def job(exporter: KeplerExporter) -> dict[str, object]:
    return {
        "job_name": f"kepler-{exporter.cluster}",
        "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"],
                            "labels": {"cluster": exporter.cluster}}],
    }  # fmt: skip


@pytest.fixture
async def kepler(tmp_path: Path) -> AsyncIterator[Prometheus]:
    """Both exporters scraped for a little longer than :data:`WINDOW`."""
    exporters = [KeplerExporter("green"), KeplerExporter("dirty")]
    for exporter in exporters:
        await exporter.start()
    try:
        with running_prometheus(tmp_path / "prometheus", [job(e) for e in exporters]) as prometheus:
            deadline = time.monotonic() + 30
            while sum(t["health"] == "up" for t in prometheus.targets()) < 2:
                assert time.monotonic() < deadline, prometheus.targets()
                await asyncio.sleep(0.5)
            await asyncio.sleep(WINDOW + 2)
            yield prometheus
    finally:
        for exporter in exporters:
            await exporter.stop()


def close(got: float, want: float) -> bool:
    """Within 25 % (``increase`` extrapolates from the samples inside its window)."""
    return abs(got - want) <= 0.25 * want


async def test_a_workloads_joules_are_its_own_pods_in_one_zone_per_cluster(
    kepler: Prometheus,
) -> None:
    pods = await Kepler(kepler.url, zone="package", cluster_label="cluster").pods(WINDOW)
    got = workload_joules(pods, "Deployment", "shop", "web")
    assert set(got) == {"green", "dirty"}
    assert close(got["green"], (4.0 + 6.0) * WINDOW), got
    assert close(got["dirty"], 5.0 * WINDOW), got
    # Summed across the overlapping zones it would be 1.9 times as much.
    assert got["green"] < 1.3 * 10.0 * WINDOW
    dram = await Kepler(kepler.url, zone="dram", cluster_label="cluster").pods(WINDOW)
    assert close(workload_joules(dram, "Deployment", "shop", "web")["green"], 2.0 * WINDOW)


async def test_the_accounting_measures_with_kepler_and_says_so(
    kepler: Prometheus, kube: kubeapi.KubeApi
) -> None:
    # web runs where Kepler measures it; "elsewhere" has no Kepler data at all.
    seed(kube, policy("web"), policy("elsewhere"),
         binding("web", {"green": 2, "dirty": 1}), binding("elsewhere", {"green": 1}),
         nodepool("batch"), node("n1", "batch", "eu-north-1a", "4"),
         node("n2", "batch", "eu-north-1a", "4"))  # fmt: skip
    clock = Clock()
    leader = accountant(kube.api, clock, prometheus_url=kepler.url)
    leader.forget()
    await leader.account()
    clock.now += timedelta(seconds=WINDOW)
    assert await leader.account() == 3
    stored = configmap(kube)
    assert stored is not None
    ledger = Ledger.from_data(stored["data"])
    web_totals = ledger.objects["PropagationPolicy/shop/web"].totals
    assert set(web_totals) == {"average/kepler"}
    measured = web_totals["average/kepler"]
    kwh = {"green": 10.0 * WINDOW / 3.6e6, "dirty": 5.0 * WINDOW / 3.6e6}
    assert close(measured.kwh, kwh["green"] + kwh["dirty"])
    # Actual: measured energy per cluster at its intensity (green 25, dirty 800 g/kWh).
    places = ledger.objects["PropagationPolicy/shop/web"].places
    assert close(places["green"]["g"], kwh["green"] * 25)
    assert close(places["dirty"]["g"], kwh["dirty"] * 800)
    assert set(ledger.objects["PropagationPolicy/shop/elsewhere"].totals) == {"average/coefficient"}
    pool = ledger.objects["NodePool//batch"].totals
    assert set(pool) == {"average/kepler"}
    assert close(pool["average/kepler"].kwh, (100.0 + 60.0) * WINDOW / 3.6e6)
    labels = {"kind": "PropagationPolicy", "namespace": "shop", "name": "web",
              "signal": "average", "method": "kepler"}  # fmt: skip
    assert sample(metrics.ENERGY_KWH, **labels) == pytest.approx(measured.kwh)
    leader.forget()
    print(f"\nKepler: web {measured.kwh * 3.6e6:.1f} J over {WINDOW:g} s "
          f"(package zone, 2 clusters; expected {15.0 * WINDOW:g} J)")  # fmt: skip
