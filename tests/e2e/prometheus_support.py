"""A real Prometheus server for the end-to-end tests (built by ``hack/build-prometheus.sh``
from its pinned Go module into ``$CARBONSHIFT_CACHE``), on 127.0.0.1, queried over its HTTP
API (``/api/v1/query``, ``/api/v1/targets``, ``/api/v1/alerts``).

The chart's alerting rules are loaded as they are, except their ``for:`` durations
(:func:`rules_with_short_for`): production waits 5-15 minutes before an alert fires, which
a test cannot wait for; the expressions, labels and annotations are the chart's own, and
the real ``for:`` semantics are covered by ``promtool test rules``
(``tests/rules/carbonshift-rules-test.yaml``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from e2e_support import unavailable

from devtools.sandbox.layout import free_port

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CARBONSHIFT_CACHE") or ROOT / ".cache" / "bin")
RULES = ROOT / "charts" / "carbonshift" / "rules" / "carbonshift-rules.yaml"
DASHBOARD = ROOT / "charts" / "carbonshift" / "dashboards" / "carbonshift.json"
INTERVAL_SECONDS = 1
"""Scrape and rule evaluation interval of the test Prometheus."""


def prometheus_binary(log: Path, name: str = "prometheus") -> Path:
    """The cached Prometheus server (or ``promtool``), built first when its stamp does
    not match (a warm run builds nothing); :func:`unavailable` when it cannot be built."""
    script = ROOT / "hack" / "build-prometheus.sh"
    if shutil.which("go") is None and not (CACHE / name).is_file():
        unavailable(f"Go is not installed, so {name} cannot be built")
    env = {**os.environ, "CARBONSHIFT_CACHE": str(CACHE)}
    with log.open("w") as out:
        done = subprocess.run(
            [str(script), name], stdout=out, stderr=subprocess.STDOUT, env=env,
            check=False, timeout=1800,
        )  # fmt: skip
    if done.returncode != 0:
        unavailable(f"hack/build-prometheus.sh failed:\n{log.read_text()[-2000:]}")
    return CACHE / name


def rules_with_short_for(path: Path, seconds: int) -> Path:
    """The chart's rule file with every ``for:`` set to ``seconds`` (written to ``path``)."""
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = f"{seconds}s"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def https_job(
    name: str,
    targets: Sequence[str],
    *,
    ca_file: Path,
    client: tuple[Path, Path] | None = None,
) -> dict[str, Any]:
    """A scrape job over HTTPS that verifies the targets' certificates against
    ``ca_file`` and presents ``client`` (certificate, key) when given."""
    tls: dict[str, Any] = {"ca_file": str(ca_file)}
    if client is not None:
        tls |= {"cert_file": str(client[0]), "key_file": str(client[1])}
    return {
        "job_name": name,
        "scheme": "https",
        "tls_config": tls,
        "static_configs": [{"targets": list(targets)}],
    }


class Prometheus:
    """One Prometheus process; its configuration, data and log in ``directory``."""

    def __init__(
        self,
        binary: Path,
        directory: Path,
        jobs: Sequence[Mapping[str, Any]],
        rule_files: Sequence[Path] = (),
    ) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / "prometheus.log"
        config = {
            "global": {
                "scrape_interval": f"{INTERVAL_SECONDS}s",
                "evaluation_interval": f"{INTERVAL_SECONDS}s",
            },
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [dict(j) for j in jobs],
        }
        path = directory / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        command = [
            str(binary), f"--config.file={path}", f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle",
            "--log.level=warn",
        ]  # fmt: skip
        with self.log.open("w") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not self._ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                unavailable(f"Prometheus did not start:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    def _ready(self) -> bool:
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer,
        ):
            return bool(answer.status == 200)
        return False

    def api(self, path: str, **params: str) -> Any:
        """``data`` of one ``/api/v1/<path>`` answer (asserting ``status: success``)."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    def targets(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.api("targets", state="active")["activeTargets"]
        return found

    def alerts(self, name: str, state: str = "firing") -> list[dict[str, Any]]:
        """The alerts named ``name`` in ``state`` (pending, firing)."""
        return [
            a
            for a in self.api("alerts")["alerts"]
            if a["labels"].get("alertname") == name and a["state"] == state
        ]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@contextlib.contextmanager
def running_prometheus(
    directory: Path, jobs: Sequence[Mapping[str, Any]], rule_files: Sequence[Path] = ()
) -> Iterator[Prometheus]:
    """A Prometheus for the block; its log is printed when the block fails."""
    directory.mkdir(parents=True, exist_ok=True)
    server = Prometheus(prometheus_binary(directory / "build.log"), directory, jobs, rule_files)
    try:
        yield server
    except BaseException:
        print("--- prometheus\n" + "\n".join(server.log.read_text().splitlines()[-30:]))
        raise
    finally:
        server.stop()
