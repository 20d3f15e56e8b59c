"""A real server's traffic for the serving tests: the AdmissionReview they send
(:data:`REVIEW`, :func:`review`), raw HTTP/1.1 over one TLS connection (:func:`http_post`,
:class:`Conn`) and what a decided answer looks like (:func:`patched`)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import orjson

from tests.serving import Running
from webhook import testing


def _bare_policy() -> dict[str, Any]:
    """A plain Divided PropagationPolicy as a bare manifest has it: no labels or
    annotations map (the patch adds the map)."""
    policy = testing.propagation_policy(
        "web",
        namespace="shop",
        selectors=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
    )
    del policy["metadata"]["labels"], policy["metadata"]["annotations"]
    return policy


REVIEW = testing.review(_bare_policy(), uid="0b1c2d3e")
"""Its review, as kube-apiserver sends it."""


TIMEOUT_SECONDS = 3.0
"""The registration's timeoutSeconds (manifests/base/webhook.yaml)."""


def review(uid: str, selector: str = "web") -> bytes:
    """A PropagationPolicy review; a distinct ``selector`` makes a fresh decision."""
    body: dict[str, Any] = orjson.loads(orjson.dumps(REVIEW))
    body["request"]["uid"] = uid
    body["request"]["object"]["spec"]["resourceSelectors"][0]["name"] = selector
    return orjson.dumps(body)


def http_post(body: bytes, path: str = "/mutate", length: int | None = None) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
    )
    return head.encode() + body


class Conn:
    """One raw TLS connection: write bytes, read one HTTP/1.1 response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.headers: dict[str, str] = {}
        """The headers of the last response."""

    @classmethod
    async def open(cls, run: Running) -> Conn:
        return cls(*await asyncio.open_connection("127.0.0.1", run.port, ssl=run.client_ssl()))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self, within: float = 5.0) -> tuple[int, Any]:
        """The next response; fails if none comes ``within`` seconds."""
        async with asyncio.timeout(within):
            return await self._response()

    async def _response(self) -> tuple[int, Any]:
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        self.headers = headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        body = await self.reader.readexactly(int(headers.get("Content-Length", "0")))
        if headers.get("Content-Type", "").startswith("application/json"):
            return status, orjson.loads(body)
        return status, body.decode(errors="replace")

    async def closed_within(self, seconds: float) -> bool:
        """Whether the server closes the connection within ``seconds`` (then or not,
        this side closes too)."""
        try:
            async with asyncio.timeout(seconds):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return False
        except (ConnectionResetError, OSError):
            pass
        finally:
            self.close()
        return True

    def close(self) -> None:
        self.writer.close()


def patched(payload: Any) -> bool:
    response = payload["response"]
    return response["allowed"] is True and bool(base64.b64decode(response.get("patch", "")))


async def metric(run: Running, line: str) -> float:
    """The value of one sample of ``/metrics`` (0 when absent)."""
    conn = await Conn.open(run)
    await conn.send(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
    _, text = await conn.response()
    conn.close()
    found = [row for row in text.splitlines() if row.startswith(line + " ")]
    return float(found[0].split()[-1]) if found else 0.0


IN_PROGRESS = "carbonshift_requests_in_progress"


async def in_progress(run: Running, count: int, seconds: float = 10.0) -> None:
    """Wait until ``count`` requests are in progress besides the scrape that asks."""
    deadline = asyncio.get_running_loop().time() + seconds
    seen = await metric(run, IN_PROGRESS) - 1
    while seen < count:
        assert asyncio.get_running_loop().time() < deadline, f"{seen:g} in progress, not {count}"
        await asyncio.sleep(0.02)
        seen = await metric(run, IN_PROGRESS) - 1
