"""Credentials never appear in logs, errors, reprs or metrics, on any failure path."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, generate_latest
from structlog.testing import capture_logs

from tests.providers.failing import (
    EM_TOKEN,
    FAILURES,
    WT_BEARER,
    WT_PASSWORD,
    WT_USER,
    assert_clean,
)
from tests.support import FakeUpstream, Reply
from webhook.feed import IntensityFeed
from webhook.model.config import parse
from webhook.model.errors import ProviderError
from webhook.model.validation import InvalidInput
from webhook.providers.http import HttpSettings
from webhook.providers.registry import build_providers


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
