"""The leader finds what the API server dropped of carbonshift's write (an ordered fill's
``overflowAffinities`` pruned by a Karmada before v1.18), says so loudly (a ``Warning``
Event ``CarbonFieldDropped``, ``carbonshift_fields_dropped_total``, a warning log line) and
decides the policy again as failover groups, never releasing the field as a user's edit."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from structlog.testing import capture_logs

from tests import kubeapi
from tests.controllers.test_follower import ADMITTED, POLICIES, Grid, admitted, namespace, settings
from webhook import testing
from webhook.controllers.follower import Follower
from webhook.decision.karmada.view import fill_of
from webhook.decision.record import Record, user_fields
from webhook.kube.events import EventRecorder
from webhook.model.config import KarmadaConfig
from webhook.model.vocabulary import DECISION
from webhook.runtime import metrics


@pytest.fixture
async def kube() -> AsyncIterator[kubeapi.KubeApi]:
    async with kubeapi.serve() as server:
        yield server


def dropped_count() -> float:
    return float(
        metrics.FIELDS_DROPPED.labels("PropagationPolicy", "overflowAffinities")._value.get()
    )


async def test_pruned_overflow_tiers_are_said_loudly_and_decided_again(
    kube: kubeapi.KubeApi,
) -> None:
    config = settings()
    grid = Grid(msgspec.structs.replace(config, karmada=KarmadaConfig("1.18")), ADMITTED)
    kube.add(namespace("shop", enabled=True))
    policy = testing.propagation_policy(namespace="shop", created=grid.clock())
    written = admitted(grid, policy)
    assert fill_of(written["spec"]["placement"])[1] == "overflow"
    cut: dict[str, Any] = copy.deepcopy(written)
    for term in cut["spec"]["placement"]["clusterAffinities"]:
        term.pop("overflowAffinities", None)
    kube.add(cut)  # what a Karmada v1.16 API server stores of the write
    grid.config = config  # the leader's own API answer: karmada.version auto
    grid.clock.advance(hours=1)
    before = dropped_count()
    gate = kubeapi.Gate()
    follower = Follower(
        kube.api, config, grid.context, gate, events=EventRecorder(kube.api, "r", gate)
    )
    with capture_logs() as logs:
        assert await follower.sync() == 1
    now = kube.get(POLICIES, "web", "shop")
    tiers, shape = fill_of(now["spec"]["placement"])
    assert (tiers, shape) == ([["a"], ["b"], ["c"]], "groups")
    record = Record.decode(now["metadata"]["annotations"][DECISION])
    assert user_fields(record) == []
    assert dropped_count() - before == 1
    [event] = kube.items("events.events.k8s.io", "shop")
    assert (event["reason"], event["type"]) == ("CarbonFieldDropped", "Warning")
    assert "dropped the overflowAffinities" in event["note"], event["note"]
    [line] = [entry for entry in logs if entry["event"] == "field_dropped"]
    assert line["log_level"] == "warning"
    assert line["dropped"] == {"placement.clusterAffinities": "overflowAffinities"}
    # written as the API keeps it: the next pass leaves it
    writes = len(kube.writes())
    assert await follower.sync() == 0
    assert len(kube.writes()) == writes
