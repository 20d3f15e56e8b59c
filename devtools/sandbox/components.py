"""What the sandbox runs: each component's command line and its readiness check.

The Karmada control plane (etcd, kube-apiserver, kube-controller-manager,
karmada-controller-manager, karmada-webhook, carbonshift, karmada-scheduler) and, per
member cluster, its own etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
KWOK.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from devtools.sandbox.layout import LOOPBACK, KarmadaRelease, Layout
from devtools.sandbox.processes import Component

HOST_PORTS = (
    "etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager",
    "karmada-controller-manager", "karmada-webhook", "carbonshift", "karmada-scheduler",
)  # fmt: skip
"""The loopback ports of the Karmada control plane, one free port each."""

MEMBER_PARTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok")
"""A member's processes, in start order; its components are named ``<member>-<part>``."""

HOST_PARTS = {
    "etcd": "etcd",
    "apiserver": "kube-apiserver",
    "controller-manager": "kube-controller-manager",
}
"""The Karmada control plane's process of the same kind as a member's (started with it)."""

MEMBER_PORTS = ("etcd", "etcd-peer", *MEMBER_PARTS[1:])

KWOK_NODES = "kwok.x-k8s.io/node=fake"
"""The annotation of the Nodes KWOK simulates (the members' one Node each)."""

HOST_CONTROLLERS = "namespace,garbagecollector"
"""kube-controller-manager on the Karmada API server: namespaces (and the Works in them,
e.g. of a removed Cluster's execution space) finish terminating; objects owned by a
deleted Deployment (its ResourceBinding) are collected."""

MEMBER_CONTROLLERS = "namespace,garbagecollector,deployment,replicaset,nodelifecycle"
"""kube-controller-manager on a member: Deployments applied by Karmada get ReplicaSets and
Pods; the node lifecycle lifts the ``not-ready`` taint of the member's Node once KWOK
reports it Ready."""

KARMADA_CONTROLLERS = (
    "cluster,clusterStatus,binding,bindingStatus,execution,workStatus,namespace,workloadRebalancer"
)
"""What Push-mode members need: Cluster status from the member (``clusterStatus``),
ResourceBinding -> Work (``binding``), Work -> the member (``execution``) and back
(``workStatus``, ``bindingStatus``), namespaces propagated to every member (``namespace``);
and WorkloadRebalancers (carbonshift's leader moves replicas back to greener tiers)."""

KARMADA_SCHEDULER_FLAGS = (
    "--carbonshift-timeout=1s",
    "--carbonshift-cache-ttl=5s",
    "--feature-gates=SchedulingOvercommitProtection=true",
    "--carbonshift-settle=3s",
)
"""The plugin's deadline on a busy laptop, and a short cache so a restarted carbonshift
or a changed grid shows within seconds. ``SchedulingOvercommitProtection`` (alpha, v1.18):
the scheduler counts the replicas it just assigned until the member reports them healthy;
the plugin's settling estimator (``--carbonshift-settle``) counts them on until the
Cluster's resource summary shows them, for at most 3 s here (the sandbox's Clusters report
every second), so many bindings scheduled at once do not all fill the same green member
past its room. Another Karmada release's stock karmada-scheduler (:class:`KarmadaRelease`)
runs without them: it has neither the plugin nor, before v1.18, that feature gate."""


def member_component(member: str, part: str) -> str:
    return f"{member}-{part}"


def port_names(members: Iterable[str]) -> list[str]:
    """Every port the sandbox allocates: the control plane's, then each member's."""
    return [*HOST_PORTS, *(f"{m}-{p}" for m in members for p in MEMBER_PORTS)]


def component_names(members: Iterable[str]) -> list[str]:
    """Start order; ``down`` stops them in reverse."""
    names = list(HOST_PARTS.values())
    names += [member_component(m, part) for m in members for part in MEMBER_PARTS]
    return [*names, "karmada-webhook", "karmada-controller-manager", "carbonshift",
            "karmada-scheduler"]  # fmt: skip


def default_carbonshift() -> list[str]:
    """The ``carbonshift`` command of this environment."""
    beside = Path(sys.executable).parent / "carbonshift"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("carbonshift")
    return [found] if found else [sys.executable, "-m", "webhook.cli"]


def etcd(lay: Layout, name: str, client: int, peer: int) -> Component:
    url, peer_url = f"http://{LOOPBACK}:{client}", f"http://{LOOPBACK}:{peer}"
    return Component(name, [
        str(lay.binary("etcd")), f"--name={name}", f"--data-dir={lay.data(name)}",
        f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
        f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster={name}={peer_url}",
        "--unsafe-no-fsync", "--log-level=warn",
    ], f"{url}/health")  # fmt: skip


MEMBER_APISERVER_FLAGS = (
    # Few objects and few clients: no watch cache, no API priority and fairness
    # (measured: ~10 MB less RSS per API server).
    "--watch-cache=false",
    "--enable-priority-and-fairness=false",
)


def kube_apiserver(
    lay: Layout, name: str, etcd_port: int, port: int, extra: Sequence[str] = ()
) -> Component:
    pki = lay.pki
    api = f"https://{LOOPBACK}:{port}"
    return Component(name, [
        str(lay.binary("kube-apiserver")),
        f"--etcd-servers=http://{LOOPBACK}:{etcd_port}",
        f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}",
        f"--secure-port={port}",
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
        *extra,
    ], f"{api}/readyz")  # fmt: skip


def kube_controller_manager(
    lay: Layout, name: str, kubeconfig: Path, port: int, controllers: str
) -> Component:
    pki = lay.pki
    return Component(name, [
        str(lay.binary("kube-controller-manager")),
        f"--kubeconfig={kubeconfig}",
        f"--controllers={controllers}",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}", f"--secure-port={port}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        "--profiling=false",
        # Else it creates /usr/libexec/kubernetes/kubelet-plugins on the host.
        f"--flex-volume-plugin-dir={lay.data(name)}",
    ], f"https://{LOOPBACK}:{port}/healthz")  # fmt: skip


def kube_scheduler(lay: Layout, name: str, kubeconfig: Path, port: int) -> Component:
    pki = lay.pki
    return Component(name, [
        str(lay.binary("kube-scheduler")),
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}", f"--secure-port={port}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        "--profiling=false",
    ], f"https://{LOOPBACK}:{port}/healthz")  # fmt: skip


def kwok(lay: Layout, name: str, kubeconfig: Path, port: int) -> Component:
    """The KWOK controller: the annotated Nodes become Ready and keep their lease, Pods
    bound to them Running (the stages Karpenter's kwok provider is tested with)."""
    return Component(name, [
        str(lay.binary("kwok")),
        f"--kubeconfig={kubeconfig}",
        f"--config={lay.crd('kwok', 'kwok-controller-config.yaml')}",
        f"--manage-nodes-with-annotation-selector={KWOK_NODES}",
        f"--server-address={LOOPBACK}:{port}",
        f"--node-ip={LOOPBACK}",
    ], f"http://{LOOPBACK}:{port}/healthz")  # fmt: skip


def define_components(
    lay: Layout,
    ports: Mapping[str, int],
    members: Sequence[str],
    *,
    carbonshift_command: Sequence[str],
    cert_reload_seconds: float,
    karmada: KarmadaRelease,
) -> dict[str, Component]:
    """Every component by name, in start order, with the flags that tie them together.
    ``karmada``: the release of karmada-controller-manager, karmada-webhook and
    karmada-scheduler (the pinned one's scheduler has carbonshift's plugin)."""
    pki = lay.pki
    release = karmada
    carbonshift_url = f"https://{LOOPBACK}:{ports['carbonshift']}"
    found: dict[str, Component] = {
        "etcd": etcd(lay, "etcd", ports["etcd"], ports["etcd-peer"]),
        "kube-apiserver": kube_apiserver(lay, "kube-apiserver", ports["etcd"],
                                         ports["kube-apiserver"]),
        "kube-controller-manager": kube_controller_manager(
            lay, "kube-controller-manager", lay.kubeconfig, ports["kube-controller-manager"],
            HOST_CONTROLLERS),
    }  # fmt: skip
    for member in members:
        names = {part: member_component(member, part) for part in MEMBER_PARTS}
        found[names["etcd"]] = etcd(
            lay, names["etcd"], ports[f"{member}-etcd"], ports[f"{member}-etcd-peer"]
        )
        found[names["apiserver"]] = kube_apiserver(
            lay, names["apiserver"], ports[f"{member}-etcd"], ports[f"{member}-apiserver"],
            MEMBER_APISERVER_FLAGS,
        )  # fmt: skip
        found[names["controller-manager"]] = kube_controller_manager(
            lay, names["controller-manager"], lay.member_kubeconfig(member),
            ports[f"{member}-controller-manager"], MEMBER_CONTROLLERS,
        )  # fmt: skip
        found[names["scheduler"]] = kube_scheduler(
            lay, names["scheduler"], lay.member_kubeconfig(member), ports[f"{member}-scheduler"]
        )
        found[names["kwok"]] = kwok(
            lay, names["kwok"], lay.member_kubeconfig(member), ports[f"{member}-kwok"]
        )
    manager_health = f"{LOOPBACK}:{ports['karmada-controller-manager']}"
    scheduler_health = f"{LOOPBACK}:{ports['karmada-scheduler']}"
    plugin = [
        f"--carbonshift-url={carbonshift_url}",
        f"--carbonshift-ca-file={pki / 'ca.crt'}",
        *KARMADA_SCHEDULER_FLAGS,
    ] if release.plugin else []  # fmt: skip
    found |= {
        "karmada-controller-manager": Component("karmada-controller-manager", [
            str(lay.binary(release.binary("karmada-controller-manager"))),
            f"--kubeconfig={lay.kubeconfig}",
            "--leader-elect=false",
            f"--controllers={KARMADA_CONTROLLERS}",
            # Resource summaries every second instead of 10 s: karmada-scheduler's estimate
            # (and its overcommit protection, which lets go of a binding's replicas once the
            # member reports them healthy) follows what the members run.
            "--cluster-status-update-frequency=1s",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address={manager_health}",
        ], f"http://{manager_health}/healthz"),
        "karmada-webhook": Component("karmada-webhook", [
            str(lay.binary(release.binary("karmada-webhook"))),
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
        ], f"{carbonshift_url}/readyz", ready_field="inventorySynced"),
        "karmada-scheduler": Component("karmada-scheduler", [
            str(lay.binary(release.binary("karmada-scheduler"))),
            f"--kubeconfig={lay.kubeconfig}",
            "--leader-elect=false",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address={scheduler_health}",
            *plugin,
        ], f"http://{scheduler_health}/healthz"),
    }  # fmt: skip
    return found
