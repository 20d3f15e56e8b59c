"""Placements follow the grid after creation: a real ``carbonshift serve --kubeconfig``
replica (shortened settings: dwell 0, interval and minimum interval 1 s) reading a local
Electricity Maps v3 server whose values the test changes re-evaluates a managed Divided
PropagationPolicy in the sandbox: it switches to the new greenest member with a
``CarbonRebalanced`` Event, writes nothing while values wobble inside the margin, and
respects a user's edit of a field it owned with exactly one Warning Event."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from e2e_support import (
    PASSES,
    WEIGHTED,
    Kube,
    carbon_order,
    more_passes,
    propagation_policy,
    unique,
)
from test_fleet_labels import Replica, eventually, holder

from devtools.sandbox import Sandbox
from tests.support import FakeUpstream, Reply, em_latest, iso
from webhook.decision.record import Record, switches, user_fields
from webhook.model.vocabulary import DECISION
from webhook.providers.static import annual_table

POLICIES = "propagationpolicies.policy.karmada.io"
MEMBERS = ["member-fr", "member-pl", "member-se"]
ZONES = {"member-fr": "FR", "member-pl": "PL", "member-se": "SE-SE3"}


class Grid:
    """A fake Electricity Maps v3 API on its own thread; :attr:`values` is what it says now,
    :attr:`ahead` what it forecasts for every coming hour of the next day (no entry: no
    forecast for the zone)."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {"FR": 100.0, "PL": 800.0, "SE-SE3": 25.0}
        self.ahead: dict[str, float] = {}
        self.fake = FakeUpstream()
        self.fake.on("/v3/carbon-intensity/latest", self._latest)
        self.fake.on("/v3/carbon-intensity/forecast", self._forecast)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def _latest(self, request: web.Request) -> Reply:
        zone = request.query.get("zone", "")
        if zone not in self.values:
            return Reply({"error": "unknown zone"}, status=404)
        return Reply(em_latest(zone, self.values[zone], datetime.now(UTC)))

    def _forecast(self, request: web.Request) -> Reply:
        zone = request.query.get("zone", "")
        if zone not in self.ahead:
            return Reply({"error": "no forecast"}, status=404)
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        points = [
            {"carbonIntensity": self.ahead[zone], "datetime": iso(hour + timedelta(hours=k))}
            for k in range(1, 25)
        ]
        return Reply({"zone": zone, "forecast": points})

    def __enter__(self) -> Grid:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.start(), self.loop).result(10)
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@contextlib.contextmanager
def follower(
    sandbox: Sandbox,
    tmp: Path,
    grid: Grid,
    forecast: str = "day-ahead-profile",
    extra: Mapping[str, Any] | None = None,
) -> Iterator[Replica]:
    """One leading replica re-evaluating every second against ``grid`` (``forecast``:
    ``reevaluate.forecast``; the default's history is too short here, so it ranks on the
    current intensity); ``extra``: config sections set besides."""
    config = yaml.safe_load(sandbox.layout.carbonshift_config.read_text())
    token = tmp / "token"
    token.write_text("e2e\n")
    config |= {
        "providers": ["electricitymaps"],
        "electricitymaps": {"url": f"{grid.fake.url}/v3", "token_file": str(token)},
        "feed": {"refresh_seconds": 1, "min_ttl_seconds": 1, "max_ttl_seconds": 1,
                 "forecasts": forecast == "provider"},
        "hysteresis": {"margin": 0.1, "dwell_hours": 0},
        "reevaluate": {"interval_seconds": 1, "min_interval_seconds": 1,
                       "forecast": forecast},
    }  # fmt: skip
    config |= dict(extra or {})
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    lease = unique("reevaluate-leader")
    replica = Replica(sandbox, tmp, lease, path, lease)
    try:
        yield replica
    except BaseException:
        print("\n".join(replica.log.read_text().splitlines()[-60:]))
        raise
    finally:
        replica.stop()


def metric(replica: Replica, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` carrying ``labels``."""
    import ssl  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    url = f"https://127.0.0.1:{replica.port}/metrics"
    with urllib.request.urlopen(url, context=context, timeout=5) as answer:
        text = answer.read().decode()
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + "{", name + " "))
        if all(w in line for w in wanted)
    )


def events(kube: Kube, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    out = kube.ok("get", "events.events.k8s.io", "-n", namespace, "-o", "yaml")
    return [
        e
        for e in yaml.safe_load(out)["items"]
        if e.get("regarding", {}).get("name") == name and e.get("reason") == reason
    ]


def greenest(policy: dict[str, Any]) -> str:
    return carbon_order(policy)[0]


def record(policy: dict[str, Any]) -> Record:
    return Record.decode(policy["metadata"]["annotations"][DECISION])


@pytest.fixture
def grid() -> Iterator[Grid]:
    """The fake grid, saying at first what the sandbox's webhook decided on (its embedded
    table), so the replica's first passes keep the placement."""
    table = annual_table()
    with Grid() as running:
        running.values.update({zone: table[zone].value for zone in ZONES.values()})
        yield running


@pytest.fixture
def managed(kube: Kube) -> Iterator[tuple[str, str]]:
    """A Divided policy over the three demo members with static weights, decided by the
    sandbox's webhook (deleted afterwards: the next test's replica skips it while it
    terminates)."""
    namespace = kube.namespace(enabled=True)
    name = unique("follow")
    placement = {
        "clusterAffinity": {"clusterNames": MEMBERS},
        "replicaScheduling": {"replicaSchedulingType": "Divided"},
    }
    kube.apply(propagation_policy(name, namespace, placement=placement, annotations=WEIGHTED))
    stored = kube.get(POLICIES, name, namespace)
    assert greenest(stored) == "member-se"  # the embedded table: SE-SE3 the greenest
    try:
        yield namespace, name
    finally:
        kube.run("delete", POLICIES, name, "-n", namespace, "--wait=false")
        kube.run("delete", "namespace", namespace, "--wait=false")


def test_a_managed_policy_follows_the_grid_after_the_dwell_and_ignores_wobbles(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, grid: Grid, managed: tuple[str, str]
) -> None:
    namespace, name = managed
    before = kube.get(POLICIES, name, namespace)["metadata"]["resourceVersion"]
    with follower(sandbox, tmp_path, grid) as replica:
        eventually(lambda: holder(kube, replica.name), 20.0, "leadership")
        kept = "carbonshift_reevaluations_total"
        eventually(
            lambda: metric(replica, kept, kind="PropagationPolicy", outcome="kept") >= 2,
            20.0,
            "passes that keep the placement",
        )
        se, fr = grid.values["SE-SE3"], grid.values["FR"]
        for change in (0.08, -0.05, 0.06, 0.02):  # wobbling inside the margin
            grid.values["SE-SE3"] = se * (1 + change)
            grid.values["FR"] = fr * (1 + change / 2)
            more_passes(lambda: replica.metric(PASSES), 2)  # each value seen
        assert kube.get(POLICIES, name, namespace)["metadata"]["resourceVersion"] == before

        grid.values.update({"SE-SE3": 900.0, "FR": 40.0})  # the grid turns
        switched = eventually(
            lambda: (p := kube.get(POLICIES, name, namespace)) and greenest(p) == "member-fr" and p,
            20.0,
            "the switch to member-fr",
        )
        (entry,) = switches(record(switched))
        assert entry["before"] > entry["after"]
        assert entry["to"]["member-fr"] > entry["to"]["member-se"]
        found = eventually(
            lambda: events(kube, namespace, name, "CarbonRebalanced"), 10.0, "the Event"
        )
        (event,) = found
        assert event["type"] == "Normal"
        assert "expected intensity" in event["note"]
        assert "->" in event["note"]
        # settled: no more writes (other tests' policies may be managed too)
        more_passes(lambda: replica.metric(PASSES), 3)
        assert (
            kube.get(POLICIES, name, namespace)["metadata"]["resourceVersion"]
            == (switched["metadata"]["resourceVersion"])
        )


def test_a_user_edit_of_an_owned_field_is_respected_with_one_warning(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, grid: Grid, managed: tuple[str, str]
) -> None:
    namespace, name = managed
    mine = {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}
    patch = [{"op": "replace", "path": "/spec/placement/replicaScheduling", "value": mine}]
    kube.ok("patch", POLICIES, name, "-n", namespace, "--type=json", "-p", json.dumps(patch))
    with follower(sandbox, tmp_path, grid) as replica:
        eventually(lambda: holder(kube, replica.name), 20.0, "leadership")
        warned = eventually(
            lambda: events(kube, namespace, name, "CarbonFieldReleased"), 20.0, "the Warning"
        )
        assert warned[0]["type"] == "Warning"
        assert "replicaScheduling" in warned[0]["note"]
        released = kube.get(POLICIES, name, namespace)
        assert released["spec"]["placement"]["replicaScheduling"] == mine
        assert user_fields(record(released)) == ["placement.replicaScheduling"]
        grid.values.update({"SE-SE3": 900.0, "FR": 40.0})  # a switch would be due
        more_passes(lambda: replica.metric(PASSES), 4)
        stored = kube.get(POLICIES, name, namespace)
        assert stored["metadata"]["resourceVersion"] == released["metadata"]["resourceVersion"]
        assert len(events(kube, namespace, name, "CarbonFieldReleased")) == 1
        assert metric(replica, "carbonshift_reevaluations_total", outcome="user_owned") == 1
        assert not events(kube, namespace, name, "CarbonRebalanced")


def test_a_managed_policy_is_ranked_on_the_forecast_mean(
    sandbox: Sandbox, kube: Kube, tmp_path: Path, grid: Grid, managed: tuple[str, str]
) -> None:
    """SE-SE3 is the greenest now but forecast dirty for the coming day, FR the other way
    round: ranked on the 24 h forecast mean, the placement moves to member-fr although the
    current readings alone would keep member-se."""
    namespace, name = managed
    grid.ahead.update({"SE-SE3": 900.0, "FR": 30.0, "PL": 800.0})
    with follower(sandbox, tmp_path, grid, forecast="provider") as replica:
        eventually(lambda: holder(kube, replica.name), 20.0, "leadership")
        switched = eventually(
            lambda: (p := kube.get(POLICIES, name, namespace)) and greenest(p) == "member-fr" and p,
            30.0,
            "the switch to member-fr on the forecast",
        )
        assert grid.values["SE-SE3"] < grid.values["FR"]  # now, SE is still the greenest
        body = record(switched).body
        assert "provider 24 h mean" in body["provider"]
        assert body["clusters"]["member-se"]["g"] > 800  # (now + 23 x 900) / 24
        (entry,) = switches(record(switched))
        assert entry["before"] > entry["after"]
