"""The shared cache (a real redis-server) goes down, hangs and flaps in the middle of a
burst of admissions: every admission is still answered, decided and fast (they read
memory, never Redis), and once Redis is back the replica uses it again without a
restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.feed.replicas import Redis, running_redis
from tests.feed.windowed import WindowedProvider
from tests.serve.hardening import TIMEOUT_SECONDS, Conn, http_post, patched, review
from tests.serving import serve_process
from tests.support import FakeUpstream, eventually

ZONES = {"member-de": {"zone": "DE"}, "member-fr": {"zone": "FR"}, "member-pl": {"zone": "PL"}}


@pytest.fixture
def redis() -> Iterator[Redis]:
    with running_redis() as server:
        yield server


@pytest.mark.timeout(120)
async def test_redis_down_hung_and_flapping_mid_burst(
    fake: FakeUpstream, redis: Redis, tmp_path: Path
) -> None:
    WindowedProvider(fake)  # readings valid for 3 s: the refresher keeps using the cache
    config = {
        "zone": "DE",
        "clusters": ZONES,
        "providers": ["electricitymaps", "static"],
        "electricitymaps": {"url": f"{fake.url}/v3", "timeout_seconds": 1, "retries": 0},
        "feed": {"refresh_seconds": 1, "min_ttl_seconds": 1},
    }
    env = {"CARBONSHIFT_REDIS_URL": redis.url, "ELECTRICITY_MAPS_API_TOKEN": "test-token"}
    async with serve_process(config, tmp_path, env=env) as server:
        await eventually(redis.keys, "the first readings in Redis", seconds=30.0)
        latencies: list[float] = []
        answers = 0
        stop = asyncio.Event()

        async def admit(worker: int) -> None:
            nonlocal answers
            conn = await Conn.open(server.run)
            i = 0
            while not stop.is_set():
                i += 1
                uid = f"w{worker}-{i}"
                started = time.monotonic()
                await conn.send(http_post(review(uid, selector=uid)))
                status, payload = await conn.response()
                latencies.append(time.monotonic() - started)
                assert status == 200
                assert payload["response"]["uid"] == uid
                assert patched(payload), payload  # decided, not failed open
                answers += 1
            conn.close()

        async def seen_down() -> None:
            """Hold the first outage until the replica has logged it (a busy machine
            may not refresh inside a fixed hold)."""
            deadline = time.monotonic() + 30
            while "cache_unavailable" not in server.log.read_text():
                assert time.monotonic() < deadline, (
                    "no cache_unavailable in 30 s of Redis down; log tail: "
                    + server.log.read_text()[-2000:]
                )
                await asyncio.sleep(0.1)

        async def chaos() -> list[str]:
            steps = []
            for name, action, hold in [
                ("down", redis.kill, 2.0),
                ("back", redis.start, 1.0),
                ("hung", lambda: redis.freeze(True), 2.5),  # longer than the 2 s Redis timeout
                ("thawed", lambda: redis.freeze(False), 1.0),
                ("down", redis.kill, 0.5),
                ("back", redis.start, 0.5),
                ("down", redis.kill, 0.5),
                ("back", redis.start, 0.1),
            ]:
                action()
                steps.append(f"{name} {hold:g} s")
                await asyncio.sleep(hold)
                if len(steps) == 1:
                    await seen_down()
            stop.set()
            return steps

        workers = [asyncio.create_task(admit(w)) for w in range(4)]
        steps = await chaos()
        await asyncio.gather(*workers)
        # Recovered without a restart: the empty Redis gets the replica's entries again.
        recovered = time.monotonic()
        while not redis.keys():
            assert time.monotonic() - recovered < 10, "Redis was not used again"
            await asyncio.sleep(0.1)
        recovery = time.monotonic() - recovered
        assert server.proc.poll() is None
        log = server.log.read_text()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)]
    assert latencies[-1] < TIMEOUT_SECONDS / 3, latencies[-5:]
    assert "cache_unavailable" in log  # the outage was real and seen (waited for above)
    print(
        f"\nRedis {', '.join(steps)}: {answers} admissions, all decided; latency "
        f"p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {latencies[-1] * 1000:.1f} ms; Redis written again {recovery:.2f} s after "
        "the last restart"
    )
