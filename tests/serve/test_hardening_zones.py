"""Bounded by configuration, never by what callers send: 10,000 made-up grid zones sent to
a real carbonshift server (in process, over TLS, loopback only) leave its memory, metric
series, log lines and provider calls where they were, and real zones are still served."""

from __future__ import annotations

import gc
import ssl
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from structlog.testing import capture_logs

from tests.feed.upstream import LATEST
from tests.serve.test_hardening_tls import ClientCAs, call, with_client_cert
from tests.serving import Running, serving
from tests.support import FakeUpstream, Reply, awaited, em_latest
from webhook.model.config import parse

HISTORY = "/v3/carbon-intensity/history"
MADE_UP = 10_000
PER_REQUEST = 250
FIRST = 1_000
"""Made-up zones sent before the baseline is taken (so every per-request cost is warm)."""
REAL = {"FR": 50.0, "DE": 380.0, "PL": 800.0, "NL": 300.0}
"""What the fake Electricity Maps answers; FR and DE are the configuration's zones, PL
and NL are only named by requests (both Electricity Maps zones of the embedded table)."""


def electricitymaps(request: web.Request) -> Reply:
    """Electricity Maps' latest reading for the real zones (an empty past day), its 404
    for anything else."""
    zone = request.query.get("zone", "")
    if zone not in REAL:
        return Reply({"status": "error", "message": f"Zone '{zone}' does not exist."}, 404)
    if request.path == HISTORY:
        return Reply({"zone": zone, "history": []})
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return Reply(em_latest(zone, REAL[zone], hour))


UNTIL = 120.0
"""How long a zone may take to be served (generous: a busy machine)."""


class Client:
    """One keep-alive HTTPS session to the server under test."""

    def __init__(self, run: Running, session: aiohttp.ClientSession) -> None:
        self.run, self.session, self.ssl = run, session, run.client_ssl()

    async def score(self, clusters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        async with self.session.post(
            self.run.url + "/v1/karmada/score", data=orjson.dumps({"clusters": clusters}),
            headers={"Content-Type": "application/json"}, ssl=self.ssl,
        ) as resp:  # fmt: skip
            assert resp.status == 200, await resp.text()
            scores: list[dict[str, Any]] = orjson.loads(await resp.read())["scores"]
            return scores

    async def get(self, path: str) -> str:
        async with self.session.get(self.run.url + path, ssl=self.ssl) as resp:
            return await resp.text()

    async def served(self, zone: str) -> bool:
        """Whether a score request naming ``zone`` is answered with its intensity."""
        (score,) = await self.score([{"name": "probe", "zone": zone}])
        return bool(score["intensity"] == REAL[zone])


def zone_series(exposition: str) -> list[str]:
    return [line for line in exposition.splitlines() if 'zone="' in line]


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def flood(client: Client, start: int, stop: int) -> int:
    """Score requests naming the made-up zones ``YY-<start>`` .. ``YY-<stop - 1>``; each
    must be answered neutral, saying why. The number answered."""
    answered = 0
    for first in range(start, stop, PER_REQUEST):
        numbers = range(first, min(stop, first + PER_REQUEST))
        scores = await client.score([{"name": f"c-{i}", "zone": f"YY-{i:05d}"} for i in numbers])
        for i, score in zip(numbers, scores, strict=True):
            assert (score["score"], score["intensity"], score["reason"]) == (
                50,
                None,
                f"no intensity data for zone YY-{i:05d}: zone not served by any provider",
            ), score
        answered += len(scores)
    return answered


@pytest.mark.timeout(600)
async def test_ten_thousand_made_up_zones_change_nothing_and_real_zones_are_served(
    fake: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ELECTRICITY_MAPS_API_TOKEN", "t")
    fake.on(LATEST, electricitymaps)
    fake.on(HISTORY, electricitymaps)
    config = parse(
        {
            "clusters": {"member-fr": {"zone": "FR"}, "member-de": {"zone": "DE"}},
            "providers": ["electricitymaps", "static"],
            "electricitymaps": {"url": f"{fake.url}/v3", "timeout_seconds": 1, "retries": 0},
            "feed": {"backoff_seconds": 0.01, "forecasts": False},
        }
    )
    with capture_logs() as logs:
        async with serving(config, tmp_path / "certs") as run, aiohttp.ClientSession() as s:
            client = Client(run, s)
            await awaited(lambda: client.served("FR"), "FR served", seconds=UNTIL)
            tracemalloc.start()
            try:
                answers = await flood(client, 0, FIRST)
                # A pass of the refresher after the flood: it fetched PL, named after it.
                await awaited(lambda: client.served("PL"), "PL served after the first flood",
                              seconds=UNTIL)  # fmt: skip
                before = (
                    traced(), len(zone_series(await client.get("/metrics"))), len(logs),
                    sum(fake.calls.values()),
                )  # fmt: skip
                started = time.monotonic()
                answers += await flood(client, FIRST, MADE_UP)
                flooded = time.monotonic() - started
                await awaited(lambda: client.served("NL"), "NL served after the second flood",
                              seconds=UNTIL)  # fmt: skip
                after = (
                    traced(), len(zone_series(await client.get("/metrics"))), len(logs),
                    sum(fake.calls.values()),
                )  # fmt: skip
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            ready = orjson.loads(await client.get("/readyz"))
            metrics = await client.get("/metrics")
            real = await client.score([{"name": "a", "zone": "FR"}, {"name": "b", "zone": "PL"}])
    made_up_calls = [s for s in fake.seen if s.query.get("zone", "").startswith("YY-")]
    print(
        f"\n{MADE_UP:,} made-up zones in {MADE_UP // PER_REQUEST} requests "
        f"({flooded:.1f} s for the last {MADE_UP - FIRST:,}): "
        f"traced memory {before[0] / 1024:.0f} KiB -> {after[0] / 1024:.0f} KiB "
        f"(peak {peak / 1024:.0f} KiB), zone series {before[1]} -> {after[1]}, "
        f"log lines {before[2]} -> {after[2]}, provider calls {before[3]} -> {after[3]} "
        f"({len(made_up_calls)} for made-up zones), /readyz zones {ready['zones']}"
    )
    assert answers == MADE_UP  # each neutral, "zone not served by any provider"
    assert made_up_calls == []
    assert after[3] - before[3] <= 3  # NL: its latest reading and its past day
    assert after[2] == before[2]  # not one log line for 9,000 more zones
    assert after[1] - before[1] <= 10  # NL's own series (three forecasters), none made up
    assert "YY-" not in metrics
    assert after[0] - before[0] < 256 * 1024, "memory grew with the made-up zones"
    assert ready["zones"] == 4  # FR, DE (configuration), PL, NL (requested, served)
    assert "missingZones" not in ready
    assert [(s["zone"], s["intensity"]) for s in real] == [("FR", 50.0), ("PL", 800.0)]


async def test_requested_zones_past_the_limit_are_answered_neutral_with_the_reason(
    tmp_path: Path,
) -> None:
    config = parse({"clusters": {"member-fr": {"zone": "FR"}}, "feed": {"max_requested_zones": 2}})
    async with serving(config, tmp_path / "certs") as run, aiohttp.ClientSession() as s:
        client = Client(run, s)
        named = ["FR", "DE", "PL", "LT"]
        first = await client.score([{"name": z, "zone": z} for z in named])
        assert [a.get("reason") for a in first] == [
            None,  # the configuration's zone: always kept, not counted
            "no intensity data yet for zone DE",
            "no intensity data yet for zone PL",
            "no intensity data for zone LT: over the limit of 2 requested zones",
        ]

        async def answered() -> list[dict[str, Any]] | None:
            got = await client.score([{"name": z, "zone": z} for z in named])
            return got if got[1]["intensity"] and got[2]["intensity"] else None

        second = await awaited(answered, "DE and PL served", seconds=UNTIL)
        assert second[3]["reason"] == first[3]["reason"]  # still refused: no room
        metrics = await client.get("/metrics")
        ready = orjson.loads(await client.get("/readyz"))
    assert ready["zones"] == 3
    assert "carbonshift_requested_zones 2.0" in metrics
    assert 'zone="LT"' not in metrics  # no series for a zone not kept
    assert 'carbonshift_requested_zones_refused_total{reason="over_limit"}' in metrics


async def test_without_a_client_certificate_a_caller_makes_no_zone_warm(
    tmp_path: Path,
) -> None:
    """With ``service.client_ca`` the scheduler API refuses a caller without a
    certificate of that CA (403) before any zone it names is looked at."""
    (tmp_path / "cas").mkdir()
    cas = ClientCAs(tmp_path / "cas")
    config = parse({"clusters": {"member-fr": {"zone": "FR"}}, "service": {
        "client_ca": str(cas.bundle)}})  # fmt: skip
    async with serving(config, tmp_path / "certs") as run:
        body = {"clusters": [{"name": "x", "zone": "PL"}]}
        none = with_client_cert(run, None)
        good = with_client_cert(run, cas.client(cas.trusted, "karmada-scheduler"))
        assert await call(run, none, "POST", "/v1/karmada/score", body) == 403
        ready = await ready_zones(run, good)
        assert ready == 1  # FR alone: PL was never asked for
        assert await call(run, good, "POST", "/v1/karmada/score", body) == 200
        assert await ready_zones(run, good) == 2


async def ready_zones(run: Running, ctx: ssl.SSLContext) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.get(run.url + "/readyz", ssl=ctx) as resp,
    ):
        zones: int = (await resp.json())["zones"]
        return zones
