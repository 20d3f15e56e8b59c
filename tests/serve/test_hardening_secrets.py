"""Provider credentials stay out of everything a running server hands out: admission
answers (warnings, the decision annotation in the patch), scheduler answers, error
bodies, /readyz, /metrics and the process's own log, while every provider fails in the
ways of tests/providers/failing.py (an upstream that echoes the token included)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.providers.failing import (
    EM_TOKEN,
    FAILURES,
    assert_clean,
    failing_providers,
)
from tests.serve.hardening import REVIEW
from tests.serving import Running, serve_process
from tests.support import FLEET, FakeUpstream, Reply, eventually


async def exchange(run: Running, method: str, path: str, body: Any = None) -> str:
    """One request; the status, headers and body as text."""
    data = None if body is None else body if isinstance(body, bytes) else orjson.dumps(body)
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            run.url + path,
            data=data,
            headers={"Content-Type": "application/json"},
            ssl=run.client_ssl(),
        ) as resp,
    ):
        return f"{resp.status} {dict(resp.headers)} {await resp.text()}"


def decoded(answer: str) -> str:
    """An admission answer with its base64 patch decoded (the decision annotation)."""
    payload = orjson.loads(answer.split(" ", 1)[1].split("} ", 1)[1])
    patch = payload["response"].get("patch")
    return answer + (base64.b64decode(patch).decode() if patch else "")


@pytest.mark.parametrize("failure", FAILURES[:5], ids=lambda r: f"{r.status}-{r.body!r}")
async def test_no_secret_in_anything_a_running_server_hands_out(
    fake: FakeUpstream, tmp_path: Path, failure: Reply
) -> None:
    sections, env = failing_providers(fake, tmp_path, failure)
    config = {**FLEET, **sections, "feed": {"backoff_seconds": 0.01}}
    async with serve_process(config, tmp_path, "--log-level=debug", env=env) as server:
        run = server.run
        # Both providers were asked (and failed) before we look: Electricity Maps, and
        # WattTime's login and data.
        asked = ("/v3/carbon-intensity/latest", "/login", "/v3/forecast")
        await eventually(
            lambda: all(fake.calls[path] for path in asked),
            "every provider asked",
            seen=lambda: dict(fake.calls),
        )
        answers = [
            decoded(await exchange(run, "POST", "/mutate", REVIEW)),
            await exchange(run, "POST", "/mutate", b"{oops"),
            await exchange(
                run, "POST", "/v1/karmada/score", {"clusters": [{"name": "m", "zone": "DE"}]}
            ),
            await exchange(run, "POST", "/v1/karmada/filter", {"clusters": [{"name": 1}]}),
            await exchange(run, "GET", "/readyz"),
            await exchange(run, "GET", "/metrics"),
        ]
        code, _ = await asyncio.to_thread(server.terminate)
        log = server.log.read_text()
    assert code == 0
    assert "patch" in answers[0]
    assert_clean(*answers, log)
    # The credentials did reach the upstream: the failing paths were exercised.
    assert any(s.headers.get("auth-token") == EM_TOKEN for s in fake.seen)
