"""Helpers for tests that run webhook replicas as separate ``carbonshift serve`` processes."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from webhook import certs


def tls(config: Path) -> ssl.SSLContext:
    """Client context trusting the replicas' CA (written next to the config)."""
    return ssl.create_default_context(cafile=str(config.parent / "certs" / certs.CA_CERT))


def session(config: Path) -> aiohttp.ClientSession:
    """A client session for the replicas started with ``config``."""
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=5), connector=aiohttp.TCPConnector(ssl=tls(config))
    )


def review(i: int) -> bytes:
    policy = {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": f"web-{i}", "namespace": "shop"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}},
        },
    }
    request = {
        "uid": f"u-{i}",
        "kind": {"group": "policy.karmada.io", "version": "v1alpha1", "kind": "PropagationPolicy"},
        "operation": "CREATE",
        "object": policy,
    }
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    )


@contextlib.asynccontextmanager
async def start_replicas(config: Path, env: dict[str, str], ports: list[int]) -> AsyncIterator[Any]:
    """Start one ``carbonshift serve`` per port (logs next to the config); stop them after.

    The replicas share one serving certificate, created up front in ``<config dir>/certs``.
    """
    cert_dir = config.parent / "certs"
    certs.issue(["localhost", "127.0.0.1"]).write(cert_dir)
    procs = []
    for port in ports:
        with (config.parent / f"replica-{port}.log").open("wb") as log:
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "webhook.cli",
                    "serve",
                    "--config",
                    str(config),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--cert-dir",
                    str(cert_dir),
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
        for proc in procs:
            await asyncio.wait_for(proc.wait(), 15)


async def wait_ready(session: aiohttp.ClientSession, port: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            async with session.get(
                f"https://127.0.0.1:{port}/readyz", timeout=aiohttp.ClientTimeout(total=2)
            ) as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    pytest.fail(f"replica on port {port} never became ready")
