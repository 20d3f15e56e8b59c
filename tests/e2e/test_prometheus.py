"""A real Prometheus scrapes a real ``carbonshift serve`` and evaluates the chart's rules.

One leading replica (``--kubeconfig`` against the sandbox, a fake Electricity Maps server
it reads, every leader loop at 1 s) serves ``/metrics`` over TLS with
``service.client_ca`` set; Prometheus (scrape and evaluation every second) verifies the
serving certificate against the replica's CA and presents a client certificate. A managed
Divided PropagationPolicy with a Deployment runs on the real Karmada, so the leader's
re-evaluation, rebalancing and carbon accounting have a workload to look at.

- Every PromQL expression of every panel of the Grafana dashboard returns data
  (Grafana's variables filled in: ``$job`` -> ``.*``, ``$__rate_interval`` -> the test's
  length, so every event since the start is inside the window).
- The alerts fire when their condition is made true: intensity data stale (the provider
  keeps answering the reading of one moment until its period ended longer than
  ``feed.max_age_seconds`` ago), provider circuit open (the provider stops), no
  leader (the leader is SIGKILLed). ``for:`` is shortened to 2 s (see
  :mod:`prometheus_support`).
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import test_schedulers
from aiohttp import web
from e2e_support import Kube, deployment, propagation_policy, unique
from prometheus_support import (
    DASHBOARD,
    Prometheus,
    https_job,
    prometheus_binary,
    rules_with_short_for,
    running_prometheus,
)
from test_fleet_labels import Replica, eventually, holder
from test_reevaluate_karmada import scheduled
from test_reevaluate_policies import MEMBERS, Grid, follower

from devtools.sandbox import Sandbox
from tests.serve.hardening import REVIEW
from tests.support import Reply, em_latest
from webhook.serve import certs

pytestmark = pytest.mark.timeout(420)

karmada = test_schedulers.karmada  # the real Karmada (module fixture)

FOR_SECONDS = 2
RATE_WINDOW = "5m"
"""``$__rate_interval``: longer than the test, so every event since its start counts."""
REPLICAS = 5
CPU = "1"
"""Five one-CPU replicas: the greenest member (member-se) holds four, so one runs on the
next tier and the leader's rebalancer has a binding to judge (``no_room``)."""
TURN = {"SE-SE3": 900.0, "FR": 40.0}
MAX_AGE = 10
"""``feed.max_age_seconds``: a reading whose period ended longer ago is stale."""
HOUR = timedelta(hours=1)
PERIOD_LEFT = timedelta(seconds=5)


class AgingGrid(Grid):
    """:class:`Grid` that can keep answering the reading of one moment (``frozen``: the
    provider's data stops moving), or answer 503.

    A reading turns stale once its period ended ``feed.max_age_seconds`` ago, and an
    Electricity Maps reading's period is the hour from its ``datetime``: every reading
    here is dated so that its hour ends :data:`PERIOD_LEFT` after it is served (a test
    cannot wait an hour), so frozen data turns stale that much plus the maximum age
    later."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen: datetime | None = None
        self.failing = False
        self.fake.on("/v3/carbon-intensity/latest", self._aged)

    def _aged(self, request: web.Request) -> Reply:
        zone = request.query.get("zone", "")
        if self.failing:
            return Reply({"error": "unavailable"}, status=503)
        if zone not in self.values:
            return Reply({"error": "unknown zone"}, status=404)
        served = self.frozen or datetime.now(UTC)
        return Reply(em_latest(zone, self.values[zone], served - HOUR + PERIOD_LEFT))

    def stop_serving(self) -> None:
        """The provider goes away: connections are refused from now on."""
        asyncio.run_coroutine_threadsafe(self.fake.close(), self.loop).result(10)


@dataclass
class Scene:
    sandbox: Sandbox
    kube: Kube
    grid: AgingGrid
    replica: Replica
    prometheus: Prometheus
    client: tuple[Path, Path]
    ca: Path
    namespace: str
    name: str


def client_pair(directory: Path) -> tuple[Path, Path, Path]:
    """A client CA (the replica's ``service.client_ca``) and a certificate it signed for
    Prometheus: (ca, cert, key)."""
    ca = certs.make_ca("metrics-clients")
    cert, key = certs.make_client(*ca, common_name="prometheus")
    paths = directory / "client-ca.crt", directory / "prometheus.crt", directory / "prometheus.key"
    paths[0].write_bytes(ca[0])
    paths[1].write_bytes(cert)
    certs.write_private(paths[2], key)
    return paths


def settings(**extra: Any) -> dict[str, Any]:
    """Config sections over :func:`follower`'s: a provider that fails fast (no retries;
    the breaker opens after 3 failures and stays open), readings stale after
    :data:`MAX_AGE`, accounting every second into a ConfigMap of the test's own."""
    return {
        "feed": {"refresh_seconds": 1, "min_ttl_seconds": 1, "max_ttl_seconds": 1,
                 "max_age_seconds": MAX_AGE, "retries": 0, "error_backoff_seconds": 1,
                 "breaker_failures": 3, "breaker_reset_seconds": 3600, "forecasts": False},
        "accounting": {"interval_seconds": 1, "configmap": unique("accounting")},
        **extra,
    }  # fmt: skip


def workload(kube: Kube, replicas: int = REPLICAS, cpu: str = CPU) -> tuple[str, str]:
    """A managed ordered-fill policy over the demo members and its Deployment (cpu
    requests, so the accounting has energy to count), once Karmada scheduled it."""
    namespace = kube.namespace(enabled=True)
    name = unique("observed")
    placement = {
        "clusterAffinity": {"clusterNames": MEMBERS},
        "replicaScheduling": {"replicaSchedulingType": "Divided"},
    }
    kube.apply(propagation_policy(name, namespace, placement=placement))
    kube.apply(deployment(name, namespace, replicas=replicas, cpu=cpu))
    eventually(lambda: scheduled(kube, namespace, name), 60.0, "Karmada's schedule")
    return namespace, name


def remove(kube: Kube, namespace: str) -> None:
    kube.run("delete", "namespace", namespace, "--wait=false")


@pytest.fixture(scope="module")
def scene(karmada: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    tmp = tmp_path_factory.mktemp("prometheus")
    kube = Kube(karmada)
    namespace, name = workload(kube)
    ca, cert, key = client_pair(tmp)
    extra = settings(service={"client_ca": str(ca), "max_concurrent_admissions": 1})
    # An administrator made the accounting ConfigMap immutable: every save is refused
    # (422), the failed API call the dashboard's "API errors" query must show. The totals
    # themselves are kept in memory and exported all the same.
    kept = extra["accounting"]["configmap"]
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
                "metadata": {"name": kept, "namespace": "default"}, "data": {}})  # fmt: skip
    grid = AgingGrid()
    try:
        with grid, follower(karmada, tmp, grid, forecast="none", extra=extra) as replica:
            eventually(lambda: holder(kube, replica.name) == replica.name, 30.0, "leadership")
            served_by = tmp / replica.name / certs.CA_CERT
            job = https_job("carbonshift", [f"127.0.0.1:{replica.port}"],
                            ca_file=served_by, client=(cert, key))  # fmt: skip
            rules = rules_with_short_for(tmp / "rules.yaml", FOR_SECONDS)
            with running_prometheus(tmp / "prometheus", [job], [rules]) as prometheus:
                eventually(
                    lambda: [t for t in prometheus.targets() if t["health"] == "up"],
                    30.0,
                    "the replica's target up",
                )
                yield Scene(karmada, kube, grid, replica, prometheus, (cert, key),
                            served_by, namespace, name)  # fmt: skip
    finally:
        kube.run("delete", "configmap", kept, "-n", "default", "--wait=false")
        remove(kube, namespace)


# --- traffic -------------------------------------------------------------------------------


def post(scene: Scene, path: str, body: Any, *, client: bool = False) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=str(scene.ca))
    if client:
        context.load_cert_chain(*scene.client)
    request = urllib.request.Request(
        f"https://127.0.0.1:{scene.replica.port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        result: dict[str, Any] = json.loads(answer.read())
    return result


def overloaded(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The admission answer when it was shed (carbonshift's overload warning), else None."""
    warnings = answer["response"].get("warnings", [])
    return answer if any("overloaded" in w for w in warnings) else None


def admissions_with_one_shed(scene: Scene) -> None:
    """One admission holds the only slot (``max_concurrent_admissions: 1``) while its body
    is still arriving; the next one is shed; then the first completes."""
    body = json.dumps(REVIEW).encode()
    context = ssl.create_default_context(cafile=str(scene.ca))
    raw = socket.create_connection(("127.0.0.1", scene.replica.port), timeout=10)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as held:
        held.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:20]
        )
        # The handler holds the slot, reading the body, once the replica has read these
        # headers: until then another admission is decided (a busy machine reads late).
        shed = eventually(lambda: overloaded(post(scene, "/mutate", REVIEW)), 5.0, "one shed")
        assert any("overloaded" in w for w in shed["response"].get("warnings", [])), shed
        held.sendall(body[20:])
        assert b"200 OK" in held.recv(65536).split(b"\r\n", 1)[0]
    answered = post(scene, "/mutate", REVIEW)
    assert answered["response"]["allowed"] is True


def scheduler_calls(scene: Scene) -> None:
    clusters = {"clusters": [{"name": m} for m in MEMBERS]}
    for path in ("/v1/karmada/filter", "/v1/karmada/score"):
        post(scene, path, clusters, client=True)


# --- the dashboard -------------------------------------------------------------------------


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title / refId, PromQL with Grafana's variables filled in)."""
    doc = json.loads(DASHBOARD.read_text())
    return [
        (f"{p['title']} / {t['refId']}",
         t["expr"].replace("$__rate_interval", RATE_WINDOW).replace("$job", ".*"))
        for p in doc["panels"]
        for t in p.get("targets", [])
    ]  # fmt: skip


def total(scene: Scene, metric: str) -> float:
    """Sum of ``metric``'s series as Prometheus scraped them last (0 when none)."""
    found = scene.prometheus.query(f"sum({metric})")
    return float(found[0]["value"][1]) if found else 0.0


def has_data(prometheus: Prometheus, expr: str) -> bool:
    """At least one sample, and a number (a quantile of no observations is NaN)."""
    return any(not math.isnan(float(s["value"][1])) for s in prometheus.query(expr))


def test_every_dashboard_query_returns_data(scene: Scene) -> None:
    started = time.monotonic()
    # A labelled series appears with its first observation, and a rate cannot see the
    # step from nothing to it: one call of each first, scraped, then the traffic.
    post(scene, "/mutate", REVIEW)
    scheduler_calls(scene)
    eventually(lambda: total(scene, "carbonshift_admission_duration_seconds_count"), 10.0,
               "the first admission scraped")  # fmt: skip
    eventually(lambda: total(scene, "carbonshift_scheduler_duration_seconds_count"), 10.0,
               "the first scheduler call scraped")  # fmt: skip
    admissions_with_one_shed(scene)
    scheduler_calls(scene)
    scene.grid.failing = True  # a provider outage shorter than the breaker's threshold
    eventually(lambda: total(scene, "carbonshift_provider_errors_total"), 20.0, "an error")
    scene.grid.failing = False
    scene.grid.values.update(TURN)  # the grid turns: the leader re-evaluates and writes
    eventually(lambda: total(scene, "carbonshift_writes_total"), 30.0, "a switch written")
    queries = dashboard_queries()
    assert len(queries) >= 20
    deadline = time.monotonic() + 60
    missing = [q for q in queries if not has_data(scene.prometheus, q[1])]
    while missing and time.monotonic() < deadline:
        time.sleep(2)
        missing = [q for q in missing if not has_data(scene.prometheus, q[1])]
    assert not missing, "queries without data:\n" + "\n".join(f"{t}: {e}" for t, e in missing)
    # The accounting figures carry their method and signal.
    (energy, *_) = scene.prometheus.query(
        f'carbonshift_energy_kwh_total{{namespace="{scene.namespace}", name="{scene.name}"}}'
    )
    assert energy["metric"]["method"] == "coefficient"
    assert energy["metric"]["signal"] in ("average", "marginal")
    print(f"\n{len(queries)} dashboard queries with data after {time.monotonic() - started:.1f} s")


def test_the_report_takes_the_workloads_figures_from_prometheus(scene: Scene) -> None:
    """``carbonshift report --prometheus``: the figures are what Prometheus counted, even
    for a workload whose ledger the leader could not save (the immutable ConfigMap)."""
    query = (
        "sum(increase(carbonshift_energy_kwh_total"
        f'{{namespace="{scene.namespace}", name="{scene.name}"}}[1h]))'
    )
    eventually(lambda: total(scene, "carbonshift_energy_kwh_total"), 30.0, "energy scraped")
    command = [*scene.sandbox.carbonshift_command, "report", "-o", "json", "--since", "1h",
               f"--kubeconfig={scene.sandbox.kubeconfig}", "--namespace=default",
               f"--configmap={unique('no-ledger')}",
               f"--prometheus={scene.prometheus.url}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    rows = [w for w in doc["workloads"] if (w["namespace"], w["name"]) ==
            (scene.namespace, scene.name)]  # fmt: skip
    assert rows, doc["workloads"]
    assert rows[0]["energy_kwh"] > 0, rows[0]
    counted = sum(float(r["value"][1]) for r in scene.prometheus.query(query))
    assert rows[0]["energy_kwh"] == pytest.approx(counted, rel=0.5), (rows[0], counted)


def get(scene: Scene, path: str, *, client: bool = True) -> tuple[int, str]:
    """Status and body of ``GET path`` (with Prometheus's client certificate or none)."""
    context = ssl.create_default_context(cafile=str(scene.ca))
    if client:
        context.load_cert_chain(*scene.client)
    url = f"https://127.0.0.1:{scene.replica.port}{path}"
    try:
        with urllib.request.urlopen(url, context=context, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


KNOWN_LINT = (
    'carbonshift_avoided_emissions_grams_total non-counter metrics should not have "_total" suffix'
)
"""The one name promtool objects to: the issue names the avoided-emissions series so, next
to the three ``_total`` counters it is the difference of, and it must be a gauge (it
falls when carbonshift's placement emits more than the counterfactual)."""


def test_metrics_need_the_client_certificate_and_pass_promtools_lint(
    scene: Scene, tmp_path: Path
) -> None:
    assert get(scene, "/metrics", client=False)[0] == 403
    status, text = get(scene, "/metrics")
    assert status == 200
    assert "carbonshift_avoided_emissions_grams_total{" in text  # the leader's series too
    promtool = prometheus_binary(tmp_path / "build.log", "promtool")
    done = subprocess.run([str(promtool), "check", "metrics"], input=text, text=True,
                          capture_output=True, timeout=60, check=False)  # fmt: skip
    problems = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert problems == [KNOWN_LINT], problems


# --- the alerts ----------------------------------------------------------------------------


def fires(scene: Scene, alert: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = eventually(
        lambda: scene.prometheus.alerts(alert), timeout, f"{alert} firing"
    )
    return found


def test_alerts_fire_when_their_condition_is_made_true(scene: Scene) -> None:
    prometheus = scene.prometheus
    for alert in ("CarbonshiftIntensityStale", "CarbonshiftProviderCircuitOpen",
                  "CarbonshiftNoLeader"):  # fmt: skip
        assert not prometheus.alerts(alert), alert

    started = time.monotonic()
    scene.grid.frozen = datetime.now(UTC)  # the provider's data stops moving
    stale = fires(scene, "CarbonshiftIntensityStale", MAX_AGE + 35.0)
    assert {a["labels"]["zone"] for a in stale} >= {"FR", "PL", "SE-SE3"}
    stale_after = time.monotonic() - started

    started = time.monotonic()
    scene.grid.stop_serving()
    (circuit,) = fires(scene, "CarbonshiftProviderCircuitOpen")
    assert circuit["labels"]["provider"] == "electricitymaps"
    circuit_after = time.monotonic() - started

    started = time.monotonic()
    scene.replica.process.send_signal(signal.SIGKILL)
    (leaderless,) = fires(scene, "CarbonshiftNoLeader")
    assert leaderless["labels"]["severity"] == "critical"
    leader_after = time.monotonic() - started
    print(f"\nfiring after: stale {stale_after:.1f} s, circuit open {circuit_after:.1f} s, "
          f"no leader {leader_after:.1f} s (for: {FOR_SECONDS} s, intervals 1 s)")  # fmt: skip
