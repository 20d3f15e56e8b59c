"""Kueue MultiKueue: reading Workloads and ClusterQueues, room, ranking, nomination,
the order for Kueue's incremental dispatcher, and the carbon window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.decision import kueue
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.kueue import Job, Worker
from webhook.model import vocabulary
from webhook.model.validation import InvalidInput

T0 = datetime(2023, 6, 1, 8, 0, tzinfo=UTC)
H = timedelta(hours=1)
D = Decimal


def job(
    name: str = "w1",
    cpu: str = "2",
    *,
    runtime: timedelta = 2 * H,
    max_delay: timedelta | None = None,
    nominated: tuple[str, ...] = (),
    cluster: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> Job:
    requests = {"cpu": D(cpu), **{k: D(v) for k, v in (extra or {}).items()}}
    return Job(
        "team",
        name,
        requests,
        runtime,
        T0,
        max_delay=max_delay,
        nominated=nominated,
        cluster=cluster,
        quota_reserved=True,
    )


def worker(name: str, zone: str | None, cpu: str = "4", used: str = "0", **more: str) -> Worker:
    quota = {"cpu": D(cpu), **{k: D(v) for k, v in more.items()}}
    return Worker(name, zone, quota, {"cpu": D(used)})


OUTLOOKS: dict[str, Sequence[float] | None] = {
    "SE": [30.0, 30.0, 30.0],
    "FR": [60.0, 60.0, 60.0],
    "DE": [300.0, 300.0, 300.0],
    "PL": [700.0, 700.0, 700.0],
}
FLEET = [worker("w-pl", "PL"), worker("w-de", "DE"), worker("w-fr", "FR"), worker("w-se", "SE")]


# --- reading the objects ---------------------------------------------------------------------


def workload(**status: Any) -> dict[str, Any]:
    container = {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-a-1",
            "namespace": "team",
            "creationTimestamp": "2023-06-01T08:00:00Z",
        },
        "spec": {
            "podSets": [
                {"name": "main", "count": 4, "template": {"spec": {"containers": [container] * 2}}},
                {
                    "name": "driver",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [container],
                            "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
                        }
                    },
                },
            ]
        },
        "status": status,
    }


def test_job_requests_are_count_times_the_pod_requests() -> None:
    read = kueue.job_of(workload(), None, default_runtime=H, default_max_delay=None)
    # 4 pods x 2 containers x 500m + the driver: max(500m, init 3) = 3.
    assert read.requests == {"cpu": D("7.0"), "memory": D(9 * 1024**3)}
    assert (read.namespace, read.name, read.created) == ("team", "job-a-1", T0)
    assert read.runtime == H
    assert read.max_delay is None
    assert not read.quota_reserved
    assert read.nominated == ()
    assert read.cluster is None


def test_job_prefers_kueues_resource_usage_once_quota_is_reserved() -> None:
    status = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "resourceUsage": {"cpu": "4", "memory": "8Gi"}},
                {"name": "driver", "resourceUsage": {"cpu": "500m"}},
            ],
        },
        "conditions": [{"type": "QuotaReserved", "status": "True"}],
        "nominatedClusterNames": ["w-se", "w-fr"],
    }
    read = kueue.job_of(workload(**status), None, default_runtime=H, default_max_delay=None)
    assert read.requests == {"cpu": D("4.5"), "memory": D(8 * 1024**3)}
    assert read.quota_reserved
    assert read.nominated == ("w-se", "w-fr")
    assert read.in_flight


def test_runtime_from_maximum_execution_time_then_annotation_then_default() -> None:
    w = workload(clusterName="w-se")
    annotations = {vocabulary.EXPECTED_RUNTIME: "90m", vocabulary.MAX_DELAY: "8h"}
    read = kueue.job_of(w, annotations, default_runtime=H, default_max_delay=None)
    assert (read.runtime, read.max_delay, read.cluster) == (
        90 * timedelta(minutes=1),
        8 * H,
        "w-se",
    )
    assert read.hours == 2
    w["spec"]["maximumExecutionTimeSeconds"] = 7200 * 3
    read = kueue.job_of(w, annotations, default_runtime=H, default_max_delay=None)
    assert read.runtime == 6 * H
    read = kueue.job_of(workload(), {}, default_runtime=3 * H, default_max_delay=4 * H)
    assert (read.runtime, read.max_delay) == (3 * H, 4 * H)
    assert read.deadline == T0 + 4 * H


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        (vocabulary.EXPECTED_RUNTIME, "2 hours"),
        (vocabulary.EXPECTED_RUNTIME, "0h"),
        (vocabulary.EXPECTED_RUNTIME, "721h"),
        (vocabulary.MAX_DELAY, "1d"),
        (vocabulary.MAX_DELAY, "169h"),
        (vocabulary.MAX_DELAY, ""),
    ],
)
def test_a_malformed_annotation_is_one_line_naming_it(key: str, raw: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        kueue.job_of(workload(), {key: raw}, default_runtime=H, default_max_delay=None)
    assert caught.value.path == key
    assert repr(raw) in caught.value.message
    assert "duration" in caught.value.message
    assert "\n" not in str(caught.value)


def test_a_workload_without_creation_time_is_refused() -> None:
    w = workload()
    del w["metadata"]["creationTimestamp"]
    with pytest.raises(InvalidInput, match="creationTimestamp"):
        kueue.job_of(w, None, default_runtime=H, default_max_delay=None)


def cluster_queue(status: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "on-demand",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "8", "borrowingLimit": "4"},
                                {"name": "memory", "nominalQuota": "32Gi"},
                            ],
                        },
                        {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": 4}]},
                    ],
                },
                {
                    "flavors": [
                        {
                            "name": "gpu",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "2"}],
                        }
                    ]
                },
            ]
        },
        "status": status,
    }


def test_worker_quota_sums_flavors_and_used_reads_reservation_then_usage() -> None:
    reservation = {
        "flavorsReservation": [
            {"name": "on-demand", "resources": [{"name": "cpu", "total": "3500m"}]}
        ]
    }
    usage = {"flavorsUsage": [{"name": "spot", "resources": [{"name": "cpu", "total": "1"}]}]}
    w = kueue.worker_of("w-se", "SE", cluster_queue(reservation))
    assert w.quota == {"cpu": D(12), "memory": D(32 * 1024**3), "nvidia.com/gpu": D(2)}
    assert w.used == {"cpu": D("3.5")}
    assert kueue.worker_of("w-se", "SE", cluster_queue(usage)).used == {"cpu": D(1)}
    assert kueue.worker_of("w-se", None, cluster_queue({})).used == {}


# --- room and exclusion ----------------------------------------------------------------------


def test_room_counts_reserved_and_in_flight_never_below_zero() -> None:
    w = worker("w-se", "SE", cpu="8", used="3")
    flying = [job("a", "2", nominated=("w-se", "w-fr")), job("b", "1", nominated=("w-fr",))]
    admitted = job("c", "4", nominated=(), cluster="w-se")  # counted in `used` already
    assert kueue.room(w, [*flying, admitted]) == {"cpu": D(3)}
    assert kueue.room(w, [job("big", "9", nominated=("w-se",))]) == {"cpu": D(0)}
    assert kueue.fits(job("x", "3"), {"cpu": D(3)})
    assert not kueue.fits(job("x", "3.5"), {"cpu": D(3)})
    assert not kueue.fits(job("x", "1", extra={"memory": "1"}), {"cpu": D(3)})


@pytest.mark.parametrize(
    ("the_job", "the_worker", "allowed", "why"),
    [
        (job(cpu="2"), worker("w", "SE"), None, None),
        (
            job(cpu="2", extra={"nvidia.com/gpu": "1"}),
            worker("w", "SE"),
            None,
            "no quota for nvidia.com/gpu",
        ),
        (job(cpu="5"), worker("w", "SE", cpu="4"), None, "needs 5 cpu, its whole quota is 4"),
        (job(cpu="2"), worker("w", "SE"), ("other",), "not among the job's workers"),
        (job(cpu="2"), worker("w", "SE", used="4"), ("w",), None),  # full now, not excluded
    ],
)
def test_excluded(
    the_job: Job, the_worker: Worker, allowed: tuple[str, ...] | None, why: str | None
) -> None:
    assert kueue.excluded(the_job, the_worker, allowed) == why


# --- ranking ---------------------------------------------------------------------------------


def test_rank_greenest_first_on_the_mean_over_the_run() -> None:
    outlooks = {"SE": [100.0, 100.0, 100.0], "FR": [150.0, 10.0, 10.0], "DE": None}
    workers = [
        worker("w-se", "SE"),
        worker("w-fr", "FR"),
        worker("w-de", "DE"),
        worker("w-x", None),
    ]
    # One hour: SE (100) before FR (150); three hours: FR (56.7) before SE.
    assert kueue.rank(workers, outlooks, hours=1) == ["w-se", "w-fr", "w-de", "w-x"]
    assert kueue.rank(workers, outlooks, hours=3) == ["w-fr", "w-se", "w-de", "w-x"]
    # A zone without forecast ranks on its current reading when given, else last.
    assert kueue.rank(workers, outlooks, hours=3, readings={"DE": 20.0}) == [
        "w-de",
        "w-fr",
        "w-se",
        "w-x",
    ]
    # Ties by name.
    same = [worker("b", "SE"), worker("a", "SE")]
    assert kueue.rank(same, outlooks) == ["a", "b"]
    assert kueue.zone_means(["SE", "FR", None], outlooks, 2) == {"SE": 100.0, "FR": 80.0}


# --- nomination ------------------------------------------------------------------------------


def test_the_greenest_worker_with_room_first() -> None:
    n = kueue.nominate(job(), FLEET, OUTLOOKS, [], rounds=0)
    assert n.names == ("w-se",)
    assert n.ranked == ("w-se", "w-fr", "w-de", "w-pl")
    assert n.reason == "w-se first: 30 g/kWh over the 2h run vs 60 g/kWh on w-fr"


def test_a_full_greenest_worker_is_passed_over() -> None:
    fleet = [*FLEET[:3], worker("w-se", "SE", used="3")]
    n = kueue.nominate(job(cpu="2"), fleet, OUTLOOKS, [], rounds=0)
    assert n.names == ("w-fr",)
    assert n.full == ("w-se",)
    assert n.reason == "w-fr first: 60 g/kWh over the 2h run vs 30 g/kWh on w-se; w-se full"


def test_a_burst_spreads_by_counting_in_flight_nominations() -> None:
    fleet = [worker("w-se", "SE"), worker("w-fr", "FR"), worker("w-de", "DE")]
    flying: list[Job] = []
    firsts = []
    for i in range(5):
        j = job(f"j{i}", "2")
        n = kueue.nominate(j, fleet, OUTLOOKS, flying, rounds=0)
        firsts.append(n.names[0])
        flying.append(job(f"j{i}", "2", nominated=n.names))
    assert firsts == ["w-se", "w-se", "w-fr", "w-fr", "w-de"]
    # The job itself is never counted against its own room.
    again = kueue.nominate(flying[0], fleet, OUTLOOKS, flying, rounds=0)
    assert again.names == ("w-se",)  # its own nomination to w-se leaves room for itself
    assert kueue.nominate(flying[4], fleet, OUTLOOKS, flying, rounds=0).names == ("w-de",)


def test_rounds_widen_in_carbon_order() -> None:
    fleet = [*FLEET[:3], worker("w-se", "SE", used="3")]  # w-se full
    names = [kueue.nominate(job(), fleet, OUTLOOKS, [], rounds=r).names for r in range(5)]
    assert names == [
        ("w-fr",),
        ("w-fr", "w-de"),
        ("w-fr", "w-de", "w-pl"),
        ("w-fr", "w-de", "w-pl", "w-se"),  # then the full ones, greenest first
        ("w-fr", "w-de", "w-pl", "w-se"),
    ]
    assert kueue.nominate(job(), FLEET, OUTLOOKS, [], rounds=1, step=2).names == (
        "w-se",
        "w-fr",
        "w-de",
        "w-pl",
    )
    assert kueue.nominate(job(), FLEET, OUTLOOKS, [], rounds=1).round == 1


def test_excluded_workers_are_never_nominated() -> None:
    gpu = job(cpu="2", extra={"nvidia.com/gpu": "1"})
    fleet = [*FLEET, worker("w-gpu", "PL", **{"nvidia.com/gpu": "4"})]
    for rounds in range(4):
        assert kueue.nominate(gpu, fleet, OUTLOOKS, [], rounds=rounds).names == ("w-gpu",)
    n = kueue.nominate(job(), FLEET, OUTLOOKS, [], rounds=9, allowed=("w-de", "w-pl"))
    assert n.names == ("w-de", "w-pl")
    assert set(n.excluded) == {"w-se", "w-fr"}
    nobody = kueue.nominate(job(cpu="64"), FLEET, OUTLOOKS, [], rounds=0)
    assert nobody.names == ()
    assert nobody.reason.startswith("no worker can run it: w-de excluded (needs 64 cpu")


def test_no_room_anywhere_nominates_every_runnable_worker_in_carbon_order() -> None:
    fleet = [worker(w.name, w.zone, used="3") for w in FLEET]
    fleet.append(worker("w-tiny", "SE", cpu="1"))  # excluded: never room for 2 cpu
    n = kueue.nominate(job(), fleet, OUTLOOKS, [], rounds=0)
    assert n.names == ("w-se", "w-fr", "w-de", "w-pl")
    assert n.reason.startswith("no worker has room: all 4 nominated greenest first")
    assert kueue.window_zone(job(), fleet, OUTLOOKS, []) == ("w-se", "SE")


def test_at_most_twenty_nominated() -> None:
    fleet = [worker(f"w{i:02}", "SE") for i in range(25)]
    assert len(kueue.nominate(job(), fleet, OUTLOOKS, [], rounds=30).names) == 20
    full = [worker(f"w{i:02}", "SE", used="4") for i in range(25)]
    assert len(kueue.nominate(job(), full, OUTLOOKS, [], rounds=0).names) == 20


def test_all_at_once_is_every_active_cluster_of_the_config_by_name() -> None:
    """Kueue's all-at-once dispatcher: the MultiKueueConfig's clusters Kueue reaches,
    sorted; at most twenty."""
    clusters = ["w-se", "w-pl", "w-de", "w-pl"]
    assert kueue.all_at_once(clusters, {"w-se", "w-pl", "w-fr"}) == ("w-pl", "w-se")
    assert kueue.all_at_once(clusters, set()) == ()
    many = [f"w{i:02}" for i in range(25)]
    assert kueue.all_at_once(reversed(many), set(many)) == tuple(many[:20])


def at(minutes: int) -> str:
    return vocabulary.format_time(T0 + timedelta(minutes=minutes))


def manager_workload(
    *, checks: Mapping[str, str] | None = None, reserved: str = "True", **status: Any
) -> dict[str, Any]:
    """A Workload with quota reserved at T0+1m whose other checks were Ready at T0+3m."""
    return workload(
        conditions=[{"type": "QuotaReserved", "status": reserved, "lastTransitionTime": at(1)}],
        admissionChecks=[
            {"name": name, "state": state, "lastTransitionTime": at(3)}
            for name, state in (checks or {"window": "Ready", "mk": "Pending"}).items()
        ],
        **status,
    )


def test_waiting_since_the_last_of_quota_and_the_other_checks() -> None:
    assert kueue.waiting_since(manager_workload(), "mk") == T0 + 3 * timedelta(minutes=1)
    only = manager_workload(checks={"mk": "Pending"})
    assert kueue.waiting_since(only, "mk") == T0 + timedelta(minutes=1)
    undated = manager_workload(checks={"mk": "Pending"})
    undated["status"]["conditions"][0]["lastTransitionTime"] = "soon"
    assert kueue.waiting_since(undated, "mk") == T0  # its creation


@pytest.mark.parametrize(
    "why",
    ["not multikueue", "no quota", "held", "nominated", "admitted", "finished", "evicted",
     "deleted"],
)  # fmt: skip
def test_not_waiting_for_a_nomination(why: str) -> None:
    check: str | None = "mk"
    w = manager_workload()
    if why == "not multikueue":
        check = None
    elif why == "no quota":
        w = manager_workload(reserved="False")
    elif why == "held":
        w = manager_workload(checks={"window": "Pending", "mk": "Pending"})
    elif why == "nominated":
        w = manager_workload(nominatedClusterNames=["w-se"])
    elif why == "admitted":
        w = manager_workload(clusterName="w-se")
    elif why in ("finished", "evicted"):
        w["status"]["conditions"].append({"type": why.title(), "status": "True"})
    else:
        w["metadata"]["deletionTimestamp"] = at(5)
    assert kueue.waiting_since(w, check) is None


def test_window_zone_is_the_greenest_worker_with_room() -> None:
    fleet = [*FLEET[:3], worker("w-se", "SE", used="3")]
    assert kueue.window_zone(job(), fleet, OUTLOOKS, []) == ("w-fr", "FR")
    assert kueue.window_zone(job(cpu="99"), fleet, OUTLOOKS, []) is None


# --- order for Kueue's incremental dispatcher -------------------------------------------------


RULE = Hysteresis(margin=0.05, dwell_hours=4.0)
PAIR = [worker("w-a", "A"), worker("w-b", "B")]


def test_order_holds_on_a_two_percent_wiggle() -> None:
    wiggle = {"A": [200.0], "B": [196.0]}  # B 2 % greener
    new, why = kueue.order(["w-a", "w-b"], PAIR, wiggle, 10.0, RULE)
    assert new is None
    assert why.startswith("held: w-b 196 g/kWh vs w-a 200 g/kWh")


def test_order_switches_on_a_forty_percent_change_after_dwell() -> None:
    change = {"A": [200.0], "B": [120.0]}
    new, why = kueue.order(["w-a", "w-b"], PAIR, change, 1.0, RULE)
    assert new is None
    assert "in force 1.0h of 4h" in why
    new, why = kueue.order(["w-a", "w-b"], PAIR, change, 4.0, RULE)
    assert new == ["w-b", "w-a"]
    assert "greener by more than 5%" in why


def test_order_keeps_the_carbon_order_and_follows_changed_workers() -> None:
    outlooks = {"A": [100.0, 300.0], "B": [200.0, 150.0]}
    assert kueue.order(["w-a", "w-b"], PAIR, outlooks, 0.0, RULE)[0] is None
    # Over a 2h representative run B (175) is 12.5 % greener than A (200).
    assert kueue.order(["w-a", "w-b"], PAIR, outlooks, 5.0, RULE, hours=2)[0] == ["w-b", "w-a"]
    new, why = kueue.order(["w-a"], PAIR, outlooks, 0.0, RULE)
    assert new == ["w-a", "w-b"]
    assert why.startswith("the workers changed")
    trio = [*PAIR, worker("w-c", "C")]
    assert kueue.order(["w-a", "w-c", "w-b"], trio, outlooks, 9.0, RULE)[0] is None  # same first


# --- the carbon window ------------------------------------------------------------------------


GREEN_AT_5 = [400.0, 400.0, 380.0, 350.0, 300.0, 80.0, 80.0, 350.0, 400.0, 400.0, 400.0, 400.0]


def test_window_waits_for_the_green_hours() -> None:
    w = kueue.window(job(max_delay=8 * H), GREEN_AT_5, T0)
    assert not w.ready
    assert w.until == T0 + 5 * H
    assert "80 g/kWh from 2023-06-01T13:00:00Z vs 400 g/kWh now" in w.reason
    # At the green hour the forecast starts there: Ready.
    later = kueue.window(job(max_delay=8 * H), GREEN_AT_5[5:], T0 + 5 * H)
    assert later.ready
    assert later.reason.startswith("no greener 2h run forecast within the 3h left")


def test_window_within_the_hour_counts_from_the_hour() -> None:
    w = kueue.window(job(max_delay=8 * H), GREEN_AT_5, T0 + timedelta(minutes=40))
    assert w.until == T0 + 5 * H


def test_window_is_ready_at_the_deadline_whatever_the_grid() -> None:
    late = job(max_delay=3 * H)
    assert kueue.window(late, GREEN_AT_5, T0 + 3 * H).ready
    assert kueue.window(late, GREEN_AT_5, T0 + 30 * H).ready
    # Slack left shorter than the way to the green hour: the best start within it, capped.
    capped = kueue.window(late, GREEN_AT_5, T0)
    assert not capped.ready
    assert capped.until is not None
    assert capped.until <= T0 + 3 * H


def test_window_is_ready_without_max_delay_or_forecast() -> None:
    assert kueue.window(job(), GREEN_AT_5, T0) == kueue.Window(
        True, None, "no max-delay: starts at once"
    )
    assert kueue.window(job(max_delay=8 * H), None, T0).ready
    flat = [100.0] * 24
    assert kueue.window(job(max_delay=8 * H), flat, T0).ready


@settings(max_examples=300, deadline=None)
@given(
    series=st.lists(st.floats(min_value=0, max_value=1000), min_size=1, max_size=48),
    delay_minutes=st.integers(min_value=1, max_value=7 * 24 * 60),
    offset_minutes=st.integers(min_value=-60, max_value=8 * 24 * 60),
    runtime_minutes=st.integers(min_value=1, max_value=48 * 60),
)
def test_never_pending_at_or_after_the_deadline_nor_past_it(
    series: list[float], delay_minutes: int, offset_minutes: int, runtime_minutes: int
) -> None:
    the_job = job(
        max_delay=timedelta(minutes=delay_minutes), runtime=timedelta(minutes=runtime_minutes)
    )
    now = T0 + timedelta(minutes=offset_minutes)
    deadline = T0 + timedelta(minutes=delay_minutes)
    w = kueue.window(the_job, series, now)
    if now >= deadline:
        assert w.ready
    if not w.ready:
        assert w.until is not None
        assert now < w.until <= deadline


# --- the record -------------------------------------------------------------------------------


def test_record_is_small_json() -> None:
    n = kueue.nominate(job(), FLEET, OUTLOOKS, [], rounds=1)
    w = kueue.window(job(max_delay=8 * H), GREEN_AT_5, T0)
    zones = {x.name: x.zone for x in FLEET}
    body = kueue.record(n, w, zones=zones)
    assert body == {
        "ranked": ["w-se", "w-fr", "w-de", "w-pl"],
        "nominated": ["w-se", "w-fr"],
        "round": 1,
        "reason": n.reason,
        "means": {"SE": 30, "FR": 60, "DE": 300, "PL": 700},
        "window": {"ready": False, "reason": w.reason, "until": "2023-06-01T13:00:00Z"},
    }
    assert len(orjson.dumps(body)) < 600
    assert kueue.record() == {}


# --- the admission check: window on the worker it would run on ------------------------------


def test_admission_judges_the_window_on_the_greenest_worker_with_room() -> None:
    outlooks = {"SE": GREEN_AT_5, "FR": [50.0] * 12}
    fleet = [worker("w-se", "SE", cpu="16"), worker("w-fr", "FR", cpu="16")]
    held = job(max_delay=8 * H)
    # FR (50) is greenest over the run and flat: nothing to wait for.
    checked, name = kueue.admission(held, fleet, outlooks, [], T0)
    assert (checked.ready, name) == (True, "w-fr")
    # FR full: judged on SE, whose green hours come in 5 h.
    fleet = [worker("w-se", "SE", cpu="16"), worker("w-fr", "FR", cpu="16", used="15")]
    checked, name = kueue.admission(held, fleet, outlooks, [], T0)
    assert (checked.ready, checked.until, name) == (False, T0 + 5 * H, "w-se")


def test_admission_does_not_hold_a_job_on_a_busy_worker() -> None:
    outlooks = {"SE": GREEN_AT_5}
    held = job(cpu="2", max_delay=8 * H)
    roomy = [worker("w-se", "SE", cpu="16", used="4")]  # 10 of 16 left after it
    assert not kueue.admission(held, roomy, outlooks, [], T0)[0].ready
    busy = [worker("w-se", "SE", cpu="16", used="8")]  # 6 of 16 left: below half
    checked, name = kueue.admission(held, busy, outlooks, [], T0)
    assert checked.ready
    assert checked.reason == "w-se is busy: waiting would give its room away"
    assert name == "w-se"
    assert not kueue.admission(held, busy, outlooks, [], T0, spare=0.25)[0].ready
    # Without max-delay or past the deadline: Ready, whatever the room.
    assert kueue.admission(job(), roomy, outlooks, [], T0)[0].ready
    assert kueue.admission(held, roomy, outlooks, [], T0 + 8 * H)[0].ready
    # No worker can run it: judged without a forecast.
    assert kueue.admission(job(cpu="99", max_delay=8 * H), roomy, outlooks, [], T0) == (
        kueue.Window(True, None, "no forecast: starts at once"),
        None,
    )


def test_window_margin_waits_only_for_a_clearly_greener_start() -> None:
    slight = [100.0, 100.0, 95.0, 95.0]
    assert not kueue.window(job(max_delay=8 * H), slight, T0).ready
    checked = kueue.window(job(max_delay=8 * H), slight, T0, margin=0.1)
    assert checked.ready
    assert "is not 10% greener than now" in checked.reason
