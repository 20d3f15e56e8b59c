"""A real carbonshift server on 127.0.0.1 (import as ``tests.serving``).

:func:`serving` runs ``app.run`` in the test's event loop with a configuration and a
certificate directory (a development CA is created there) and stops it on exit;
:func:`serve_process` runs ``carbonshift serve`` as a child process, for figures that the
test's own client must not distort and for signals. :class:`Running` is what a test talks
to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from devtools.sandbox.layout import free_port
from webhook import app
from webhook.model.config import Config
from webhook.serve import certs


class Running:
    """A server started in this event loop."""

    def __init__(self, cert_dir: Path, port: int) -> None:
        self.cert_dir = cert_dir
        self.port = port
        self.url = f"https://127.0.0.1:{port}"

    def client_ssl(self) -> ssl.SSLContext:
        """A client context that trusts the server's development CA."""
        return ssl.create_default_context(cafile=str(self.cert_dir / certs.CA_CERT))


async def wait_listening(port: int, attempts: int = 100) -> None:
    for _ in range(attempts):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


@contextlib.asynccontextmanager
async def serving(config: Config, cert_dir: Path, **options: Any) -> AsyncIterator[Running]:
    """``app.run(config, ...)`` on a free port until the block ends."""
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.create_task(
        app.run(
            config,
            host="127.0.0.1",
            port=port,
            cert_dir=cert_dir,
            cert_reload_seconds=options.pop("cert_reload_seconds", 0.1),
            stop=stop,
            **options,
        )
    )
    try:
        await wait_listening(port)
        yield Running(cert_dir, port)
    finally:
        stop.set()
        await task


class Process:
    """``carbonshift serve`` as a child process (see :func:`serve_process`)."""

    def __init__(self, proc: subprocess.Popen[bytes], run: Running, log: Path) -> None:
        self.proc, self.run, self.log = proc, run, log

    def terminate(self, timeout: float = 30.0) -> tuple[int, float]:
        """SIGTERM; the exit status and the seconds it took to exit."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        return code, time.monotonic() - started

    def lines(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far."""
        out = []
        for line in self.log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out


def _spawn(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)


@contextlib.asynccontextmanager
async def serve_process(
    config: dict[str, Any], directory: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[Process]:
    """A real ``carbonshift serve`` on a free port with ``config`` (written as YAML), extra
    ``args`` and ``env``, its stdout and stderr in ``directory/serve.log``; killed on exit
    if still running."""
    port = free_port()
    (directory / "config.yaml").write_text(json.dumps(config))
    log = directory / "serve.log"
    command = [
        str(Path(sys.executable).with_name("carbonshift")),
        "serve",
        f"--config={directory / 'config.yaml'}",
        "--host=127.0.0.1",
        f"--port={port}",
        f"--cert-dir={directory / 'certs'}",
        *args,
    ]
    proc = _spawn(command, log, {**os.environ, **(env or {})})
    try:
        await wait_listening(port, attempts=200)
        yield Process(proc, Running(directory / "certs", port), log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
