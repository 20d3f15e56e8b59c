"""Every carbonshift.io annotation, well-formed or not, through every path that reads it.

One table of values per key; each path is exercised over HTTP where it has one (the
webhook's ``/mutate``, the Karmada and extender endpoints) and through the CLI preview.
A malformed value must get the same treatment everywhere: the webhook (and the preview,
which runs the webhook's code) admits the object without that rule and warns naming the
key and the value; the scheduler API answers 400 naming the key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.support import FLEET, NOW
from webhook import testing
from webhook.cli import preview
from webhook.feed import IntensityFeed
from webhook.kinds import Context
from webhook.model import vocabulary
from webhook.model.config import parse
from webhook.model.validation import InvalidInput
from webhook.serve.server import build_app
from webhook.serve.state import STATE, ServerState

MALFORMED = ["nan", "inf", "-inf", "-5", "", " ", "12g", "1e400", "0x10", "½", "²"]
"""Values no number-valued key accepts."""

WELL_FORMED = {
    vocabulary.MAX_INTENSITY: ["0", "250", "99.5", " 300 "],
    vocabulary.MAX_CLUSTERS: ["1", "2", " 3"],
    vocabulary.OVERRIDE: ["true", "false", "TRUE"],
}

Client = TestClient[web.Request, web.Application]


def policy(**annotations: str) -> dict[str, Any]:
    clusters = sorted(FLEET["clusters"])
    return testing.propagation_policy(namespace="shop", annotations=annotations, clusters=clusters)


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    config = parse(FLEET)
    feed = IntensityFeed.from_config(config, env={})
    await feed.refresh_once()
    app = build_app(ServerState(config=config, feed=feed))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c
    await feed.stop()


async def mutate(client: Client, obj: dict[str, Any]) -> dict[str, Any]:
    resp = await client.post("/mutate", data=orjson.dumps(testing.review(obj)), headers=JSON)
    assert resp.status == 200
    answer = await resp.json()
    body: dict[str, Any] = answer["response"]
    stored = testing.stored(obj, answer)
    return {"allowed": body["allowed"], "warnings": body.get("warnings", []), "stored": stored}


JSON = {"Content-Type": "application/json"}


def placement_of(stored: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = stored["spec"]["placement"]
    return result


@pytest.mark.parametrize("key", [vocabulary.MAX_INTENSITY, vocabulary.MAX_CLUSTERS])
@pytest.mark.parametrize("raw", MALFORMED)
async def test_webhook_and_preview_leave_the_rule_out_and_warn_naming_key_and_value(
    client: Client, key: str, raw: str
) -> None:
    answer = await mutate(client, policy(**{key: raw}))
    clean = await mutate(client, policy())
    assert answer["allowed"] is True
    ours = [w for w in answer["warnings"] if key in w]
    assert len(ours) == 1
    assert repr(raw)[:20] in ours[0] or len(ours[0]) == 119
    assert len(ours[0]) < 120
    # Everything else was decided as for a policy without the annotation.
    assert placement_of(answer["stored"]) == placement_of(clean["stored"])
    assert "exclude" not in str(placement_of(answer["stored"]))
    assert len(placement_of(answer["stored"])["clusterAffinities"][0]["clusterNames"]) == 1
    # The preview runs the same code and says the same.
    state = client.app[STATE]
    ctx = Context(state.config, state.feed.table(), NOW)
    [shown] = preview.preview([policy(**{key: raw})], ctx)
    assert placement_of(dict(shown.stored)) == placement_of(answer["stored"])
    assert [w for w in shown.outcome.warnings if key in w] == ours


@pytest.mark.parametrize("raw", ["yes", "1", "", "ture"])
async def test_a_malformed_override_is_not_an_override(client: Client, raw: str) -> None:
    obj = policy(**{vocabulary.OVERRIDE: raw})
    obj["spec"]["placement"]["replicaScheduling"]["weightPreference"] = {
        "staticWeightList": [{"targetCluster": {"clusterNames": ["member-pl"]}, "weight": 1}]
    }
    answer = await mutate(client, obj)
    weights = answer["stored"]["spec"]["placement"]["replicaScheduling"]["weightPreference"]
    assert weights == obj["spec"]["placement"]["replicaScheduling"]["weightPreference"]
    assert any(vocabulary.OVERRIDE in w and repr(raw) in w for w in answer["warnings"])


async def test_unknown_strategies_are_named_and_known_ones_still_apply(client: Client) -> None:
    answer = await mutate(client, policy(**{vocabulary.STRATEGY: "weighted,greenest"}))
    assert any("greenest" in w and vocabulary.STRATEGY in w for w in answer["warnings"])
    assert "weightPreference" in placement_of(answer["stored"])["replicaScheduling"]


KARMADA_PATHS = ["/v1/karmada/filter", "/v1/karmada/score"]
EXTENDER_PATHS = ["/v1/extender/filter", "/v1/extender/prioritize"]


def karmada_body(annotations: dict[str, str]) -> dict[str, Any]:
    clusters = [{"name": n, "zone": c["zone"]} for n, c in FLEET["clusters"].items()]
    return {"clusters": clusters, "workload": {"annotations": annotations}}


def extender_body(annotations: dict[str, str]) -> dict[str, Any]:
    return {"Pod": {"metadata": {"annotations": annotations}}, "NodeNames": ["n1", "n2"]}


async def schedule(client: Client, path: str, annotations: dict[str, str]) -> tuple[int, Any]:
    """POST a scheduler request whose workload (or Pod) carries ``annotations``."""
    body = karmada_body(annotations) if "karmada" in path else extender_body(annotations)
    resp = await client.post(path, data=orjson.dumps(body))
    return resp.status, await resp.json()


SCHEDULER_PATHS = KARMADA_PATHS + EXTENDER_PATHS


@pytest.mark.parametrize("path", SCHEDULER_PATHS)
@pytest.mark.parametrize("raw", MALFORMED)
async def test_scheduler_api_ignores_the_key_and_warns_naming_it(
    client: Client, path: str, raw: str
) -> None:
    """A 400 would make the Karmada plugin let every cluster through: the malformed knob
    is ignored and the rest answered (Karmada answers name it in warnings)."""
    status, answer = await schedule(client, path, {vocabulary.MAX_INTENSITY: raw})
    assert status == 200
    if "karmada" in path:
        (warning,) = answer["warnings"]
        assert warning.startswith(f"workload.annotations.{vocabulary.MAX_INTENSITY}: ")


@pytest.mark.parametrize("path", SCHEDULER_PATHS)
@pytest.mark.parametrize(
    "annotations",
    [{vocabulary.MAX_INTENSITY: raw} for raw in WELL_FORMED[vocabulary.MAX_INTENSITY]]
    + [{vocabulary.MAX_CLUSTERS: "nan", vocabulary.OVERRIDE: "maybe"}],  # keys it never reads
)
async def test_scheduler_api_accepts_well_formed_limits_and_ignores_other_keys(
    client: Client, path: str, annotations: dict[str, str]
) -> None:
    status, _ = await schedule(client, path, annotations)
    assert status == 200


@pytest.mark.parametrize(("key", "values"), list(WELL_FORMED.items()))
def test_parsers_accept_well_formed_values(key: str, values: list[str]) -> None:
    for value in values:
        assert vocabulary.knobs({key: value}, "policy").problems == ()


@pytest.mark.parametrize("raw", MALFORMED)
def test_parsers_reject_malformed_numbers_with_the_key_as_path(raw: str) -> None:
    for parse_value in (vocabulary.max_intensity, vocabulary.max_clusters):
        with pytest.raises(InvalidInput) as caught:
            parse_value(raw)
        assert caught.value.path.startswith("carbonshift.io/")
        assert repr(raw) in caught.value.message


def test_every_key_is_in_the_table_once() -> None:
    names = [k.name for k in vocabulary.KEYS]
    assert len(names) == len(set(names))
    assert all(n.startswith("carbonshift.io/") for n in names)


@pytest.mark.parametrize(
    ("raw", "minutes"), [("24h", 1440), ("90m", 90), ("1h30m", 90), (" 2h ", 120), ("168h", 10080)]
)
def test_max_pause_reads_hours_and_minutes(raw: str, minutes: int) -> None:
    assert vocabulary.max_pause(raw).total_seconds() == minutes * 60
    knobs = vocabulary.knobs({vocabulary.MAX_PAUSE: raw}, "nodepool")
    assert knobs.problems == ()
    assert knobs.max_pause.total_seconds() == minutes * 60


BAD_DURATIONS = [*MALFORMED, "0h", "0m", "169h", "1d", "h", "1.5h", "30s", "\uff11h"]


@pytest.mark.parametrize("raw", BAD_DURATIONS)
def test_a_malformed_max_pause_is_named_and_the_default_applies(raw: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        vocabulary.max_pause(raw)
    assert caught.value.path == vocabulary.MAX_PAUSE
    assert repr(raw) in caught.value.message
    knobs = vocabulary.knobs({vocabulary.MAX_PAUSE: raw}, "nodepool")
    assert [p.path for p in knobs.problems] == [vocabulary.MAX_PAUSE]
    assert knobs.max_pause == vocabulary.DEFAULT_MAX_PAUSE
    assert vocabulary.knobs({}, "nodepool").max_pause == vocabulary.DEFAULT_MAX_PAUSE
    # On a policy the key is not read at all: misplaced, whatever its value.
    [misplaced] = vocabulary.knobs({vocabulary.MAX_PAUSE: raw}, "policy").problems
    assert isinstance(misplaced, vocabulary.UnknownKey)
    assert misplaced.path == vocabulary.MAX_PAUSE
    assert repr(raw) not in misplaced.message
