"""The shared cache (a real redis-server) goes down, hangs and flaps in the middle of a
burst of admissions: every admission is still answered, decided and fast (they read
memory, never Redis), and once Redis is back the replica uses it again without a
restart."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.sandbox.layout import free_port
from tests.feed.test_shared_cache import WindowedProvider
from tests.serving import serve_process
from tests.support import FakeUpstream
from tests.test_hardening_limits import TIMEOUT_SECONDS, Conn, http_post, patched, review

ZONES = {"member-de": {"zone": "DE"}, "member-fr": {"zone": "FR"}, "member-pl": {"zone": "PL"}}


class Redis:
    """A private redis-server on a fixed loopback port that a test can kill, freeze,
    thaw and start again (an empty one, as after a crash without persistence)."""

    def __init__(self, exe: str, port: int) -> None:
        self.exe, self.port = exe, port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no"]  # fmt: skip
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while self.command(b"PING") != b"+PONG":
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def freeze(self, frozen: bool) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP if frozen else signal.SIGCONT)

    def command(self, line: bytes) -> bytes:
        """One inline command's first reply line (b"" when Redis cannot be reached)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(line + b"\r\n")
                return conn.recv(64).split(b"\r\n")[0]
        except OSError:
            return b""

    def keys(self) -> int:
        reply = self.command(b"DBSIZE")
        return int(reply[1:]) if reply.startswith(b":") else 0


@pytest.fixture
def redis() -> Iterator[Redis]:
    exe = shutil.which("redis-server")
    if exe is None:
        message = "redis-server is not installed (Debian: apt-get install -y redis-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    port = free_port()
    server = Redis(exe, port)
    server.start()
    try:
        yield server
    finally:
        assert server.proc is not None
        server.proc.send_signal(signal.SIGCONT)
        server.proc.kill()
        server.proc.wait()


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
        for _ in range(100):  # warm: the first readings are in Redis
            if redis.keys():
                break
            await asyncio.sleep(0.1)
        assert redis.keys(), "the replica never wrote to Redis"
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
    assert "cache_unavailable" in log  # the outage was real and seen
    print(
        f"\nRedis {', '.join(steps)}: {answers} admissions, all decided; latency "
        f"p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {latencies[-1] * 1000:.1f} ms; Redis written again {recovery:.2f} s after "
        "the last restart"
    )
