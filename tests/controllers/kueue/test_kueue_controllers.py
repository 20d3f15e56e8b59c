"""The leader's Kueue controllers against two in-process API servers (:mod:`tests.kubeapi`):
a MultiKueue manager (Workloads, ClusterQueue with the MultiKueue check, MultiKueueConfig,
MultiKueueClusters with their zones, kubeconfig Secrets) and one worker server holding
both workers' LocalQueues and ClusterQueues (each MultiKueueCluster's Secret points at it,
its ClusterQueues named per worker).

The dispatcher nominates the greenest worker with room as Kueue's admission (field manager
``kueue-admission``, the admission status as read), explains it (annotation, Event),
passes over a full worker, widens after a round and never revokes; nominates every active
worker at once, as Kueue's all-at-once dispatcher would, what carbon does not place (not
opted in, opted out by the Workload's or its Job's label, a malformed annotation: a Warning
Event naming it; no worker readable); waits on other checks, leaves another dispatcher's
nominations alone, writes nothing without the Lease, and counts the Workloads nobody
nominates past a round (``carbonshift_kueue_workloads_waiting``). In ``order`` mode it
puts an opted-in MultiKueueConfig's clusters in carbon order. The carbon window keeps its
AdmissionCheck Active, holds a Workload Pending until the greener hour of the grid it is
about to run on, is Ready at the deadline, takes the delay of the check's CarbonWindow,
and is Ready at once for what did not opt in, a Job labelled out or a malformed annotation.

Most tests drive a one-off sync (every key reconciled once, the caches listed first). The
started ones check the keyed runs: a term waits for the caches, then a Workload's change
reconciles that Workload alone and a refresh that changed nothing reconciles nothing; a
feed refresh queues only the Workloads whose workers' zones changed; a refused write is
retried with a doubling back-off; losing the Lease drains the queue and the next term
decides each key once; a reconcile says when its key is due again.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from tests import kubeapi
from tests.support import NOW, eventually, reading
from webhook.controllers.kueue.carbon_window import CarbonWindow
from webhook.controllers.kueue.dispatch import KueueDispatcher
from webhook.controllers.kueue.fleet import WORKLOAD
from webhook.integrations import Fleet, Wiring, controllers
from webhook.kinds.reevaluation import OutlookMethod
from webhook.kube import kueue as kube
from webhook.kube.events import EventRecorder
from webhook.model import vocabulary
from webhook.model.config import parse
from webhook.model.intensity import IntensityTable

API = kube.API_VERSION
NS = "batch"
ZONES = {"worker-a": "PL", "worker-b": "SE-SE3"}
"""worker-b's grid is the greener."""
CHECK = "multikueue"
WINDOW = "carbon-window"


@dataclasses.dataclass
class Feed:
    values: dict[str, float]
    ahead: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    @dataclasses.dataclass
    class _Snapshot:
        table: IntensityTable

    def snapshot(self) -> Feed._Snapshot:
        return self._Snapshot({z: reading(z, v) for z, v in self.values.items()})

    def want(self, zone: str) -> None:
        pass

    def outlook(self, zone: str, horizon: int, method: OutlookMethod) -> list[float] | None:
        if zone in self.ahead:
            return self.ahead[zone][: horizon + 1]
        value = self.values.get(zone)
        return None if value is None else [value] * (horizon + 1)


def namespace(name: str, enabled: bool = True) -> dict[str, Any]:
    labels = {vocabulary.ENABLED: "true"} if enabled else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def cluster_queue(
    name: str, cpu: str, used: str = "0", checks: list[str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                ],
            }
        ]
    }
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    status = {
        "flavorsReservation": [{"name": "default", "resources": [{"name": "cpu", "total": used}]}]
    }
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    }


def workload(
    name: str,
    cpu: str = "1",
    *,
    checks: dict[str, str] | None = None,
    nominated: list[str] | None = None,
    annotations: dict[str, str] | None = None,
    job: str | None = None,
    namespace: str = NS,
) -> dict[str, Any]:
    """A Workload with quota reserved on the manager's ClusterQueue."""
    status: dict[str, Any] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "count": 1, "resourceUsage": {"cpu": cpu}}],
        },
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "",
                "lastTransitionTime": "2026-01-01T11:59:00Z",
            }
        ],
        "admissionChecks": [
            {"name": n, "state": s, "message": "", "lastTransitionTime": "2026-01-01T11:59:00Z"}
            for n, s in (checks or {CHECK: "Pending"}).items()
        ],
    }
    if nominated:
        status["nominatedClusterNames"] = nominated
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": annotations or {}}
    if job:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "u", "controller": True}
        ]
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": meta,
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1}]},
        "status": status,
    }


def kubeconfig_secret(name: str, url: str) -> dict[str, Any]:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "w",
        "clusters": [{"name": "w", "cluster": {"server": url}}],
        "users": [{"name": "w", "user": {"token": "t"}}],
        "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
    }
    data = base64.b64encode(yaml.safe_dump(document).encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "kueue-system"},
        "data": {"kubeconfig": data},
    }


@dataclasses.dataclass
class World:
    manager: kubeapi.KubeApi
    worker: kubeapi.KubeApi
    workers: kube.Workers
    gate: kubeapi.Gate


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with kubeapi.serve() as manager, kubeapi.serve() as worker:
        url = str(worker.api.configuration.host)
        manager.add(namespace(NS))
        manager.add(namespace("elsewhere", enabled=False))
        manager.add(cluster_queue("cq", "100", checks=[CHECK]))
        manager.add(
            {
                "apiVersion": API,
                "kind": "AdmissionCheck",
                "metadata": {"name": CHECK},
                "spec": {
                    "controllerName": kube.MULTIKUEUE_CONTROLLER,
                    "parameters": {
                        "apiGroup": kube.GROUP,
                        "kind": "MultiKueueConfig",
                        "name": "mk",
                    },
                },
            }
        )
        manager.add(
            {
                "apiVersion": API,
                "kind": "MultiKueueConfig",
                "metadata": {"name": "mk"},
                "spec": {"clusters": ["worker-a", "worker-b"]},
            }
        )
        for name, zone in ZONES.items():
            manager.add(
                {
                    "apiVersion": API,
                    "kind": "MultiKueueCluster",
                    "metadata": {"name": name, "labels": {vocabulary.ZONE: zone}},
                    "spec": {
                        "clusterSource": {
                            "kubeConfig": {"locationType": "Secret", "location": name}
                        }
                    },
                    "status": {"conditions": [{"type": "Active", "status": "True"}]},
                }
            )
            manager.add(kubeconfig_secret(name, url))
            # one worker server for both: each worker's LocalQueue lives in its own namespace
            # name on it, so they are told apart by the ClusterQueue the queue points to.
        worker.add(
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": "user-queue", "namespace": NS},
                "spec": {"clusterQueue": "cq-worker"},
            }
        )
        worker.add(cluster_queue("cq-worker", "4"))
        workers = kube.Workers(manager.api, "kueue-system")
        try:
            yield World(manager, worker, workers, kubeapi.Gate())
        finally:
            await workers.close()


def dispatcher(
    world: World, feed: Feed, clock: Any = lambda: NOW, caches: Any = None, **kueue: Any
) -> KueueDispatcher:
    config = parse(
        {"kueue": {"enabled": True, **kueue}, "hysteresis": {"margin": 0.1, "dwell_hours": 1}}
    )
    events = EventRecorder(world.manager.api, "replica-0", world.gate)
    return KueueDispatcher(
        world.manager.api, config, feed, world.gate, world.workers, events=events, clock=clock,
        caches=caches,
    )  # fmt: skip


CREATED = vocabulary.parse_time(kubeapi.CREATED)
"""Every Workload's creationTimestamp."""
SOON = CREATED + timedelta(hours=1)
"""The carbon window's clock: an hour after the Workloads were created."""


def window(
    world: World, feed: Feed, clock: Any = lambda: SOON, caches: Any = None, **kueue: Any
) -> CarbonWindow:
    config = parse({"kueue": {"enabled": True, **kueue}})
    events = EventRecorder(world.manager.api, "replica-0", world.gate)
    return CarbonWindow(
        world.manager.api, config, feed, world.gate, world.workers, events=events, clock=clock,
        caches=caches,
    )  # fmt: skip


GREEN = Feed({"PL": 700.0, "SE-SE3": 30.0})


def stored(world: World, name: str, namespace: str = NS) -> dict[str, Any]:
    return world.manager.get("workloads", name, namespace)


def reasons(world: World) -> list[str]:
    return [e["reason"] for e in world.manager.items("events.events.k8s.io")]


async def test_the_greenest_worker_with_room_is_nominated_as_kueues_admission(world: World) -> None:
    world.manager.add(workload("job-1"))
    assert await dispatcher(world, GREEN).sync() == {"nominated": 1}
    held = stored(world, "job-1")
    assert held["status"]["nominatedClusterNames"] == ["worker-b"]
    assert held["status"]["admission"]["clusterQueue"] == "cq"  # the admission status kept
    [status_write] = [c for c in world.manager.calls("PATCH") if c.where.subresource == "status"]
    assert status_write.query["fieldManager"] == "kueue-admission"
    assert status_write.body["metadata"]["resourceVersion"]
    decision = json.loads(held["metadata"]["annotations"][vocabulary.DECISION])
    assert decision["ranked"] == ["worker-b", "worker-a"]
    assert decision["means"] == {"SE-SE3": 30, "PL": 700}
    assert decision["nominatedAt"] == vocabulary.format_time(NOW)
    assert reasons(world) == ["CarbonDispatched"]
    assert await dispatcher(world, GREEN).sync() == {}  # nothing left to change


async def test_with_no_room_anywhere_every_worker_is_nominated_greenest_first(world: World) -> None:
    world.worker.add(cluster_queue("cq-worker", "4", used="4"))  # both workers full...
    world.manager.add(workload("job-1"))
    assert await dispatcher(world, GREEN).sync() == {"nominated": 1}
    # ...so every worker that can run it is nominated, greenest first
    assert stored(world, "job-1")["status"]["nominatedClusterNames"] == ["worker-b", "worker-a"]


async def test_in_flight_nominations_count_against_room(world: World) -> None:
    world.manager.add(workload("first", cpu="3", nominated=["worker-b"]))
    world.manager.add(workload("second", cpu="2"))
    await dispatcher(world, GREEN).sync()
    assert stored(world, "second")["status"]["nominatedClusterNames"] == ["worker-a"]


async def test_a_round_without_admission_widens_and_never_revokes(world: World) -> None:
    since = vocabulary.format_time(NOW - timedelta(seconds=61))
    world.manager.add(
        workload(
            "job-1",
            nominated=["worker-a"],
            annotations={vocabulary.DECISION: json.dumps({"nominatedAt": since})},
        )
    )
    assert await dispatcher(world, GREEN).sync() == {"widened": 1}
    held = stored(world, "job-1")
    assert held["status"]["nominatedClusterNames"] == ["worker-a", "worker-b"]
    assert json.loads(held["metadata"]["annotations"][vocabulary.DECISION])["nominatedAt"] == since


async def test_a_workload_another_check_holds_or_being_evicted_is_left_alone(
    world: World,
) -> None:
    world.manager.add(workload("held", checks={CHECK: "Pending", WINDOW: "Pending"}))
    evicted = workload("evicted")
    evicted["status"]["conditions"].append({"type": "Evicted", "status": "True"})
    world.manager.add(evicted)
    held = {CHECK: "Pending", WINDOW: "Pending"}
    world.manager.add(workload("other", namespace="elsewhere", checks=held))
    assert await dispatcher(world, GREEN).sync() == {}
    assert world.manager.writes() == []


def event_of(world: World, name: str, namespace: str = NS) -> dict[str, Any]:
    [found] = [
        e
        for e in world.manager.items("events.events.k8s.io")
        if (e["regarding"]["name"], e["regarding"]["namespace"]) == (name, namespace)
    ]
    return found


async def test_what_carbon_does_not_place_goes_to_every_active_worker_at_once(
    world: World,
) -> None:
    """Kueue's dispatcherName is carbonshift's: nobody else nominates. A Workload carbon
    does not place is nominated at once to every active worker of its MultiKueueConfig,
    as Kueue's own all-at-once dispatcher would, and never waits for carbonshift."""
    world.worker.add(cluster_queue("cq-worker", "10"))  # room for all of them
    world.manager.add(workload("other", namespace="elsewhere"))  # namespace not opted in
    opted_out = workload("opted-out")
    opted_out["metadata"]["labels"] = {vocabulary.ENABLED: "false"}
    world.manager.add(opted_out)
    world.manager.add(job("job-out", {}, labels={vocabulary.ENABLED: "false"}))
    world.manager.add(workload("job-labelled", job="job-out"))
    world.manager.add(job("job-bad", {vocabulary.MAX_DELAY: "banana"}))
    world.manager.add(workload("malformed", job="job-bad"))
    world.manager.add(workload("green"))  # opted in: carbon places it
    assert await dispatcher(world, GREEN).sync() == {"all_at_once": 4, "nominated": 1}
    assert stored(world, "green")["status"]["nominatedClusterNames"] == ["worker-b"]
    every = ["worker-a", "worker-b"]
    other = world.manager.get("workloads", "other", "elsewhere")
    assert other["status"]["nominatedClusterNames"] == every
    assert other["status"]["admission"]["clusterQueue"] == "cq"  # Kueue's admission status kept
    for name in ("opted-out", "job-labelled", "malformed"):
        assert stored(world, name)["status"]["nominatedClusterNames"] == every, name
    writes = [c for c in world.manager.calls("PATCH") if c.where.subresource == "status"]
    assert {c.query["fieldManager"] for c in writes} == {"kueue-admission"}
    recorded = json.loads(other["metadata"]["annotations"][vocabulary.DECISION])
    assert recorded["nominated"] == every
    assert recorded["nominatedAt"] == vocabulary.format_time(NOW)
    assert "not opted in" in recorded["reason"], recorded
    assert (
        "its Job is labelled carbonshift.io/enabled=false"
        in json.loads(
            stored(world, "job-labelled")["metadata"]["annotations"][vocabulary.DECISION]
        )["reason"]
    )
    warning = event_of(world, "malformed")
    assert (warning["type"], warning["reason"]) == ("Warning", "CarbonDispatched")
    assert "carbonshift.io/max-delay" in warning["note"], warning
    assert "banana" in warning["note"], warning
    assert event_of(world, "other", "elsewhere")["type"] == "Normal"
    assert await dispatcher(world, GREEN).sync() == {}  # nothing left to change


async def test_all_at_once_leaves_out_an_inactive_worker_and_adds_it_once_active(
    world: World,
) -> None:
    cluster = world.manager.get("multikueueclusters", "worker-b")
    cluster["status"] = {"conditions": [{"type": "Active", "status": "False"}]}
    world.manager.add(cluster)
    world.manager.add(workload("other", namespace="elsewhere"))
    assert await dispatcher(world, GREEN).sync() == {"all_at_once": 1}
    other = world.manager.get("workloads", "other", "elsewhere")
    assert other["status"]["nominatedClusterNames"] == ["worker-a"]
    cluster = world.manager.get("multikueueclusters", "worker-b")
    cluster["status"] = {"conditions": [{"type": "Active", "status": "True"}]}
    world.manager.add(cluster)
    assert await dispatcher(world, GREEN).sync() == {"widened": 1}
    other = world.manager.get("workloads", "other", "elsewhere")
    assert other["status"]["nominatedClusterNames"] == ["worker-a", "worker-b"]


async def test_an_opted_in_workload_no_worker_can_be_read_for_goes_everywhere(
    world: World,
) -> None:
    world.worker.remove("localqueues", "user-queue", NS)  # no worker's queue to read
    world.manager.add(workload("job-1"))
    assert await dispatcher(world, GREEN).sync() == {"all_at_once": 1}
    held = stored(world, "job-1")
    assert held["status"]["nominatedClusterNames"] == ["worker-a", "worker-b"]
    reason = json.loads(held["metadata"]["annotations"][vocabulary.DECISION])["reason"]
    assert "no worker's queues could be read" in reason, reason


async def test_another_dispatchers_nomination_is_left_alone_on_every_path(world: World) -> None:
    world.manager.add(workload("other", namespace="elsewhere", nominated=["worker-a"]))
    assert await dispatcher(world, GREEN).sync() == {}
    assert world.manager.writes() == []


def waiting() -> float | None:
    return REGISTRY.get_sample_value("carbonshift_kueue_workloads_waiting")


LATER = NOW + timedelta(seconds=61)
"""Past a round (60 s) since every Workload's quota was reserved (11:59)."""


async def test_workloads_nobody_nominates_past_a_round_are_counted(world: World) -> None:
    """Kueue's dispatcherName names carbonshift while carbonshift does not dispatch
    (``dispatch: none``): the gauge shows who waits, not those another check holds."""
    with_window(world)
    world.manager.add(workload("stuck", checks={WINDOW: "Ready", CHECK: "Pending"}))
    world.manager.add(workload("held", checks={WINDOW: "Pending", CHECK: "Pending"}))
    world.manager.add(workload("sent", checks={WINDOW: "Ready", CHECK: "Pending"},
                               nominated=["worker-a"]))  # fmt: skip
    idle = dispatcher(world, GREEN, clock=lambda: LATER, dispatch="none")
    with capture_logs() as logs:
        assert await idle.sync() == {}
    assert waiting() == 1
    [said] = [e for e in logs if e["event"] == "kueue_workloads_waiting"]
    assert said["workloads"] == [f"{NS}/stuck"], said
    assert world.manager.writes() == []
    idle.lost()
    assert waiting() == 0
    young = dispatcher(world, GREEN, dispatch="none")  # a minute after: within the round
    assert await young.sync() == {}
    assert waiting() == 0
    # carbonshift dispatching: nominated in this very pass, so not waiting
    assert await dispatcher(world, GREEN, clock=lambda: LATER).sync() == {"nominated": 1}
    assert waiting() == 0


async def test_nothing_is_written_without_the_lease(world: World) -> None:
    world.manager.add(workload("job-1"))
    world.gate.lose()
    assert await dispatcher(world, GREEN).sync() == {}
    assert world.manager.writes() == []


async def test_order_mode_puts_an_opted_in_config_in_carbon_order(world: World) -> None:
    config = world.manager.get("multikueueconfigs", "mk")
    config["metadata"]["labels"] = {vocabulary.ENABLED: "true"}
    world.manager.add(config)
    assert await dispatcher(world, GREEN, dispatch="order").sync() == {"ordered": 1}
    held = world.manager.get("multikueueconfigs", "mk")
    assert held["spec"]["clusters"] == ["worker-b", "worker-a"]
    assert "orderedAt" in json.loads(held["metadata"]["annotations"][vocabulary.DECISION])
    assert "CarbonOrderChanged" in reasons(world)
    # the grid flips at once: held for the dwell (1 h) since the order was written
    flipped = Feed({"PL": 30.0, "SE-SE3": 700.0})
    assert await dispatcher(world, flipped, dispatch="order").sync() == {}
    assert world.manager.get("multikueueconfigs", "mk")["spec"]["clusters"] == [
        "worker-b",
        "worker-a",
    ]


def with_window(world: World, parameters: str | None = None) -> None:
    check: dict[str, Any] = {
        "apiVersion": API,
        "kind": "AdmissionCheck",
        "metadata": {"name": WINDOW},
        "spec": {"controllerName": "carbonshift.io/carbon-window"},
    }
    if parameters:
        check["spec"]["parameters"] = {
            "apiGroup": "carbonshift.io",
            "kind": "CarbonWindow",
            "name": parameters,
        }
    world.manager.add(check)
    world.manager.add(cluster_queue("cq", "100", checks=[WINDOW, CHECK]))


def job(
    name: str, annotations: dict[str, str], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": annotations,
            "labels": labels or {},
        },
    }


def check_of(world: World, name: str) -> dict[str, Any]:
    held = stored(world, name)["status"]["admissionChecks"]
    found: dict[str, Any] = next(c for c in held if c["name"] == WINDOW)
    return found


LATER_GREEN = Feed(
    {"PL": 700.0, "SE-SE3": 300.0}, ahead={"SE-SE3": [300.0, 300.0, 40.0, 40.0] + [300.0] * 30}
)
"""worker-b's grid is the greener, and greener still two hours from now."""


async def test_the_check_is_active_and_holds_for_the_greener_hour(world: World) -> None:
    with_window(world)
    world.manager.add(job("job-1", {vocabulary.MAX_DELAY: "6h"}))
    world.manager.add(workload("wl-1", checks={WINDOW: "Pending", CHECK: "Pending"}, job="job-1"))
    assert await window(world, LATER_GREEN).sync() == {"active": 1, "Pending": 1}
    [active] = world.manager.get("admissionchecks", WINDOW)["status"]["conditions"]
    assert (active["type"], active["status"]) == ("Active", "True")
    state = check_of(world, "wl-1")
    assert state["state"] == "Pending"
    assert "from 2026-01-01T03:00:00Z" in state["message"]
    assert "(grid SE-SE3)" in state["message"]
    assert "CarbonWindowPending" in reasons(world)
    assert await window(world, LATER_GREEN).sync() == {}  # the same hold: no rewrite
    feed_then = Feed({"PL": 700.0, "SE-SE3": 40.0})
    at_green = window(world, feed_then, clock=lambda: SOON + timedelta(hours=2))
    assert await at_green.sync() == {"Ready": 1}
    assert check_of(world, "wl-1")["state"] == "Ready"


async def test_never_held_past_the_deadline(world: World) -> None:
    with_window(world)
    world.manager.add(job("job-1", {vocabulary.MAX_DELAY: "6h"}))
    world.manager.add(workload("wl-1", checks={WINDOW: "Pending"}, job="job-1"))
    late = window(world, LATER_GREEN, clock=lambda: CREATED + timedelta(hours=6))
    assert await late.sync() == {"active": 1, "Ready": 1}
    assert "deadline" in check_of(world, "wl-1")["message"]


async def test_the_carbon_window_parameters_give_the_default_delay(world: World) -> None:
    with_window(world, parameters="overnight")
    world.manager.add(
        {
            "apiVersion": "carbonshift.io/v1alpha1",
            "kind": "CarbonWindow",
            "metadata": {"name": "overnight"},
            "spec": {"maxDelay": "6h"},
        }
    )
    world.manager.add(workload("wl-1", checks={WINDOW: "Pending"}))
    world.manager.add(workload("wl-2", checks={WINDOW: "Pending"}, job="job-2"))
    world.manager.add(job("job-2", {vocabulary.MAX_DELAY: "30m"}))
    await window(world, LATER_GREEN).sync()
    assert check_of(world, "wl-1")["state"] == "Pending"  # the CarbonWindow's 6 h
    assert check_of(world, "wl-2")["state"] == "Ready"  # its own 30 min


async def test_ready_at_once_when_not_opted_in_or_malformed(world: World) -> None:
    with_window(world)
    world.manager.add(workload("other", checks={WINDOW: "Pending"}, namespace="elsewhere"))
    world.manager.add(job("job-1", {vocabulary.MAX_DELAY: "soon"}))
    world.manager.add(workload("wl-1", checks={WINDOW: "Pending"}, job="job-1"))
    assert await window(world, LATER_GREEN, default_max_delay_seconds=21600).sync() == {
        "active": 1,
        "Ready": 2,
    }
    other = world.manager.get("workloads", "other", "elsewhere")["status"]["admissionChecks"][0]
    assert other["state"] == "Ready"
    assert "max-delay" in check_of(world, "wl-1")["message"]


async def test_ready_at_once_for_a_job_labelled_out(world: World) -> None:
    with_window(world)
    world.manager.add(
        job("job-1", {vocabulary.MAX_DELAY: "6h"}, labels={vocabulary.ENABLED: "false"})
    )
    world.manager.add(workload("wl-1", checks={WINDOW: "Pending"}, job="job-1"))
    assert await window(world, LATER_GREEN).sync() == {"active": 1, "Ready": 1}
    state = check_of(world, "wl-1")
    assert state["message"].startswith("carbonshift leaves it alone: opted out (its Job"), state


async def test_a_worker_without_a_readable_secret_is_left_out(world: World) -> None:
    world.manager.objects = {
        k: v
        for k, v in world.manager.objects.items()
        if not (k[2] == "secrets" and k[4] == "worker-b")
    }
    world.manager.add(workload("job-1"))
    await dispatcher(world, GREEN).sync()
    assert stored(world, "job-1")["status"]["nominatedClusterNames"] == ["worker-a"]


def test_the_application_runs_both_kueue_controllers_when_kueue_is_enabled(world: World) -> None:
    off = {s: {"enabled": False} for s in ("labels", "reevaluate", "accounting", "ocm", "carry")}
    state: Any = SimpleNamespace(feed=GREEN)
    fleet = Fleet(world.manager.api, cast(Any, world.gate), cast(Any, None), cast(Any, None),
                  cast(Any, None), world.workers)  # fmt: skip
    kube_settings: Any = None

    def names(**kueue: Any) -> list[str]:
        config = parse({**off, "kueue": kueue})
        return [c.name for c in controllers(Wiring(config, state, fleet, kube_settings))]

    assert names(enabled=True) == ["kueue_dispatch", "carbon_window"]
    # dispatch: none nominates nothing, the dispatcher only counts who waits
    assert names(enabled=True, dispatch="none") == ["kueue_dispatch", "carbon_window"]
    assert names(enabled=False) == []


async def test_a_workload_another_dispatcher_nominated_is_left_alone(world: World) -> None:
    world.manager.add(workload("job-1", nominated=["worker-a"]))  # no nominatedAt of ours
    assert await dispatcher(world, GREEN).sync() == {}
    assert world.manager.writes() == []


async def test_a_young_workload_waits_a_pass_for_the_feed_to_know_its_zones(world: World) -> None:
    """The feed was just asked for the workers' zones: no nomination, no window on no data
    while the Workload is younger than a round; after that, never held for want of it."""
    with_window(world)
    world.manager.add(job("job-1", {vocabulary.MAX_DELAY: "6h"}))
    world.manager.add(workload("wl-1", checks={WINDOW: "Pending"}, job="job-1"))
    world.manager.add(workload("wl-2", checks={CHECK: "Pending"}))
    unknown = Feed({})
    young = CREATED + timedelta(seconds=10)
    assert await window(world, unknown, clock=lambda: young).sync() == {"active": 1}
    assert await dispatcher(world, unknown, clock=lambda: young).sync() == {}
    old = CREATED + timedelta(seconds=61)
    assert await window(world, unknown, clock=lambda: old).sync() == {"Ready": 1}
    assert "no forecast" in check_of(world, "wl-1")["message"]
    assert await dispatcher(world, unknown, clock=lambda: old).sync() == {"nominated": 2}


# --- started: watched caches ------------------------------------------------------------------


@dataclasses.dataclass
class Fed(Feed):
    """A feed whose snapshot has a generation (as the real one's)."""

    generation: int = 0

    def snapshot(self) -> Any:
        table = {z: reading(z, v) for z, v in self.values.items()}
        return SimpleNamespace(table=table, generation=self.generation)


async def test_a_started_dispatcher_waits_for_its_caches_then_a_workload_event_wakes_it(
    world: World,
) -> None:
    """Started, the dispatcher passes only once its watched caches have synced; a new
    Workload is nominated on its watch event, long before the interval (an hour)."""
    world.manager.fail("GET", "workloads", 500)  # the first list fails
    world.manager.add(workload("early"))
    leader = dispatcher(world, Fed(GREEN.values), interval_seconds=3600)
    leader.tick = 0.01
    leader.start()
    try:
        caches = leader.reader.caches
        await eventually(lambda: caches.synced, "the caches synced")
        await eventually(lambda: stored(world, "early")["status"].get("nominatedClusterNames"),
                         "the Workload there before the sync nominated")  # fmt: skip
        world.manager.add(workload("job-1"))
        nominated = await eventually(
            lambda: stored(world, "job-1")["status"].get("nominatedClusterNames"),
            "the new Workload nominated on its watch event",
        )
        assert nominated == ["worker-b"]
    finally:
        await leader.stop()
    assert not leader.reader.caches.following


async def test_nothing_is_decided_before_the_caches_have_synced(world: World) -> None:
    world.manager.add(workload("job-1"))
    world.manager.fail("GET", "workloads", 500, times=1000)
    leader = dispatcher(world, GREEN)
    leader.reader.caches.start(world.manager.api)
    try:
        await eventually(lambda: world.manager.calls("GET", "workloads"), "a list asked")
        assert not leader.reader.caches.synced
        assert not leader.synced()  # a term starts only once they have
        assert await leader.sync() == {}
        assert world.manager.writes() == []
    finally:
        await leader.reader.caches.stop()


class Counted:
    """Records the keys a started controller reconciles, and the back-offs it asks."""

    def __init__(self, controller: Any) -> None:
        self.keys: list[Any] = []
        self.delays: list[float] = []
        reconcile, retry = controller.reconcile, controller.queue.retry

        async def counted(key: Any) -> float | None:
            self.keys.append(key)
            after: float | None = await reconcile(key)
            return after

        def retried(key: Any) -> float:
            delay: float = retry(key)
            self.delays.append(delay)
            return delay

        controller.reconcile, controller.queue.retry = counted, retried

    def since(self, mark: int) -> set[str]:
        return {key for _, key in self.keys[mark:]}


def settled(leader: Any, *names: str) -> bool:
    """Every Workload ``names`` shows its nomination in the cache, and the queue is idle."""
    cache = leader.reader.caches.workloads
    return leader.queue.idle and all(
        vocabulary.DECISION in ((cache.get(f"{NS}/{n}") or {}).get("metadata", {}).get(
            "annotations") or {}) for n in names
    )  # fmt: skip


async def test_a_running_dispatcher_reconciles_only_the_workload_that_changed(
    world: World,
) -> None:
    """Started and leading, the dispatcher decides each Workload once when its term
    starts; then a Workload's change is reconciled alone: the others are not decided
    again, and with nothing changed nothing is reconciled and the manager is not asked."""
    world.worker.add(cluster_queue("cq-worker", "10"))  # room for all of them
    for name in ("job-1", "job-2", "job-3"):
        world.manager.add(workload(name))
    feed = Fed(GREEN.values)
    leader = dispatcher(world, feed)
    leader.tick = 0.01
    counted = Counted(leader)
    with capture_logs() as logs:
        await changed_alone(world, leader, feed, counted)
    assert leader.outcomes == {"nominated": 3}
    # its own nomination seen before its record is not another dispatcher's
    assert not [e for e in logs if e["event"] == "kueue_nominated_by_another"]


async def changed_alone(world: World, leader: Any, feed: Fed, counted: Counted) -> None:
    """Started: every Workload decided once; a refresh that changed nothing and a change
    of one Workload."""
    leader.start()
    try:
        await eventually(
            lambda: settled(leader, "job-1", "job-2", "job-3"),
            "every Workload nominated and seen",
            seen=lambda: counted.keys,
        )
        mark, requests = len(counted.keys), len(world.manager.requests)
        feed.generation += 1  # a feed refresh that changed no zone's reading
        await eventually(lambda: leader._seen is not None and leader._seen[1] == feed.generation,
                         "the refresh polled")  # fmt: skip
        assert counted.since(mark) == set(), counted.keys[mark:]
        assert [r for r in world.manager.requests[requests:] if not r.query.get("watch")] == []
        changed = stored(world, "job-2")
        changed["metadata"]["labels"] = {"team": "b"}
        world.manager.add(changed)
        await eventually(lambda: counted.since(mark), "the changed Workload reconciled")
        await eventually(lambda: leader.queue.idle, "the queue idle")
        assert counted.since(mark) == {f"{NS}/job-2"}, counted.keys[mark:]
    finally:
        await leader.stop()
    assert not leader.reader.caches.following


def queued(controller: Any) -> set[str]:
    """The keys ready in a controller's queue (taken out)."""
    out = set()
    while (key := controller.queue.get_nowait()) is not None:
        controller.queue.done(key)
        out.add(key[1])
    return out


async def test_a_feed_refresh_queues_only_the_workloads_that_can_go_to_the_changed_zone(
    world: World,
) -> None:
    """worker-c (FR) serves a second MultiKueueConfig: a refresh that changes FR's reading
    queues that config's Workload only, one that changes PL's the other's only."""
    url = str(world.worker.api.configuration.host)
    world.manager.add(cluster_queue("cq-fr", "100", checks=["multikueue-fr"]))
    world.manager.add({
        "apiVersion": API, "kind": "AdmissionCheck", "metadata": {"name": "multikueue-fr"},
        "spec": {"controllerName": kube.MULTIKUEUE_CONTROLLER, "parameters": {
            "apiGroup": kube.GROUP, "kind": "MultiKueueConfig", "name": "mk-fr"}},
    })  # fmt: skip
    world.manager.add({"apiVersion": API, "kind": "MultiKueueConfig",
                       "metadata": {"name": "mk-fr"},
                       "spec": {"clusters": ["worker-c"]}})  # fmt: skip
    world.manager.add({
        "apiVersion": API, "kind": "MultiKueueCluster",
        "metadata": {"name": "worker-c", "labels": {vocabulary.ZONE: "FR"}},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                  "location": "worker-c"}}},
        "status": {"conditions": [{"type": "Active", "status": "True"}]},
    })  # fmt: skip
    world.manager.add(kubeconfig_secret("worker-c", url))
    world.worker.add(cluster_queue("cq-worker", "10"))
    world.manager.add(workload("to-pl-or-se"))
    french = workload("to-fr")
    french["status"]["admission"]["clusterQueue"] = "cq-fr"
    french["status"]["admissionChecks"][0]["name"] = "multikueue-fr"
    world.manager.add(french)
    feed = Fed({**GREEN.values, "FR": 50.0})
    leader = dispatcher(world, feed)
    assert await leader.sync() == {"nominated": 2}  # a term's first sync: both decided
    assert queued(leader) == set()
    feed.values["FR"], feed.generation = 60.0, feed.generation + 1
    leader.poll()
    assert queued(leader) == {f"{NS}/to-fr"}
    feed.values["PL"], feed.generation = 650.0, feed.generation + 1
    leader.poll()
    assert queued(leader) == {f"{NS}/to-pl-or-se"}
    feed.generation += 1  # refreshed, nothing changed
    leader.poll()
    assert queued(leader) == set()


async def test_a_workload_whose_nomination_fails_is_retried_with_back_off(world: World) -> None:
    world.manager.add(workload("job-1"))
    world.manager.fail("PATCH", "workloads", 500, times=2)  # the first two status writes
    leader = dispatcher(world, Fed(GREEN.values))
    leader.tick = 0.01
    counted = Counted(leader)
    with capture_logs() as logs:
        leader.start()
        try:
            await eventually(
                lambda: stored(world, "job-1")["status"].get("nominatedClusterNames"),
                "nominated after two refusals",
                seen=lambda: counted.delays,
            )
            await eventually(lambda: leader.queue.failures((WORKLOAD, f"{NS}/job-1")) == 0,
                             "the back-off reset by the success")  # fmt: skip
        finally:
            await leader.stop()
    assert counted.delays == [0.5, 1.0]  # doubled after the second failure
    failed = [e for e in logs if e["event"] == "kueue_nomination_failed"]
    assert len(failed) == 2, failed
    assert not [e for e in logs if e["event"] == "kueue_dispatch_reconcile_failed"]


async def test_losing_the_lease_drains_the_queue_and_a_new_term_decides_each_key_once(
    world: World,
) -> None:
    world.worker.add(cluster_queue("cq-worker", "10"))
    world.manager.add(workload("job-1"))
    leader = dispatcher(world, Fed(GREEN.values))
    leader.tick = 0.01
    counted = Counted(leader)
    leader.start()
    try:
        await eventually(lambda: settled(leader, "job-1"), "job-1 nominated")
        assert len(leader.queue) == 1  # due again when its round ends
        world.gate.lose()
        await eventually(
            lambda: not leader._term and len(leader.queue) == 0,
            "the term ended, its queue drained",
            seen=lambda: len(leader.queue),
        )
        writes = len(world.manager.writes())
        world.manager.add(workload("job-2"))
        await eventually(lambda: leader.reader.workload(f"{NS}/job-2"), "job-2 seen")
        assert len(leader.queue) == 0
        assert len(world.manager.writes()) == writes
        mark = len(counted.keys)
        world.gate.leading = True
        await eventually(lambda: settled(leader, "job-1", "job-2"), "job-2 nominated")
        keys = counted.keys[mark:]  # the first sync, then job-2's own writes seen
        assert sorted(keys[:2]) == [(WORKLOAD, f"{NS}/job-1"), (WORKLOAD, f"{NS}/job-2")], keys
        assert set(keys[2:]) <= {(WORKLOAD, f"{NS}/job-2")}, keys
        nominated = [w for w in world.manager.writes()[writes:] if w.where.subresource == "status"]
        assert [w.where.name for w in nominated] == ["job-2"]  # job-1 stands as it was
    finally:
        await leader.stop()


async def test_both_controllers_share_the_caches_and_with_nothing_changed_reconcile_nothing(
    world: World,
) -> None:
    with_window(world)
    world.manager.add(workload("job-1", checks={WINDOW: "Ready", CHECK: "Pending"}))
    feed = Fed(GREEN.values)
    leader = dispatcher(world, feed)
    holder = window(world, feed, caches=leader.reader.caches)
    assert holder.caches == leader.caches  # one watch per resource, started with the first
    leader.tick = holder.tick = 0.01
    counted = [Counted(leader), Counted(holder)]
    leader.start()
    holder.start()
    try:
        active = leader.reader.caches.admission_checks
        await eventually(lambda: settled(leader, "job-1") and holder.queue.idle
                         and condition_of(active.get(WINDOW), "Active") == "True",
                         "nominated, the check Active and both seen")  # fmt: skip
        marks, requests = [len(c.keys) for c in counted], len(world.manager.requests)
        feed.generation += 1  # a refresh that changed nothing
        await eventually(lambda: all(c._seen is not None and c._seen[1] == feed.generation
                                     for c in (leader, holder)), "the refresh polled")  # fmt: skip
        assert [c.keys[m:] for c, m in zip(counted, marks, strict=True)] == [[], []]
        assert [r for r in world.manager.requests[requests:] if not r.query.get("watch")] == []
        assert holder.outcomes == {"active": 1}
        assert leader.outcomes == {"nominated": 1}
    finally:
        await leader.stop()
        assert leader.reader.caches.following  # the carbon window still reads them
        await holder.stop()
    assert not leader.reader.caches.following


def condition_of(obj: dict[str, Any] | None, kind: str) -> str | None:
    found = [
        c for c in ((obj or {}).get("status") or {}).get("conditions", []) if c["type"] == kind
    ]
    return found[0]["status"] if found else None


async def test_a_reconcile_says_when_its_key_is_due_again(world: World) -> None:
    """A nominated Workload when its round ends, a held one at the next forecast hour (at
    the latest after 5 minutes), one nobody may dispatch yet only when it changes."""
    with_window(world)
    world.manager.add(job("job-1", {vocabulary.MAX_DELAY: "6h"}))
    world.manager.add(workload("held", checks={WINDOW: "Pending", CHECK: "Pending"}, job="job-1"))
    world.manager.add(workload("sent", checks={WINDOW: "Ready", CHECK: "Pending"}))
    before_the_hour = SOON + timedelta(minutes=58)
    leader = dispatcher(world, GREEN)
    holder = window(world, LATER_GREEN, clock=lambda: before_the_hour)
    assert await holder.sync() == {"active": 1, "Pending": 1}
    assert await leader.sync() == {"nominated": 1}
    await leader.reader.caches.load(world.manager.api)  # the writes, as listed again
    await holder.reader.caches.load(world.manager.api)
    assert await leader.reconcile((WORKLOAD, f"{NS}/sent")) == 60.0  # its next round
    assert await leader.reconcile((WORKLOAD, f"{NS}/held")) is None  # the window holds it
    assert await holder.reconcile((WORKLOAD, f"{NS}/held")) == 120.0  # the next hour
    assert await holder.reconcile((WORKLOAD, f"{NS}/sent")) is None  # nothing to hold
    assert await leader.reconcile((WORKLOAD, f"{NS}/gone")) is None
