"""Kueue MultiKueue runs Jobs on worker clusters: a real manager and two workers
(``devtools.sandbox.kueue``: etcd and kube-apiserver each with Kueue's CRDs, Kueue v0.19.2's
controller manager per cluster built by ``hack/build-kueue.sh``, and on each worker
kube-controller-manager, kube-scheduler and KWOK so that Jobs get Pods that run and
complete).

A ``batch/v1`` Job queued on the manager gets a Workload, quota there, is dispatched by
MultiKueue to a worker, runs and finishes there, and the manager's Job shows the completion.
With the incremental dispatcher (one cluster per round) and the MultiKueueConfig's clusters
``[worker-b, worker-a]``, a Job goes to worker-b and worker-a never sees it. With worker-b's
ClusterQueue full (a Job of its own holds all of its quota), the next Job goes to worker-a.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from e2e_support import build_binaries, unavailable

from devtools.sandbox import Layout, SandboxError
from devtools.sandbox.kueue import (
    ALL_AT_ONCE,
    CLUSTER_QUEUE,
    INCREMENTAL,
    LOCAL_QUEUE,
    MANAGER,
    NAMESPACE,
    QUEUE_LABEL,
    KueueSandbox,
)

T = TypeVar("T")

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
            "kubectl")  # fmt: skip
WORKERS = ("worker-a", "worker-b")
QUOTAS = {
    MANAGER: {"cpu": "100", "memory": "64Gi"},
    "worker-a": {"cpu": "4", "memory": "16Gi"},
    "worker-b": {"cpu": "2", "memory": "16Gi"},
}
"""worker-b holds two one-CPU Jobs at once; its own two-CPU Job fills it."""
TIMEOUT = 120.0
"""A Job's way from the manager to a worker and back, on 2 shared cores."""
MULTIKUEUE_MANAGED = "kueue.x-k8s.io/multikueue"


@contextlib.contextmanager
def running(
    tmp_path_factory: pytest.TempPathFactory,
    what: str,
    ready: Callable[[KueueSandbox], None] = lambda _box: None,
    **options: Any,
) -> Iterator[KueueSandbox]:
    """A Kueue sandbox (``options``: :class:`KueueSandbox`'s) built, started and, once
    ``ready`` has set it up, handed to the tests; stopped after them. ``what`` names it in
    the messages; under ``CI=true`` one that cannot be built or started fails."""
    state = tmp_path_factory.mktemp("kueue")
    layout = Layout.default(state)
    build_binaries(layout, state / "build.log", *BINARIES)
    build_binaries(layout, state / "build-kueue.log", script_name="build-kueue.sh")
    box = KueueSandbox(layout, workers=WORKERS, log=lambda _msg: None, **options)
    started = time.monotonic()
    try:
        box.up()
    except SandboxError as exc:
        unavailable(f"{what} did not start: {exc}")
    try:
        ready(box)
        print(f"{what} up in {time.monotonic() - started:.1f} s")
        yield box
    finally:
        box.down()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KueueSandbox]:
    with running(
        tmp_path_factory, "the Kueue sandbox",
        config_clusters=["worker-b", "worker-a"], quotas=QUOTAS,
    ) as box:  # fmt: skip
        yield box


def job(name: str, cpu: str = "1", node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A Job of one Pod asking for ``cpu``, queued in the LocalQueue."""
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "registry.invalid/sleep:1",
                        "resources": {"requests": {"cpu": cpu}}}],
    }  # fmt: skip
    if node_selector:
        pod["nodeSelector"] = node_selector
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": pod}},
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def items(
    box: KueueSandbox, cluster: str, resource: str, namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    out = box.on(cluster, "get", resource, "-n", namespace, "-o", "json")
    found: list[dict[str, Any]] = json.loads(out)["items"]
    return found


def workload_of(
    box: KueueSandbox, cluster: str, job_name: str, namespace: str = NAMESPACE
) -> dict[str, Any] | None:
    """The Workload Kueue made for the Job ``job_name`` in ``cluster`` (its owner)."""
    for item in items(box, cluster, "workloads.kueue.x-k8s.io", namespace):
        owners = item["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "Job" and o["name"] == job_name for o in owners):
            return item
    return None


def get_job(
    box: KueueSandbox, cluster: str, name: str, namespace: str = NAMESPACE
) -> dict[str, Any] | None:
    result = box.kubectl(f"--context={cluster}", "get", "job", name, "-n", namespace, "-o",
                         "json", check=False)  # fmt: skip
    if result.returncode != 0:
        if "NotFound" in result.stderr:
            return None
        raise SandboxError(result.stderr.strip())
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def condition(obj: dict[str, Any] | None, kind: str) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def fleet_state(box: KueueSandbox) -> str:
    """What the wait was about, on every cluster: Workloads, Jobs, Pods, ClusterQueues, the
    manager's MultiKueue objects, and the tail of each Kueue's log."""
    lines = []
    for cluster in box.clusters:
        lines.append(f"===== {cluster}")
        for args in (
            ("get", "workloads,jobs,pods", "-n", NAMESPACE, "-o", "wide"),
            ("get", "clusterqueues", "-o", "wide"),
            ("get", "workloads", "-n", NAMESPACE, "-o", "jsonpath={range .items[*]}"
             "{.metadata.name}{' '}{.status}{'\\n'}{end}"),
            ("get", "clusterqueue", CLUSTER_QUEUE, "-o", "jsonpath={.status}"),
        ):  # fmt: skip
            result = box.kubectl(f"--context={cluster}", *args, check=False)
            lines.append(f"$ kubectl {' '.join(args)}\n{result.stdout}{result.stderr}")
    for resource in ("multikueueclusters", "admissionchecks"):
        result = box.kubectl("get", resource, "-o", "jsonpath={range .items[*]}{.metadata.name}"
                             "{' '}{.status.conditions}{'\\n'}{end}", check=False)  # fmt: skip
        lines.append(f"--- {resource}\n{result.stdout}{result.stderr}")
    for cluster in box.clusters:
        log = box.layout.log(f"{cluster}-kueue")
        tail = log.read_text(errors="replace").splitlines()[-15:] if log.is_file() else []
        lines.append(f"--- {cluster}-kueue log\n" + "\n".join(tail))
    return "\n".join(lines)


def wait_for(
    box: KueueSandbox,
    probe: Callable[[], T | None],
    what: str,
    timeout: float = TIMEOUT,
    shown: Callable[[KueueSandbox], str] = fleet_state,
) -> T:
    """Poll ``probe`` until it returns something other than None (or False); on timeout
    fail with what ``shown`` says of the fleet (default: its state)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out after {timeout:g}s waiting for {what}\n{shown(box)}",
                pytrace=False,
            )
        time.sleep(0.3)


def dispatched_to(box: KueueSandbox, name: str) -> str:
    """The worker the manager's Workload of Job ``name`` was dispatched to."""

    def cluster() -> str | None:
        status = (workload_of(box, MANAGER, name) or {}).get("status") or {}
        found: str | None = status.get("clusterName")
        return found

    return wait_for(box, cluster, f"Job {name}'s Workload on the manager to be dispatched")


def events(
    box: KueueSandbox, cluster: str, name: str, namespace: str = NAMESPACE
) -> set[tuple[str, str, str]]:
    """(kind, reason, message) of the Events of Job ``name`` and its Pods in ``cluster``:
    they outlive the Job, which MultiKueue deletes from the worker once it finished."""
    found = set()
    for item in items(box, cluster, "events", namespace):
        involved = item.get("involvedObject") or {}
        if (involved.get("kind"), involved.get("name")) == ("Job", name) or (
            involved.get("kind") == "Pod" and str(involved.get("name")).startswith(f"{name}-")
        ):
            found.add((involved["kind"], item.get("reason") or "", item.get("message") or ""))
    return found


def wait_ran(box: KueueSandbox, name: str, worker: str, namespace: str = NAMESPACE) -> None:
    """The manager's Job ``name`` shows the completion, its Workload finished, and the Job
    ran on ``worker``: its Pod was bound to the KWOK Node and the Job completed there (the
    worker's Events; the worker's Job itself is deleted once the manager's finished)."""
    wait_for(box, lambda: condition(get_job(box, MANAGER, name, namespace), "Complete"),
             f"the manager's Job {name} to show the completion")  # fmt: skip
    wait_for(box, lambda: condition(workload_of(box, MANAGER, name, namespace), "Finished"),
             f"the manager's Workload of {name} to be Finished")  # fmt: skip
    manager_job = get_job(box, MANAGER, name, namespace)
    assert manager_job is not None
    assert manager_job["spec"].get("managedBy") == MULTIKUEUE_MANAGED
    assert manager_job["status"].get("succeeded") == 1

    def ran() -> set[tuple[str, str, str]] | None:
        seen = events(box, worker, name, namespace)
        scheduled = any(k == "Pod" and r == "Scheduled" and "kwok-node" in m for k, r, m in seen)
        completed = any(k == "Job" and r == "Completed" for k, r, _ in seen)
        return seen if scheduled and completed else None

    wait_for(box, ran, f"the Events of Job {name}'s Pod on kwok-node and completion on {worker}")
    for other in WORKERS:
        if other != worker:
            ran_there = {
                e
                for e in events(box, other, name, namespace)
                if e[0] == "Pod" or e[1] == "Completed"
            }
            assert not ran_there, f"Job {name} ran on {other} too"


def test_a_job_on_the_manager_runs_on_a_worker(fleet: KueueSandbox) -> None:
    fleet.set_dispatcher(ALL_AT_ONCE)
    name = unique("hello")
    started = time.monotonic()
    fleet.apply_on(MANAGER, [job(name)])
    workload = wait_for(fleet, lambda: workload_of(fleet, MANAGER, name),
                        f"a Workload for Job {name} on the manager")  # fmt: skip
    assert workload["spec"]["queueName"] == LOCAL_QUEUE
    worker = dispatched_to(fleet, name)
    assert worker in WORKERS
    wait_for(fleet, lambda: condition(workload_of(fleet, MANAGER, name), "Admitted"),
             f"the manager's Workload of {name} to be Admitted")  # fmt: skip
    wait_ran(fleet, name, worker)
    other = next(w for w in WORKERS if w != worker)
    wait_for(fleet, lambda: get_job(fleet, other, name) is None,
             f"no copy of Job {name} left on {other}")  # fmt: skip
    print(f"{name}: ran on {worker}, complete on the manager after "
          f"{time.monotonic() - started:.1f} s")  # fmt: skip


def test_the_incremental_dispatcher_follows_the_config_order(fleet: KueueSandbox) -> None:
    fleet.set_dispatcher(INCREMENTAL, step_size=1)
    for _ in range(2):
        name = unique("ordered")
        fleet.apply_on(MANAGER, [job(name)])
        nominated: set[str] = set()
        seen_on_a = False

        def dispatched(name: str = name, nominated: set[str] = nominated) -> str | None:
            nonlocal seen_on_a
            status = (workload_of(fleet, MANAGER, name) or {}).get("status") or {}
            nominated.update(status.get("nominatedClusterNames") or [])
            seen_on_a = seen_on_a or get_job(fleet, "worker-a", name) is not None
            cluster: str | None = status.get("clusterName")
            return cluster

        worker = wait_for(fleet, dispatched, f"Job {name} to be dispatched")
        assert worker == "worker-b"
        assert nominated <= {"worker-b"}, nominated
        assert not seen_on_a, f"worker-a got a copy of {name}"
        wait_ran(fleet, name, "worker-b")
        assert get_job(fleet, "worker-a", name) is None


def test_a_full_worker_is_passed_over(fleet: KueueSandbox) -> None:
    fleet.set_dispatcher(ALL_AT_ONCE)
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
            status = json.loads(out).get("status") or {}
            return bool(status.get("reservingWorkloads") == 1)

        wait_for(fleet, full, "worker-b's ClusterQueue to be full")
        name = unique("overflow")
        fleet.apply_on(MANAGER, [job(name)])
        assert dispatched_to(fleet, name) == "worker-a"
        wait_ran(fleet, name, "worker-a")
        wait_for(fleet, lambda: get_job(fleet, "worker-b", name) is None,
                 f"no copy of Job {name} left on worker-b")  # fmt: skip
        assert full(), "the filler no longer holds worker-b's quota"
    finally:
        fleet.on("worker-b", "delete", "job", filler, "-n", NAMESPACE, "--wait=false")
