"""Instant queries against a Prometheus HTTP API (``GET /api/v1/query``)."""

from __future__ import annotations

from typing import Any

import aiohttp

from webhook.model.errors import QueryError
from webhook.model.objects import items, mapping

Sample = tuple[dict[str, str], float]
"""One element of an instant vector: its labels and its value."""


async def instant(session: aiohttp.ClientSession, url: str, query: str) -> list[Sample]:
    """The instant vector ``query`` evaluates to now at the Prometheus ``url``."""
    try:
        async with session.get(
            url.rstrip("/") + "/api/v1/query", params={"query": query}
        ) as response:
            body: Any = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise QueryError(f"cannot query {url}: {exc}") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        raise QueryError(str(error or "query failed"))
    data = mapping(body, "data")
    if data.get("resultType") != "vector":
        raise QueryError(f"expected an instant vector, got {data.get('resultType')}")
    return [
        ({str(k): str(v) for k, v in s["metric"].items()}, float(s["value"][1]))
        for s in items(data, "result")
    ]
