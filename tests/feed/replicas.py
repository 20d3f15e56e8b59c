"""Helpers for tests that run webhook replicas as separate ``carbonshift serve`` processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from devtools.sandbox.layout import free_port
from webhook import testing
from webhook.serve import certs


def tls(config: Path) -> ssl.SSLContext:
    """Client context trusting the replicas' CA (written next to the config)."""
    return ssl.create_default_context(cafile=str(config.parent / "certs" / certs.CA_CERT))


def session(config: Path) -> aiohttp.ClientSession:
    """A client session for the replicas started with ``config``."""
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=5), connector=aiohttp.TCPConnector(ssl=tls(config))
    )


def review(i: int) -> bytes:
    """The AdmissionReview of policy ``web-<i>`` (uid ``u-<i>``)."""
    policy = testing.propagation_policy(f"web-{i}", namespace="shop")
    return orjson.dumps(testing.review(policy, uid=f"u-{i}"))


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


class Redis:
    """A private redis-server on a fixed loopback port that a test can kill, freeze,
    thaw and start again (an empty one, as after a crash without persistence)."""

    def __init__(self, exe: str, port: int) -> None:
        self.exe, self.port = exe, port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no"]  # fmt: skip
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while self.command(b"PING") != b"+PONG":
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def freeze(self, frozen: bool) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP if frozen else signal.SIGCONT)

    def command(self, line: bytes) -> bytes:
        """One inline command's first reply line (b"" when Redis cannot be reached)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(line + b"\r\n")
                return conn.recv(64).split(b"\r\n")[0]
        except OSError:
            return b""

    def keys(self) -> int:
        reply = self.command(b"DBSIZE")
        return int(reply[1:]) if reply.startswith(b":") else 0


@contextlib.contextmanager
def running_redis() -> Iterator[Redis]:
    """A private redis-server on a free loopback port, stopped afterwards (skipped without
    redis-server, failed under CI)."""
    exe = shutil.which("redis-server")
    if exe is None:
        message = "redis-server is not installed (Debian: apt-get install -y redis-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    server = Redis(exe, free_port())
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None:
            server.freeze(False)
            server.kill()
