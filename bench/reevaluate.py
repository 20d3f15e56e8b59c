"""Re-evaluation passes over 10,000 managed ordered-fill policies on 100 clusters, with
the move back to greener tiers.

The objects are what the API servers store, each kind parsed from one JSON document as a
list call's answer is (keys shared across items, values not). Each PropagationPolicy is
admitted by the webhook's own admission code (:func:`webhook.cli.preview.preview`, a CREATE
review and its JSON patch), with the metadata the API server adds; every one is Divided,
so each comes back as an ordered fill (tiers greenest first). Each policy has a
ResourceBinding as Karmada keeps it: the policy's annotations that link it to its
policy, the workload's ``replicaRequirements`` (cpu and memory per replica), the
policy's placement and ``spec.clusters`` where karmada-scheduler's tier fill put the
replicas, the bindings scheduled one after another on the room the fleet had then
(:func:`webhook.decision.karmada.capacity.tier_fill`, Steady); the greenest clusters fill up and
the rest overflows. The 100 Karmada Clusters carry ``status.resourceSummary``
(allocatable; allocated: the bindings' replicas plus what else runs there).

The leader's loop (:class:`webhook.controllers.follower.Follower`, with its
:class:`~webhook.controllers.karmada.rebalancer.Rebalancer`, ``rebalance`` as shipped) then runs
:meth:`reconcile` three times against an in-memory API that answers the list calls with
those objects, exactly as the loop receives them, accepts WorkloadRebalancer creates and
Events (counted), and refuses every other write:

1. the first pass of a term, room as scheduled: nothing changed since admission (same
   readings, same clusters, a forecast as flat as the grid), so every policy is decided
   and ``kept``, no write proposed, and the rebalancer finds the replicas where the room
   put them;
2. nothing changed: what the first pass kept is kept again without deciding (the
   objects, the intensities and the fleet are the same);
3. room changed: every cluster's other workloads shrink (allocated drops by 10 to 70 %
   of what else runs there), so room appears on greener clusters; no policy is decided
   again (room is not an input of a placement) and the rebalancer plans moves back
   (WorkloadRebalancers and ``CarbonReplicasMoved`` Events) within the shipped move
   budgets.

The passes run in a process of their own, pinned to core 0, that parses the four list
answers (policies, bindings, Clusters before and after) from files, so what admission
and the set-up left behind is not counted. Measured: CPU seconds of each pass (target
< 2.5 s), split into re-evaluation and rebalancer, and resident memory with every object
held (target < 250 MB).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from bench.harness import RESULTS, SERVER_CPU, machine, write_table
from webhook import kinds
from webhook.cli import preview
from webhook.controllers.follower import Follower
from webhook.controllers.karmada.rebalancer import Rebalancer, Rebalancing
from webhook.decision.karmada.bindings import PP_NAME, PP_NAMESPACE
from webhook.decision.karmada.capacity import tier_fill
from webhook.decision.karmada.terms import fill_tiers
from webhook.kube.client import LIST_PAGE
from webhook.kube.events import EventRecorder
from webhook.model.config import Config, parse
from webhook.model.intensity import IntensityTable, Reading, Signal
from webhook.runtime import collector, logs, metrics

POLICIES = 10_000
CLUSTERS = 100
NAMESPACES = 100
TARGET_CPU_SECONDS = 2.5
TARGET_RSS_MB = 250.0
IDLE_CPU_SECONDS = 0.01
"""A tick with nothing changed: 1 % of a core at the runner's one tick a second."""
LARGE = (100_000, 1_000, 25.0, 1500.0)
"""``python -m bench reevaluate-large``: policies, clusters, CPU and RSS targets."""
ENABLED = "carbonshift.io/enabled"
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
STAMP = "%Y-%m-%dT%H:%M:%SZ"
KARMADA_WORK = ("work.karmada.io", "resourcebindings")
KARMADA_CLUSTERS = ("cluster.karmada.io", "clusters")
REBALANCERS = ("apps.karmada.io", "workloadrebalancers")

REPLICAS = (1, 2, 3, 4, 5, 6, 8, 10)
CPU_MILLI = (100, 250, 500, 1000)
MEMORY_MI = (128, 256, 512, 1024, 2048)
CLUSTER_CPUS = (96, 192, 384, 768)
"""Allocatable cores of a member (4 GiB each; 110 pods per 16 cores)."""


def scale(policies: int, clusters: int, cpu_seconds: float, rss_mb: float) -> None:
    """Run at another size (the module's figures are the 10,000-policy run's)."""
    global POLICIES, CLUSTERS, TARGET_CPU_SECONDS, TARGET_RSS_MB
    POLICIES, CLUSTERS, TARGET_CPU_SECONDS, TARGET_RSS_MB = policies, clusters, cpu_seconds, rss_mb


def config() -> Config:
    """100 clusters over 50 grid zones; hysteresis, intervals and rebalance as shipped, on a
    Karmada 1.18 (the ordered fill as overflow tiers, as the bindings are scheduled here)."""
    clusters = {f"member-{i:03d}": {"zone": f"Z{i % 50:02d}"} for i in range(CLUSTERS)}
    return parse({"zone": "Z00", "clusters": clusters, "karmada": {"version": "1.18"}})


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
    """Every one Divided (an ordered fill): over 3-10 named clusters, some with
    max-clusters 2 or 3 (their first tier shared), some open (every cluster)."""
    names = sorted(rng.sample(range(CLUSTERS), rng.randint(3, 10)))
    placement: dict[str, Any] = {
        "clusterAffinity": {"clusterNames": [f"member-{n:03d}" for n in names]}
    }
    annotations: dict[str, str] = {}
    shape = i % 10
    if shape == 9:
        placement = {}  # open: every known cluster
    placement["replicaScheduling"] = {"replicaSchedulingType": "Divided"}
    if shape in (5, 6, 7, 8):
        annotations["carbonshift.io/max-clusters"] = "3" if shape < 7 else "2"
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


def reachable() -> list[set[str]]:
    """Per policy (as :func:`stored` builds them), the zones of the clusters it can place
    on: what a change of one zone's reading should decide again."""
    rng = random.Random(11)
    every = {f"Z{n % 50:02d}" for n in range(CLUSTERS)}
    out = []
    for i in range(POLICIES):
        names = policy(i, rng)["spec"]["placement"].get("clusterAffinity", {}).get("clusterNames")
        out.append(every if names is None else {f"Z{int(n[-3:]) % 50:02d}" for n in names})
    return out


def _uid(kind: int, i: int) -> str:
    return f"00000000-0000-{kind:04d}-0000-{i:012d}"


def listed(objs: list[Any]) -> list[dict[str, Any]]:
    """``objs`` as a list call returns them: one JSON document parsed at once (plain dicts
    and lists; the parser shares keys across the items, never values)."""
    out: list[dict[str, Any]] = json.loads(json.dumps(objs))
    return out


def stored(ctx: kinds.Context) -> list[dict[str, Any]]:
    """The policies as the API server holds them after admission, as the list call
    returns them; every one an ordered fill."""
    rng = random.Random(11)
    created = (NOW - timedelta(days=1)).strftime(STAMP)
    out = []
    for i in range(POLICIES):
        [result] = preview.preview([policy(i, rng)], ctx)  # one at a time: nothing else held
        if result.outcome.result != "patched":
            raise RuntimeError(f"policy {i} not decided: {result.outcome.reason}")
        obj = dict(result.stored)
        if not fill_tiers(obj["spec"]["placement"]):
            raise RuntimeError(f"policy {i} is not an ordered fill")
        obj["metadata"] = dict(obj["metadata"]) | {
            "uid": _uid(1, i),
            "resourceVersion": str(1000 + i),
            "generation": 1,
            "creationTimestamp": created,
        }
        obj.pop("apiVersion")  # list items carry neither: the loop sets them
        obj.pop("kind")
        out.append(json.dumps(obj))
    items: list[dict[str, Any]] = json.loads(f"[{','.join(out)}]")  # one list response
    return items


# --- capacity ------------------------------------------------------------------------------

Amounts = dict[str, int]
"""cpu (millicores), memory (KiB), pods."""


class Fleet:
    """What each member can hold and what runs there: other workloads and the bindings."""

    def __init__(self) -> None:
        rng = random.Random(13)
        self.names = [f"member-{i:03d}" for i in range(CLUSTERS)]
        self.allocatable: dict[str, Amounts] = {}
        self.others: dict[str, Amounts] = {}
        for name in self.names:
            cores = rng.choice(CLUSTER_CPUS)
            self.allocatable[name] = {
                "cpu": cores * 1000,
                "memory": cores * 4 * 1024 * 1024,
                "pods": cores // 16 * 110,
            }
            share = rng.uniform(0.15, 0.35)  # what else runs there
            self.others[name] = {k: int(v * share) for k, v in self.allocatable[name].items()}
        self.bound: dict[str, Amounts] = {n: dict.fromkeys(("cpu", "memory", "pods"), 0)
                                          for n in self.names}  # fmt: skip

    def allocated(self, name: str) -> Amounts:
        return {k: self.others[name][k] + self.bound[name][k] for k in self.allocatable[name]}

    def room(self, name: str, need: Amounts) -> int:
        """Replicas of ``need`` the member can still take (Karmada's general estimator)."""
        allocated = self.allocated(name)
        left = {k: v - allocated[k] for k, v in self.allocatable[name].items()}
        fits = [left["pods"], left["cpu"] // need["cpu"], left["memory"] // need["memory"]]
        return max(0, min(fits))

    def place(self, name: str, need: Amounts, replicas: int) -> None:
        for k in ("cpu", "memory"):
            self.bound[name][k] += need[k] * replicas
        self.bound[name]["pods"] += replicas

    def shrink_others(self, rng: random.Random) -> None:
        """Every member's other workloads shrink by 10 to 70 %: room appears."""
        for name in self.names:
            keep = 1 - rng.uniform(0.1, 0.7)
            self.others[name] = {k: int(v * keep) for k, v in self.others[name].items()}

    def clusters(self, version: int) -> list[dict[str, Any]]:
        """The Karmada Clusters as the list call returns them."""
        return listed([self._cluster(i, name, version) for i, name in enumerate(self.names)])

    def _cluster(self, i: int, name: str, version: int) -> dict[str, Any]:
        allocatable, allocated = self.allocatable[name], self.allocated(name)
        ready = {"type": "Ready", "status": "True", "reason": "ClusterReady",
                 "message": "cluster is healthy and ready to accept workloads",
                 "lastTransitionTime": (NOW - timedelta(days=30)).strftime(STAMP)}  # fmt: skip
        obj = {
            "metadata": {
                "name": name,
                "uid": _uid(3, i),
                "resourceVersion": str(500_000 + version * 1000 + i),
                "generation": 3,
                "creationTimestamp": (NOW - timedelta(days=90)).strftime(STAMP),
                "labels": {"cluster.karmada.io/name": name},
                "finalizers": ["karmada.io/cluster-controller"],
            },
            "spec": {
                "id": _uid(4, i),
                "syncMode": "Pull",
                "provider": "bench",
                "region": f"region-{i % 10}",
                "zone": f"Z{i % 50:02d}",
                "impersonatorSecretRef": {"namespace": "karmada-cluster", "name": name},
                "resourceModels": [],
            },
            "status": {
                "kubernetesVersion": "v1.31.4",
                "apiEnablements": [
                    {"groupVersion": gv, "resources": [{"name": r, "kind": k}]}
                    for gv, r, k in (
                        ("apps/v1", "deployments", "Deployment"),
                        ("v1", "pods", "Pod"),
                        ("batch/v1", "jobs", "Job"),
                    )
                ],
                "conditions": [ready],
                "nodeSummary": {
                    "totalNum": allocatable["cpu"] // 16_000,
                    "readyNum": allocatable["cpu"] // 16_000,
                },
                "resourceSummary": {
                    "allocatable": _quantities(allocatable),
                    "allocated": _quantities(allocated),
                    "allocating": {"cpu": "0", "memory": "0", "pods": "0"},
                },
            },
        }
        return obj


def _quantities(amounts: Amounts) -> dict[str, str]:
    return {
        "cpu": f"{amounts['cpu']}m",
        "memory": f"{amounts['memory']}Ki",
        "pods": str(amounts["pods"]),
        "ephemeral-storage": "1500Gi",
    }


def bindings(items: list[dict[str, Any]], fleet: Fleet) -> list[dict[str, Any]]:
    """One ResourceBinding per policy, scheduled in turn on the room the fleet had then
    (Karmada's tier fill: the greenest tier up to its room, the rest to the next)."""
    rng = random.Random(17)
    scheduled = (NOW - timedelta(hours=6)).strftime(STAMP)
    out = []
    for i, obj in enumerate(items):
        meta, placement = obj["metadata"], obj["spec"]["placement"]
        tiers = fill_tiers(placement) or []
        replicas = rng.choice(REPLICAS)
        need = {"cpu": rng.choice(CPU_MILLI), "memory": rng.choice(MEMORY_MI) * 1024, "pods": 1}
        names = [n for t in tiers for n in t]
        spread = tier_fill(replicas, tiers, {n: fleet.room(n, need) for n in names})
        if spread is None:  # the fleet is full: Karmada would fail; the last tier overcommits
            spread = {tiers[-1][0]: replicas}
        for name, n in spread.items():
            fleet.place(name, need, n)
        out.append(
            _binding(
                i,
                meta,
                placement=placement,
                replicas=replicas,
                need=need,
                spread=spread,
                scheduled=scheduled,
            )
        )
    return listed(out)  # nothing shared with the policies


def _binding(
    i: int,
    meta: Mapping[str, Any],
    *,
    placement: Mapping[str, Any],
    replicas: int,
    need: Amounts,
    spread: Mapping[str, int],
    scheduled: str,
) -> dict[str, Any]:
    name, namespace = meta["name"], meta["namespace"]
    workload = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace,
                "name": name, "uid": _uid(5, i), "resourceVersion": str(90_000 + i)}  # fmt: skip
    clusters = [{"name": c, "replicas": n} for c, n in sorted(spread.items())]
    condition = {"status": "True", "lastTransitionTime": scheduled}
    obj = {
        "metadata": {
            "name": f"{name}-deployment",
            "namespace": namespace,
            "uid": _uid(2, i),
            "resourceVersion": str(200_000 + i),
            "generation": 2,
            "creationTimestamp": meta["creationTimestamp"],
            "labels": {"propagationpolicy.karmada.io/permanent-id": _uid(6, i)},
            "annotations": {
                PP_NAME: name,
                PP_NAMESPACE: namespace,
                "propagationpolicy.karmada.io/permanent-id": _uid(6, i),
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": name,
                    "uid": _uid(5, i),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": ["karmada.io/binding-controller"],
        },
        "spec": {
            "resource": workload,
            "replicas": replicas,
            "replicaRequirements": {
                "resourceRequest": {"cpu": f"{need['cpu']}m", "memory": f"{need['memory']}Ki"}
            },
            "clusters": clusters,
            "placement": placement,
            "schedulerName": "default-scheduler",
            "conflictResolution": "Abort",
        },
        "status": {
            "schedulerObservedGeneration": 2,
            "lastScheduledTime": scheduled,
            "conditions": [
                {
                    "type": "Scheduled",
                    "reason": "Success",
                    "message": "Binding has been scheduled successfully.",
                    **condition,
                },
                {
                    "type": "FullyApplied",
                    "reason": "FullyAppliedSuccess",
                    "message": "All works have been successfully applied",
                    **condition,
                },
            ],
            "aggregatedStatus": [
                {
                    "clusterName": c["name"],
                    "applied": True,
                    "health": "Healthy",
                    "status": {
                        "replicas": c["replicas"],
                        "readyReplicas": c["replicas"],
                        "availableReplicas": c["replicas"],
                        "updatedReplicas": c["replicas"],
                    },
                }
                for c in clusters
            ],
        },
    }
    return obj


# --- the in-memory API --------------------------------------------------------------------


@dataclasses.dataclass
class Answered:
    """An answer the client hands over unread (``_preload_content=False``), as aiohttp's
    response: its status and body."""

    data: bytes
    status: int = 200

    async def read(self) -> bytes:
        return self.data

    def release(self) -> None:
        pass


class Memory:
    """The API groups the loop calls: lists answered from memory, WorkloadRebalancer
    creates and Events accepted (counted), every other write refused."""

    def __init__(
        self, policy_pages: list[Path], binding_pages: list[Path], clusters: list[Any]
    ) -> None:
        # Policies and bindings as the API server holds them: serialized, in another
        # process (here: files), answered a page at a time.
        self.pages = {
            (kinds.KARMADA, "propagationpolicies"): policy_pages,
            KARMADA_WORK: binding_pages,
        }
        self.clusters = clusters
        self.rebalancers: list[dict[str, Any]] = []
        self.events = 0
        self.writes = 0
        labels = {ENABLED: "true"}
        self.namespaces = [
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": f"team-{n:03d}", "labels": labels}}
            for n in range(NAMESPACES)
        ]  # fmt: skip

    async def list_cluster_custom_object(
        self, group: str, version: str, plural: str, **options: Any
    ) -> dict[str, Any] | Answered:
        pages = self.pages.get((group, plural))
        if pages is not None:
            if options.get("limit") != PAGE:
                raise RuntimeError(f"{plural} listed without pages of {PAGE}")
            if not pages:
                return {"items": [], "metadata": {"resourceVersion": "1"}}
            answer = pages[int(options.get("_continue") or 0)].read_bytes()
            if options.get("_preload_content") is False:
                return Answered(answer)  # as the client hands it over: unread
            listed: dict[str, Any] = orjson.loads(answer)
            return listed
        found = {
            KARMADA_CLUSTERS: self.clusters,
            REBALANCERS: self.rebalancers,
            ("", "namespaces"): self.namespaces,
        }.get((group, plural), [])
        # a fresh top level, as a new list
        return {"items": [dict(o) for o in found], "metadata": {"resourceVersion": "1"}}

    async def create_cluster_custom_object(
        self, group: str, version: str, plural: str, body: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        if (group, plural) != REBALANCERS:
            return await self._write()
        self.rebalancers.append(body)
        return body

    async def create_namespaced_event(self, namespace: str, body: Any, **_: Any) -> Any:
        self.events += 1
        return body

    async def _write(self, *_: Any, **__: Any) -> dict[str, Any]:
        self.writes += 1
        raise RuntimeError("the benchmark pass proposed a write")

    replace_namespaced_custom_object = _write
    replace_cluster_custom_object = _write


class Leading:
    leading = True


def _kept() -> float:
    return float(metrics.REEVALUATIONS.labels("PropagationPolicy", "kept")._value.get())


def _moved() -> float:
    return float(metrics.REPLICAS_MOVED._value.get())


def _rss_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process, in MB. Not ``getrusage``'s
    ``ru_maxrss``: Linux folds the replaced memory's peak into it at exec, so in a process
    started by fork and exec it reports at least the parent's resident memory at the fork
    (here the parent that admitted the 10,000 policies, about 485 MB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _quiet_logs() -> None:
    """Production logging (structlog JSON lines), written to /dev/null."""
    sink = open(os.devnull, "w")  # noqa: SIM115 - held for the process
    with contextlib.redirect_stdout(sink):
        logs.configure("info")


def _answered_by(loop: Follower, api: Memory) -> Rebalancer:
    """Every list and write of ``loop`` (its caches, its keepers) answered by ``api``; its
    rebalancer."""
    for cache in loop.caches:
        cache.objects = lambda _api: api  # type: ignore[attr-defined]
    loop.objects = api  # type: ignore[assignment]
    mover = next(k.rebalancer for k in loop.keepers if isinstance(k, Rebalancing))
    if mover is None:
        raise RuntimeError("rebalance is not enabled in the config")
    mover.objects = api  # type: ignore[assignment]
    return mover


def _counting(loop: Follower) -> list[int]:
    """Count the decisions ``loop`` makes (not the verdicts it holds)."""
    decided = [0]
    decide = loop.rules.decide

    def counted(*args: Any) -> Any:
        decided[0] += 1
        return decide(*args)

    loop.rules.decide = counted  # type: ignore[method-assign,assignment]
    return decided


def _one_zone_changed(ctx: kinds.Context, values: dict[str, float]) -> kinds.Context:
    """``ctx`` after a refresh that brought :data:`CHANGED_ZONE` a new reading (1 g more;
    its outlook in ``values`` too)."""
    reading = ctx.table[CHANGED_ZONE]
    values[CHANGED_ZONE] = reading.value + 1.0
    fresh = dataclasses.replace(reading, value=values[CHANGED_ZONE])
    return dataclasses.replace(ctx, table={**ctx.table, CHANGED_ZONE: fresh}, generation=2)


async def _passes(
    cfg: Config, ctx: kinds.Context, api: Memory, changed: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The leader's work in each of :data:`PASSES`: the first sync of a term (the caches
    listed, every object decided, the keepers run), then what a tick finds with nothing
    changed, then what follows when room changed on every cluster (the fleet inventory's
    room count moves: the keepers run; no object is decided again, room is not an input
    of a placement)."""
    from kubernetes_asyncio import client  # noqa: PLC0415

    async with client.ApiClient() as kube:
        values = {zone: reading.value for zone, reading in ctx.table.items()}

        def outlook(zone: str, hours: int, _method: object) -> list[float]:
            return [values[zone]] * (hours + 1)  # the grid holds still: nothing to switch

        now = [ctx]
        events = EventRecorder(kube, "bench")
        events.events = api  # type: ignore[assignment]
        rooms = [0]
        loop = Follower(kube, cfg, lambda: now[0], Leading(), events=events, outlook=outlook)
        keepers = Rebalancing(loop, rooms=lambda: rooms[0])
        mover = _answered_by(loop, api)
        inner = mover.rebalance
        spent: list[tuple[float, collections.Counter[str]]] = []

        async def timed(
            policies: Any, ranked: kinds.Context, rewritten: Any = ()
        ) -> collections.Counter[str]:
            cpu = time.process_time()
            outcomes = await inner(policies, ranked, rewritten)
            spent.append((time.process_time() - cpu, outcomes))
            return outcomes

        mover.rebalance = timed  # type: ignore[method-assign,assignment]

        decided = _counting(loop)

        async def first() -> int:
            return await loop.sync()

        async def tick() -> int:
            """One tick of the runner: the inputs looked at, what they queued decided
            (by the workers, here in turn), the keepers if something changed."""
            loop.poll()
            before = loop.written
            while (key := loop.queue.get_nowait()) is not None:
                await loop.reconcile(key)
                loop.queue.done(key)
            if keepers.changed():
                await keepers.run()
            return loop.written - before

        results = []
        for n, what in enumerate(PASSES, 1):
            if what == ONE_ZONE:  # a refresh brought one zone a new reading
                now[0] = _one_zone_changed(ctx, values)
            if n == len(PASSES):  # the Clusters' resource summaries changed: their room
                api.clusters = changed
                if mover.watched is not None:  # as the watch delivers them
                    mover.watched.clusters.replace(changed)
                rooms[0] += 1
                keepers._ended = float("-inf")  # the rest after the last pass is over
            kept, moved = _kept(), _moved()
            rebalancers, events_before = len(api.rebalancers), api.events
            ran, decided_before = len(spent), decided[0]
            gc.collect()
            cpu, wall = time.process_time(), time.perf_counter()
            written = await (first() if n == 1 else tick())
            cpu_s, wall_s = time.process_time() - cpu, time.perf_counter() - wall
            rebalance_s, outcomes = spent[-1] if len(spent) > ran else (0.0, collections.Counter())
            looked = sum(outcomes.values())
            results.append({
                "pass": what,
                "cpu_seconds": round(cpu_s, 2),
                "reevaluate_cpu_seconds": round(cpu_s - rebalance_s, 2),
                "rebalance_cpu_seconds": round(rebalance_s, 2),
                "wall_seconds": round(wall_s, 2),
                "kept": int(_kept() - kept),
                "decided": decided[0] - decided_before,
                "written": written,
                "moves": len(api.rebalancers) - rebalancers,
                "events": api.events - events_before,
                "replicas_moved": int(_moved() - moved),
                "outcomes": dict(sorted(outcomes.items()))
                | ({"nothing_to_move": POLICIES - looked} if looked else {}),
            })  # fmt: skip
        return results


def answer(objs: list[dict[str, Any]], n: int, first: int) -> bytes:
    """Page ``n`` of a list answer, from ``objs[first]`` on, as the API server sends it."""
    more = first + PAGE < len(objs)
    continued = {"continue": str(n + 1)} if more else {}
    metadata = {"resourceVersion": "1"} | continued
    page = objs[first : first + PAGE]
    return orjson.dumps({"apiVersion": "v1", "metadata": metadata, "items": page})


LISTS = ("policies", "bindings", "clusters", "clusters-changed")
PAGED = ("policies", "bindings")
"""The lists the API answers a page at a time, from files (another process's memory)."""
PAGE = LIST_PAGE
ONE_ZONE = "a feed refresh changing one zone's reading"
CHANGED_ZONE = "Z07"
"""The zone whose reading the refresh changes (two of the clusters are in it)."""
PASSES = (
    "first sync of a term, room as scheduled",
    "a tick with nothing changed",
    ONE_ZONE,
    "room changed on every cluster",
)
"""What is measured, in order: a leader's term starts by deciding every object once;
after that only a change makes work (the object, the intensities, the fleet)."""


def measure(folder: Path) -> dict[str, Any]:
    """The passes in a process of their own: the four list answers in ``folder`` parsed
    (one JSON document each, as a list call's answer is), then the two passes; what
    they measured, with the resident memory at each stage."""
    os.sched_setaffinity(0, {int(SERVER_CPU)})
    _quiet_logs()
    collector.tune()  # as the app manager does
    cfg = config()
    ctx = kinds.Context(config=cfg, table=table(), now=NOW, generation=1)
    gc.collect()
    stages = {"start": _rss_mb("VmRSS")}

    def read(name: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads((folder / f"{name}.json").read_bytes())
        return items

    api = Memory(
        sorted(folder.glob("policies-*.json")),
        sorted(folder.glob("bindings-*.json")),
        read("clusters"),
    )
    changed = read("clusters-changed")
    gc.collect()
    stages["clusters"] = _rss_mb("VmRSS")
    passes = asyncio.run(_passes(cfg, ctx, api, changed))
    stages["passes"] = _rss_mb("VmRSS")
    return {
        "passes": passes,
        "writes_proposed": api.writes,
        "rss_after_mb": stages,
        "peak_rss_mb": _rss_mb("VmHWM"),
    }


def large(**_: Any) -> dict[str, Any]:
    """The same passes over 100,000 policies on 1,000 clusters."""
    scale(*LARGE)
    return main(bench="reevaluate-large")


def short(**_: Any) -> dict[str, Any]:
    """The same at 300 policies on 20 clusters, recorded nowhere: what CI runs so the
    benchmark cannot break unseen (``python -m bench reevaluate-short``)."""
    scale(300, 20, TARGET_CPU_SECONDS, TARGET_RSS_MB)
    return main(bench="reevaluate-short", record=False)


def main(bench: str = "reevaluate", record: bool = True, **_: Any) -> dict[str, Any]:
    os.sched_setaffinity(0, {int(SERVER_CPU)})
    cfg = config()
    ctx = kinds.Context(config=cfg, table=table(), now=NOW, generation=1)
    started = time.perf_counter()
    items = stored(ctx)
    admitted_s = time.perf_counter() - started
    bound_zones = reachable()
    fleet = Fleet()
    bound = bindings(items, fleet)
    lists = [items, bound, fleet.clusters(1)]
    fleet.shrink_others(random.Random(19))
    lists.append(fleet.clusters(2))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, objs in zip(LISTS, lists, strict=True):
            if name in PAGED:  # the API server's pages, as it would send them
                for n, i in enumerate(range(0, len(objs), PAGE)):
                    (folder / f"{name}-{n:04d}.json").write_bytes(answer(objs, n, i))
                continue
            (folder / f"{name}.json").write_text(json.dumps(objs))
        del items, lists
        cmd = ["taskset", "-c", SERVER_CPU, sys.executable, "-m", "bench.reevaluate", tmp,
               str(POLICIES), str(CLUSTERS)]  # fmt: skip
        subprocess.run(cmd, check=True)
        measured = json.loads((folder / "measured.json").read_text())
    passes = measured["passes"]
    stages = measured["rss_after_mb"]
    rss, peak = stages["passes"], measured["peak_rss_mb"]
    writes = measured["writes_proposed"]
    worst = max(p["cpu_seconds"] for p in passes)
    first, steady, zone, second = passes
    reach = sum(1 for p in bound_zones if CHANGED_ZONE in p)
    result = {
        "policies": POLICIES,
        "bindings": len(bound),
        "clusters": CLUSTERS,
        "cpu_seconds": worst,
        "passes": passes,
        "moves_planned": second["moves"],
        "replicas_moved": second["replicas_moved"],
        "writes_proposed": writes,
        "rss_mb": round(rss),
        "peak_rss_mb": round(peak),
        "rss_after_mb": {k: round(v) for k, v in stages.items()},
        "admission_seconds": round(admitted_s, 1),
        "machine": machine(),
    }
    met = (
        worst < TARGET_CPU_SECONDS
        and steady["cpu_seconds"] <= IDLE_CPU_SECONDS
        and peak < TARGET_RSS_MB
        and writes == 0
        and all(p["written"] == 0 for p in passes)
        and first["kept"] == POLICIES
        and zone["decided"] == reach
        and steady["kept"] == second["kept"] == 0
        and second["moves"] > 0
    )
    warm = max(steady["cpu_seconds"], second["cpu_seconds"])
    warm_met = warm < TARGET_CPU_SECONDS
    verdict = "Targets met" if met else "Targets NOT met"

    def cpu(p: Mapping[str, Any]) -> str:
        return (
            f"{p['cpu_seconds']:.2f} s ({p['reevaluate_cpu_seconds']:.2f} s re-evaluation "
            f"+ {p['rebalance_cpu_seconds']:.2f} s rebalancer)"
        )

    def outcomes(p: Mapping[str, Any]) -> str:
        return ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in p["outcomes"].items())

    table_md = f"""\
| the leader's work, {POLICIES:,} managed ordered-fill PropagationPolicies and their ResourceBindings, {CLUSTERS:,} clusters | measured | target |
|---|---:|---:|
| CPU seconds on one core, first sync of a term (caches listed, every object decided, keepers) | {cpu(first)} | < {TARGET_CPU_SECONDS:g} s |
| CPU seconds on one core, a tick with nothing changed | {steady["cpu_seconds"]:.3f} s | ≤ {IDLE_CPU_SECONDS:g} s (1 % of a core at a tick a second) |
| CPU seconds on one core, a feed refresh changing one zone's reading (of 50) | {zone["cpu_seconds"]:.2f} s: {zone["decided"]:,} policies decided again, the {reach:,} that can place there | only those |
| CPU seconds on one core, room changed on every cluster (the rebalancer; no object decided again) | {cpu(second)} | < {TARGET_CPU_SECONDS:g} s |
| wall time of the four | {first["wall_seconds"]:.2f} s / {steady["wall_seconds"]:.3f} s / {zone["wall_seconds"]:.2f} s / {second["wall_seconds"]:.2f} s | |
| policies kept / writes proposed | {first["kept"]:,} / {writes}, {steady["kept"]:,} / 0 and {second["kept"]:,} / 0 | {POLICIES:,} / 0, 0 / 0, 0 / 0 |
| moves planned, each (WorkloadRebalancers; Events) | {first["moves"]:,} / {steady["moves"]:,} / **{second["moves"]:,}** ({second["events"]:,} Events, {second["replicas_moved"]:,} replicas) | room changed > 0 |
| bindings by outcome, room changed | {outcomes(second)} | |
| resident memory after them (peak) | {rss:.0f} MB ({peak:.0f} MB) | < {TARGET_RSS_MB:g} MB |

{verdict}{"" if met else (" (after the first sync: met)" if warm_met else "")}. Resident memory after start-up {stages["start"]:.0f} MB, with the Clusters \
{stages["clusters"]:.0f} MB, after the four {rss:.0f} MB (policies and bindings listed a \
page of {PAGE} at a time; the cache holds each managed policy as the JSON the API sent, \
LZ4-packed). First \
sync bindings by outcome: {outcomes(first)}. Admitting the {POLICIES:,} policies first took {admitted_s:.1f} s. Machine: {machine()}.
"""  # noqa: E501
    result["targets_met"] = met
    if record:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{bench}.json").write_text(json.dumps(result, indent=2) + "\n")
        write_table(bench, table_md)
    print(table_md)
    return result


if __name__ == "__main__":
    measured_in = Path(sys.argv[1])
    if len(sys.argv) > 3:
        scale(int(sys.argv[2]), int(sys.argv[3]), TARGET_CPU_SECONDS, TARGET_RSS_MB)
    (measured_in / "measured.json").write_text(json.dumps(measure(measured_in)))
