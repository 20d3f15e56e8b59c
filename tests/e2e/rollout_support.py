"""Helpers for the rollout tests (rolling restart and CA rotation under load): restartable
``carbonshift serve`` replicas, a real HAProxy in front of them, a carbonshift
MutatingWebhookConfiguration of the test's own, and a load of ``kubectl apply`` whose
stored objects are counted afterwards (with ``failurePolicy: Ignore`` a failed admission
is silent, so only the stored objects tell)."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import DECISION, Kube, carbonshift_marks, propagation_policy, unique

from devtools.sandbox import LOOPBACK, Sandbox, free_port
from devtools.sandbox.objects import carbonshift_webhook_configuration
from devtools.sandbox.pki import b64
from devtools.sandbox.processes import Component, launch, tail, terminate, wait_ready

HAPROXY = Path("/usr/sbin/haproxy")
ROLLOUT_LABEL = "e2e.carbonshift.io/rollout"
"""The namespace label the test's own webhook registration selects on (and nothing else)."""
MUTATE_PATH = "/mutate"


def haproxy_binary() -> Path:
    """HAProxy from Debian's package; a failure under CI, a skip elsewhere."""
    if not HAPROXY.is_file():
        message = "haproxy is not installed (Debian: apt-get install -y haproxy)"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return HAPROXY


# carbonshift replicas -----------------------------------------------------------------------


class Replica:
    """One ``carbonshift serve --kubeconfig`` on a fixed port, started, stopped with SIGTERM
    and started again like a pod of a rolling restart. Ready means ``/readyz`` answers 200
    over TLS verified with ``cafile`` and the fleet inventory is synced (the sandbox's own
    readiness rule)."""

    def __init__(
        self,
        sandbox: Sandbox,
        directory: Path,
        name: str,
        *,
        cert_dir: Path,
        cafile: Path,
        lease: str,
    ) -> None:
        self.name, self.cafile = name, cafile
        self.port = free_port()
        self.log = directory / f"{name}.log"
        self.pid_file = directory / f"{name}.pid"
        self.directory = directory
        argv = [
            *sandbox.carbonshift_command, "serve", f"--config={sandbox.layout.carbonshift_config}",
            f"--host={LOOPBACK}", f"--port={self.port}", f"--cert-dir={cert_dir}",
            "--cert-reload-seconds=0.5", f"--kubeconfig={sandbox.kubeconfig}",
            "--lease-namespace=default", f"--lease-name={lease}",
        ]  # fmt: skip
        ready = f"https://{LOOPBACK}:{self.port}/readyz"
        self.component = Component(name, argv, ready, ready_field="inventorySynced")

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self.component.process is not None, f"{self.name} was never started"
        return self.component.process

    def start(self, timeout: float = 60.0) -> float:
        """Start and wait until ready; the seconds that took."""
        started = time.monotonic()
        launch(self.component, log_path=self.log, pid_file=self.pid_file, cwd=self.directory)
        wait_ready(self.component, cafile=self.cafile, log_path=self.log, timeout=timeout)
        return time.monotonic() - started

    def terminate(self, grace: float = 30.0) -> tuple[int, float]:
        """SIGTERM (SIGKILL after ``grace``); the exit status and the seconds to exit."""
        started = time.monotonic()
        terminate((self.process.pid, self.component.argv[0]), self.process, grace)
        code = self.process.wait(timeout=5)
        return code, time.monotonic() - started

    def kill(self) -> None:
        process = self.component.process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)

    def tail(self) -> str:
        return f"--- {self.name}\n{tail(self.log, 40)}"


# HAProxy -------------------------------------------------------------------------------------

HAPROXY_CONFIG = """\
global
    log stdout format raw local0 info
    stats socket {socket} mode 600 level admin
    maxconn 2000

defaults
    mode tcp
    log global
    option tcplog
    timeout connect 1s
    timeout client 5m
    timeout server 5m
    # A connection the replica refuses (it stopped listening) is retried on the other.
    retries 3
    option redispatch 1

frontend carbonshift
    bind {host}:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server check check-ssl verify required ca-file {cafile} inter {inter_ms}ms fall 2 rise 2
{servers}
"""


class HAProxy:
    """A real HAProxy on 127.0.0.1 in front of the replicas, standing in for the Service and
    kube-proxy: TLS passes through (``mode tcp``), health checks ``GET /readyz`` over TLS."""

    def __init__(
        self, directory: Path, replicas: Sequence[Replica], cafile: Path, inter_ms: int = 500
    ) -> None:
        self.port = free_port()
        self.socket = directory / "haproxy.sock"
        self.config = directory / "haproxy.cfg"
        self.log = directory / "haproxy.log"
        servers = "\n".join(f"    server {r.name} {LOOPBACK}:{r.port}" for r in replicas)
        self.config.write_text(HAPROXY_CONFIG.format(
            socket=self.socket, host=LOOPBACK, port=self.port, cafile=cafile,
            inter_ms=inter_ms, servers=servers,
        ))  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(haproxy_binary()), "-db", "-f", str(self.config)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        eventually(lambda: self.states() is not None, 10.0, "HAProxy's stats socket")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def command(self, line: str) -> str | None:
        """One runtime API command's answer (None while HAProxy does not answer)."""
        try:
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(2)
                conn.connect(str(self.socket))
                conn.sendall(line.encode() + b"\n")
                chunks = []
                while chunk := conn.recv(65536):
                    chunks.append(chunk)
        except OSError:
            return None
        return b"".join(chunks).decode()

    def states(self) -> dict[str, str] | None:
        """Server name -> HAProxy's status of it (``UP``, ``DOWN``, ``UP 1/2``...)."""
        answer = self.command("show stat")
        if answer is None:
            return None
        rows = csv.DictReader(answer.lstrip("# ").splitlines())
        return {
            row["svname"]: row["status"]
            for row in rows
            if row.get("pxname") == "replicas" and row["svname"] not in ("BACKEND",)
        }

    def wait_state(self, server: str, status: str, timeout: float = 20.0) -> float:
        """Wait until HAProxy reports ``server`` in ``status``; the seconds that took."""
        started = time.monotonic()
        eventually(lambda: (self.states() or {}).get(server) == status, timeout,
                   f"HAProxy to see {server} {status}")  # fmt: skip
        return time.monotonic() - started

    def session_ends(self) -> dict[str, int]:
        """The sessions HAProxy logged, by termination state (``--`` ended normally)."""
        ends: dict[str, int] = {}
        for line in self.log.read_text(errors="replace").splitlines():
            fields = line.split()
            # tcplog: client [date] frontend backend/server Tw/Tc/Tt bytes state conns queues
            if len(fields) == 9 and fields[1].startswith("[") and fields[4].count("/") == 2:
                ends[fields[6]] = ends.get(fields[6], 0) + 1
        return ends


@dataclasses.dataclass(frozen=True, slots=True)
class Restart:
    """One replica's turn in a rolling restart (seconds)."""

    replica: str
    exited: float
    """From SIGTERM to the exit (status 0)."""
    ready: float
    """From the start to ready."""
    up: float
    """From ready to HAProxy's health checks seeing it UP."""


class Fleet:
    """Two replicas on one certificate directory behind a :class:`HAProxy`; ``cafile``
    verifies the replicas for readiness and HAProxy's checks (the test's trust, not the
    API server's, which is the registration's ``caBundle``)."""

    def __init__(self, sandbox: Sandbox, directory: Path, cert_dir: Path, cafile: Path) -> None:
        lease = unique("rollout-leader")
        self.replicas = [
            Replica(sandbox, directory, f"{lease}-{i}", cert_dir=cert_dir, cafile=cafile,
                    lease=lease)
            for i in (0, 1)
        ]  # fmt: skip
        self.proxy = HAProxy(directory, self.replicas, cafile)
        self.restarts: list[Restart] = []

    def __enter__(self) -> Fleet:
        try:
            for replica in self.replicas:
                replica.start()
            self.proxy.start()
            for replica in self.replicas:
                self.proxy.wait_state(replica.name, "UP")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if exc and exc[0] is not None:
            for replica in self.replicas:
                print(replica.tail())
        for replica in self.replicas:
            replica.kill()
        self.proxy.stop()

    def roll(self, grace: float = 30.0) -> None:
        """Restart the replicas one after the other: SIGTERM, wait for the exit, start,
        wait until ready and HAProxy sees it UP, then the next."""
        for replica in self.replicas:
            code, exited = replica.terminate(grace)
            assert code == 0, replica.tail()
            ready = replica.start()
            up = self.proxy.wait_state(replica.name, "UP")
            self.restarts.append(Restart(replica.name, exited, ready, up))

    def summary(self) -> str:
        """The restarts' figures and how HAProxy's sessions ended."""
        if not self.restarts:
            return "no restarts"
        return (
            f"{len(self.restarts)} restarts, exit after SIGTERM max "
            f"{max(r.exited for r in self.restarts):.2f} s, ready after start max "
            f"{max(r.ready for r in self.restarts):.2f} s, HAProxy UP after that max "
            f"{max(r.up for r in self.restarts):.2f} s; HAProxy sessions by end state "
            f"{self.proxy.session_ends()}"
        )


def eventually(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``check()`` until it returns something truthy; returns that."""
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, f"{what}: not reached in {timeout:g} s"
        time.sleep(0.1)
    return got


# the test's own registration and namespace --------------------------------------------------


def rollout_namespace(kube: Kube) -> str:
    """A namespace only the test's registration selects: it has the rollout label and not
    ``carbonshift.io/enabled``, so the sandbox's own registration leaves it alone."""
    name = unique("e2e-rollout")
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": {ROLLOUT_LABEL: name}}})  # fmt: skip
    return name


def registration(
    sandbox: Sandbox, name: str, url: str, ca_bundle: bytes, namespace: str
) -> dict[str, Any]:
    """carbonshift's production PropagationPolicy webhook (``manifests/base/webhook.yaml``)
    under its own configuration ``name``, calling ``url``, trusting the PEM ``ca_bundle``,
    for the PropagationPolicies of ``namespace`` only."""
    manifest = sandbox.layout.root / "manifests" / "base" / "webhook.yaml"
    document = carbonshift_webhook_configuration(manifest, url + MUTATE_PATH, b64(ca_bundle))
    (hook,) = [h for h in document["webhooks"] if h["name"].startswith("propagationpolicies.")]
    hook["name"] = f"{name}.carbonshift.io"  # the API server's metrics tell it by this name
    hook["namespaceSelector"] = {"matchLabels": {ROLLOUT_LABEL: namespace}}
    document["metadata"] = {"name": name}
    document["webhooks"] = [hook]
    return document


@contextlib.contextmanager
def registered(kube: Kube, document: Mapping[str, Any]) -> Iterator[None]:
    """The webhook configuration applied for the block, deleted afterwards."""
    kube.apply(document)
    try:
        yield
    finally:
        kube.run("delete", "mutatingwebhookconfiguration", document["metadata"]["name"],
                 "--wait=false")  # fmt: skip


def wait_mutating(kube: Kube, namespace: str, timeout: float = 20.0) -> None:
    """Until the API server calls the new registration (its informer has it): a server-side
    dry run comes back with carbonshift's decision."""

    def decided() -> bool:
        policy = propagation_policy(unique("probe"), namespace)
        result = kube.run("create", "--dry-run=server", "-o", "json", "-f", "-",
                          stdin=yaml.safe_dump(policy))  # fmt: skip
        return result.returncode == 0 and DECISION in carbonshift_marks(json.loads(result.stdout))

    eventually(decided, timeout, "the API server to call the rollout webhook")


def failed_open(kube: Kube, document: Mapping[str, Any]) -> int:
    """How often the API server admitted an object although calling the registration's
    webhook failed (``apiserver_admission_webhook_fail_open_count``)."""
    (hook,) = document["webhooks"]
    label = f'name="{hook["name"]}"'
    metrics = kube.ok("get", "--raw", "/metrics").splitlines()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in metrics
        if line.startswith("apiserver_admission_webhook_fail_open_count{") and label in line
    )


def webhook_errors(sandbox: Sandbox, document: Mapping[str, Any]) -> list[str]:
    """What the API server logged about failed calls of the registration's webhook."""
    (hook,) = document["webhooks"]
    log = sandbox.layout.log("kube-apiserver").read_text(errors="replace").splitlines()
    return [line for line in log if hook["name"] in line and "ailed calling webhook" in line]


def served_certificate(port: int) -> bytes:
    """The DER certificate a TLS server on the loopback address presents."""
    return ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((LOOPBACK, port), timeout=2))


# the load ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Apply:
    """One ``kubectl apply`` of ``names`` (one multi-document stream)."""

    names: tuple[str, ...]
    seconds: float
    error: str | None
    phase: str


class Load:
    """``kubectl apply`` of new opted-in PropagationPolicies into ``namespace``, ``batch``
    objects per apply (each is its own request, so its own admission), from ``workers``
    threads until the block ends; ``phase()`` labels each apply. ``pause``: seconds each
    worker waits between its applies (0: as fast as the API server answers, thousands of
    policies on an idle machine, which Karmada's controllers then take minutes to work
    through, delaying the tests after this one)."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        *,
        workers: int = 2,
        batch: int = 5,
        phase: Callable[[], str] = str,
        pause: float = 0.0,
    ) -> None:
        self.kube, self.namespace, self.phase, self.batch = kube, namespace, phase, batch
        self.pause = pause
        self.applies: list[Apply] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(workers)
        ]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _run(self, worker: int) -> None:
        index = 0
        while not self._stop.is_set():
            index += 1
            names = [f"web-{worker}-{index}-{k}" for k in range(self.batch)]
            manifest = yaml.safe_dump_all([propagation_policy(n, self.namespace) for n in names])
            phase = self.phase()
            started = time.monotonic()
            result = self.kube.run("apply", "-f", "-", stdin=manifest)
            error = None if result.returncode == 0 else result.stderr.strip() or "failed"
            self.applies.append(Apply(tuple(names), time.monotonic() - started, error, phase))
            self._stop.wait(self.pause)

    @property
    def objects(self) -> int:
        """How many objects the applies that succeeded sent."""
        return sum(len(a.names) for a in self.applies if a.error is None)

    @property
    def failed(self) -> list[Apply]:
        return [a for a in self.applies if a.error is not None]

    @property
    def max_seconds(self) -> float:
        return max((a.seconds for a in self.applies), default=0.0)

    def undecided(self) -> list[str]:
        """The stored objects of the namespace that carry no carbonshift decision."""
        listed = json.loads(self.kube.ok("get", "propagationpolicies", "-n", self.namespace,
                                         "-o", "json"))  # fmt: skip
        stored = {item["metadata"]["name"]: item for item in listed["items"]}
        sent = [name for a in self.applies if a.error is None for name in a.names]
        missing = [name for name in sent if name not in stored]
        assert not missing, f"applied but not stored: {missing[:5]}"
        return sorted(
            name for name, item in stored.items() if DECISION not in carbonshift_marks(item)
        )
