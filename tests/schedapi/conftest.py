"""Fixtures for the scheduler API: a feed with fixed intensities and an app with the routes
(:func:`tests.support.make_state`, :func:`tests.support.make_app`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.support import make_app, make_state
from webhook.serve.state import ServerState


@pytest.fixture
async def state() -> ServerState:
    return await make_state()


@pytest.fixture
async def client(state: ServerState) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    async with TestClient(TestServer(make_app(state), host="127.0.0.1")) as c:
        yield c
