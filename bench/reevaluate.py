"""One re-evaluation pass over 10,000 managed PropagationPolicies on 100 clusters.

The objects are what the API server stores: each policy admitted by the webhook's own
admission code (:func:`webhook.preview.preview`, a CREATE review and its JSON patch),
with the metadata the API server adds. The leader's loop
(:class:`webhook.kube.reevaluator.Reevaluator`) then runs :meth:`pass_once` against an
in-memory API that answers the list calls with those objects, exactly as the loop
receives them, and refuses every write. Nothing changed since admission (same readings,
same clusters, a forecast as flat as the grid), so every policy must be ``kept`` and no
write proposed. The pass ranks on the forecast, as the default config
(``reevaluate.forecast: day-ahead-profile``) has it.

Measured on one core (the process pinned to core 0): CPU seconds of the pass (target
< 5 s) and resident memory with the 10,000 objects held (target < 300 MB).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import random
import resource
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.harness import RESULTS, SERVER_CPU, machine, write_table
from webhook import kinds, metrics, preview
from webhook.config import Config, parse
from webhook.intensity import IntensityTable, Reading, Signal
from webhook.kube.reevaluator import Reevaluator

POLICIES = 10_000
CLUSTERS = 100
NAMESPACES = 100
TARGET_CPU_SECONDS = 5.0
TARGET_RSS_MB = 300.0
ENABLED = "carbonshift.io/enabled"
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def config() -> Config:
    """100 clusters over 50 grid zones; hysteresis and intervals as shipped."""
    clusters = {f"member-{i:03d}": {"zone": f"Z{i % 50:02d}"} for i in range(CLUSTERS)}
    return parse({"zone": "Z00", "clusters": clusters})


def table() -> IntensityTable:
    """A fresh reading for each zone, 20 to 800 gCO2eq/kWh."""
    rng = random.Random(7)
    return {
        f"Z{z:02d}": Reading(
            zone=f"Z{z:02d}",
            value=round(rng.uniform(20, 800), 1),
            signal=Signal.AVERAGE,
            valid_from=NOW - timedelta(minutes=5),
            valid_to=NOW + timedelta(minutes=55),
            estimated=False,
            source="bench",
        )
        for z in range(50)
    }


def policy(i: int, rng: random.Random) -> dict[str, Any]:
    """A mix: Divided over 3-10 named clusters, some with max-clusters, some Duplicated,
    some open (every cluster)."""
    names = sorted(rng.sample(range(CLUSTERS), rng.randint(3, 10)))
    placement: dict[str, Any] = {
        "clusterAffinity": {"clusterNames": [f"member-{n:03d}" for n in names]}
    }
    annotations: dict[str, str] = {}
    shape = i % 10
    if shape == 9:
        placement = {}  # open: every known cluster
    if shape in (7, 8):
        placement["replicaScheduling"] = {"replicaSchedulingType": "Duplicated"}
        annotations["carbonshift.io/max-clusters"] = "2"
    else:
        placement["replicaScheduling"] = {"replicaSchedulingType": "Divided"}
        if shape in (5, 6):
            annotations["carbonshift.io/max-clusters"] = "3"
    name, namespace = f"app-{i:05d}", f"team-{i % NAMESPACES:03d}"
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "placement": placement,
        },
    }


def stored(ctx: kinds.Context) -> list[dict[str, Any]]:
    """The policies as the API server holds them after admission (JSON round trip: plain
    dicts and lists, as the list call returns them)."""
    rng = random.Random(11)
    created = (NOW - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = []
    for i in range(POLICIES):
        [result] = preview.preview([policy(i, rng)], ctx)  # one at a time: nothing else held
        if result.outcome.result != "patched":
            raise RuntimeError(f"policy {i} not decided: {result.outcome.reason}")
        obj = json.loads(json.dumps(result.stored))
        obj["metadata"] |= {
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "resourceVersion": str(1000 + i),
            "generation": 1,
            "creationTimestamp": created,
        }
        obj.pop("apiVersion")  # list items carry neither: the loop sets them
        obj.pop("kind")
        out.append(obj)
    return out


class Memory:
    """The two API groups the loop calls: lists answered from memory, writes refused."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.writes = 0
        labels = {ENABLED: "true"}
        self.namespaces = SimpleNamespace(items=[
            SimpleNamespace(metadata=SimpleNamespace(name=f"team-{n:03d}", labels=labels))
            for n in range(NAMESPACES)
        ])  # fmt: skip

    async def list_namespace(self, **_: Any) -> SimpleNamespace:
        return self.namespaces

    async def list_cluster_custom_object(
        self, group: str, version: str, plural: str, **_: Any
    ) -> dict[str, Any]:
        if (group, plural) != (kinds.KARMADA, "propagationpolicies"):
            return {"items": []}
        return {"items": [dict(o) for o in self.items]}  # a fresh top level, as a new list

    async def _write(self, *_: Any, **__: Any) -> dict[str, Any]:
        self.writes += 1
        raise RuntimeError("the benchmark pass proposed a write")

    replace_namespaced_custom_object = _write
    replace_cluster_custom_object = _write


class Leading:
    leading = True


def _kept() -> float:
    counter = metrics.REEVALUATIONS
    found = [counter.labels(k, "kept")._value.get() for k in ("PropagationPolicy",)]
    return float(sum(found))


def _rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _pass(cfg: Config, ctx: kinds.Context, api: Memory) -> tuple[int, float, float]:
    from kubernetes_asyncio import client  # noqa: PLC0415

    async with client.ApiClient() as kube:
        values = {zone: reading.value for zone, reading in ctx.table.items()}

        def outlook(zone: str, hours: int, _method: object) -> list[float]:
            return [values[zone]] * (hours + 1)  # the grid holds still: nothing to switch

        loop = Reevaluator(kube, cfg, lambda: ctx, Leading(), outlook=outlook)
        loop.objects = api  # type: ignore[assignment]
        loop.core = api  # type: ignore[assignment]
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        written = await loop.pass_once()
        return written, time.process_time() - cpu, time.perf_counter() - wall


def main(**_: Any) -> dict[str, Any]:
    os.sched_setaffinity(0, {int(SERVER_CPU)})
    cfg = config()
    ctx = kinds.Context(config=cfg, table=table(), now=NOW, generation=1)
    started = time.perf_counter()
    items = stored(ctx)
    admitted_s = time.perf_counter() - started
    api = Memory(items)
    kept_before = _kept()
    written, cpu_s, wall_s = asyncio.run(_pass(cfg, ctx, api))
    kept = int(_kept() - kept_before)
    rss, peak = _rss_mb("VmRSS"), _rss_mb("VmHWM")
    result = {
        "policies": POLICIES,
        "clusters": CLUSTERS,
        "cpu_seconds": round(cpu_s, 2),
        "wall_seconds": round(wall_s, 2),
        "kept": kept,
        "writes_proposed": api.writes,
        "written": written,
        "rss_mb": round(rss),
        "peak_rss_mb": round(peak),
        "maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "admission_seconds": round(admitted_s, 1),
        "machine": machine(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "reevaluate.json").write_text(json.dumps(result, indent=2) + "\n")
    met = (
        cpu_s < TARGET_CPU_SECONDS
        and peak < TARGET_RSS_MB
        and api.writes == 0
        and written == 0
        and kept == POLICIES
    )
    verdict = "Targets met" if met else "Targets NOT met"
    table_md = f"""\
| one pass, 10,000 managed PropagationPolicies, 100 clusters, nothing changed | measured | target |
|---|---:|---:|
| CPU seconds on one core | {cpu_s:.2f} s | < {TARGET_CPU_SECONDS:g} s |
| wall time of the pass | {wall_s:.2f} s | |
| policies kept / writes proposed | {kept:,} / {api.writes} | 10,000 / 0 |
| resident memory after the pass (peak) | {rss:.0f} MB ({peak:.0f} MB) | < {TARGET_RSS_MB:g} MB |

{verdict}. Admitting the 10,000 policies first took {admitted_s:.1f} s. Machine: {machine()}.
"""
    write_table("reevaluate", table_md)
    print(table_md)
    return result
