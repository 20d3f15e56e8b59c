"""Instant queries against a Prometheus HTTP API (a fake one on 127.0.0.1): the samples of
an instant vector; an answer that is not a success, or not an instant vector, is a
:class:`QueryError` naming why; a vector without results is none."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.support import FakeUpstream, Reply
from webhook.model.errors import QueryError
from webhook.prometheus import promql

QUERY = "/api/v1/query"


async def instant(fake: FakeUpstream, answer: Any) -> list[promql.Sample]:
    fake.on(QUERY, Reply(answer))
    async with aiohttp.ClientSession() as session:
        return await promql.instant(session, fake.url, "up")


async def test_an_instant_vector_is_its_samples(fake: FakeUpstream) -> None:
    result = [
        {"metric": {"job": "kepler", "zone": "a"}, "value": [1700000000.0, "2.5"]},
        {"metric": {}, "value": [1700000000.0, "0"]},
    ]
    answer = {"status": "success", "data": {"resultType": "vector", "result": result}}
    assert await instant(fake, answer) == [({"job": "kepler", "zone": "a"}, 2.5), ({}, 0.0)]
    [seen] = fake.seen
    assert seen.query == {"query": "up"}


@pytest.mark.parametrize("result", [[], None])
async def test_a_vector_without_results_is_none(fake: FakeUpstream, result: Any) -> None:
    answer = {"status": "success", "data": {"resultType": "vector", "result": result}}
    assert await instant(fake, answer) == []


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"status": "error", "error": "parse error"}, "parse error"),
        ({"status": "error"}, "query failed"),
        (["not", "an", "object"], "query failed"),
        ({"status": "success"}, "expected an instant vector, got None"),
        ({"status": "success", "data": None}, "expected an instant vector, got None"),
        ({"status": "success", "data": "vector"}, "expected an instant vector, got None"),
        ({"status": "success", "data": {"resultType": "matrix"}}, "got matrix"),
    ],
)
async def test_anything_but_an_instant_vector_is_a_query_error(
    fake: FakeUpstream, answer: Any, why: str
) -> None:
    with pytest.raises(QueryError, match=why):
        await instant(fake, answer)
