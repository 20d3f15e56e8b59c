"""Rotating the serving certificate to a new CA under load: while clients trust both
CAs (the overlap: old and new CA in the caBundle), the switch loses no admission on new
or kept-alive connections; afterwards only the new CA verifies new connections."""

from __future__ import annotations

import asyncio
import ssl
import time
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.serve.hardening import patched, review
from tests.serving import Running, serving
from tests.support import FLEET, eventually
from webhook.model.config import parse
from webhook.serve import certs

HOSTS = ["localhost", "127.0.0.1"]


def trusting(*cas: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata="".join(ca.decode() for ca in cas))


async def admit(session: aiohttp.ClientSession, run: Running, uid: str) -> bool:
    async with session.post(
        run.url + "/mutate",
        data=review(uid, selector=uid),
        headers={"Content-Type": "application/json"},
    ) as resp:
        assert resp.status == 200
        return patched(orjson.loads(await resp.read()))


async def test_the_serving_ca_is_rotated_under_load_without_a_lost_admission(
    tmp_path: Path,
) -> None:
    old = certs.issue(HOSTS)
    old.write(tmp_path)
    new_ca, new_ca_key = certs.make_ca("carbonshift-ca-2")
    new_cert, new_key = certs.make_serving(new_ca, new_ca_key, HOSTS)
    overlap = trusting(old.ca_cert, new_ca)
    results: list[bool] = []
    errors: list[str] = []
    stop = asyncio.Event()

    async with serving(parse(FLEET), tmp_path, cert_reload_seconds=0.05) as run:

        async def worker(n: int, fresh_every: int) -> None:
            i = 0
            while not stop.is_set():
                connector = aiohttp.TCPConnector(ssl=overlap, limit=1)
                async with aiohttp.ClientSession(connector=connector) as session:
                    for _ in range(fresh_every):  # then a new connection: a new handshake
                        i += 1
                        try:
                            results.append(await admit(session, run, f"w{n}-{i}"))
                        except (aiohttp.ClientError, AssertionError) as exc:
                            errors.append(f"{type(exc).__name__}: {exc}")

        def seen() -> tuple[int, list[str]]:
            return len(results), errors[:3]

        workers = [asyncio.create_task(worker(n, every)) for n, every in enumerate([1, 1, 5, 50])]
        # Under load before and after the rotation: counted admissions, not seconds (a busy
        # machine answers fewer in a second).
        await eventually(lambda: len(results) >= 30, "admissions before", seen=seen)
        at_rotation = len(results)
        rotated = time.monotonic()
        certs.Bundle(ca_cert=new_ca, ca_key=new_ca_key, cert=new_cert, key=new_key).write(tmp_path)
        only_new = trusting(new_ca)
        while True:  # served by the new CA's certificate
            try:
                async with aiohttp.ClientSession() as session:
                    assert await admit_with(session, run, only_new)
                break
            except aiohttp.ClientConnectorCertificateError:
                assert time.monotonic() - rotated < 5, "the new certificate was never served"
                await asyncio.sleep(0.05)
        await eventually(lambda: len(results) >= at_rotation + 30, "admissions after", seen=seen)
        stop.set()
        await asyncio.gather(*workers)
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with aiohttp.ClientSession() as session:
                await admit_with(session, run, trusting(old.ca_cert))
    assert errors == [], errors[:3]
    assert len(results) > 50
    assert all(results)
    print(f"\nCA rotation under load: {len(results)} admissions, all decided, 0 errors")


async def admit_with(session: aiohttp.ClientSession, run: Running, ctx: ssl.SSLContext) -> bool:
    async with session.post(
        run.url + "/mutate",
        data=review("probe"),
        headers={"Content-Type": "application/json"},
        ssl=ctx,
    ) as resp:
        assert resp.status == 200
        return patched(orjson.loads(await resp.read()))
