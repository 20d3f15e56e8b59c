"""Shared benchmark plumbing: a pinned server process, wrk runs, the tables in the docs."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
README = ROOT / "README.md"
SERVER_CPU = "0"
CLIENT_CPU = "1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass
class Server:
    """A ``carbonshift serve`` process pinned to one core."""

    url: str
    pid: int
    cert_dir: Path

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))


@contextlib.contextmanager
def server(
    config_yaml: str, module: str = "webhook.cli", extra: Sequence[str] = ()
) -> Iterator[Server]:
    """Start ``python -m MODULE serve ... EXTRA`` on 127.0.0.1, pinned to :data:`SERVER_CPU`.

    Logs are discarded (written, as in production, then dropped by /dev/null).
    """
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(config_yaml)
        port = free_port()
        cmd = ["taskset", "-c", SERVER_CPU, sys.executable, "-m", module, "serve"]
        cmd += ["--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
        certs = Path(tmp) / "certs"  # serve creates development certificates in an empty folder
        cmd += ["--cert-dir", str(certs), *extra]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        running = Server(f"https://127.0.0.1:{port}", proc.pid, certs)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with urllib.request.urlopen(
                        running.url + "/readyz", context=running.ssl_context(), timeout=1
                    ):
                        break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError("the server did not start") from None
                    time.sleep(0.2)
            yield running
        finally:
            proc.terminate()
            proc.wait(timeout=15)


@dataclasses.dataclass
class WrkResult:
    """What one wrk run measured."""

    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    cpu_us_per_request: float


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not match:
        raise ValueError(f"unexpected wrk latency {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def wrk(
    srv: Server,
    path: str,
    *,
    seconds: int = 10,
    connections: int = 32,
    body_file: Path | None = None,
    bodies_file: Path | None = None,
    rate: float | None = None,
) -> WrkResult:
    """One wrk run pinned to :data:`CLIENT_CPU`; ``rate`` paces it (requests/s overall).

    ``body_file`` POSTs one body; ``bodies_file`` (one JSON body per line) POSTs them in
    turn, so every request is a different review.
    """
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        if body_file is not None:
            lua.write(
                f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*all")\nf:close()\n'
                'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
            )
        if bodies_file is not None:
            lua.write(
                "local bodies = {}\n"
                f'for line in io.lines("{bodies_file}") do bodies[#bodies + 1] = line end\n'
                "local i = 0\n"
                'local headers = {["Content-Type"] = "application/json"}\n'
                "function request()\n  i = i % #bodies + 1\n"
                '  return wrk.format("POST", nil, headers, bodies[i])\nend\n'
            )
        if rate is not None:
            per_connection_ms = connections * 1000.0 / rate
            lua.write(f"function delay()\n  return {per_connection_ms:.3f}\nend\n")
    cmd: Sequence[str] = [
        "taskset",
        "-c",
        CLIENT_CPU,
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--latency",
        "-s",
        lua.name,
        srv.url + path,
    ]
    before = cpu_seconds(srv.pid)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(srv.pid) - before
    os.unlink(lua.name)
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise RuntimeError(f"{errors.group(1)} failed requests:\n{out}")
    return WrkResult(
        rps=float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        p50_ms=_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1)),  # type: ignore[union-attr]
        p99_ms=_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1)),  # type: ignore[union-attr]
        requests=requests,
        cpu_us_per_request=cpu * 1e6 / max(requests, 1),
    )


def write_table(name: str, table: str) -> None:
    """Replace the block between ``<!-- bench:NAME -->`` markers in the README or the
    page of ``docs/`` that holds it."""
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    for page in (README, *sorted((ROOT / "docs").glob("*.md"))):
        text = page.read_text()
        if start in text:
            head, rest = text.split(start, 1)
            _, tail = rest.split(end, 1)
            page.write_text(f"{head}{start}\n{table.rstrip()}\n{end}{tail}")
            return
    print(f"no page has a {start} marker; table not written", file=sys.stderr)


def machine() -> str:
    """One line describing where the numbers came from."""
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"
