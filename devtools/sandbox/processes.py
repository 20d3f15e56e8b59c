"""Processes the sandbox runs: start one detached with a pid file, wait until it answers
over HTTP(S), stop it again (also from a later ``down`` that did not start it)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from devtools.sandbox.layout import SandboxError


@dataclasses.dataclass(slots=True)
class Component:
    """A process the sandbox runs."""

    name: str
    argv: list[str]
    ready_url: str
    ready_statuses: frozenset[int] = frozenset({200})
    """HTTP answers that mean "serving" (any answer over verified TLS will do for some)."""
    ready_field: str | None = None
    """When set, the ready URL's JSON body must also hold ``true`` under this key
    (carbonshift: ``inventorySynced``, so the fleet is known before the first admission)."""
    env: Mapping[str, str] | None = None
    """Added to the sandbox's environment (e.g. ``KUBECONFIG`` for a program without a
    ``--kubeconfig`` flag)."""
    process: subprocess.Popen[bytes] | None = None


def pid_alive(pid: int, executable: str) -> bool:
    """True when ``pid`` runs and is still the program we started (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # a zombie has finished
        return False
    return any(executable.encode() in part for part in cmdline[:2])


def read_pid(pid_file: Path) -> tuple[int, str] | None:
    """The pid and executable recorded by :func:`launch`, if any."""
    try:
        pid, executable = pid_file.read_text(encoding="utf-8").split("\n", 2)[:2]
        return int(pid), executable
    except (OSError, ValueError):
        return None


def launch(component: Component, *, log_path: Path, pid_file: Path, cwd: Path) -> None:
    """Start ``component`` in its own session (it outlives the caller) and record its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        component.process = subprocess.Popen(
            component.argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if component.env is None else {**os.environ, **component.env},
            start_new_session=True,  # survives the `up` command; `down` stops it
        )
    pid_file.write_text(f"{component.process.pid}\n{component.argv[0]}\n", encoding="utf-8")


def terminate(
    entry: tuple[int, str], process: subprocess.Popen[bytes] | None, timeout: float
) -> None:
    """SIGTERM the recorded process, SIGKILL it after ``timeout`` seconds."""
    pid = entry[0]
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(*entry) and time.monotonic() < deadline:
        if process:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(0.1)
        else:
            time.sleep(0.1)
    if pid_alive(*entry):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_ready(component: Component, *, cafile: Path, log_path: Path, timeout: float) -> None:
    """Poll the component's ready URL until it answers as expected; raise with its log tail
    when it exits or does not answer in time."""
    context = ssl.create_default_context(cafile=str(cafile))
    deadline = time.monotonic() + timeout
    last = "not started"
    while time.monotonic() < deadline:
        process = component.process
        if process is not None and process.poll() is not None:
            raise SandboxError(
                f"{component.name} exited with status {process.returncode}:\n" + tail(log_path)
            )
        status = http_status(component.ready_url, context, component.ready_field)
        if status in component.ready_statuses:
            return
        last = f"HTTP {status}" if isinstance(status, int) else status
        time.sleep(0.25)
    raise SandboxError(
        f"{component.name} not ready after {timeout:g}s ({last}):\n" + tail(log_path)
    )


def http_status(url: str, context: ssl.SSLContext, field: str | None = None) -> int | str:
    """The HTTP status of a GET, or why there was none (also when the JSON body does not
    hold ``true`` under ``field``)."""
    try:
        # url is always an http(s) URL on 127.0.0.1 built by the sandbox.
        with urllib.request.urlopen(url, context=context, timeout=2) as response:  # noqa: S310
            status: int = response.status
            if field is not None:
                body = json.loads(response.read() or b"{}")
                if not (isinstance(body, dict) and body.get(field) is True):
                    return f"{field} is not true yet"
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return str(exc)


def tail(path: Path, lines: int = 25) -> str:
    """The last lines of a log file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])
