"""An Open Cluster Management hub where the real placement controller ranks on carbonshift's
scores (a development tool and the OCM end-to-end tests' cluster).

:class:`OcmHub` runs, on 127.0.0.1 and under its own state folder (``<sandbox state>/ocm``
by default):

* its own etcd and kube-apiserver (the sandbox's command lines and PKI helpers), with OCM's
  CRDs (ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement,
  PlacementDecision, AddOnPlacementScore) from ``<cache>/crds/ocm`` (``hack/crds.sh``, from
  the pinned module);
* OCM's placement controller ``v1.2.1`` (``placement controller --disable-leader-election``,
  built by ``hack/build-ocm.sh``), serving its health checks with the sandbox's API server
  certificate;
* ``carbonshift serve --kubeconfig`` for this API server, as its service account with the
  RBAC of ``manifests/base``: as leader (Lease ``carbonshift-system/carbonshift-leader``)
  it keeps the AddOnPlacementScores ``carbon`` (``ocm`` in its config).

No registration controller, klusterlet or managed cluster runs: ManagedClusters are plain
objects here, which is all placement reads. ``up`` records a pid file per component;
``down`` stops every recorded one and removes the state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from devtools.sandbox.components import (
    MEMBER_APISERVER_FLAGS,
    default_carbonshift,
    etcd,
    kube_apiserver,
)
from devtools.sandbox.layout import LOOPBACK, Layout, SandboxError
from devtools.sandbox.objects import user_config
from devtools.sandbox.plane import Plane
from devtools.sandbox.processes import Component
from devtools.sandbox.workload import WorkloadCluster
from webhook.model import config as config_mod
from webhook.model.validation import InvalidInput
from webhook.serve import certs

COMPONENTS = ("etcd", "kube-apiserver", "placement", "carbonshift")
"""Start order; ``down`` stops them in reverse."""
LEASE_NAMESPACE = "carbonshift-system"
"""carbonshift's namespace (``manifests/base``): its Lease ``carbonshift-leader``."""
PORTS = ("etcd", "etcd-peer", "kube-apiserver", "placement", "carbonshift")

OCM_CRDS = (
    "0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml",
    "0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml",
    "0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml",
    "0000_02_clusters.open-cluster-management.io_placements.crd.yaml",
    "0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml",
    "0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml",
)
"""The CRDs the placement controller watches (``hack/crds.sh`` fetches them)."""

BASE_CONFIG: Mapping[str, Any] = {
    "providers": ["static"],
    "labels": {"enabled": False},  # no Karmada Clusters here
    "reevaluate": {"enabled": False},
    "accounting": {"enabled": False},
    "ocm": {"enabled": True, "interval_seconds": 1},
}
"""carbonshift's config here: scores every second, nothing else to do."""


def ocm_layout(layout: Layout) -> Layout:
    """The sandbox's inputs, with its state one folder down (``<state>/ocm``)."""
    return dataclasses.replace(layout, state=layout.state / "ocm")


class OcmHub(Plane):
    """etcd, kube-apiserver, OCM's placement controller and carbonshift on 127.0.0.1."""

    STATE_ENTRIES = (*WorkloadCluster.STATE_ENTRIES, "placement.yaml", "carbonshift.kubeconfig")

    def __init__(
        self,
        layout: Layout | None = None,
        *,
        config: Mapping[str, Any] | None = None,
        clusters: Mapping[str, Any] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        """``config``: carbonshift's, laid over :data:`BASE_CONFIG` section by section;
        ``clusters``: its ``clusters:`` (ManagedClusters may take their zone from it)."""
        self.carbonshift_command = default_carbonshift()
        try:
            self.config = user_config(BASE_CONFIG, config or {})
            self.config["clusters"] = dict(clusters or {})
            config_mod.parse(self.config)
        except InvalidInput as exc:
            raise SandboxError(f"carbonshift config: {exc}") from None
        super().__init__(
            layout or ocm_layout(Layout.default()),
            log or (lambda message: print(f"[ocm] {message}", flush=True)),
        )

    def component_order(self) -> list[str]:
        return list(COMPONENTS)

    def up(self) -> None:
        """Start everything; on any failure stop what was started and raise."""
        self.bring_up("an OCM hub", self._prepare_state, self._start_rest)

    def _start_rest(self) -> None:
        self._install_crds()
        self._install_rbac()
        self.start("placement", "carbonshift", timeout=120.0)

    def _install_rbac(self) -> None:
        """carbonshift's own service account and RBAC (``manifests/base``), and a kubeconfig
        with a token of that account for carbonshift: it runs with what a real install
        grants, not as the admin."""
        base = self.layout.root / "manifests" / "base"
        rendered = self.kubectl("kustomize", str(base)).stdout
        kinds = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                 "RoleBinding")  # fmt: skip
        documents = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] in kinds]
        self.apply(sorted(documents, key=lambda d: kinds.index(d["kind"])))
        token = self.kubectl(
            "-n", LEASE_NAMESPACE, "create", "token", "carbonshift", "--duration=24h"
        ).stdout.strip()
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"] = [{"name": "sandbox-admin", "user": {"token": token}}]
        certs.write_private(self.carbonshift_kubeconfig, yaml.safe_dump(config).encode())

    @property
    def carbonshift_kubeconfig(self) -> Path:
        """carbonshift's kubeconfig: its service account's token."""
        return self.layout.state / "carbonshift.kubeconfig"

    def _prepare_state(self) -> None:
        by = "devtools.sandbox.ocm: the OCM hub's carbonshift"
        self.prepare_state(PORTS, "ocm-hub", self.config, by)
        self.components = self._define_components()

    def _placement_config(self) -> Path:
        """library-go's controller config: serve the health checks with the API server's
        certificate (the sandbox CA signs it; else the controller makes a self-signed one)."""
        path = self.layout.state / "placement.yaml"
        serving = {
            "bindAddress": f"{LOOPBACK}:{self.ports['placement']}",
            "certFile": str(self.layout.pki / "apiserver.crt"),
            "keyFile": str(self.layout.pki / "apiserver.key"),
        }
        document = {
            "apiVersion": "operator.openshift.io/v1alpha1",
            "kind": "GenericControllerConfig",
            "servingInfo": serving,
        }
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        return path

    def _define_components(self) -> dict[str, Component]:
        lay, ports, kubeconfig = self.layout, self.ports, str(self.layout.kubeconfig)
        api = ports["kube-apiserver"]
        carbonshift = f"https://{LOOPBACK}:{ports['carbonshift']}"
        return {
            "etcd": etcd(lay, "etcd", ports["etcd"], ports["etcd-peer"]),
            "kube-apiserver": kube_apiserver(
                lay, "kube-apiserver", ports["etcd"], api, MEMBER_APISERVER_FLAGS
            ),
            "placement": Component("placement", [
                str(lay.binary("placement")), "controller",
                f"--kubeconfig={kubeconfig}",
                f"--config={self._placement_config()}",
                "--namespace=default",  # its Events; else it reads the in-cluster namespace
                "--disable-leader-election",
                f"--listen={LOOPBACK}:{ports['placement']}",
            ], f"https://{LOOPBACK}:{ports['placement']}/healthz"),
            "carbonshift": Component("carbonshift", [
                *self.carbonshift_command, "serve",
                f"--config={lay.carbonshift_config}",
                f"--host={LOOPBACK}", f"--port={ports['carbonshift']}",
                f"--cert-dir={lay.carbonshift_certs}",
                f"--kubeconfig={self.carbonshift_kubeconfig}",
                f"--lease-namespace={LEASE_NAMESPACE}",
            ], f"{carbonshift}/readyz"),
        }  # fmt: skip

    def _install_crds(self) -> None:
        folder = self.layout.crd("ocm", OCM_CRDS[0]).parent
        self._log(f"installing OCM's CRDs from {folder}")
        for name in OCM_CRDS:
            self.kubectl("apply", "--server-side", "-f", str(folder / name))
        self.wait_established()
