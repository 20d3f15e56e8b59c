"""Providers that fail while holding every secret, for the tests that check no credential
leaks: the secrets (:data:`SECRETS`), the ways an upstream fails (:data:`FAILURES`), the
config and environment of such providers (:func:`failing_providers`) and the checks
(:func:`assert_clean`, and :func:`refused` for a body of the wrong shape)."""

from __future__ import annotations

import re
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from tests.support import FakeUpstream, Reply
from webhook.model.errors import ProviderError

EM_TOKEN = "EMSECRET-1d9e5b"
WT_USER = "WTUSER-77aa"
WT_PASSWORD = "WTSECRET-3c1f0e"
WT_BEARER = "WTBEARER-9b8a7c"
SECRETS = (EM_TOKEN, WT_PASSWORD, WT_BEARER)
BODY = "BODYTEXT-5e2d81"
"""Put in an upstream body's wrong-typed field: errors must not repeat it."""

FAILURES = [
    Reply({"message": f"bad token {EM_TOKEN}"}, status=401),
    Reply({}, status=403),
    Reply({}, status=429, headers={"Retry-After": "600"}),
    Reply({}, status=500),
    Reply(body=b"<html>oops</html>"),
    Reply({"zone": "DE", "carbonIntensity": "x", "datetime": None}),
    Reply({}, status=404),
    Reply({}, delay=1.0),
]


def failing_providers(
    fake: FakeUpstream, folder: Path, failure: Reply
) -> tuple[dict[str, Any], dict[str, str]]:
    """Electricity Maps and WattTime (credentials from the environment, WattTime's password
    in a file under ``folder``) answering every data request with ``failure``: the config
    sections and the environment of a ``carbonshift serve`` that holds every secret."""
    for path in ("/v3/carbon-intensity/latest", "/v3/carbon-intensity/forecast", "/v3/forecast",
                 "/v3/signal-index"):  # fmt: skip
        fake.on(path, failure)
    fake.on("/login", Reply({"token": WT_BEARER}))
    password = folder / "password"
    password.write_text(WT_PASSWORD)
    config = {
        "providers": ["electricitymaps", "watttime", "static"],
        "electricitymaps": {"url": f"{fake.url}/v3", "timeout_seconds": 0.3, "retries": 1},
        "watttime": {"url": fake.url, "timeout_seconds": 0.3, "retries": 1},
    }
    env = {
        "ELECTRICITY_MAPS_API_TOKEN": EM_TOKEN,
        "WATTTIME_USERNAME": WT_USER,
        "WATTTIME_PASSWORD_FILE": str(password),
    }
    return config, env


def assert_clean(*texts: object) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in str(text), f"secret leaked into: {text!r}"


async def refused(call: Awaitable[object], provider: str, field: str) -> ProviderError:
    """``call`` fails on a body of the wrong shape: a :class:`ProviderError` of
    ``provider`` naming the endpoint and ``field``, without the body (:data:`BODY`)."""
    with pytest.raises(ProviderError) as info:
        await call
    message = str(info.value)
    assert info.value.provider == provider
    assert re.match(rf"{provider}: unexpected response from \S+ \(", message)
    assert field in message, message
    assert BODY not in message
    return info.value
