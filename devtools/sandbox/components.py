"""What the sandbox runs: each component's command line and its readiness check."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from devtools.sandbox.layout import LOOPBACK, Layout
from devtools.sandbox.processes import Component

COMPONENTS = ("etcd", "kube-apiserver", "karmada-webhook", "carbonshift")
"""Start order; ``down`` stops them in reverse."""

PORTS = ("etcd", "etcd-peer", "kube-apiserver", "carbonshift", "karmada-webhook")
"""The loopback ports the components listen on, one free port each."""


def default_carbonshift() -> list[str]:
    """The ``carbonshift`` command of this environment."""
    beside = Path(sys.executable).parent / "carbonshift"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("carbonshift")
    return [found] if found else [sys.executable, "-m", "webhook.cli"]


def define_components(
    lay: Layout,
    ports: Mapping[str, int],
    *,
    carbonshift_command: Sequence[str],
    cert_reload_seconds: float,
) -> dict[str, Component]:
    """Every component by name, with the flags that tie them together."""
    pki = lay.pki
    api = f"https://{LOOPBACK}:{ports['kube-apiserver']}"
    etcd_url = f"http://{LOOPBACK}:{ports['etcd']}"
    return {
        "etcd": Component("etcd", [
            str(lay.binary("etcd")), "--name=sandbox", f"--data-dir={lay.state / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://{LOOPBACK}:{ports['etcd-peer']}",
            f"--initial-advertise-peer-urls=http://{LOOPBACK}:{ports['etcd-peer']}",
            f"--initial-cluster=sandbox=http://{LOOPBACK}:{ports['etcd-peer']}",
            "--unsafe-no-fsync", "--log-level=warn",
        ], f"{etcd_url}/health"),
        "kube-apiserver": Component("kube-apiserver", [
            str(lay.binary("kube-apiserver")),
            f"--etcd-servers={etcd_url}",
            f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}",
            f"--secure-port={ports['kube-apiserver']}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={api}/",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            "--profiling=false",
        ], f"{api}/readyz"),
        "karmada-webhook": Component("karmada-webhook", [
            str(lay.binary("karmada-webhook")),
            f"--kubeconfig={lay.kubeconfig}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={ports['karmada-webhook']}",
            f"--cert-dir={pki / 'karmada-webhook'}",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
        # It registers no health checks: an HTTP 404 over verified TLS means it serves.
        ], f"https://{LOOPBACK}:{ports['karmada-webhook']}/", frozenset({404})),
        "carbonshift": Component("carbonshift", [
            *carbonshift_command, "serve",
            f"--config={lay.carbonshift_config}",
            f"--host={LOOPBACK}", f"--port={ports['carbonshift']}",
            f"--cert-dir={lay.carbonshift_certs}",
            f"--cert-reload-seconds={cert_reload_seconds:g}",
            # The fleet comes from the Cluster objects (its Lease in ``default``).
            f"--kubeconfig={lay.kubeconfig}", "--lease-namespace=default",
        ], f"https://{LOOPBACK}:{ports['carbonshift']}/readyz",
            ready_field="inventorySynced"),
    }  # fmt: skip
