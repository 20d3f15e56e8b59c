"""A workload cluster where the real Karpenter launches nodes (a development tool).

:class:`WorkloadCluster` runs, on 127.0.0.1 and under its own state folder
(``<sandbox state>/workload`` by default):

* its own etcd and kube-apiserver (the sandbox's command lines and PKI helpers), with the
  Karpenter kwok-provider CRDs (NodePool, NodeClaim, KWOKNodeClass) from
  ``<cache>/crds/karpenter-kwok`` (``hack/crds.sh``, from the pinned module) and one
  ``KWOKNodeClass`` named ``default``;
* kube-controller-manager (its node-lifecycle controller lifts the ``not-ready`` taint
  every new Node gets; Deployments get ReplicaSets and pods) and kube-scheduler (it marks
  pods ``Unschedulable``, which is what Karpenter provisions for, and binds them);
* Karpenter ``v1.14.1`` with its kwok cloud provider (``karpenter-kwok``), feature gate
  ``NodeOverlay`` on (and its CRD installed): NodeClaims become Node objects instead of
  instances;
* the KWOK controller (``kwok``), with the stages of
  ``<cache>/crds/kwok/kwok-controller-config.yaml`` (``hack/crds.sh``), which makes
  Karpenter's Nodes Ready and the pods bound to them Running;
* ``carbonshift serve --kubeconfig`` for this API server: the production mutating webhook
  registration (so NodePools are decided at admission), and as leader the re-evaluation of
  managed NodePools over time (``reevaluate`` in its config).

Binaries come from ``hack/build-binaries.sh`` (``karpenter-kwok`` and ``kwok`` from the
modules in ``hack/karpenter/``). ``up`` records a pid file per component; ``down`` stops
every recorded one, also from a later process, and removes the state. The Karpenter
controller's metrics and health ports bind every interface (v1.14.1 takes only a port
number). By hand: ``python -m devtools.sandbox.workload up|down|status``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from devtools.sandbox import pki
from devtools.sandbox.components import (
    MEMBER_APISERVER_FLAGS,
    default_carbonshift,
    etcd,
    kube_apiserver,
    kube_controller_manager,
)
from devtools.sandbox.layout import KWOK_PROVIDER_CRDS, LOOPBACK, Layout, SandboxError
from devtools.sandbox.objects import LOCAL_ZONE, carbonshift_webhook_configuration, user_config
from devtools.sandbox.plane import Plane
from devtools.sandbox.processes import (
    Component,
)
from webhook.model.validation import InvalidInput

COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "karpenter",
    "carbonshift",
)
"""Start order; ``down`` stops them in reverse."""


PORTS = (
    "etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
    "kwok", "karpenter", "karpenter-metrics", "carbonshift",
)  # fmt: skip
"""The ports the components listen on, one free port each (``karpenter``: its health
probes)."""

NODE_CLASS = "default"
"""The ``KWOKNodeClass`` every NodePool of this cluster refers to."""

KWOK_NODES = "kwok.x-k8s.io/node=fake"
"""The annotation Karpenter's kwok provider puts on its Nodes; KWOK manages only those."""

CONTROLLERS = "nodelifecycle,deployment,replicaset,garbagecollector,namespace,disruption"
"""kube-controller-manager's controllers: the node lifecycle (it lifts the ``not-ready``
taint every new Node gets), Deployments, garbage collection, namespace deletion and
PodDisruptionBudget status (evictions, and so Karpenter's drains, need it)."""

BASE_CONFIG: Mapping[str, Any] = {
    "zone": LOCAL_ZONE,
    "providers": ["static"],
    "labels": {"enabled": False},  # no Karmada Clusters here
    "reevaluate": {"enabled": True, "interval_seconds": 10, "min_interval_seconds": 60},
}
"""carbonshift's config here: the sandbox's local grid (PL), NodePools re-evaluated every
10 s."""


def workload_layout(layout: Layout) -> Layout:
    """The sandbox's inputs, with its state one folder down (``<state>/workload``)."""
    return dataclasses.replace(layout, state=layout.state / "workload")


class WorkloadCluster(Plane):
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK, Karpenter
    (kwok provider) and carbonshift on 127.0.0.1."""

    STATE_ENTRIES = (
        "data", "pki", "logs", "pids", "carbonshift-certs", "kubeconfig", "carbonshift.yaml",
        "state.json",
    )  # fmt: skip

    def __init__(
        self,
        layout: Layout | None = None,
        *,
        carbonshift_command: Sequence[str] | None = None,
        carbonshift_config: Mapping[str, Any] | None = None,
        cert_reload_seconds: float = 10.0,
        instance_types: Path | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        """``layout``: where state, logs and pid files go (its ``state`` is used as is;
        see :func:`workload_layout`). ``carbonshift_config``: laid over :data:`BASE_CONFIG`
        section by section (provider settings, feed, reevaluate...). ``instance_types``:
        the kwok provider's instance types and prices (``INSTANCE_TYPES_FILE_PATH``; default
        its embedded 144 types)."""
        self.carbonshift_command = list(carbonshift_command or default_carbonshift())
        try:
            self.config = user_config(BASE_CONFIG, carbonshift_config or {})
        except InvalidInput as exc:
            raise SandboxError(f"carbonshift config: {exc}") from None
        self.cert_reload_seconds = cert_reload_seconds
        self.instance_types = instance_types
        super().__init__(
            layout or workload_layout(Layout.default()),
            log or (lambda message: print(f"[workload] {message}", flush=True)),
        )

    # ----------------------------------------------------------------- public API

    @property
    def carbonshift_url(self) -> str:
        return f"https://{LOOPBACK}:{self.ports['carbonshift']}"

    def up(self) -> None:
        """Start everything; on any failure stop what was started and raise."""
        self.bring_up("a workload cluster", self._prepare_state, self._start_rest)

    def _start_rest(self) -> None:
        self._install_crds()
        self.apply([node_class()])
        self.start("kube-controller-manager", "kube-scheduler", "kwok", "karpenter",
                   "carbonshift", timeout=120.0)  # fmt: skip
        ca_bundle = pki.b64((self.layout.pki / "ca.crt").read_bytes())
        manifest = self.layout.root / "manifests" / "base" / "webhook.yaml"
        url = f"{self.carbonshift_url}/mutate"
        self.apply([carbonshift_webhook_configuration(manifest, url, ca_bundle)])

    def component_order(self) -> list[str]:
        return list(COMPONENTS)

    # ----------------------------------------------------------------- steps

    def _prepare_state(self) -> None:
        by = "devtools.sandbox.workload: the workload cluster's carbonshift"
        self.prepare_state(PORTS, "workload", self.config, by)
        self.components = self._define_components()

    def _define_components(self) -> dict[str, Component]:
        lay, ports, kubeconfig = self.layout, self.ports, str(self.layout.kubeconfig)
        pki_dir, api = lay.pki, ports["kube-apiserver"]
        controller_manager = kube_controller_manager(
            lay, "kube-controller-manager", lay.kubeconfig, ports["kube-controller-manager"],
            CONTROLLERS,
        )  # fmt: skip
        scheduler = f"{LOOPBACK}:{ports['kube-scheduler']}"
        kwok_config = lay.crd("kwok", "kwok-controller-config.yaml")
        carbonshift = f"https://{LOOPBACK}:{ports['carbonshift']}"
        karpenter_env = {"KUBECONFIG": kubeconfig}
        if self.instance_types is not None:
            karpenter_env["INSTANCE_TYPES_FILE_PATH"] = str(self.instance_types)
        return {
            "etcd": etcd(lay, "etcd", ports["etcd"], ports["etcd-peer"]),
            "kube-apiserver": kube_apiserver(
                lay, "kube-apiserver", ports["etcd"], api, MEMBER_APISERVER_FLAGS
            ),
            "kube-controller-manager": controller_manager,
            "kube-scheduler": Component("kube-scheduler", [
                str(lay.binary("kube-scheduler")),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                f"--bind-address={LOOPBACK}", f"--secure-port={ports['kube-scheduler']}",
                f"--tls-cert-file={pki_dir / 'apiserver.crt'}",
                f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
                "--profiling=false",
            ], f"https://{scheduler}/healthz"),
            "kwok": Component("kwok", [
                str(lay.binary("kwok")),
                f"--kubeconfig={kubeconfig}",
                f"--config={kwok_config}",
                f"--manage-nodes-with-annotation-selector={KWOK_NODES}",
                f"--server-address={LOOPBACK}:{ports['kwok']}",
                f"--node-ip={LOOPBACK}",
            ], f"http://{LOOPBACK}:{ports['kwok']}/healthz"),
            # Karpenter has no --kubeconfig flag: KUBECONFIG comes through its environment.
            "karpenter": Component("karpenter", [
                str(lay.binary("karpenter-kwok")),
                "--disable-leader-election=true",
                f"--metrics-port={ports['karpenter-metrics']}",
                f"--health-probe-port={ports['karpenter']}",
                # Provision for pending pods within ~1 s (defaults: 10 s / 1 s).
                "--batch-max-duration=2s", "--batch-idle-duration=500ms",
                # NodeOverlay prices (strategy price); the gate is off by default.
                "--feature-gates=NodeOverlay=true",
            ], f"http://{LOOPBACK}:{ports['karpenter']}/readyz", env=karpenter_env),
            "carbonshift": Component("carbonshift", [
                *self.carbonshift_command, "serve",
                f"--config={lay.carbonshift_config}",
                f"--host={LOOPBACK}", f"--port={ports['carbonshift']}",
                f"--cert-dir={lay.carbonshift_certs}",
                f"--cert-reload-seconds={self.cert_reload_seconds:g}",
                # Webhook, and as leader (Lease in ``default``) the NodePool re-evaluation.
                f"--kubeconfig={kubeconfig}", "--lease-namespace=default",
            ], f"{carbonshift}/readyz"),  # no Karmada here: no fleet to wait for
        }  # fmt: skip

    def _install_crds(self) -> None:
        files = [self.layout.crd("karpenter-kwok", n) for n in KWOK_PROVIDER_CRDS]
        self._log(f"installing {len(files)} CRDs from {files[0].parent}")
        args = ["apply", "--server-side", "--force-conflicts"]
        for path in files:
            args += ["-f", str(path)]
        self.kubectl(*args)
        self.wait_established()


def node_class(name: str = NODE_CLASS) -> dict[str, Any]:
    """A ``KWOKNodeClass`` (Ready at once: its CRD defaults the status)."""
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": name},
        "spec": {},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m devtools.sandbox.workload up|down|status [--state-dir DIR]``."""
    p = argparse.ArgumentParser(
        prog="python -m devtools.sandbox.workload",
        description="A workload cluster on 127.0.0.1 where the real Karpenter (kwok provider) "
        "launches KWOK nodes and carbonshift decides the NodePools. A development tool.",
        epilog="Exit status: 0 success, 1 a component failed; status: 3 when nothing runs.",
    )
    p.add_argument("command", choices=("up", "down", "status"))
    p.add_argument(
        "--state-dir", type=Path, default=None, help="state folder (default: .sandbox/workload)"
    )
    args = p.parse_args(argv)
    layout = workload_layout(Layout.default())
    if args.state_dir is not None:
        layout = dataclasses.replace(layout, state=args.state_dir.resolve())
    cluster = WorkloadCluster(layout)
    try:
        if args.command == "up":
            cluster.up()
            print(f"export KUBECONFIG={cluster.kubeconfig} PATH={layout.bin}:$PATH")
        elif args.command == "down":
            cluster.down()
        else:
            alive = cluster.running()
            for name in cluster.known_components():
                print(
                    f"{name:24} " + (f"running, pid {alive[name]}" if name in alive else "stopped")
                )
            return 0 if alive else 3
    except SandboxError as exc:
        print(f"workload: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
