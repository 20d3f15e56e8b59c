"""carbonshift's Kueue controllers against real Kueue MultiKueue (``devtools.sandbox.kueue``:
a manager and two workers, Kueue v0.19.2 on each, Jobs that run on KWOK Nodes).

The manager's Kueue hands nomination to carbonshift (``multiKueue.dispatcherName:
carbonshift.io/carbon-dispatcher``) and its ClusterQueue lists the carbon window check
(controller ``carbonshift.io/carbon-window``) before MultiKueue's. carbonshift's real
controllers (:class:`~webhook.controllers.kueue.dispatch.KueueDispatcher`,
:class:`~webhook.controllers.kueue.carbon_window.CarbonWindow`) run in-process against the
manager's API server as carbonshift's service account with the RBAC an install grants
(``manifests/base`` and ``manifests/components/kueue``; nothing may be refused), reading
the workers through the kubeconfig Secrets the MultiKueueClusters name, on a static
intensity table the test switches: worker-a's grid is PL, worker-b's SE-SE3, greener
unless flipped. The carbon window's clock is the real
one plus a skew the test moves forward (a forecast's hours pass in seconds).

(a) a Job lands on the greener worker, only it nominated; (b) with the greener worker's
quota full the next Job goes to the other, at once; (c) a grid flip changes where the next
Job goes, not where an admitted one is; (d) a Job allowed a delay is Ready at once when the
green hour is now, waits (check Pending, nothing dispatched) for a greener hour and goes
when it comes, and is Ready at its deadline at the latest, whatever the forecast; (e) with
``dispatch: order`` and Kueue's incremental dispatcher, carbonshift writes the carbon order
into the MultiKueueConfig, and once carbonshift is stopped Kueue keeps dispatching in the
last order written.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio import config as kube_config
from test_kueue_sandbox import (
    WORKERS,
    condition,
    events,
    fleet_state,
    get_job,
    items,
    job,
    running,
    unique,
    wait_ran,
    workload_of,
)

from devtools.sandbox.kueue import (
    CARBON_WINDOW,
    CLUSTER_QUEUE,
    INCREMENTAL,
    MANAGER,
    MULTIKUEUE_CONFIG,
    NAMESPACE,
    KueueSandbox,
    queue_objects,
)
from webhook.controllers.kueue.carbon_window import CarbonWindow
from webhook.controllers.kueue.dispatch import KueueDispatcher
from webhook.controllers.kueue.fleet import KueueController
from webhook.kinds.reevaluation import OutlookMethod
from webhook.kube.events import EventRecorder
from webhook.kube.kueue import Workers
from webhook.model import vocabulary
from webhook.model.config import parse
from webhook.model.intensity import IntensityTable, Reading, Signal
from webhook.runtime import metrics

DISPATCHER = "carbonshift.io/carbon-dispatcher"
WINDOW_CONTROLLER = "carbonshift.io/carbon-window"
ZONES = {"worker-a": "PL", "worker-b": "SE-SE3"}
QUOTAS = {
    MANAGER: {"cpu": "100", "memory": "64Gi"},
    "worker-a": {"cpu": "4", "memory": "16Gi"},
    "worker-b": {"cpu": "2", "memory": "16Gi"},
}
GREEN_B = {"PL": 700.0, "SE-SE3": 30.0}
GREEN_A = {"PL": 30.0, "SE-SE3": 700.0}
STEP = 0.5
"""Seconds between carbonshift's passes."""


class Grid:
    """The static intensity table the controllers read (switchable), with optional
    hourly outlooks ``[now, now+1 h, ...]`` per zone (else the value every hour)."""

    def __init__(self) -> None:
        self.values: dict[str, float] = dict(GREEN_B)
        self.ahead: dict[str, list[float]] = {}

    class _Snapshot:
        def __init__(self, table: IntensityTable) -> None:
            self.table = table

    def snapshot(self) -> Grid._Snapshot:
        now = datetime.now(UTC)
        table = {
            z: Reading(
                zone=z,
                value=v,
                signal=Signal.AVERAGE,
                valid_from=now,
                valid_to=now + timedelta(hours=1),
                estimated=False,
                source="e2e",
            )
            for z, v in dict(self.values).items()
        }
        return self._Snapshot(table)

    def want(self, zone: str) -> None:
        pass

    def outlook(self, zone: str, horizon: int, method: OutlookMethod) -> list[float] | None:
        ahead = self.ahead.get(zone)
        if ahead is not None:
            return (ahead + ahead[-1:] * (horizon + 1))[: horizon + 1]
        value = self.values.get(zone)
        return None if value is None else [value] * (horizon + 1)


class Clock:
    """The real time plus a skew the test moves forward."""

    def __init__(self) -> None:
        self.skew = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.skew

    def to(self, at: datetime) -> None:
        self.skew = at - datetime.now(UTC)


class Leading:
    leading = True


class Carbonshift:
    """carbonshift's Kueue controllers on their own event loop and thread, one sync each
    (every key reconciled once, on the caches listed afresh) every :data:`STEP` seconds,
    until :meth:`stop`; as carbonshift's service account, with
    the RBAC of ``manifests/base`` and ``manifests/components/kueue``
    (:meth:`KueueSandbox.carbonshift_identity`)."""

    def __init__(self, box: KueueSandbox, grid: Grid, clock: Clock, dispatch: str) -> None:
        self.box, self.grid, self.clock, self.dispatch = box, grid, clock, dispatch
        self.failures: list[str] = []
        self.rounds = 0
        """Rounds run so far: each controller's pass, once."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def __enter__(self) -> Carbonshift:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def more_rounds(self, count: int, timeout: float = 60.0) -> None:
        """Until ``count`` more rounds have run: rounds, not seconds (a busy machine runs
        fewer of them in a second)."""
        start = self.rounds
        deadline = time.monotonic() + timeout
        while self.rounds < start + count:
            assert time.monotonic() < deadline, (
                f"{count} more rounds not run in {timeout:g} s: {start} -> {self.rounds}; "
                f"failures: {self.failures[-3:]}"
            )
            time.sleep(0.1)

    async def _run(self) -> None:
        config = parse(
            {
                "kueue": {
                    "enabled": True,
                    "dispatch": self.dispatch,
                    "interval_seconds": 1,
                    "round_seconds": 30,
                    "dispatcher_name": DISPATCHER,
                },
                "hysteresis": {"margin": 0.1, "dwell_hours": 0},
            }
        )
        kubeconfig = str(self.box.layout.state / "kubeconfigs" / "carbonshift.kubeconfig")
        api = await kube_config.new_client_from_config(config_file=kubeconfig)
        workers = Workers(api, config.kueue.namespace)
        events = EventRecorder(api, "e2e", Leading())
        controllers: Sequence[KueueController] = (
            KueueDispatcher(
                api, config, self.grid, Leading(), workers, events=events, clock=self.clock
            ),
            CarbonWindow(
                api, config, self.grid, Leading(), workers, events=events, clock=self.clock
            ),
        )
        try:
            while not self._stop.is_set():
                for controller in controllers:
                    try:
                        await controller.sync()  # a one-off sync: every key once
                    except Exception as exc:  # the test prints them when a wait fails
                        self.failures.append(f"{controller.name}: {exc!r}"[:500])
                self.rounds += 1
                await asyncio.sleep(STEP)
        finally:
            await workers.close()
            await api.close()


TIMEOUT = 120.0
T = TypeVar("T")


def carbon_state(box: KueueSandbox) -> str:
    """Besides the fleet's Workloads and queues: the MultiKueueConfig, the AdmissionChecks
    and the Events carbonshift wrote."""
    lines = [fleet_state(box)]
    for args in (
        ("get", "multikueueconfig", MULTIKUEUE_CONFIG, "-o", "yaml"),
        ("get", "admissionchecks", "-o", "yaml"),
        (
            "get",
            "events.events.k8s.io",
            "-n",
            NAMESPACE,
            "-o",
            "custom-columns=REASON:.reason,OBJECT:.regarding.name,NOTE:.note",
        ),
    ):
        result = box.kubectl(f"--context={MANAGER}", *args, check=False)
        lines.append(f"$ kubectl {' '.join(args)}\n{result.stdout}{result.stderr}")
    return "\n".join(lines)


def wait_for(
    box: KueueSandbox, probe: Callable[[], T | None], what: str, timeout: float = TIMEOUT
) -> T:
    """Poll ``probe`` until it returns something other than None (or False); on timeout
    fail with the state waited on (:func:`carbon_state`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out after {timeout:g}s waiting for {what}\n{carbon_state(box)}",
                pytrace=False,
            )
        time.sleep(0.3)


def dispatched_to(box: KueueSandbox, name: str) -> str:
    """The worker the manager's Workload of Job ``name`` was admitted by."""

    def cluster() -> str | None:
        status = (workload_of(box, MANAGER, name) or {}).get("status") or {}
        found: str | None = status.get("clusterName")
        return found

    return wait_for(box, cluster, f"Job {name}'s Workload on the manager to be dispatched")


def _opted_in(box: KueueSandbox) -> None:
    box.on(MANAGER, "label", "namespace", NAMESPACE, f"{vocabulary.ENABLED}=true", "--overwrite")
    box.carbonshift_identity()  # carbonshift runs as its service account, with its RBAC


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KueueSandbox]:
    with running(
        tmp_path_factory, "the Kueue sandbox", _opted_in, quotas=QUOTAS,
        dispatcher=DISPATCHER, zones=ZONES, carbon_window=WINDOW_CONTROLLER,
    ) as box:  # fmt: skip
        yield box


@pytest.fixture
def grid() -> Grid:
    return Grid()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def carbonshift(fleet: KueueSandbox, grid: Grid, clock: Clock) -> Iterator[Carbonshift]:
    with Carbonshift(fleet, grid, clock, "external") as running:
        # the carbon window is Active: the manager's ClusterQueue admits
        fleet.on(
            MANAGER,
            "wait",
            "--for=condition=Active",
            "--timeout=60s",
            f"admissioncheck/{CARBON_WINDOW}",
            f"clusterqueue/{CLUSTER_QUEUE}",
        )
        yield running
        assert not running.failures, running.failures
    assert not forbidden(), f"refused by RBAC: {forbidden()}"
    quiet(fleet)


def forbidden() -> list[dict[str, str]]:
    """The (verb, resource) RBAC refused carbonshift (``carbonshift_kube_forbidden_total``)."""
    return [
        sample.labels
        for family in metrics.KUBE_FORBIDDEN.collect()
        for sample in family.samples
        if sample.name.endswith("_total") and sample.value
    ]


def quiet(box: KueueSandbox) -> None:
    """Every Job of a test gone from the manager and every worker's quota free again: the
    next test starts on an idle fleet, whatever the last one left."""
    box.on(MANAGER, "delete", "jobs", "--all", "-n", NAMESPACE, "--wait=true", timeout=TIMEOUT)
    # The manager runs no garbage collector: its Workloads outlive their Jobs, and so would
    # their copies on the workers.
    box.on(MANAGER, "delete", "workloads", "--all", "-n", NAMESPACE, "--wait=true", timeout=TIMEOUT)
    for worker in WORKERS:
        box.on(worker, "delete", "jobs", "--all", "-n", NAMESPACE, "--wait=false")

    def idle() -> bool:
        for worker in WORKERS:
            out = box.on(worker, "get", "clusterqueue", CLUSTER_QUEUE, "-o", "json")
            if (json.loads(out).get("status") or {}).get("reservingWorkloads"):
                return False
        return not items(box, MANAGER, "workloads.kueue.x-k8s.io")

    wait_for(box, idle, "an idle fleet (no Workload on the manager, no quota used on a worker)")


def submit(
    box: KueueSandbox,
    prefix: str,
    *,
    cpu: str = "1",
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> str:
    name = unique(prefix)
    document = job(name, cpu=cpu, node_selector=node_selector)
    if annotations:
        document["metadata"]["annotations"] = annotations
    box.apply_on(MANAGER, [document])
    return name


def manager_workload(box: KueueSandbox, name: str) -> dict[str, Any]:
    return wait_for(box, lambda: workload_of(box, MANAGER, name), f"Job {name}'s Workload")


def window_state(box: KueueSandbox, name: str) -> dict[str, Any] | None:
    status = (workload_of(box, MANAGER, name) or {}).get("status") or {}
    for check in status.get("admissionChecks") or []:
        if check["name"] == CARBON_WINDOW:
            found: dict[str, Any] = check
            return found
    return None


def watched_dispatch(box: KueueSandbox, name: str, seen: set[str]) -> str:
    """The worker Job ``name`` is admitted by, collecting every worker it was nominated to."""

    def admitted() -> str | None:
        status = (workload_of(box, MANAGER, name) or {}).get("status") or {}
        seen.update(status.get("nominatedClusterNames") or [])
        found: str | None = status.get("clusterName")
        return found

    return wait_for(box, admitted, f"Job {name} to be dispatched by carbonshift")


def decision(box: KueueSandbox, name: str) -> dict[str, Any]:
    annotations = manager_workload(box, name)["metadata"].get("annotations") or {}
    found: dict[str, Any] = json.loads(annotations.get(vocabulary.DECISION, "{}"))
    return found


def dispatched_events(box: KueueSandbox, name: str) -> list[str]:
    workload = manager_workload(box, name)["metadata"]["name"]
    out = box.on(MANAGER, "get", "events.events.k8s.io", "-n", NAMESPACE, "-o", "json")
    return [
        e.get("note") or ""
        for e in json.loads(out)["items"]
        if e.get("reason") == "CarbonDispatched" and e["regarding"]["name"] == workload
    ]


def test_a_job_lands_on_the_greener_worker(fleet: KueueSandbox, carbonshift: Carbonshift) -> None:
    started = time.monotonic()
    name = submit(fleet, "green")
    seen: set[str] = set()
    assert watched_dispatch(fleet, name, seen) == "worker-b"
    assert seen <= {"worker-b"}, seen
    wait_ran(fleet, name, "worker-b")
    recorded = decision(fleet, name)
    assert recorded["nominated"] == ["worker-b"], recorded
    assert recorded["ranked"] == ["worker-b", "worker-a"], recorded
    assert recorded["means"] == {"SE-SE3": 30, "PL": 700}, recorded
    assert recorded["window"]["ready"] is True, recorded
    [note] = dispatched_events(fleet, name)
    assert note.startswith("nominated worker-b: worker-b first: 30 g/kWh"), note
    print(f"{name}: on worker-b, complete after {time.monotonic() - started:.1f} s")


def test_a_full_greener_worker_sends_the_next_job_to_the_next_greenest(
    fleet: KueueSandbox, carbonshift: Carbonshift
) -> None:
    filler = unique("filler")
    # worker-b's own Job holds all of its CPU quota; its Pod fits no Node, so it stays.
    fleet.apply_on(
        "worker-b",
        [
            job(
                filler,
                cpu=QUOTAS["worker-b"]["cpu"],
                node_selector={"carbonshift.io/no-such-node": "true"},
            )
        ],
    )
    try:

        def full() -> bool:
            out = fleet.on("worker-b", "get", "clusterqueue", CLUSTER_QUEUE, "-o", "json")
            return bool((json.loads(out).get("status") or {}).get("reservingWorkloads") == 1)

        wait_for(fleet, full, "worker-b's ClusterQueue to be full")
        started = time.monotonic()
        name = submit(fleet, "overflow")
        seen: set[str] = set()
        assert watched_dispatch(fleet, name, seen) == "worker-a"
        took = time.monotonic() - started
        assert seen <= {"worker-a"}, seen
        assert decision(fleet, name)["nominated"] == ["worker-a"]  # no round was needed
        assert took < 30, f"admitted after {took:.1f} s: held for carbonshift's sake"
        wait_ran(fleet, name, "worker-a")
        assert "worker-b full" in decision(fleet, name)["reason"]
    finally:
        fleet.on("worker-b", "delete", "job", filler, "-n", NAMESPACE, "--wait=false")


def test_a_grid_flip_moves_the_next_job_not_an_admitted_one(
    fleet: KueueSandbox, carbonshift: Carbonshift, grid: Grid
) -> None:
    # admitted on worker-b and held there (its Pod fits no Node): admitted, not finished
    stuck = submit(fleet, "before", node_selector={"carbonshift.io/no-such-node": "true"})
    try:
        assert dispatched_to(fleet, stuck) == "worker-b"
        grid.values = dict(GREEN_A)
        name = submit(fleet, "after")
        seen: set[str] = set()
        assert watched_dispatch(fleet, name, seen) == "worker-a"
        assert seen <= {"worker-a"}, seen
        assert decision(fleet, name)["nominated"] == ["worker-a"]
        wait_ran(fleet, name, "worker-a")
        carbonshift.more_rounds(3)  # passes after the flip: the admitted one stays
        status = manager_workload(fleet, stuck)["status"]
        assert status.get("clusterName") == "worker-b"
        assert condition(workload_of(fleet, MANAGER, stuck), "Admitted")
        assert len(dispatched_events(fleet, stuck)) == 1
    finally:
        fleet.on(MANAGER, "delete", "job", stuck, "-n", NAMESPACE, "--wait=false")


def next_hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


def pending(box: KueueSandbox, name: str) -> dict[str, Any]:
    """The carbon window's hold on ``name``: its check Pending with carbonshift's message."""

    def state() -> dict[str, Any] | None:
        found = window_state(box, name) or {}
        held = found.get("state") == "Pending" and found["message"].startswith("waiting")
        return found if held and "until" in decision(box, name).get("window", {}) else None

    return wait_for(box, state, f"the carbon window's Pending state on {name}")


def undispatched_for(box: KueueSandbox, name: str, seconds: float) -> None:
    """Nothing nominated nor admitted for ``seconds`` while the window holds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = manager_workload(box, name).get("status") or {}
        assert not status.get("nominatedClusterNames"), status
        assert not status.get("clusterName"), status
        assert (window_state(box, name) or {}).get("state") == "Pending", status
        assert get_job(box, "worker-b", name) is None
        time.sleep(STEP)


def test_the_window_is_ready_at_once_when_the_green_hour_is_now(
    fleet: KueueSandbox, carbonshift: Carbonshift, grid: Grid
) -> None:
    grid.ahead = {"SE-SE3": [30.0] + [700.0] * 30}
    name = submit(fleet, "now", annotations={vocabulary.MAX_DELAY: "2h"})
    assert dispatched_to(fleet, name) == "worker-b"
    window = decision(fleet, name)["window"]
    assert window["ready"] is True, window
    assert "no greener" in window["reason"], window
    wait_ran(fleet, name, "worker-b")


def test_a_job_waits_for_the_green_hour_and_goes_when_it_comes(
    fleet: KueueSandbox, carbonshift: Carbonshift, grid: Grid, clock: Clock
) -> None:
    grid.ahead = {"SE-SE3": [400.0, 30.0] + [400.0] * 30}
    name = submit(fleet, "later", annotations={vocabulary.MAX_DELAY: "2h"})
    state = pending(fleet, name)
    until = vocabulary.parse_time(decision(fleet, name)["window"]["until"])
    assert until == next_hour(clock()), decision(fleet, name)
    assert "waiting for a greener 1h run: 30 g/kWh" in state["message"], state
    undispatched_for(fleet, name, 5.0)
    grid.ahead = {"SE-SE3": [30.0] + [400.0] * 30}  # the green hour has come
    clock.to(until)
    assert dispatched_to(fleet, name) == "worker-b"
    assert window_state(fleet, name)["state"] == "Ready"  # type: ignore[index]
    wait_ran(fleet, name, "worker-b")


def test_a_job_is_ready_at_its_deadline_at_the_latest(
    fleet: KueueSandbox, carbonshift: Carbonshift, grid: Grid, clock: Clock
) -> None:
    # Always a greener hour ahead, the greenest beyond the deadline: only the deadline ends it.
    grid.ahead = {"SE-SE3": [400.0, 300.0, 300.0, 30.0] + [400.0] * 30}
    name = submit(fleet, "deadline", annotations={vocabulary.MAX_DELAY: "2h"})
    created = vocabulary.parse_time(manager_workload(fleet, name)["metadata"]["creationTimestamp"])
    deadline = created + timedelta(hours=2)
    pending(fleet, name)
    undispatched_for(fleet, name, 3.0)
    holds = []
    while True:  # follow the holds: each ends no later than the deadline
        window = decision(fleet, name)["window"]
        if window["ready"]:
            break
        until = vocabulary.parse_time(window["until"])
        holds.append(until)
        assert until <= deadline, window
        clock.to(until + timedelta(seconds=1))

        def moved(before: datetime = until) -> bool:
            now = decision(fleet, name)["window"]
            return bool(now["ready"] or vocabulary.parse_time(now["until"]) != before)

        wait_for(fleet, moved, f"the window of {name} to move past {until}")
        if len(holds) > 3:
            break
    window = decision(fleet, name)["window"]
    if not window["ready"]:
        clock.to(deadline)
    assert dispatched_to(fleet, name) == "worker-b"
    window = decision(fleet, name)["window"]
    assert window["ready"] is True, window
    print(
        f"{name}: holds until {[vocabulary.format_time(h) for h in holds]}, Ready: "
        f"{window['reason']} (deadline {vocabulary.format_time(deadline)})"
    )
    wait_ran(fleet, name, "worker-b")
    # Had nobody answered until then (carbonshift down), the deadline itself releases it.
    clock.skew = timedelta()  # a new Job, read from the real time on
    late = submit(fleet, "late", annotations={vocabulary.MAX_DELAY: "2h"})
    created = vocabulary.parse_time(manager_workload(fleet, late)["metadata"]["creationTimestamp"])
    pending(fleet, late)
    clock.to(created + timedelta(hours=2))
    assert dispatched_to(fleet, late) == "worker-b"
    window = decision(fleet, late)["window"]
    assert window["ready"] is True, window
    assert window["reason"].startswith("deadline "), window
    wait_ran(fleet, late, "worker-b")


CARBON_WINDOW_CRD = Path(__file__).parents[2] / "manifests/components/kueue/carbonwindows.yaml"


def test_the_checks_carbon_window_holds_a_job_without_its_own_max_delay(
    fleet: KueueSandbox, carbonshift: Carbonshift, grid: Grid, clock: Clock
) -> None:
    fleet.on(MANAGER, "apply", "--server-side", "-f", str(CARBON_WINDOW_CRD))
    fleet.wait_established("carbonwindows.carbonshift.io", context=MANAGER)
    window = {
        "apiVersion": "carbonshift.io/v1alpha1",
        "kind": "CarbonWindow",
        "metadata": {"name": "overnight"},
        "spec": {"maxDelay": "2h"},
    }
    refused = fleet.kubectl(
        "--context=manager",
        "apply",
        "-f",
        "-",
        check=False,
        stdin=json.dumps({**window, "metadata": {"name": "bad"}, "spec": {"maxDelay": "soon"}}),
    )
    assert refused.returncode != 0, "the CRD accepted maxDelay: soon"
    assert "spec.maxDelay" in refused.stderr, refused.stderr
    fleet.apply_on(MANAGER, [window])
    parameters = {"apiGroup": "carbonshift.io", "kind": "CarbonWindow", "name": "overnight"}
    fleet.on(
        MANAGER,
        "patch",
        "admissioncheck",
        CARBON_WINDOW,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"parameters": parameters}}),
    )
    try:
        grid.ahead = {"SE-SE3": [400.0, 30.0] + [400.0] * 30}
        name = submit(fleet, "overnight")
        pending(fleet, name)
        undispatched_for(fleet, name, 3.0)
        until = vocabulary.parse_time(decision(fleet, name)["window"]["until"])
        grid.ahead = {"SE-SE3": [30.0] + [400.0] * 30}
        clock.to(until)
        assert dispatched_to(fleet, name) == "worker-b"
        wait_ran(fleet, name, "worker-b")
    finally:
        fleet.on(
            MANAGER,
            "patch",
            "admissioncheck",
            CARBON_WINDOW,
            "--type=json",
            "-p",
            '[{"op": "remove", "path": "/spec/parameters"}]',
        )


def test_kueue_keeps_the_last_carbon_order_when_carbonshift_stops(
    fleet: KueueSandbox, grid: Grid, clock: Clock
) -> None:
    # Kueue's own incremental dispatcher, one worker per round; no carbon window on the queue
    # (a check nobody answers would hold every Job: see docs/kueue.md).
    fleet.apply_on(MANAGER, queue_objects(QUOTAS[MANAGER], admission_checks=["multikueue"]))
    fleet.set_dispatcher(INCREMENTAL, step_size=1)
    fleet.on(
        MANAGER,
        "label",
        "multikueueconfig",
        MULTIKUEUE_CONFIG,
        f"{vocabulary.ENABLED}=true",
        "--overwrite",
    )

    def clusters() -> list[str]:
        out = fleet.on(MANAGER, "get", "multikueueconfig", MULTIKUEUE_CONFIG, "-o", "json")
        found: list[str] = json.loads(out)["spec"]["clusters"]
        return found

    assert clusters() == ["worker-a", "worker-b"]
    with Carbonshift(fleet, grid, clock, "order") as running:
        wait_for(
            fleet,
            lambda: clusters() == ["worker-b", "worker-a"],
            "the carbon order in the MultiKueueConfig",
        )
    assert not running.failures, running.failures
    assert not forbidden(), f"refused by RBAC: {forbidden()}"
    grid.values = dict(GREEN_A)  # carbonshift is stopped: nobody reorders
    for _ in range(2):
        name = submit(fleet, "ordered")
        seen: set[str] = set()
        assert watched_dispatch(fleet, name, seen) == "worker-b"
        assert seen <= {"worker-b"}, seen
        wait_ran(fleet, name, "worker-b")
        assert not {e for e in events(fleet, "worker-a", name) if e[0] == "Pod"}
    assert clusters() == ["worker-b", "worker-a"]
