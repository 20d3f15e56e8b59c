"""Two webhook replicas sharing a real redis-server: one upstream call per zone per window.

The fake Electricity Maps server hands out readings whose validity windows are
:data:`WINDOW` seconds long and counts calls per (zone, window). Both replicas serve
many admissions while their refreshers keep the zones warm; the fleet must call the
provider exactly once per zone per window.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.sandbox.layout import free_port
from tests.feed import replicas
from tests.feed.replicas import review, running_redis, start_replicas, wait_ready
from tests.feed.windowed import WindowedProvider
from tests.support import FakeUpstream

BURST_SECONDS = 8.0
ZONES = ("DE", "FR", "PL")


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A private redis-server on a free loopback port, stopped afterwards."""
    with running_redis() as server:
        yield server.url


def write_config(path: Path, fake: FakeUpstream) -> None:
    clusters = "\n".join(f"  member-{z.lower()}: {{zone: {z}}}" for z in ZONES)
    path.write_text(
        f"""zone: DE
clusters:
{clusters}
providers: [electricitymaps, static]
electricitymaps: {{url: "{fake.url}/v3", timeout_seconds: 1, retries: 0}}
feed: {{refresh_seconds: 1, min_ttl_seconds: 1, forecasts: true}}
""",
        encoding="utf-8",
    )


@pytest.mark.timeout(120)
async def test_two_replicas_call_the_provider_once_per_zone_per_window(
    fake: FakeUpstream, redis_url: str, tmp_path: Path
) -> None:
    upstream = WindowedProvider(fake)
    config = tmp_path / "carbonshift.yaml"
    write_config(config, fake)
    env = {
        **os.environ,
        "CARBONSHIFT_REDIS_URL": redis_url,
        "ELECTRICITY_MAPS_API_TOKEN": "test-token",
    }
    ports = [free_port(), free_port()]
    answered = Counter[int]()
    patched = 0
    async with (
        start_replicas(config, env, ports),
        replicas.session(config) as session,
    ):
        for port in ports:
            await wait_ready(session, port)
        stop_at = time.monotonic() + BURST_SECONDS

        async def admit(port: int, worker: int, stop_at: float = stop_at) -> None:
            nonlocal patched
            i = 0
            while time.monotonic() < stop_at:
                i += 1
                async with session.post(
                    f"https://127.0.0.1:{port}/mutate",
                    data=review(worker * 100_000 + i),
                    headers={"Content-Type": "application/json"},
                ) as resp:
                    assert resp.status == 200
                    body = await resp.json()
                assert body["response"]["allowed"] is True
                answered[port] += 1
                patched += "patch" in body["response"]

        await asyncio.gather(*(admit(p, w) for w, p in enumerate(ports * 2)))
    windows = {w for (_zone, w) in upstream.latest}
    print(
        f"\nadmissions answered: {dict(answered)}; upstream latest calls per (zone, window): "
        f"{sorted(upstream.latest.items())}; forecast calls: {dict(upstream.forecast)}"
    )
    assert all(n > 50 for n in answered.values())
    assert patched == sum(answered.values())
    assert len(windows) >= 2, "the test must span several validity windows"
    for zone in ZONES:
        assert any(z == zone for z, _ in upstream.latest)
    assert set(upstream.latest.values()) == {1}, "more than one call for a zone in a window"
    assert dict(upstream.forecast) == dict.fromkeys(ZONES, 1)
