"""The fleet inventory at scale: 5,000 Karmada Clusters in a real kube-apiserver.

A throw-away control plane (``devtools.sandbox``: etcd, kube-apiserver, the Karmada CRDs)
is started, 5,000 ``Cluster`` objects with providers and regions are created in it, and
then measured:

- how long an inventory (the one ``carbonshift serve`` runs) takes from start to holding
  every Cluster with its grid zone;
- ``carbonshift serve --kubeconfig``: time until ``/readyz`` reports ``inventorySynced``,
  and its resident memory with the 5,000 Clusters in memory;
- ``POST /mutate`` throughput, every review distinct, with and without the inventory.

Targets: sync under 10 s, RSS under 250 MB, admission throughput unchanged within noise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.admission import CONFIG, reviews
from bench.harness import RESULTS, Server, machine, server, write_table, wrk
from devtools.sandbox import Layout, Sandbox
from webhook.kube import client as kube_client
from webhook.kube.inventory import FleetInventory
from webhook.model import config as config_mod
from webhook.runtime.tasks import closed

CLUSTERS = 5_000
PLACES = [
    ("aws", "eu-north-1"), ("aws", "eu-west-3"), ("aws", "us-east-1"), ("aws", "eu-central-1"),
    ("gcp", "europe-west1"), ("gcp", "us-central1"), ("azure", "westeurope"),
    ("azure", "eastus"),
]  # fmt: skip
TARGET_SYNC_SECONDS = 10.0
TARGET_RSS_MB = 250.0


def cluster(i: int) -> dict[str, Any]:
    provider, region = PLACES[i % len(PLACES)]
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {
            "name": f"bench-{i:05d}",
            "labels": {"tier": ("prod", "dev")[i % 2], "bench": "fleet"},
        },
        "spec": {
            "syncMode": "Push",
            "provider": provider,
            "region": region,
            "zones": [f"{region}a"],
        },
    }


async def create(kubeconfig: Path, count: int) -> float:
    """Create ``count`` Clusters (16 at a time); returns seconds taken."""
    from kubernetes_asyncio import client  # noqa: PLC0415

    where = kube_client.Settings(kubeconfig, "default", "bench")
    api = await kube_client.connect(where)
    objects = client.CustomObjectsApi(api)
    queue = list(range(count))
    started = time.monotonic()

    async def worker() -> None:
        while queue:
            i = queue.pop()
            await objects.create_cluster_custom_object(
                "cluster.karmada.io", "v1alpha1", "clusters", cluster(i)
            )

    try:
        await asyncio.gather(*(worker() for _ in range(16)))
    finally:
        await closed(api.close())
    return time.monotonic() - started


async def sync_time(kubeconfig: Path, count: int) -> float:
    """Seconds from starting an inventory until it holds ``count`` Clusters."""
    config = config_mod.Config()
    where = kube_client.Settings(kubeconfig, "default", "bench")
    api = await kube_client.connect(where)
    inventory = FleetInventory(config)
    started = time.monotonic()
    inventory.start(api)
    try:
        while not (inventory.synced and len(inventory.clusters()) >= count):
            if time.monotonic() - started > 120:
                raise RuntimeError("the inventory did not sync within 120 s")
            await asyncio.sleep(0.02)
        return time.monotonic() - started
    finally:
        await inventory.stop()
        await closed(api.close())


def readyz(srv: Server) -> dict[str, Any]:
    with urllib.request.urlopen(srv.url + "/readyz", context=srv.ssl_context(), timeout=2) as r:
        body: dict[str, Any] = json.loads(r.read())
        return body


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def served(kubeconfig: Path, bodies: Path, seconds: int) -> dict[str, Any]:
    """``carbonshift serve --kubeconfig``: time to a synced inventory, RSS, throughput."""
    started = time.monotonic()  # process start, Python start-up included
    with server(CONFIG, extra=["--kubeconfig", str(kubeconfig)]) as srv:
        while not readyz(srv).get("inventorySynced"):
            if time.monotonic() - started > 120:
                raise RuntimeError("carbonshift did not sync its inventory within 120 s")
            time.sleep(0.1)
        synced = time.monotonic() - started
        wrk(srv, "/mutate", seconds=2, bodies_file=bodies)  # warm-up
        load = wrk(srv, "/mutate", seconds=seconds, bodies_file=bodies)
        return {"synced_seconds": synced, "rss_mb": rss_mb(srv.pid), "mutate": load}


def main(seconds: int = 10, count: int = CLUSTERS) -> dict[str, object]:
    """Run the fleet benchmark, print and record the results."""
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        box = Sandbox(
            Layout.default(state / "sandbox"), with_karmada_webhook=False, log=print, quiet=True
        )
        box.up()
        try:
            created = asyncio.run(create(box.kubeconfig, count))
            total = count + 3  # the sandbox's own members
            inventory_sync = asyncio.run(sync_time(box.kubeconfig, total))
            bodies = state / "distinct.jsonl"
            reviews(bodies, fresh=False)
            with server(CONFIG) as plain:
                wrk(plain, "/mutate", seconds=2, bodies_file=bodies)
                without = wrk(plain, "/mutate", seconds=seconds, bodies_file=bodies)
                rss_without = rss_mb(plain.pid)
            with_fleet = served(box.kubeconfig, bodies, seconds)
        finally:
            box.down()
    mutate = with_fleet["mutate"]
    results = {
        "machine": machine(),
        "clusters": total,
        "create_seconds": created,
        "inventory_sync_seconds": inventory_sync,
        "serve_synced_seconds": with_fleet["synced_seconds"],
        "rss_mb_with_fleet": with_fleet["rss_mb"],
        "rss_mb_without": rss_without,
        "mutate_with_fleet": dataclasses.asdict(mutate),
        "mutate_without": dataclasses.asdict(without),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fleet.json").write_text(json.dumps(results, indent=2) + "\n")
    met = inventory_sync < TARGET_SYNC_SECONDS and with_fleet["rss_mb"] < TARGET_RSS_MB
    table = "\n".join(
        [
            f"| {total:,} Clusters in a real kube-apiserver | measured | target |",
            "|---|---:|---:|",
            f"| inventory: start to every Cluster held with its zone | {inventory_sync:.2f} s "
            f"| < {TARGET_SYNC_SECONDS:g} s |",
            f"| `carbonshift serve --kubeconfig`: process start to `inventorySynced` | "
            f"{with_fleet['synced_seconds']:.2f} s | |",
            f"| resident memory with the inventory | {with_fleet['rss_mb']:.0f} MB "
            f"| < {TARGET_RSS_MB:g} MB |",
            f"| resident memory without (config only) | {rss_without:.0f} MB | |",
            f"| `POST /mutate` req/s with the inventory | {mutate.rps:.0f} | unchanged |",
            f"| `POST /mutate` req/s without | {without.rps:.0f} | |",
            "",
            f"Targets {'met' if met else 'NOT met'}; throughput with/without: "
            f"{mutate.rps / without.rps:.2f}. Creating the Clusters took {created:.1f} s. "
            f"Machine: {machine()}.",
        ]
    )
    print(table)
    write_table("fleet", table)
    return results
