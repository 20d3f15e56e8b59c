"""``carbonshift serve`` as users run it, against real Kueue MultiKueue (``make sandbox
SANDBOX=kueue``: :class:`devtools.sandbox.kueue.KueueSandbox` with ``carbonshift=True``).

The manager's Kueue (v0.19.2) hands nomination to carbonshift (``multiKueue.dispatcherName:
carbonshift.io/carbon-dispatcher``) and its ClusterQueue lists the carbon window check.
carbonshift is the real process, started as the chart starts it: ``carbonshift serve`` with
the chart's default config plus ``kueue.enabled`` (every other section on, at its default,
with no Karmada on that API server), leader election on (its Lease in
``carbonshift-system``), a kubeconfig of the manager with the token of carbonshift's service
account and the RBAC an install grants (``manifests/base`` and
``manifests/components/kueue``). Intensities are the built-in static table: worker-a's grid
PL, worker-b's SE-SE3 (several times greener in every year the table has held).

(a) ``examples/kueue/jobs.yaml``, applied as users apply it: ``green`` (namespace
``default``, opted in) is placed by carbon on worker-b only; ``plain`` (namespace ``plain``,
not opted in) is nominated to both workers at once, as Kueue's own all-at-once dispatcher
would, admitted and run; ``banana`` (``carbonshift.io/max-delay: banana``) likewise, with a
Warning Event naming the key. The process's ``/metrics`` counts them, shows no Workload
waiting and nothing refused by RBAC; its log has no failed pass. (b) Misconfigured
(``kueue.dispatch: none`` while Kueue's ``dispatcherName`` is still carbonshift's), a Job
waits for a nomination: past a round ``carbonshift_kueue_workloads_waiting`` counts it and
the log names it; with ``dispatch: external`` again it is nominated and runs.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from test_kueue_sandbox import (
    condition,
    fleet_state,
    items,
    job,
    running,
    unique,
    wait_ran,
    workload_of,
)
from test_kueue_sandbox import wait_for as sandbox_wait_for

from devtools.sandbox import Layout
from devtools.sandbox.kueue import (
    CARBONSHIFT,
    MANAGER,
    NAMESPACE,
    OTHER_NAMESPACE,
    KueueSandbox,
)
from webhook.model import vocabulary
from webhook.providers.static import annual_table

EVERY = ["worker-a", "worker-b"]
EXAMPLE = Layout.default().root / "examples" / "kueue" / "jobs.yaml"
TIMEOUT = 120.0
ROUND = 3
"""``kueue.round_seconds`` in the misconfigured run."""
T = TypeVar("T")


def state(box: KueueSandbox) -> str:
    """The fleet's state, every namespace's Workloads on the manager, carbonshift's Events
    and the tail of carbonshift's log."""
    lines = [fleet_state(box)]
    for args in (
        ("get", "workloads", "-A", "-o", "custom-columns=NS:.metadata.namespace,"
         "NAME:.metadata.name,NOMINATED:.status.nominatedClusterNames,ON:.status.clusterName"),
        ("get", "events.events.k8s.io", "-A", "-o",
         "custom-columns=TYPE:.type,REASON:.reason,OBJECT:.regarding.name,NOTE:.note"),
    ):  # fmt: skip
        result = box.kubectl(f"--context={MANAGER}", *args, check=False)
        lines.append(f"$ kubectl {' '.join(args)}\n{result.stdout}{result.stderr}")
    log = box.layout.log(CARBONSHIFT)
    tail = log.read_text(errors="replace").splitlines()[-30:] if log.is_file() else []
    return "\n".join([*lines, "--- carbonshift log", *tail])


def wait_for(
    box: KueueSandbox, probe: Callable[[], T | None], what: str, timeout: float = TIMEOUT
) -> T:
    """:func:`test_kueue_sandbox.wait_for`, failing with :func:`state` (carbonshift's log
    too)."""
    return sandbox_wait_for(box, probe, what, timeout, shown=state)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KueueSandbox]:
    with running(
        tmp_path_factory, "the Kueue sandbox with carbonshift serve", carbonshift=True,
        carbonshift_config={"kueue": {"interval_seconds": 1}},
    ) as box:  # fmt: skip
        yield box


def metrics(box: KueueSandbox) -> dict[str, float]:
    """``/metrics`` of the carbonshift process: series (name and labels as exposed) ->
    value."""
    context = ssl.create_default_context(cafile=str(box.layout.pki / "ca.crt"))
    # the URL is the sandbox's own, https on 127.0.0.1
    with urllib.request.urlopen(f"{box.carbonshift_url}/metrics", context=context,
                                timeout=10) as answer:  # fmt: skip
        text: str = answer.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("carbonshift_"):
            series, _, value = line.rpartition(" ")
            found[series] = float(value)
    return found


def watched(box: KueueSandbox, name: str, namespace: str, seen: set[str]) -> str | None:
    """The worker that admitted Job ``name``'s Workload (None: none yet), collecting every
    worker it was nominated to."""
    status = (workload_of(box, MANAGER, name, namespace) or {}).get("status") or {}
    seen.update(status.get("nominatedClusterNames") or [])
    found: str | None = status.get("clusterName")
    return found


def decision(box: KueueSandbox, name: str, namespace: str) -> dict[str, Any]:
    workload = workload_of(box, MANAGER, name, namespace) or {}
    annotations = workload.get("metadata", {}).get("annotations") or {}
    found: dict[str, Any] = json.loads(annotations.get(vocabulary.DECISION, "{}"))
    return found


def carbon_events(box: KueueSandbox, name: str, namespace: str) -> list[tuple[str, str, str]]:
    """(type, reason, note) of carbonshift's Events about Job ``name``'s Workload."""
    workload = (workload_of(box, MANAGER, name, namespace) or {}).get("metadata", {}).get("name")
    return [
        (e.get("type") or "", e.get("reason") or "", e.get("note") or "")
        for e in items(box, MANAGER, "events.events.k8s.io", namespace)
        if e.get("regarding", {}).get("name") == workload
        and e.get("reportingController", "").startswith("carbonshift")
    ]


def test_the_example_jobs_are_placed_by_carbon_or_sent_everywhere_at_once(
    fleet: KueueSandbox,
) -> None:
    started = time.monotonic()
    fleet.on(MANAGER, "apply", "-f", str(EXAMPLE))
    jobs = {("green", NAMESPACE): set[str](), ("plain", OTHER_NAMESPACE): set[str](),
            ("banana", NAMESPACE): set[str]()}  # fmt: skip
    admitted: dict[str, str] = {}

    def all_admitted() -> bool:
        for (name, namespace), seen in jobs.items():
            on = watched(fleet, name, namespace, seen)
            if on is not None:
                admitted.setdefault(name, on)
        return len(admitted) == len(jobs)

    wait_for(fleet, all_admitted, "the three example Jobs to be admitted by a worker")
    took = time.monotonic() - started
    print(f"admitted after {took:.1f} s: {admitted}; nominated: {jobs}")
    # green: placed by carbon, the greener worker only
    # (a nomination may come and go, cleared by the admission, between two looks: the
    # decision annotation records it)
    assert admitted["green"] == "worker-b"
    assert jobs[("green", NAMESPACE)] <= {"worker-b"}, jobs
    recorded = decision(fleet, "green", NAMESPACE)
    assert recorded["nominated"] == ["worker-b"], recorded
    table = annual_table()
    means = {zone: round(table[zone].value) for zone in ("SE-SE3", "PL")}
    assert recorded["means"] == means, recorded
    # plain (not opted in) and banana (malformed): every worker at once
    for name, namespace in (("plain", OTHER_NAMESPACE), ("banana", NAMESPACE)):
        assert jobs[(name, namespace)] <= set(EVERY), (name, jobs)
        recorded = decision(fleet, name, namespace)
        assert recorded["nominated"] == EVERY, recorded
        assert "every active worker at once" in recorded["reason"], recorded
        assert "ranked" not in recorded, recorded
    assert "not opted in" in decision(fleet, "plain", OTHER_NAMESPACE)["reason"]
    [note] = [e[2] for e in carbon_events(fleet, "plain", OTHER_NAMESPACE)
              if e[1] == "CarbonDispatched"]  # fmt: skip
    assert note.startswith("nominated worker-a, worker-b: every active worker at once"), note
    warnings = [e for e in carbon_events(fleet, "banana", NAMESPACE) if e[0] == "Warning"]
    dispatched = [e for e in warnings if e[1] == "CarbonDispatched"]
    assert dispatched, carbon_events(fleet, "banana", NAMESPACE)
    assert vocabulary.MAX_DELAY in dispatched[0][2], dispatched
    assert "banana" in dispatched[0][2], dispatched
    # the carbon window let it go at once too, and said why in a Warning of its own
    assert any(e[1] == "CarbonWindowReady" and vocabulary.MAX_DELAY in e[2] for e in warnings)
    assert took < 60, f"admitted after {took:.1f} s: held for carbonshift's sake"
    wait_ran(fleet, "green", "worker-b")
    for name, namespace in (("plain", OTHER_NAMESPACE), ("banana", NAMESPACE)):
        wait_ran(fleet, name, admitted[name], namespace)
    seen = metrics(fleet)
    print({k: v for k, v in seen.items() if "kueue" in k or k.startswith("carbonshift_leader")})
    assert seen["carbonshift_leader"] == 1
    assert seen['carbonshift_kueue_nominations_total{outcome="nominated"}'] >= 1
    assert seen['carbonshift_kueue_nominations_total{outcome="all_at_once"}'] >= 2
    assert seen["carbonshift_kueue_workloads_waiting"] == 0
    refused = {k: v for k, v in seen.items() if k.startswith("carbonshift_kube_forbidden") and v}
    assert not refused, f"refused by RBAC: {refused}"
    log = fleet.layout.log(CARBONSHIFT).read_text(errors="replace")
    failures = ("_pass_failed", "_reconcile_failed", "_poll_failed", "_tick_failed", "Traceback")
    failed = [line for line in log.splitlines() if any(f in line for f in failures)]
    assert not failed, "\n".join(failed[:20])
    for event in ("kueue_dispatch_started", "carbon_window_started", "leader_elected"):
        assert event in log, event


def test_a_workload_nobody_nominates_is_counted_and_alerted_on(fleet: KueueSandbox) -> None:
    """Kueue's dispatcherName names carbonshift while carbonshift does not dispatch: the
    Job waits, and past a round the gauge counts it; dispatching again, it runs."""
    fleet.restart_carbonshift({"kueue": {"interval_seconds": 1, "round_seconds": ROUND,
                                         "dispatch": "none"}})  # fmt: skip
    name = unique("stuck")
    try:
        fleet.apply_on(MANAGER, [job(name)])

        def ready_for_a_nomination() -> dict[str, Any] | None:
            found = workload_of(fleet, MANAGER, name)
            checks = ((found or {}).get("status") or {}).get("admissionChecks") or []
            window = [c for c in checks if c["name"] == "carbon-window"]
            quota = condition(found, "QuotaReserved")
            return found if quota and window and window[0]["state"] == "Ready" else None

        since = time.monotonic()
        wait_for(fleet, ready_for_a_nomination, f"{name}'s quota and its carbon window Ready")

        def counted() -> float | None:
            value = metrics(fleet).get("carbonshift_kueue_workloads_waiting", 0.0)
            return value if value >= 1 else None

        assert wait_for(fleet, counted, "carbonshift_kueue_workloads_waiting to count it") == 1
        waited = time.monotonic() - since
        assert waited >= ROUND - 1, f"counted after {waited:.1f} s, within the {ROUND} s round"
        status = (workload_of(fleet, MANAGER, name) or {}).get("status") or {}
        assert not status.get("nominatedClusterNames"), status
        log = fleet.layout.log(CARBONSHIFT).read_text(errors="replace")
        said = [line for line in log.splitlines() if "kueue_workloads_waiting" in line]
        assert said, "no kueue_workloads_waiting in carbonshift's log"
        assert f"{NAMESPACE}/" in said[-1], said
        print(f"{name}: counted as waiting {waited:.1f} s after it could be nominated")
    finally:
        fleet.restart_carbonshift({"kueue": {"interval_seconds": 1}})
    seen: set[str] = set()
    on = wait_for(fleet, lambda: watched(fleet, name, NAMESPACE, seen),
                  f"{name} to be dispatched once carbonshift dispatches again")  # fmt: skip
    assert on == "worker-b"
    assert seen <= {"worker-b"}, seen  # the admission may clear it between two looks
    assert decision(fleet, name, NAMESPACE)["nominated"] == ["worker-b"]
    wait_ran(fleet, name, on)
