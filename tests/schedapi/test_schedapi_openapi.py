"""Responses match the shipped OpenAPI document (jsonschema checks and schemathesis)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from importlib import resources
from typing import Any

import jsonschema
import orjson
import pytest
import schemathesis
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, settings
from jsonschema.validators import Draft202012Validator

from tests.schedapi.bodies import (
    BAD_EXTENDER,
    BAD_KARMADA,
    DIRTY,
    GREEN,
    GRID,
    ISSUE_REQUEST,
    MAX,
)
from tests.support import make_app, make_state

DOC: dict[str, Any] = orjson.loads(
    resources.files("webhook").joinpath("data/openapi.json").read_bytes()
)


def validator(path: str, status: int) -> Draft202012Validator:
    """A validator for the response schema of ``POST path`` with ``status``."""
    content = DOC["paths"][path]["post"]["responses"][str(status)]["content"]
    schema = {**DOC, **content["application/json"]["schema"]}
    schema.pop("paths")
    return Draft202012Validator(schema)


def test_document_is_a_valid_openapi_3_1_schema_set() -> None:
    assert DOC["openapi"].startswith("3.1")
    for schema in DOC["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)


GOOD = {
    "/v1/karmada/filter": [
        ISSUE_REQUEST,
        {"clusters": []},
        {"clusters": [{"name": "u", "zone": "NZ"}]},
        {
            "clusters": [{"name": "a", "zone": "PL"}],
            "workload": {"annotations": {"carbonshift.io/max-intensity": "1"}},
        },
        {"clusters": [{"name": "a"}], "workload": {"annotations": {MAX: "lots"}}},
    ],
    "/v1/karmada/score": [
        ISSUE_REQUEST,
        {"clusters": [{"name": "u", "region": "nowhere"}]},
        {"clusters": [{"name": "a"}], "workload": {"annotations": {MAX: "lots"}}},
    ],
    "/v1/extender/filter": [
        {
            "Pod": {"metadata": {"annotations": {"carbonshift.io/max-intensity": "300"}}},
            "Nodes": {"items": [GREEN, DIRTY, GRID]},
        },
        {"Pod": None, "Nodes": None, "NodeNames": ["x"]},
    ],
    "/v1/extender/prioritize": [
        {"Pod": {}, "Nodes": {"items": [GREEN, DIRTY]}},
        {"NodeNames": ["x"]},
    ],
}
BAD = {
    "/v1/karmada/filter": BAD_KARMADA,
    "/v1/karmada/score": BAD_KARMADA,
    "/v1/extender/filter": BAD_EXTENDER,
    "/v1/extender/prioritize": BAD_EXTENDER,
}


@pytest.fixture
async def client() -> Any:
    async with TestClient(TestServer(make_app(await make_state()), host="127.0.0.1")) as c:
        yield c


@pytest.mark.parametrize("path", sorted(GOOD))
async def test_answers_match_the_document(client: Any, path: str) -> None:
    ok, bad = validator(path, 200), validator(path, 400)
    for body in GOOD[path]:
        resp = await client.post(path, data=orjson.dumps(body))
        assert resp.status == 200
        ok.validate(orjson.loads(await resp.read()))
    for body in BAD[path]:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        resp = await client.post(path, data=data)
        assert resp.status == 400
        bad.validate(orjson.loads(await resp.read()))


def test_a_schema_violation_is_caught() -> None:
    with pytest.raises(jsonschema.ValidationError):
        validator("/v1/karmada/score", 200).validate({"scores": [{"name": "a", "score": 101}]})


# --- schemathesis: generated requests against a real server on 127.0.0.1 ---------------


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    """Serve the scheduler routes from a background thread with its own event loop."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(make_app(await make_state()))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["runner"] = runner
        box["port"] = runner.addresses[0][1]
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
    started.wait(30)
    yield f"http://127.0.0.1:{box['port']}"
    asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(timeout=30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()


schema = schemathesis.openapi.from_dict(DOC)
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
]


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_generated_requests_get_documented_answers(case: schemathesis.Case, live_url: str) -> None:
    case.call_and_validate(base_url=live_url, checks=CHECKS)
