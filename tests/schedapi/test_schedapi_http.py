"""The scheduler endpoints over HTTP (aiohttp test server on 127.0.0.1)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.schedapi.bodies import (
    BAD_EXTENDER,
    BAD_KARMADA,
    DIRTY,
    GREEN,
    GRID,
    ISSUE_REQUEST,
    MAX,
    node,
    pod,
)
from tests.support import make_app, make_state
from webhook.decision.ranking import NEUTRAL_SCORE
from webhook.model.config import ClusterConfig, Config, NodePoolConfig
from webhook.serve.state import ServerState

Client = TestClient[web.Request, web.Application]


async def post(client: Client, path: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    resp = await client.post(path, data=data, headers={"Content-Type": "application/json"})
    assert resp.content_type == "application/json"
    return resp.status, orjson.loads(await resp.read())


async def test_karmada_filter_removes_clusters_above_max_intensity(client: Client) -> None:
    status, body = await post(client, "/v1/karmada/filter", ISSUE_REQUEST)
    assert status == 200
    assert body["clusters"] == ["m1"]
    assert [f["name"] for f in body["filtered"]] == ["m2"]
    assert "PL" in body["filtered"][0]["reason"]
    assert "warnings" not in body


async def test_karmada_filter_without_limit_keeps_everything(client: Client) -> None:
    status, body = await post(client, "/v1/karmada/filter", {"clusters": [{"name": "x"}]})
    assert (status, body) == (200, {"clusters": ["x"], "filtered": []})


async def test_karmada_score_reports_the_facts_behind_each_score(client: Client) -> None:
    status, body = await post(client, "/v1/karmada/score", ISSUE_REQUEST)
    assert status == 200
    m1, m2 = body["scores"]
    assert m1 == {
        "name": "m1",
        "score": 95,
        "intensity": 50.0,
        "zone": "FR",
        "source": "fixed:test",
        "dataAgeSeconds": m1["dataAgeSeconds"],
    }
    assert 0 <= m1["dataAgeSeconds"] <= 3600
    assert m2["score"] == 30
    assert m2["zone"] == "PL"


async def test_unknown_zone_is_neutral_and_fetched_in_the_background(
    client: Client, state: ServerState
) -> None:
    provider = state.feed.providers[0]
    asked_before = list(provider.asked)  # type: ignore[attr-defined]
    status, body = await post(
        client,
        "/v1/karmada/score",
        {"clusters": [{"name": "a", "zone": "NZ"}, {"name": "b", "region": "mars-1"}]},
    )
    assert status == 200
    a, b = body["scores"]
    assert a["score"] == b["score"] == NEUTRAL_SCORE
    assert a["zone"] == "NZ"
    assert a["intensity"] is None
    assert "NZ" in a["reason"]
    assert b["zone"] is None
    assert "mars-1" in b["reason"]
    assert "NZ" in state.feed.zones()
    assert provider.asked == asked_before  # type: ignore[attr-defined]  # no network in the handler


async def test_config_clusters_resolve_between_explicit_zone_and_region() -> None:
    config = Config(clusters={"m1": ClusterConfig(name="m1", zone="PL")})
    async with TestClient(_server(await make_state(config))) as c:
        _, body = await post(
            c,
            "/v1/karmada/score",
            {
                "clusters": [
                    {"name": "m1", "provider": "aws", "region": "eu-west-3"},
                    {"name": "m2", "zone": "SE-SE3", "provider": "aws", "region": "eu-west-3"},
                ]
            },
        )
    assert [s["zone"] for s in body["scores"]] == ["PL", "SE-SE3"]


def _server(state: ServerState) -> TestServer:
    return TestServer(make_app(state), host="127.0.0.1")


async def test_extender_filter_with_nodes_echoes_kept_items(client: Client) -> None:
    status, body = await post(
        client,
        "/v1/extender/filter",
        {"Pod": pod({MAX: "300"}), "Nodes": {"items": [GREEN, DIRTY, GRID]}, "NodeNames": None},
    )
    assert status == 200
    assert body["Nodes"]["items"] == [GREEN, GRID]
    assert body["NodeNames"] is None
    assert list(body["FailedAndUnresolvableNodes"]) == ["dirty"]
    assert body["FailedNodes"] == {}
    assert body["Error"] == ""


async def test_extender_filter_with_node_names(client: Client) -> None:
    status, body = await post(
        client, "/v1/extender/filter", {"Pod": pod(), "Nodes": None, "NodeNames": ["a", "b"]}
    )
    assert status == 200
    assert body["NodeNames"] == ["a", "b"]
    assert body["Nodes"] is None


async def test_extender_prioritize_scores_greener_higher(client: Client) -> None:
    status, body = await post(
        client, "/v1/extender/prioritize", {"Pod": pod(), "Nodes": {"items": [GREEN, DIRTY, GRID]}}
    )
    assert status == 200
    assert body == [
        {"Host": "green", "Score": 10},
        {"Host": "dirty", "Score": 4},
        {"Host": "grid", "Score": 10},
    ]


async def test_extender_topology_zone_through_config() -> None:
    config = Config(nodepools=NodePoolConfig(topology_zones={"eu-west-3a": "PL"}))
    n = node(
        "n",
        **{
            "topology.kubernetes.io/zone": "eu-west-3a",
            "topology.kubernetes.io/region": "eu-west-3",
        },
    )
    async with TestClient(_server(await make_state(config))) as c:
        _, body = await post(c, "/v1/extender/prioritize", {"Pod": pod(), "Nodes": {"items": [n]}})
    assert body == [{"Host": "n", "Score": 3}]


@pytest.mark.parametrize("path", ["/v1/karmada/filter", "/v1/karmada/score"])
@pytest.mark.parametrize("body", BAD_KARMADA, ids=range(len(BAD_KARMADA)))
async def test_karmada_bad_requests_get_400_naming_the_field(
    client: Client, path: str, body: Any
) -> None:
    status, answer = await post(client, path, body)
    assert status == 400
    assert isinstance(answer["error"], str)
    assert answer["error"]


@pytest.mark.parametrize("path", ["/v1/extender/filter", "/v1/extender/prioritize"])
@pytest.mark.parametrize("body", BAD_EXTENDER, ids=range(len(BAD_EXTENDER)))
async def test_extender_bad_requests_get_400_naming_the_field(
    client: Client, path: str, body: Any
) -> None:
    status, answer = await post(client, path, body)
    assert status == 400
    assert answer["error"]


async def test_openapi_document_is_served(client: Client) -> None:
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    shipped = resources.files("webhook").joinpath("data/openapi.json").read_bytes()
    assert await resp.read() == shipped
    doc = orjson.loads(shipped)
    assert set(doc["paths"]) == {
        "/v1/karmada/filter",
        "/v1/karmada/score",
        "/v1/extender/filter",
        "/v1/extender/prioritize",
        "/openapi.json",
    }


async def test_metrics_count_requests(client: Client) -> None:
    from webhook.runtime.metrics import SCHEDULER_REQUESTS  # noqa: PLC0415

    counter = SCHEDULER_REQUESTS.labels("karmada/filter", "bad_request")
    before = counter._value.get()
    await post(client, "/v1/karmada/filter", b"x")
    assert counter._value.get() == before + 1


MALFORMED = "workload.annotations.carbonshift.io/max-intensity: must be a number >= 0"


async def test_karmada_filter_ignores_only_a_malformed_annotation_and_warns(
    client: Client,
) -> None:
    """A 400 would make the Karmada plugin fail open for every cluster: the malformed knob
    is ignored, the rest answered, the warning names it and a metric counts it."""
    from webhook.runtime.metrics import SCHEDULER_IGNORED_ANNOTATIONS  # noqa: PLC0415

    counter = SCHEDULER_IGNORED_ANNOTATIONS.labels("karmada", MAX)
    before = counter._value.get()
    body = {**ISSUE_REQUEST, "workload": {"annotations": {MAX: "lots"}}}
    status, answer = await post(client, "/v1/karmada/filter", body)
    assert status == 200
    assert (answer["clusters"], answer["filtered"]) == (["m1", "m2"], [])
    (warning,) = answer["warnings"]
    assert warning.startswith(MALFORMED)
    assert "'lots'; ignored" in warning
    assert counter._value.get() == before + 1


async def test_karmada_score_ignores_a_malformed_annotation_and_warns(client: Client) -> None:
    body = {**ISSUE_REQUEST, "workload": {"annotations": {MAX: "-4"}}}
    status, answer = await post(client, "/v1/karmada/score", body)
    _, plain = await post(client, "/v1/karmada/score", {"clusters": ISSUE_REQUEST["clusters"]})
    assert status == 200
    assert [s["score"] for s in answer["scores"]] == [s["score"] for s in plain["scores"]]
    (warning,) = answer["warnings"]
    assert warning.startswith(MALFORMED)
    assert "warnings" not in plain


@pytest.mark.parametrize("path", ["/v1/extender/filter", "/v1/extender/prioritize"])
async def test_extender_ignores_a_malformed_annotation(client: Client, path: str) -> None:
    from webhook.runtime.metrics import SCHEDULER_IGNORED_ANNOTATIONS  # noqa: PLC0415

    counter = SCHEDULER_IGNORED_ANNOTATIONS.labels("extender", MAX)
    before = counter._value.get()
    body = {"Pod": {"metadata": {"annotations": {MAX: "-4"}}}, "NodeNames": ["a", "b"]}
    status, answer = await post(client, path, body)
    assert status == 200
    if path.endswith("filter"):
        assert answer["NodeNames"] == ["a", "b"]
        assert answer["FailedAndUnresolvableNodes"] == {}
    else:
        assert [h["Host"] for h in answer] == ["a", "b"]
    assert counter._value.get() == before + 1
