"""Credentials never appear in logs, errors, reprs or metrics, on any failure path."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest
from structlog.testing import capture_logs

from tests.support import FakeUpstream, Reply
from webhook.feed import IntensityFeed
from webhook.model.config import parse
from webhook.model.errors import ProviderError
from webhook.model.validation import InvalidInput
from webhook.providers.http import HttpSettings
from webhook.providers.registry import build_providers

EM_TOKEN = "EMSECRET-1d9e5b"
WT_USER = "WTUSER-77aa"
WT_PASSWORD = "WTSECRET-3c1f0e"
WT_BEARER = "WTBEARER-9b8a7c"
SECRETS = (EM_TOKEN, WT_PASSWORD, WT_BEARER)

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


@pytest.mark.parametrize("failure", FAILURES, ids=lambda r: f"{r.status}-{r.delay}-{r.body!r}")
async def test_no_secret_on_any_failure_path(
    fake: FakeUpstream,
    fast: HttpSettings,
    tmp_path: Path,
    failure: Reply,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    password_file = tmp_path / "password"
    password_file.write_text(WT_PASSWORD)
    env = {
        "ELECTRICITY_MAPS_API_TOKEN": EM_TOKEN,
        "WATTTIME_USERNAME": WT_USER,
        "WATTTIME_PASSWORD_FILE": str(password_file),
    }
    config = parse(
        {
            "providers": ["electricitymaps", "watttime", "static"],
            "electricitymaps": {"url": f"{fake.url}/v3", "timeout_seconds": 0.3, "retries": 1},
            "watttime": {"url": fake.url, "timeout_seconds": 0.3, "retries": 1},
            "feed": {"backoff_seconds": 0.01},
        }
    )
    fake.on("/v3/carbon-intensity/latest", failure)
    fake.on("/login", Reply({"token": WT_BEARER}))
    fake.on("/v3/forecast", failure)
    fake.on("/v3/signal-index", failure)
    errors: list[object] = []
    with capture_logs() as logs:
        feed = IntensityFeed.from_config(config, ["DE"], env=env)
        await feed.refresh_once()
        status = feed.status("DE")
        for provider in feed.providers[:2]:
            errors.append(repr(provider))
            try:
                await provider.latest("DE")
            except ProviderError as exc:
                errors.append(str(exc))
                errors.append(repr(exc))
        await feed.stop()
    assert status.provider == "static"
    assert_clean(*errors, status, logs, caplog.text, generate_latest(REGISTRY).decode())
    # The token did reach the upstream, so the test exercised the real path.
    assert any(s.headers.get("auth-token") == EM_TOKEN for s in fake.seen)


def test_config_errors_do_not_echo_secrets(tmp_path: Path) -> None:
    env = {"ELECTRICITY_MAPS_API_TOKEN": EM_TOKEN}
    bad = [
        {"electricitymaps": {"token": EM_TOKEN}},
        {"electricitymaps": {"url": f"https://u:{EM_TOKEN}@example.test"}},
        {"watttime": {"password": WT_PASSWORD}},
    ]
    for section in bad:
        name = next(iter(section))
        with pytest.raises(InvalidInput) as info:  # credentials in the file: at parse
            build_providers(parse({"providers": [name], **section}), env=env)
        assert_clean(str(info.value))
