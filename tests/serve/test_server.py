"""The HTTPS server over real TLS on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.serve.hardening import REVIEW
from tests.serving import Running, serving
from tests.support import FLEET, awaited
from webhook.model.config import parse
from webhook.serve import certs, server


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    async with serving(parse(FLEET), tmp_path) as run:
        yield run


async def post(
    run: Running, body: bytes, content_type: str = "application/json"
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            run.url + "/mutate",
            data=body,
            headers={"Content-Type": content_type},
            ssl=run.client_ssl(),
        ) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def test_mutate_answers_a_real_admission_review(running: Running) -> None:
    status, body = await post(running, orjson.dumps(REVIEW))
    assert status == 200
    response = body["response"]
    assert response["uid"] == "0b1c2d3e"
    assert response["allowed"] is True
    patch = orjson.loads(base64.b64decode(response["patch"]))
    assert {op["path"] for op in patch} >= {  # the ordered fill
        "/spec/placement/replicaScheduling",
        "/spec/placement/clusterAffinities",
        "/metadata/annotations",
    }


@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (b"{oops", "application/json", 400),
        (b'{"request": {"kind": {}}}', "application/json", 400),
        (b'{"request": {"uid": "\xff\xfe"}}', "application/json", 400),  # not UTF-8
        (orjson.dumps(REVIEW), "text/plain", 415),
        (orjson.dumps(REVIEW), "application/jsonl", 415),
        (b"x" * (8 * 1024 * 1024 + 1), "application/json", 413),
    ],
)
async def test_bad_requests_get_a_json_error(
    running: Running, body: bytes, content_type: str, status: int
) -> None:
    got, payload = await post(running, body, content_type)
    assert got == status
    assert isinstance(payload["error"], str)
    assert payload["error"]


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON"])
async def test_json_content_types_with_parameters_or_any_case_are_accepted(
    running: Running, content_type: str
) -> None:
    got, payload = await post(running, orjson.dumps(REVIEW), content_type)
    assert got == 200
    assert payload["response"]["allowed"] is True


async def test_probes_and_metrics(running: Running) -> None:
    await post(running, orjson.dumps(REVIEW))
    async with aiohttp.ClientSession() as session:
        ctx = running.client_ssl()
        async with session.get(running.url + "/healthz", ssl=ctx) as resp:
            assert resp.status == 200

        async def readiness() -> dict[str, Any] | None:
            async with session.get(running.url + "/readyz", ssl=ctx) as resp:
                ready: dict[str, Any] = await resp.json()
            return ready if ready["ready"] else None

        ready = await awaited(readiness, "ready on /readyz")
        assert ready == {"ready": True, "zones": 3, "staleZones": []}, ready
        async with session.get(running.url + "/metrics", ssl=ctx) as resp:
            text = await resp.text()
    assert 'carbonshift_admissions_total{kind="PropagationPolicy",outcome="patched"}' in text
    assert "carbonshift_admission_duration_seconds_bucket" in text


async def test_rotated_certificate_is_served_without_dropping_connections(
    running: Running, tmp_path: Path
) -> None:
    old_ctx = running.client_ssl()
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector) as kept:
        async with kept.get(running.url + "/healthz", ssl=old_ctx) as resp:
            assert resp.status == 200
        certs.issue(["localhost", "127.0.0.1"]).write(tmp_path)  # new CA and serving pair
        new_ctx = ssl.create_default_context(cafile=str(tmp_path / certs.CA_CERT))
        deadline = time.monotonic() + 30
        while True:
            try:
                async with (
                    aiohttp.ClientSession() as fresh,
                    fresh.get(running.url + "/healthz", ssl=new_ctx) as resp,
                ):
                    assert resp.status == 200
                    break
            except aiohttp.ClientConnectorCertificateError as exc:
                if time.monotonic() > deadline:
                    pytest.fail(f"the new certificate was never served in 30 s: {exc}")
                await asyncio.sleep(0.05)
        # The connection opened before the rotation is still alive and answering.
        async with kept.get(running.url + "/healthz", ssl=old_ctx) as resp:
            assert resp.status == 200
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with (
                aiohttp.ClientSession() as fresh,
                fresh.get(running.url + "/healthz", ssl=old_ctx),
            ):
                pass


async def test_deeply_nested_scheduler_requests_get_a_json_error(running: Running) -> None:
    # An unknown field is skipped, not built, yet msgspec recurses through it.
    deep = b'{"Extra": ' + b"[" * 100_000 + b"]" * 100_000 + b', "Nodes": {"items": []}}'
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            running.url + "/v1/extender/filter",
            data=deep,
            headers={"Content-Type": "application/json"},
            ssl=running.client_ssl(),
        ) as resp,
    ):
        assert resp.status == 400
        assert "nested too deeply" in (await resp.json())["error"]


@pytest.mark.parametrize(
    ("method", "path", "status", "error"),
    [
        ("GET", "/nope", 404, "GET /nope: Not Found"),
        ("POST", "/v1/karmada/nope", 404, "POST /v1/karmada/nope: Not Found"),
        ("GET", "/mutate", 405, "GET /mutate: Method Not Allowed (allowed: POST)"),
        ("DELETE", "/healthz", 405, "DELETE /healthz: Method Not Allowed (allowed: GET, HEAD)"),
    ],
)
async def test_unknown_paths_and_methods_get_the_json_error(
    running: Running, method: str, path: str, status: int, error: str
) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, running.url + path, ssl=running.client_ssl()) as resp,
    ):
        assert resp.status == status
        assert resp.content_type == "application/json"
        assert await resp.json() == {"error": error}
        if status == 405:
            assert resp.headers["Allow"]


async def test_a_handler_that_fails_gets_the_json_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(_request: aiohttp.web.Request) -> aiohttp.web.Response:
        raise RuntimeError("boom")

    monkeypatch.setattr(server, "healthz", broken)
    async with (
        serving(parse(FLEET), tmp_path) as run,
        aiohttp.ClientSession() as session,
        session.get(run.url + "/healthz", ssl=run.client_ssl()) as resp,
    ):
        assert resp.status == 500
        assert resp.content_type == "application/json"
        assert await resp.json() == {"error": "Internal Server Error"}
