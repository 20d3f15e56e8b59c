"""Slow clients, oversized headers and bursts against a real server over TLS on loopback:
every wait is bounded, and past its bound the webhook answers at once (allowed,
unchanged, a warning) instead of queueing into kube-apiserver's timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.serve.hardening import TIMEOUT_SECONDS, Conn, http_post, metric, patched, review
from tests.serving import Running, serve_process, serving
from tests.support import FLEET, eventually
from webhook.model.config import ServiceConfig, parse
from webhook.model.validation import InvalidInput
from webhook.serve import server
from webhook.serve.guard import AdmissionGate


def limited(**service: Any) -> Any:
    return parse({**FLEET, "service": service})


@pytest.fixture
async def strict(tmp_path: Path) -> AsyncIterator[Running]:
    config = limited(
        handshake_timeout_seconds=0.4,
        header_timeout_seconds=0.4,
        body_timeout_seconds=0.4,
        idle_timeout_seconds=1.5,
    )
    async with serving(config, tmp_path) as run:
        yield run


# slow clients ------------------------------------------------------------------------------


HEADER_TIMEOUTS = 'carbonshift_request_timeouts_total{phase="header"}'
BODY_TIMEOUTS = 'carbonshift_request_timeouts_total{phase="body"}'
SHED_CONCURRENCY = 'carbonshift_admissions_shed_total{reason="concurrency"}'
SHED_QUEUE = 'carbonshift_admissions_shed_total{reason="queue"}'
SHED_ADMISSIONS = 'carbonshift_admissions_total{kind="PropagationPolicy",outcome="shed"}'


async def test_headers_trickling_in_are_cut_off(strict: Running) -> None:
    before = await metric(strict, HEADER_TIMEOUTS)
    conn = await Conn.open(strict)
    await conn.send(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\n")  # and never the rest
    started = time.monotonic()
    assert await conn.closed_within(3.0)
    assert 0.3 < time.monotonic() - started < 1.2  # the header timeout, not the idle one
    assert await metric(strict, HEADER_TIMEOUTS) == before + 1


async def test_a_body_that_never_arrives_gets_408(strict: Running) -> None:
    before = await metric(strict, BODY_TIMEOUTS)
    conn = await Conn.open(strict)
    body = review("slow-body")
    await conn.send(http_post(body[:20], length=len(body)))
    started = time.monotonic()
    status, payload = await conn.response()
    assert status == 408
    assert "request body not received within 0.4 s" in payload["error"]
    assert time.monotonic() - started < 2.0
    assert await conn.closed_within(3.0)  # after reading what comes for 1 s more
    assert await metric(strict, BODY_TIMEOUTS) == before + 1


@pytest.fixture
async def idle(tmp_path: Path) -> AsyncIterator[Running]:
    """A short header timeout and an idle timeout ten times as long: a connection idle
    past the first stays open by a margin a busy machine's stalls do not eat."""
    config = limited(header_timeout_seconds=0.4, idle_timeout_seconds=4.0)
    async with serving(config, tmp_path) as run:
        yield run


async def test_an_idle_keep_alive_connection_is_kept_then_closed(idle: Running) -> None:
    before = await metric(idle, HEADER_TIMEOUTS)
    conn = await Conn.open(idle)
    for uid in ("first", "second"):
        await conn.send(http_post(review(uid)))
        status, payload = await conn.response()
        assert status == 200
        assert payload["response"]["uid"] == uid
        # idle past the header timeout (its timer fires and finds no request awaited),
        # 3.4 s short of the idle timeout: the next request is still answered
        await asyncio.sleep(0.6)
    started = time.monotonic()
    assert await conn.closed_within(8.0)  # the idle timeout (4 s) closes it
    # Not the header timeout (0.4 s): a slow machine can only make this longer.
    assert time.monotonic() - started > 2.0
    assert await metric(idle, HEADER_TIMEOUTS) == before  # idle is not a header timeout


async def test_a_later_request_trickling_in_on_a_kept_connection_is_cut_off(
    strict: Running,
) -> None:
    # The connection's one timer was armed by the first request; it fires while the second
    # one's headers are awaited and waits for that request's own deadline.
    before = await metric(strict, HEADER_TIMEOUTS)
    conn = await Conn.open(strict)
    await conn.send(http_post(review("first")))
    status, _ = await conn.response()
    assert status == 200
    await asyncio.sleep(0.2)  # half the header timeout
    await conn.send(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\n")  # and never the rest
    started = time.monotonic()
    assert await conn.closed_within(3.0)
    # Its own deadline (0.4 s after these headers began), not the first request's (due
    # 0.2 s from here): a slow machine can only make the wait longer.
    assert time.monotonic() - started > 0.3
    assert await metric(strict, HEADER_TIMEOUTS) == before + 1


async def test_a_busy_kept_connection_outlives_the_header_timeout(strict: Running) -> None:
    before = await metric(strict, HEADER_TIMEOUTS)
    conn = await Conn.open(strict)
    started, answered = time.monotonic(), 0
    while time.monotonic() - started < 1.3:  # three header timeouts of requests in a row
        await conn.send(http_post(review(f"busy-{answered}")))
        status, payload = await conn.response()
        assert status == 200
        assert payload["response"]["uid"] == f"busy-{answered}"
        answered += 1
        await asyncio.sleep(0.05)
    assert not await conn.closed_within(0.1)
    assert await metric(strict, HEADER_TIMEOUTS) == before


async def test_a_connection_that_never_speaks_is_closed(strict: Running) -> None:
    conn = await Conn.open(strict)
    assert await conn.closed_within(3.0)


async def test_a_tls_handshake_that_never_starts_is_cut_off(strict: Running) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", strict.port)  # no TLS
    started = time.monotonic()
    assert await Conn(reader, writer).closed_within(3.0)
    assert time.monotonic() - started < 1.2  # the handshake timeout, not the idle one


@pytest.mark.parametrize(
    "headers",
    [
        "".join(f"X-Filler-{i}: {i}\r\n" for i in range(100)),  # too many headers
        "X-Big: " + "a" * 9000 + "\r\n",  # a header line over 8190 bytes
    ],
    ids=["100-headers", "9000-byte-header"],
)
async def test_oversized_headers_are_refused(strict: Running, headers: str) -> None:
    conn = await Conn.open(strict)
    body = review("big-headers")
    head = f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n"
    await conn.send((head + headers + "Content-Type: application/json\r\n\r\n").encode() + body)
    status, payload = await conn.response()
    assert status == 400
    assert conn.headers["Content-Type"].startswith("application/json")
    assert "Too many headers" in payload["error"] or "Got more than 8190 bytes" in payload["error"]


@pytest.mark.parametrize(
    "head",
    [
        b"GARBAGE\r\n\r\n",  # no method, path or version
        b"GET /healthz HTTP/9.9\r\nHost: localhost\r\n\r\n",  # an unknown version
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n",  # no colon
        b"GET /he\x00lthz HTTP/1.1\r\nHost: localhost\r\n\r\n",  # a NUL in the target
    ],
    ids=["request-line", "version", "header-line", "nul"],
)
async def test_malformed_requests_get_the_json_error(strict: Running, head: bytes) -> None:
    conn = await Conn.open(strict)
    await conn.send(head)
    status, payload = await conn.response()
    assert status == 400
    assert conn.headers["Content-Type"].startswith("application/json")
    assert isinstance(payload["error"], str)
    assert payload["error"]
    assert await conn.closed_within(3.0)


# admission bound ---------------------------------------------------------------------------


def shed(payload: Any) -> bool:
    """An answer allowed and unchanged with carbonshift's overload warning."""
    response = payload["response"]
    return (
        response["allowed"] is True
        and "patch" not in response
        and any("carbonshift: overloaded" in w for w in response.get("warnings", []))
    )


async def slow_admission(run: Running, uid: str, pause: float | asyncio.Event) -> tuple[float, Any]:
    """An admission whose body arrives in two halves, ``pause`` seconds apart or once
    ``pause`` is set: it occupies an admission slot meanwhile. Returns its latency and
    answer."""
    conn = await Conn.open(run)
    body = review(uid, selector=uid)
    started = time.monotonic()
    await conn.send(http_post(body[:40], length=len(body)))
    if isinstance(pause, asyncio.Event):
        await pause.wait()
    else:
        await asyncio.sleep(pause)
    await conn.send(body[40:])
    status, payload = await conn.response()
    conn.close()
    assert status == 200
    return time.monotonic() - started, payload


class CountedGate(AdmissionGate):
    """The server's admission gate, kept where the test can see how many hold a slot."""

    made: ClassVar[list[AdmissionGate]] = []

    def __init__(self, limits: ServiceConfig) -> None:
        super().__init__(limits)
        self.made.append(self)


async def test_past_the_concurrency_bound_admissions_are_answered_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = 4
    monkeypatch.setattr(server, "AdmissionGate", CountedGate)
    monkeypatch.setattr(CountedGate, "made", [])
    async with serving(limited(max_concurrent_admissions=bound), tmp_path) as run:
        before = (await metric(run, SHED_CONCURRENCY), await metric(run, SHED_ADMISSIONS))
        release = asyncio.Event()
        holders = [asyncio.create_task(slow_admission(run, f"hold-{i}", release)) for i in range(4)]
        (gate,) = CountedGate.made
        await eventually(
            lambda: gate.active == bound, "the four holding every slot", seen=lambda: gate.active
        )
        conn = await Conn.open(run)
        started = time.monotonic()
        await conn.send(http_post(review("extra", selector="extra")))
        status, payload = await conn.response()
        assert status == 200
        assert time.monotonic() - started < 0.5
        assert payload["response"]["uid"] == "extra"
        assert shed(payload)
        release.set()
        answers = await asyncio.gather(*holders)
        assert all(patched(p) for _, p in answers)  # the ones holding a slot were decided
        await conn.send(http_post(review("after", selector="after")))
        _, payload = await conn.response()
        assert patched(payload)  # the bound is free again
        after = (await metric(run, SHED_CONCURRENCY), await metric(run, SHED_ADMISSIONS))
        assert after == (before[0] + 1, before[1] + 1)


async def test_a_burst_of_three_times_the_bound_stays_within_the_webhook_timeout(
    tmp_path: Path,
) -> None:
    bound = 8
    async with serving(limited(max_concurrent_admissions=bound), tmp_path) as run:
        started = time.monotonic()
        answers = await asyncio.gather(
            *(slow_admission(run, f"burst-{i}", 0.5) for i in range(3 * bound))
        )
        elapsed = time.monotonic() - started
        latencies = sorted(seconds for seconds, _ in answers)
        decided = sum(patched(p) for _, p in answers)
        dropped = sum(shed(p) for _, p in answers)
        assert decided + dropped == 3 * bound
        assert decided >= bound  # at least the bound was decided ...
        assert dropped >= bound  # ... and the excess shed, not queued
        assert latencies[-1] < TIMEOUT_SECONDS, latencies
        # Recovered: the next admission is decided, at once.
        recovered = time.monotonic()
        _, payload = await slow_admission(run, "after-burst", 0.0)
        assert patched(payload)
        print(
            f"burst {3 * bound} (bound {bound}): decided {decided}, shed {dropped}, "
            f"p50 {latencies[len(latencies) // 2]:.3f} s, max {latencies[-1]:.3f} s, "
            f"all answered in {elapsed:.2f} s; recovered in {time.monotonic() - recovered:.3f} s"
        )


@pytest.mark.parametrize("max_queue", [0.02, 1.0])
async def test_a_burst_on_open_connections_is_answered_within_the_webhook_timeout(
    tmp_path: Path, max_queue: float
) -> None:
    # A separate server process (the client must not share its event loop): 3 x 64
    # distinct admissions written at once on as many open connections queue on the
    # server's event loop behind each other's decisions. With max_queue_seconds 0.02 the
    # ones that waited longer are shed; with the default (1 s) every one is decided.
    bound = 64
    service = {"max_concurrent_admissions": bound, "max_queue_seconds": max_queue}
    async with serve_process({**FLEET, "service": service}, tmp_path) as server:
        run = server.run
        before = await metric(run, SHED_QUEUE)
        conns = [await Conn.open(run) for _ in range(3 * bound)]
        started = time.monotonic()
        for i, conn in enumerate(conns):
            conn.writer.write(http_post(review(f"queued-{i}", selector=f"queued-{i}")))

        async def answer(conn: Conn) -> tuple[float, Any]:
            status, payload = await conn.response()
            assert status == 200
            return time.monotonic() - started, payload

        answers = await asyncio.gather(*(answer(conn) for conn in conns))
        latencies = sorted(seconds for seconds, _ in answers)
        dropped = sum(shed(payload) for _, payload in answers)
        decided = sum(patched(payload) for _, payload in answers)
        assert decided + dropped == 3 * bound
        assert latencies[-1] < TIMEOUT_SECONDS, latencies
        assert await metric(run, SHED_QUEUE) == before + dropped
        if max_queue < 0.1:
            assert dropped > 0  # how many depends on the machine; the first may be decided
        recovered = time.monotonic()
        await conns[0].send(http_post(review("after-queue", selector="after-queue")))
        _, payload = await conns[0].response()
        assert patched(payload)
        print(
            f"\nburst of {3 * bound} on open connections, max_queue_seconds {max_queue}: "
            f"decided {decided}, shed {dropped}, p50 {latencies[len(latencies) // 2]:.3f} s, "
            f"max {latencies[-1]:.3f} s; next admission decided after "
            f"{time.monotonic() - recovered:.3f} s"
        )
        for conn in conns:
            conn.close()


@pytest.mark.parametrize(
    ("service", "problem"),
    [
        ({"max_concurrent_admissions": 0}, "service.max_concurrent_admissions: expected int >= 1"),
        ({"header_timeout_seconds": 0}, "service.header_timeout_seconds: expected float > 0"),
        ({"client_auth": ["mutate"]}, "service.client_auth[0]: expected one of"),
    ],
)
def test_bad_limits_are_configuration_errors(service: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem.replace("[", r"\[")):
        limited(**service)
