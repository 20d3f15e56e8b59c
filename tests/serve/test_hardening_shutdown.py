"""Graceful shutdown of a real ``carbonshift serve`` process: on SIGTERM it stops
accepting, finishes the requests in progress (a body still arriving included), writes
the admission journal and exits with status 0 well within the pod's grace period."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from tests.serve.hardening import Conn, http_post, in_progress, patched, review
from tests.serving import serve_process
from tests.support import FLEET

GRACE_SECONDS = 30.0
"""The pod's terminationGracePeriodSeconds (manifests/base/deployment.yaml)."""


async def refused(port: int) -> bool:
    """Whether the server no longer accepts connections: refused, or reset when the
    connection raced the listening socket's closing (it sat in the backlog as it closed)."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except (ConnectionRefusedError, ConnectionResetError):
        return True
    writer.close()
    await writer.wait_closed()
    return False


async def test_sigterm_finishes_requests_in_progress_and_exits_in_time(tmp_path: Path) -> None:
    async with serve_process(FLEET, tmp_path) as server:
        run = server.run
        kept = await Conn.open(run)  # an idle keep-alive connection, as the API server keeps
        await kept.send(http_post(review("before", selector="before")))
        assert patched((await kept.response())[1])
        slow = await Conn.open(run)
        body = review("in-flight", selector="in-flight")
        await slow.send(http_post(body[:50], length=len(body)))  # in progress: half a body
        await in_progress(run, 1)

        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        for _ in range(100):  # stops accepting at once
            if await refused(run.port):
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("still accepting connections 1 s after SIGTERM")
        refused_after = time.monotonic() - started
        await asyncio.sleep(0.5)  # the rest of the body comes late: it is still read
        await slow.send(body[50:])
        status, payload = await slow.response()
        assert status == 200
        assert payload["response"]["uid"] == "in-flight"
        assert patched(payload)
        assert slow.headers.get("Connection") == "close"  # go elsewhere from now on
        assert await kept.closed_within(5.0)  # idle connections are closed
        code = await asyncio.to_thread(server.proc.wait, GRACE_SECONDS)
        exited_after = time.monotonic() - started
        assert code == 0
        assert exited_after < GRACE_SECONDS / 3
        lines = server.lines()
        uids = [line.get("uid") for line in lines if line.get("event") == "admission"]
        assert uids == ["before", "in-flight"]  # the journal was written before exit
        events = [line.get("event") for line in lines]
        assert events.index("shutting_down") < events.index("stopped")
        stopped = next(line for line in lines if line.get("event") == "stopped")
        print(
            f"\nSIGTERM: refusing connections after {refused_after:.3f} s, in-flight request "
            f"answered, exit 0 after {exited_after:.3f} s (server's own shutdown "
            f"{stopped['seconds']} s incl. the 0.5 s wait for the late body)"
        )


async def test_sigterm_with_nothing_in_progress_exits_at_once(tmp_path: Path) -> None:
    async with serve_process(FLEET, tmp_path) as server:
        kept = await Conn.open(server.run)
        await kept.send(http_post(review("only")))
        assert patched((await kept.response())[1])
        code, seconds = await asyncio.to_thread(server.terminate)
        assert code == 0
        assert seconds < 2.0, seconds
        assert [line.get("uid") for line in server.lines() if line.get("uid")] == ["only"]
        print(f"\nSIGTERM, idle: exit 0 after {seconds:.3f} s")


async def test_a_request_that_never_finishes_does_not_hold_the_shutdown(tmp_path: Path) -> None:
    async with serve_process(FLEET, tmp_path, "--shutdown-seconds=3") as server:
        stuck = await Conn.open(server.run)
        body = review("stuck")
        await stuck.send(http_post(body[:50], length=len(body)))  # and never the rest
        await in_progress(server.run, 1)
        code, seconds = await asyncio.to_thread(server.terminate)
        assert code == 0
        assert 2.9 < seconds < 5.5, seconds  # --shutdown-seconds, plus at most 1 s
        events = [line.get("event") for line in server.lines()]
        assert "shutdown_requests_unfinished" in events
        stuck.close()
        print(
            f"\nSIGTERM with a request stuck: exit 0 after {seconds:.3f} s (--shutdown-seconds=3)"
        )
