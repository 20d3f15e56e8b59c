"""A zone without data: refused at start when no provider of the chain can ever serve it,
else never a reason to be unready, but loud (a warning once per spell, a gauge, /readyz)."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from structlog.testing import capture_logs

from devtools.sandbox.layout import free_port
from tests.feed.upstream import LATEST
from tests.serve.hardening import REVIEW
from tests.serving import Running, serving
from tests.support import FakeUpstream, FixedProvider, Reply, em_latest
from webhook.feed import IntensityFeed
from webhook.feed.zones import check_config, servable, suggestions
from webhook.model.config import parse
from webhook.model.validation import InvalidInput
from webhook.providers.registry import build_providers

ENV = {"ELECTRICITY_MAPS_API_TOKEN": "t", "WATTTIME_USERNAME": "u", "WATTTIME_PASSWORD": "p"}


def refusal(doc: dict[str, Any]) -> str | None:
    """The error ``doc`` is refused with at start, None when it is accepted."""
    config = parse(doc)
    try:
        check_config(config, build_providers(config, env=ENV))
    except InvalidInput as exc:
        return str(exc)
    return None


# --- refused at start --------------------------------------------------------------------


def test_a_typo_is_refused_on_one_line_naming_it_with_the_suggestion(tmp_path: Path) -> None:
    config = tmp_path / "carbonshift.yaml"
    config.write_text("clusters:\n  member-fr: {zone: FR}\n  member-uk: {zone: UK}\n")
    done = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "serve", f"--config={config}",
         f"--port={free_port()}", f"--cert-dir={tmp_path / 'certs'}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"carbonshift: config {config}: clusters.member-uk.zone: no provider in the chain "
        "(static) has data for zone 'UK'; did you mean GB?\n"
    )
    assert '"serving"' not in done.stdout  # refused before listening


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        # (a key in lower case, a country's name or a cloud region: refused by the config
        # itself, tests/cli/test_exit_statuses.py)
        ({"zone": "DEU"}, "zone: no provider in the chain (static) has data for zone 'DEU'; "
         "did you mean DE?"),
        ({"clusters": {"m": {"zone": "SE3"}}}, "did you mean SE or SE-SE3?"),
        ({"clusters": {"m": {"zone": "XX"}}}, "clusters.m.zone: no provider in the chain "
         "(static) has data for zone 'XX'; electricitymaps or watttime in providers serve "
         "zones beyond these"),
        ({"nodepools": {"topology_zones": {"eu-central-1a": "DEU"}}},
         "nodepools.topology_zones.eu-central-1a: no provider"),
        ({"providers": ["ukgrid"], "clusters": {"m": {"provider": "aws", "region": "eu-west-3"}}},
         "clusters.m.region: no provider in the chain (ukgrid) has data for zone 'FR' (of "
         "region 'eu-west-3')"),
        ({"providers": ["ukgrid", "static"], "zone": "GB-REGION-99"}, "did you mean"),
    ],
)  # fmt: skip
def test_a_zone_no_listed_provider_serves_is_refused(doc: dict[str, Any], error: str) -> None:
    got = refusal(doc)
    assert got is not None
    assert error in got
    assert "\n" not in got


@pytest.mark.parametrize(
    "doc",
    [
        {"clusters": {"m": {"zone": "FR"}, "n": {"provider": "gcp", "region": "europe-west4"}}},
        {"providers": ["ukgrid"], "zone": "GB-REGION-13"},
        {"providers": ["ukgrid", "static"], "zone": "GB-REGION-13",
         "clusters": {"m": {"zone": "PL"}}},
        # Open providers: their zone lists are their own (EM's XX, WattTime's UK).
        {"providers": ["electricitymaps", "static"], "clusters": {"m": {"zone": "XX"}}},
        {"providers": ["static", "watttime"], "clusters": {"m": {"zone": "UK"}}},
        {"providers": ["electricitymaps"], "zone": "US-CAL-CISO"},
    ],
)  # fmt: skip
def test_a_zone_some_provider_may_serve_is_accepted(doc: dict[str, Any]) -> None:
    assert refusal(doc) is None


def test_the_trace_provider_serves_the_zones_of_its_files(tmp_path: Path) -> None:
    trace = Path(__file__).resolve().parents[2] / "webhook/data/traces/electricitymaps-hourly-2023"
    doc = {"providers": ["trace"], "trace": {"path": str(trace)}}
    config = parse(doc)
    listed = servable(build_providers(config, env=ENV))
    assert listed
    zone = sorted(listed)[0]
    assert refusal({**doc, "zone": zone}) is None
    assert "no provider in the chain (trace)" in (refusal({**doc, "zone": "UK"}) or "")


def test_suggestions_prefer_the_usual_key_then_spelling() -> None:
    known = frozenset({"GB", "GR", "DE", "DK", "SE-SE3", "IE"})
    assert suggestions("UK", known) == ["GB"]
    assert suggestions("EL", known) == ["GR"]
    assert suggestions("eu-west-1", known) == ["IE"]
    assert suggestions("XX", known) == []


def test_the_intensity_command_asks_about_any_zone() -> None:
    """An explicit list of zones (``carbonshift intensity XX``) is not checked."""
    feed = IntensityFeed.from_config(parse({"zone": "DE"}), ["XX"], env=ENV)
    assert feed.zones() == {"XX"}


# --- ready, but loud ----------------------------------------------------------------------


async def test_ready_after_the_first_pass_even_without_data() -> None:
    feed = IntensityFeed([FixedProvider({"FR": 50})], ["FR", "XX"])
    assert not feed.ready  # nothing asked yet
    with capture_logs() as logs:
        await feed.refresh_once()
        await feed.refresh_once()
    assert feed.ready
    assert feed.missing() == ["XX"]
    missing = [e for e in logs if e["event"] == "zone_data_missing"]
    assert [(e["zone"], e["log_level"]) for e in missing] == [("XX", "warning")]
    assert "no data for XX" in missing[0]["problems"]["fixed"]
    await feed.stop()


def latest_answers(failing: set[str]) -> Callable[[web.Request], Reply]:
    """Electricity Maps' latest reading for FR and DE, 503 for the ``failing`` zones."""

    def answer(request: web.Request) -> Reply:
        zone = request.query["zone"]
        if zone in failing:
            return Reply({"error": "upstream unavailable"}, status=503)
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        return Reply(em_latest(zone, {"FR": 50, "DE": 380}[zone], hour))

    return answer


async def get(run: Running, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(run.url + path, ssl=run.client_ssl()) as resp,
    ):
        return resp.status, await resp.text()


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{check.__name__} never held")


def gauge(exposition: str, zone: str) -> float:
    series = f'carbonshift_zone_data_missing{{zone="{zone}"}} '
    lines = [line for line in exposition.splitlines() if line.startswith(series)]
    assert lines, f"{series} not exported"
    return float(lines[0].rsplit(" ", 1)[1])


@pytest.mark.timeout(60)
async def test_a_provider_outage_for_a_zone_keeps_the_server_ready_and_says_so(
    fake: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ELECTRICITY_MAPS_API_TOKEN", "t")
    failing = {"DE"}
    fake.on(LATEST, latest_answers(failing))
    config = parse(
        {
            "zone": "DE",
            "clusters": {"member-fr": {"zone": "FR"}, "member-de": {"zone": "DE"}},
            "providers": ["electricitymaps"],
            "electricitymaps": {"url": f"{fake.url}/v3", "timeout_seconds": 0.3, "retries": 0},
            "feed": {"refresh_seconds": 1, "error_backoff_seconds": 1, "min_ttl_seconds": 1,
                     "breaker_reset_seconds": 1, "backoff_seconds": 0.01, "forecasts": False},
        }
    )  # fmt: skip
    with capture_logs() as logs:
        async with serving(config, tmp_path / "certs") as run:

            async def ready() -> bool:
                return (await get(run, "/readyz"))[0] == 200

            await eventually(ready)
            status, body = await get(run, "/readyz")
            assert (status, json.loads(body)["missingZones"]) == (200, ["DE"])
            calls = fake.calls[LATEST]

            async def retried_a_few_times() -> bool:
                return fake.calls[LATEST] >= calls + 3

            await eventually(retried_a_few_times)  # still failing, refresh after refresh
            status, body = await get(run, "/readyz")
            assert status == 200
            assert json.loads(body)["missingZones"] == ["DE"]
            metrics = (await get(run, "/metrics"))[1]
            assert (gauge(metrics, "DE"), gauge(metrics, "FR")) == (1.0, 0.0)
            async with (
                aiohttp.ClientSession() as session,
                session.post(run.url + "/mutate", data=orjson.dumps(REVIEW),
                             headers={"Content-Type": "application/json"},
                             ssl=run.client_ssl()) as resp,
            ):  # fmt: skip
                answer = (await resp.json())["response"]
            assert answer["allowed"] is True
            assert "member-fr" in base64.b64decode(answer["patch"]).decode()

            failing.clear()  # the provider recovers

            async def recovered() -> bool:
                status, body = await get(run, "/readyz")
                return status == 200 and "missingZones" not in json.loads(body)

            await eventually(recovered)
            metrics = (await get(run, "/metrics"))[1]
            assert gauge(metrics, "DE") == 0.0
    missing = [e for e in logs if e["event"] == "zone_data_missing"]
    assert [(e["zone"], e["log_level"]) for e in missing] == [("DE", "warning")]
    assert "503" in missing[0]["problems"]["electricitymaps"]
    back = [e for e in logs if e["event"] == "zone_data_back"]
    assert [(e["zone"], e["log_level"], e["provider"]) for e in back] == [
        ("DE", "info", "electricitymaps")
    ]
