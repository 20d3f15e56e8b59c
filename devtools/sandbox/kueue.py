"""A Kueue MultiKueue fleet: a manager cluster that dispatches Jobs to two worker clusters
where they run (a development tool and the MultiKueue end-to-end tests' clusters).

:class:`KueueSandbox` runs, on 127.0.0.1 and under its own state folder
(``<sandbox state>/kueue`` by default), one PKI (the sandbox's helpers) for all of it:

* the **manager** (context ``manager``): etcd, kube-apiserver with Kueue's CRDs, and
  Kueue's controller manager with ``multiKueue`` on (the dispatcher is chosen by the
  caller: :data:`ALL_AT_ONCE` by default, :data:`INCREMENTAL` or any external name);
* each **worker** (contexts ``worker-a``, ``worker-b``): etcd, kube-apiserver with Kueue's
  CRDs, kube-controller-manager (``job``, ``nodelifecycle``, ``namespace``,
  ``garbagecollector``), kube-scheduler and KWOK with one simulated Node (the command lines
  the sandbox's members use), and Kueue's controller manager: a Job MultiKueue creates there
  is admitted by the worker's Kueue, gets Pods that KWOK reports Running, then Succeeded
  (the ``pod-complete`` stage of ``<cache>/crds/kwok``), and completes;
* every Kueue (``hack/build-kueue.sh``, v0.19.2) is a process with a Configuration file:
  leader election off, internal certificate management off, its webhooks served with a
  certificate of the sandbox CA and registered in its API server by URL (the mutating and
  validating webhooks of Kueue's own kinds and ``batch/v1`` Jobs, the only integration on),
  the CRD conversion webhooks likewise, the visibility server off, metrics off;
* on the manager, for each worker a Secret ``kueue-system/<worker>`` holding a kubeconfig of
  that worker (inline CA and admin client certificate) and a ``MultiKueueCluster`` naming
  it; a ``MultiKueueConfig`` :data:`MULTIKUEUE_CONFIG` listing the workers in the caller's
  order; an ``AdmissionCheck`` :data:`ADMISSION_CHECK` (controller
  ``kueue.x-k8s.io/multikueue``); and on every cluster a ResourceFlavor :data:`FLAVOR`, a
  ClusterQueue :data:`CLUSTER_QUEUE` with the caller's quotas (the manager's with the
  admission check) and a LocalQueue :data:`LOCAL_QUEUE` in :data:`NAMESPACE`;
* for carbonshift's Kueue controllers (``tests/e2e/test_kueue_carbon.py``), when asked: each
  MultiKueueCluster labelled with its worker's grid zone (``carbonshift.io/zone``), and an
  AdmissionCheck :data:`CARBON_WINDOW` (controller ``carbonshift.io/carbon-window``) the
  manager's ClusterQueue lists before MultiKueue's;
* with ``carbonshift=True`` (``up --carbonshift``, ``make sandbox SANDBOX=kueue``;
  ``tests/e2e/test_kueue_serve.py``), ``carbonshift serve`` itself, as the chart runs it: a
  process with the chart's default config plus ``kueue.enabled`` (:func:`serve_config`),
  leader election on (its Lease in :data:`CARBONSHIFT_NAMESPACE`), a kubeconfig of the manager
  (no Karmada there) with the token of carbonshift's service account and the RBAC an install
  grants (:meth:`KueueSandbox.carbonshift_identity`); Kueue's dispatcher is then
  :data:`DISPATCHER` (carbonshift's), the carbon window is on, the workers' zones are
  :data:`DEMO_ZONES` unless given, :data:`NAMESPACE` is opted in
  (``carbonshift.io/enabled=true``) and :data:`OTHER_NAMESPACE`, with LocalQueues too, is not.

A Job on the manager labelled ``kueue.x-k8s.io/queue-name: user-queue`` gets a Workload,
quota on the manager, and MultiKueue dispatches it to a worker; the worker's Job status is
copied back to the manager's Job (``spec.managedBy: kueue.x-k8s.io/multikueue``).

``up`` records a pid file per component; ``down`` stops every recorded one, also from a
later process, and removes the state. By hand:
``python -m devtools.sandbox.kueue up|down|status``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from devtools.sandbox import pki
from devtools.sandbox.components import (
    MEMBER_APISERVER_FLAGS,
    default_carbonshift,
    etcd,
    kube_apiserver,
    kube_controller_manager,
    kube_scheduler,
    kwok,
)
from devtools.sandbox.layout import LOOPBACK, Layout, SandboxError, free_port
from devtools.sandbox.objects import SIMULATED_NODE, simulated_node, user_config
from devtools.sandbox.plane import Plane
from devtools.sandbox.processes import Component
from webhook.model.validation import InvalidInput, read_yaml

MANAGER = "manager"
WORKERS = ("worker-a", "worker-b")
ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
KUEUE_NAMESPACE = "kueue-system"
"""Kueue's namespace (its Configuration's ``namespace``): the workers' kubeconfig Secrets."""
NAMESPACE = "default"
"""Where the LocalQueues are (and the Jobs go)."""
OTHER_NAMESPACE = "plain"
"""With carbonshift: a namespace with LocalQueues that is not opted in."""
DISPATCHER = "carbonshift.io/carbon-dispatcher"
"""carbonshift's ``multiKueue.dispatcherName`` (``kueue.dispatcher_name``'s default)."""
WINDOW_CONTROLLER = "carbonshift.io/carbon-window"
"""The carbon window's ``controllerName`` (``kueue.admission_check_controller``'s default)."""
DEMO_ZONES: Mapping[str, str] = {"worker-a": "PL", "worker-b": "SE-SE3"}
"""The workers' grids with carbonshift: worker-b's is far greener in the built-in table."""
CARBONSHIFT = "carbonshift"
"""The component ``carbonshift serve``."""
CARBONSHIFT_NAMESPACE = "carbonshift-system"
"""carbonshift's namespace in ``manifests/base``: its service account, Roles and Lease."""
ENABLED_LABEL = "carbonshift.io/enabled"
FLAVOR = "default-flavor"
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = "user-queue"
ADMISSION_CHECK = "multikueue"
MULTIKUEUE_CONFIG = "multikueue"
CARBON_WINDOW = "carbon-window"
"""The AdmissionCheck carbonshift answers, when the caller asks for one."""
ZONE_LABEL = "carbonshift.io/zone"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP = "kueue.x-k8s.io"
API = f"{GROUP}/v1beta2"

DEFAULT_QUOTAS: Mapping[str, Mapping[str, str]] = {
    MANAGER: {"cpu": "100", "memory": "400Gi"},
    "worker-a": {"cpu": "8", "memory": "32Gi"},
    "worker-b": {"cpu": "8", "memory": "32Gi"},
}
"""Each ClusterQueue's nominal quota unless the caller gives one (a worker without an entry
gets :data:`WORKER_QUOTA`)."""
WORKER_QUOTA: Mapping[str, str] = {"cpu": "8", "memory": "32Gi"}
NODE_RESOURCES: Mapping[str, str] = {"cpu": "64", "memory": "256Gi", "pods": "1000"}
"""What each worker's simulated Node offers: more than any quota, so the quota decides."""

WORKER_CONTROLLERS = "job,nodelifecycle,namespace,garbagecollector"
"""kube-controller-manager on a worker: Jobs get Pods and complete; the node lifecycle lifts
the ``not-ready`` taint of the Node once KWOK reports it Ready."""

KUEUE_CRDS = (
    "kueue.x-k8s.io_admissionchecks.yaml",
    "kueue.x-k8s.io_clusterqueues.yaml",
    "kueue.x-k8s.io_cohorts.yaml",
    "kueue.x-k8s.io_localqueues.yaml",
    "kueue.x-k8s.io_multikueueclusters.yaml",
    "kueue.x-k8s.io_multikueueconfigs.yaml",
    "kueue.x-k8s.io_provisioningrequestconfigs.yaml",
    "kueue.x-k8s.io_resourceflavors.yaml",
    "kueue.x-k8s.io_topologies.yaml",
    "kueue.x-k8s.io_workloadpriorityclasses.yaml",
    "kueue.x-k8s.io_workloads.yaml",
)
"""Kueue's CRDs (``hack/build-kueue.sh`` copies them into ``<cache>/crds/kueue``)."""
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
"""The CRDs Kueue's own install gives a conversion webhook (``config/components/crd``)."""
WEBHOOK_MANIFESTS = "webhook-manifests.yaml"
WEBHOOK_PATHS = ("-kueue-x-k8s-io-", "-batch-v1-job")
"""The webhooks registered: Kueue's kinds and Jobs (the only integration on). A webhook of
an integration that is off has no handler and would refuse its kind (``failurePolicy:
Fail``)."""
WORKER_PARTS = ("etcd", "apiserver", "controller-manager", "scheduler", "kwok", "kueue")
MANAGER_PARTS = ("etcd", "apiserver", "kueue")
PORTS = {
    "etcd": ("etcd", "etcd-peer"),
    "apiserver": ("apiserver",),
    "controller-manager": ("controller-manager",),
    "scheduler": ("scheduler",),
    "kwok": ("kwok",),
    "kueue": ("kueue-webhook", "kueue-health"),
}


def kueue_layout(layout: Layout) -> Layout:
    """The sandbox's inputs, with its state one folder down (``<state>/kueue``)."""
    return dataclasses.replace(layout, state=layout.state / "kueue")


def component(cluster: str, part: str) -> str:
    return f"{cluster}-{part}"


class KueueSandbox(Plane):
    """A MultiKueue manager and its workers on 127.0.0.1 (see the module's docstring)."""

    STATE_ENTRIES = (
        "data", "pki", "logs", "pids", "carbonshift-certs", "kubeconfig", "kubeconfigs",
        "kueue", "carbonshift.yaml", "state.json",
    )  # fmt: skip

    def __init__(
        self,
        layout: Layout | None = None,
        *,
        workers: Sequence[str] = WORKERS,
        config_clusters: Sequence[str] | None = None,
        quotas: Mapping[str, Mapping[str, str]] | None = None,
        dispatcher: str = ALL_AT_ONCE,
        step_size: int | None = None,
        zones: Mapping[str, str] | None = None,
        carbon_window: str | None = None,
        log: Callable[[str], None] | None = None,
        carbonshift: bool = False,
        carbonshift_config: Mapping[str, Any] | None = None,
        carbonshift_command: Sequence[str] | None = None,
    ) -> None:
        """``workers``: the worker clusters' names (contexts); ``config_clusters``: the
        ``MultiKueueConfig``'s clusters in order (default ``workers``); ``quotas``: cluster
        -> the nominal quota of its ClusterQueue (resource -> quantity; covered resources
        are the keys, with :data:`DEFAULT_QUOTAS` for a cluster not given); ``dispatcher``:
        the manager's ``multiKueue.dispatcherName`` (``step_size``: the incremental
        dispatcher's, default Kueue's 3); ``zones``: worker -> grid zone, the label
        ``carbonshift.io/zone`` of its MultiKueueCluster; ``carbon_window``: a controller
        name for an AdmissionCheck :data:`CARBON_WINDOW` the manager's ClusterQueue lists
        before MultiKueue's (its controller, carbonshift, must mark it Active: until then the
        manager's ClusterQueue is inactive and :meth:`wait_active` does not wait for it).
        ``carbonshift``: run ``carbonshift serve`` too (see the module's docstring; then
        ``dispatcher`` is :data:`DISPATCHER` and ``carbon_window`` :data:`WINDOW_CONTROLLER`
        unless given otherwise), its config :func:`serve_config` with
        ``carbonshift_config`` laid over it section by section; ``carbonshift_command``:
        the program (default: this environment's ``carbonshift``)."""
        if MANAGER in workers or len(set(workers)) != len(workers) or not workers:
            raise SandboxError(f"workers must be distinct names other than {MANAGER}")
        self.workers = list(workers)
        self.config_clusters = list(config_clusters or workers)
        unknown = set(self.config_clusters) - set(self.workers)
        if unknown:
            raise SandboxError(f"MultiKueueConfig names unknown workers: {sorted(unknown)}")
        self.quotas = {
            name: dict((quotas or {}).get(name) or DEFAULT_QUOTAS.get(name) or WORKER_QUOTA)
            for name in self.clusters
        }
        self.with_carbonshift = carbonshift
        if carbonshift:
            dispatcher = DISPATCHER if dispatcher == ALL_AT_ONCE else dispatcher
            carbon_window = carbon_window or WINDOW_CONTROLLER
            zones = zones or {w: z for w, z in DEMO_ZONES.items() if w in self.workers}
        self.dispatcher = dispatcher
        self.step_size = step_size
        self.zones = dict(zones or {})
        self.carbon_window = carbon_window
        self.namespaces = [NAMESPACE, OTHER_NAMESPACE] if carbonshift else [NAMESPACE]
        self.carbonshift_config = serve_config(carbonshift_config)
        self.carbonshift_command = list(carbonshift_command or default_carbonshift())
        super().__init__(
            layout or kueue_layout(Layout.default()),
            log or (lambda message: print(f"[kueue] {message}", flush=True)),
        )

    # ----------------------------------------------------------------- public API

    @property
    def clusters(self) -> list[str]:
        """The manager, then the workers (also the kubeconfig's contexts)."""
        return [MANAGER, *self.workers]

    def parts(self, cluster: str) -> tuple[str, ...]:
        return MANAGER_PARTS if cluster == MANAGER else WORKER_PARTS

    def component_order(self) -> list[str]:
        order = [component(c, "etcd") for c in self.clusters]
        order += [component(c, "apiserver") for c in self.clusters]
        order += [component(w, p) for w in self.workers for p in WORKER_PARTS[2:5]]
        order += [component(c, "kueue") for c in self.clusters]
        return order + ([CARBONSHIFT] if self.with_carbonshift else [])

    @property
    def carbonshift_url(self) -> str:
        """``carbonshift serve``'s HTTPS address (with ``carbonshift``)."""
        return f"https://{LOOPBACK}:{self.ports[CARBONSHIFT]}"

    @property
    def carbonshift_kubeconfig(self) -> Path:
        """The manager as carbonshift's service account (:meth:`carbonshift_identity`)."""
        return self.layout.state / "kubeconfigs" / "carbonshift.kubeconfig"

    def restart_carbonshift(self, config: Mapping[str, Any] | None = None) -> None:
        """Stop ``carbonshift serve`` (SIGTERM: it hands its Lease back), write its config
        anew (:func:`serve_config` with ``config`` laid over it) and start it again."""
        self.stop(CARBONSHIFT)
        self.carbonshift_config = serve_config(config)
        self._write_carbonshift_config()
        self.start(CARBONSHIFT, timeout=120.0)

    def cluster_kubeconfig(self, cluster: str) -> Path:
        """An admin kubeconfig whose only context is ``cluster``."""
        return self.layout.state / "kubeconfigs" / f"{cluster}.kubeconfig"

    def on(self, cluster: str, *args: str, stdin: str | None = None, check: bool = True,
           timeout: float = 60.0) -> str:  # fmt: skip
        """kubectl against one cluster; returns its stdout."""
        return self.kubectl(
            f"--context={cluster}", *args, stdin=stdin, check=check, timeout=timeout
        ).stdout

    def apply_on(self, cluster: str, documents: Sequence[Mapping[str, Any]], *extra: str) -> str:
        text = yaml.safe_dump_all(list(documents), sort_keys=False)
        return self.on(cluster, "apply", *extra, "-f", "-", stdin=text)

    def up(self) -> None:
        """Start everything; on any failure stop what was started (keeping the logs) and
        raise."""
        if self.running():
            raise SandboxError(f"a Kueue sandbox already runs from {self.layout.state}")
        self._prepare_state()
        try:
            self.start(*(component(c, "etcd") for c in self.clusters))
            self.start(*(component(c, "apiserver") for c in self.clusters), timeout=120.0)
            each(self._install_crds, self.clusters)  # minutes one after the other
            for worker in self.workers:
                self._add_node(worker)
            self.start(*(component(w, p) for w in self.workers for p in WORKER_PARTS[2:5]),
                       timeout=120.0)  # fmt: skip
            self.start(*(component(c, "kueue") for c in self.clusters), timeout=180.0)
            each(self._register_webhooks, self.clusters)
            each(lambda w: self.apply_on(w, queue_objects(self.quotas[w],
                                                          namespaces=self.namespaces)),
                 self.workers)  # fmt: skip
            self.apply_on(MANAGER, self._manager_objects())
            self.wait_active()
            if self.with_carbonshift:
                self._start_carbonshift()
            state = {"ports": self.ports, "kubeconfig": str(self.kubeconfig)}
            self.layout.state_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        except BaseException:
            self.down(keep_state=True)
            raise

    def set_dispatcher(self, dispatcher: str, step_size: int | None = None) -> None:
        """Restart the manager's Kueue with another dispatcher (Kueue reads it at start);
        nothing happens when it already runs with this one."""
        if (dispatcher, step_size) == (self.dispatcher, self.step_size):
            return
        self.dispatcher, self.step_size = dispatcher, step_size
        name = component(MANAGER, "kueue")
        self.stop(name)
        self._write_kueue_config(MANAGER)
        self.start(name, timeout=180.0)
        self.wait_active()

    def carbonshift_identity(self) -> Path:
        """carbonshift's service account on the manager with what a real install grants it
        (the ServiceAccount, ClusterRole and Roles of ``manifests/base`` and of the
        component ``manifests/components/kueue``, which also holds the CarbonWindow CRD),
        and a kubeconfig of the manager with a token of that account; returns its path."""
        root = self.layout.root / "manifests"
        rendered = self.kubectl("kustomize", str(root / "base")).stdout
        component = (root / "components" / "kueue" / "kueue-rbac.yaml").read_text()
        crd = yaml.safe_load((root / "components" / "kueue" / "carbonwindows.yaml").read_text())
        kinds = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                 "RoleBinding")  # fmt: skip
        documents = [d for text in (rendered, component) for d in yaml.safe_load_all(text)
                     if d and d["kind"] in kinds]  # fmt: skip
        self.apply_on(MANAGER, [crd, *sorted(documents, key=lambda d: kinds.index(d["kind"]))])
        account = next(d for d in documents if d["kind"] == "ServiceAccount")["metadata"]
        token = self.on(MANAGER, "-n", account["namespace"], "create", "token",
                        account["name"], "--duration=24h").strip()  # fmt: skip
        config = yaml.safe_load(self.cluster_kubeconfig(MANAGER).read_text())
        for user in config["users"]:
            user["user"] = {"token": token}
        path = self.carbonshift_kubeconfig
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        path.chmod(0o600)
        return path

    def wait_active(self, timeout: float = 120.0) -> None:
        """Until every MultiKueueCluster, the AdmissionCheck and every ClusterQueue is
        Active (the manager reaches the workers and every queue can admit)."""
        t = f"--timeout={timeout:g}s"
        self.on(MANAGER, "wait", "--for=condition=Active", t, "multikueueclusters", "--all")
        self.on(MANAGER, "wait", "--for=condition=Active", t, f"admissioncheck/{ADMISSION_CHECK}")
        for cluster in self.clusters:
            if cluster == MANAGER and self.carbon_window:
                continue  # Active once carbonshift marks the carbon window Active
            self.on(cluster, "wait", "--for=condition=Active", t, f"clusterqueue/{CLUSTER_QUEUE}")

    # ----------------------------------------------------------------- steps

    def _prepare_state(self) -> None:
        state = self.layout.state
        for sub in ("data", "pki", "logs", "pids", "kueue", "kubeconfigs"):  # a crashed run's
            shutil.rmtree(state / sub, ignore_errors=True)
        state.mkdir(parents=True, exist_ok=True)
        self.ports = {
            f"{cluster}-{port}": free_port()
            for cluster in self.clusters
            for part in self.parts(cluster)
            for port in PORTS[part]
        }
        if self.with_carbonshift:
            self.ports[CARBONSHIFT] = free_port()
        pki.write_pki(self.layout)
        ca = pki.read_ca(self.layout)
        servers = {c: f"https://{LOOPBACK}:{self.ports[f'{c}-apiserver']}" for c in self.clusters}
        pki.write_kubeconfig(self.kubeconfig, self.layout, servers)
        for cluster, server in servers.items():
            pki.write_kubeconfig(self.cluster_kubeconfig(cluster), self.layout, {cluster: server})
            pki.serving_pair(ca, f"kueue-{cluster}").write(self._kueue_certs(cluster))
            self._write_kueue_config(cluster)
        self.components = self._define_components()

    def _kueue_certs(self, cluster: str) -> Path:
        return self.layout.state / "kueue" / cluster / "certs"

    def _kueue_config(self, cluster: str) -> Path:
        return self.layout.state / "kueue" / cluster / "config.yaml"

    def _write_kueue_config(self, cluster: str) -> None:
        document = kueue_configuration(
            webhook_port=self.ports[f"{cluster}-kueue-webhook"],
            health_port=self.ports[f"{cluster}-kueue-health"],
            cert_dir=self._kueue_certs(cluster),
            multikueue=multikueue_settings(self.dispatcher, self.step_size)
            if cluster == MANAGER
            else None,
        )
        path = self._kueue_config(cluster)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")

    def _define_components(self) -> dict[str, Component]:
        lay, ports = self.layout, self.ports
        kueue_binary = str(lay.bin / "kueue-controller-manager")
        if not Path(kueue_binary).is_file():
            raise SandboxError(f"{kueue_binary} is missing: run hack/build-kueue.sh")
        found: dict[str, Component] = {}
        for cluster in self.clusters:
            kubeconfig = self.cluster_kubeconfig(cluster)

            def port(name: str, cluster: str = cluster) -> int:
                return ports[f"{cluster}-{name}"]

            name = {part: component(cluster, part) for part in self.parts(cluster)}
            found[name["etcd"]] = etcd(lay, name["etcd"], port("etcd"), port("etcd-peer"))
            found[name["apiserver"]] = kube_apiserver(
                lay, name["apiserver"], port("etcd"), port("apiserver"), MEMBER_APISERVER_FLAGS
            )
            if cluster != MANAGER:
                found[name["controller-manager"]] = kube_controller_manager(
                    lay, name["controller-manager"], kubeconfig, port("controller-manager"),
                    WORKER_CONTROLLERS,
                )  # fmt: skip
                found[name["scheduler"]] = kube_scheduler(
                    lay, name["scheduler"], kubeconfig, port("scheduler")
                )
                found[name["kwok"]] = kwok(lay, name["kwok"], kubeconfig, port("kwok"))
            found[name["kueue"]] = Component(
                name["kueue"],
                [
                    kueue_binary,
                    f"--config={self._kueue_config(cluster)}",
                    f"--kubeconfig={kubeconfig}",
                ],
                f"http://{LOOPBACK}:{port('kueue-health')}/readyz",
                # Its metrics certificate (the build reads the folder from here; upstream
                # has the fixed path /etc/kueue/metrics/certs): metrics are off anyway.
                env={"KUEUE_METRICS_CERT_DIR": str(self._kueue_certs(cluster))},
            )
        if self.with_carbonshift:
            found[CARBONSHIFT] = Component(CARBONSHIFT, [
                *self.carbonshift_command, "serve",
                f"--config={lay.carbonshift_config}",
                f"--host={LOOPBACK}", f"--port={ports[CARBONSHIFT]}",
                f"--cert-dir={lay.carbonshift_certs}",
                # as the chart runs it: a kubeconfig of the API server it works on (the
                # Kueue manager), its Lease in its own namespace
                f"--kubeconfig={self.carbonshift_kubeconfig}",
                f"--lease-namespace={CARBONSHIFT_NAMESPACE}",
            ], f"{self.carbonshift_url}/readyz",
                env={"POD_NAME": f"{CARBONSHIFT}-sandbox"})  # fmt: skip
        return found

    def _write_carbonshift_config(self) -> None:
        self.layout.carbonshift_config.write_text(
            "# Written by devtools.sandbox.kueue: the chart's default config, kueue.enabled.\n"
            + yaml.safe_dump(self.carbonshift_config, sort_keys=False),
            encoding="utf-8",
        )

    def _start_carbonshift(self) -> None:
        """carbonshift's identity and RBAC, its namespace opted in, ``carbonshift serve``;
        then until its carbon window is Active (the manager's ClusterQueue admits)."""
        self.on(MANAGER, "label", "namespace", NAMESPACE, f"{ENABLED_LABEL}=true",
                "--overwrite")  # fmt: skip
        self.carbonshift_identity()
        self._write_carbonshift_config()
        self.start(CARBONSHIFT, timeout=120.0)
        self.on(MANAGER, "wait", "--for=condition=Active", "--timeout=120s",
                f"admissioncheck/{CARBON_WINDOW}", f"clusterqueue/{CLUSTER_QUEUE}",
                timeout=150.0)  # fmt: skip

    def _install_crds(self, cluster: str) -> None:
        """Kueue's CRDs, those Kueue converts with its conversion webhook pointed at its
        URL; and Kueue's namespace."""
        ca_bundle = pki.b64((self.layout.pki / "ca.crt").read_bytes())
        url = f"https://{LOOPBACK}:{self.ports[f'{cluster}-kueue-webhook']}/convert"
        documents = []
        for name in KUEUE_CRDS:
            path = self.layout.crd("kueue", name)
            document = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)  # noqa: S506
            if document["spec"]["names"]["plural"] in CONVERTED:
                document["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {"url": url, "caBundle": ca_bundle},
                        "conversionReviewVersions": ["v1"],
                    },
                }
            documents.append(document)
        self._log(f"{cluster}: installing {len(documents)} Kueue CRDs")
        namespace = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": KUEUE_NAMESPACE}}  # fmt: skip
        self.apply_on(cluster, [*documents, namespace], "--server-side", "--force-conflicts")
        self.wait_established(context=cluster)

    def _add_node(self, worker: str) -> None:
        """One Node that KWOK simulates, with room beyond any quota."""
        self.apply_on(worker, [simulated_node()])
        capacity = {"status": {"capacity": dict(NODE_RESOURCES),
                               "allocatable": dict(NODE_RESOURCES)}}  # fmt: skip
        self.on(worker, "patch", "node", SIMULATED_NODE, "--subresource=status",
                "--type=merge", "-p", json.dumps(capacity))  # fmt: skip

    def _register_webhooks(self, cluster: str) -> None:
        manifest = self.layout.crd("kueue", WEBHOOK_MANIFESTS)
        url = f"https://{LOOPBACK}:{self.ports[f'{cluster}-kueue-webhook']}"
        ca_bundle = pki.b64((self.layout.pki / "ca.crt").read_bytes())
        self.apply_on(cluster, webhook_configurations(manifest, url, ca_bundle))

    def _manager_objects(self) -> list[dict[str, Any]]:
        secrets, clusters = [], []
        for worker in self.workers:
            kubeconfig = self.cluster_kubeconfig(worker).read_bytes()
            secrets.append({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": worker, "namespace": KUEUE_NAMESPACE},
                "data": {"kubeconfig": pki.b64(kubeconfig)},
            })  # fmt: skip
            labels = {ZONE_LABEL: self.zones[worker]} if worker in self.zones else {}
            clusters.append({
                "apiVersion": API, "kind": "MultiKueueCluster",
                "metadata": {"name": worker, "labels": labels},
                "spec": {"clusterSource": {"kubeConfig": {
                    "locationType": "Secret", "location": worker}}},
            })  # fmt: skip
        config = {
            "apiVersion": API, "kind": "MultiKueueConfig",
            "metadata": {"name": MULTIKUEUE_CONFIG},
            "spec": {"clusters": list(self.config_clusters)},
        }  # fmt: skip
        check = {
            "apiVersion": API, "kind": "AdmissionCheck",
            "metadata": {"name": ADMISSION_CHECK},
            "spec": {"controllerName": MULTIKUEUE_CONTROLLER, "parameters": {
                "apiGroup": GROUP, "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG}},
        }  # fmt: skip
        checks = [ADMISSION_CHECK]
        extra = []
        if self.carbon_window:
            checks.insert(0, CARBON_WINDOW)
            extra.append({
                "apiVersion": API, "kind": "AdmissionCheck", "metadata": {"name": CARBON_WINDOW},
                "spec": {"controllerName": self.carbon_window},
            })  # fmt: skip
        queues = queue_objects(
            self.quotas[MANAGER], admission_checks=checks, namespaces=self.namespaces
        )
        return [*secrets, *clusters, config, check, *extra, *queues]


def each(step: Callable[[str], object], clusters: Sequence[str]) -> None:
    """``step`` for every cluster at once (kubectl runs, mostly waiting on API servers);
    the first error is raised."""
    with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
        for future in [pool.submit(step, cluster) for cluster in clusters]:
            future.result()


try:
    _LOADER: Any = yaml.CSafeLoader
except AttributeError:  # PyYAML without libyaml
    _LOADER = yaml.SafeLoader


def kueue_configuration(
    *,
    webhook_port: int,
    health_port: int,
    cert_dir: Path,
    multikueue: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Kueue's ``Configuration`` for a process on 127.0.0.1: leader election, internal
    certificate management, metrics and the visibility server off; the webhooks served
    from ``cert_dir``; Jobs the only integration; ``multiKueue`` when given (the manager)."""
    document: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"{LOOPBACK}:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": LOOPBACK, "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": ["batch/job"]},
        # An aggregated API server on 0.0.0.0:8082 otherwise, one per process.
        "featureGates": {"VisibilityOnDemand": False},
    }
    if multikueue is not None:
        document["multiKueue"] = dict(multikueue)
    return document


def multikueue_settings(dispatcher: str, step_size: int | None) -> dict[str, Any]:
    """The manager's ``multiKueue``: the dispatcher, and for the incremental one its step."""
    settings: dict[str, Any] = {"dispatcherName": dispatcher, "gcInterval": "30s"}
    if dispatcher == INCREMENTAL and step_size is not None:
        settings["incrementalDispatcherConfig"] = {"stepSize": step_size}
    return settings


def queue_objects(
    quota: Mapping[str, str],
    *,
    admission_checks: Sequence[str] = (),
    namespaces: Sequence[str] = (NAMESPACE,),
) -> list[dict[str, Any]]:
    """A ResourceFlavor, a ClusterQueue with ``quota`` (for every namespace) and, in each of
    ``namespaces`` (created unless :data:`NAMESPACE`), a LocalQueue pointing at it."""
    queue_spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{
            "coveredResources": list(quota),
            "flavors": [{"name": FLAVOR, "resources": [
                {"name": name, "nominalQuota": value} for name, value in quota.items()]}],
        }],
    }  # fmt: skip
    if admission_checks:
        queue_spec["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": name} for name in admission_checks]
        }
    created = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
               for n in namespaces if n != NAMESPACE]  # fmt: skip
    return [
        *created,
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
         "spec": queue_spec},
        *({"apiVersion": API, "kind": "LocalQueue",
           "metadata": {"name": LOCAL_QUEUE, "namespace": n},
           "spec": {"clusterQueue": CLUSTER_QUEUE}} for n in namespaces),
    ]  # fmt: skip


def serve_config(overlay: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``carbonshift serve``'s config in the sandbox: the chart's default (``providers:
    [static]``, ``clusters: {}``, every other section at the product's default) with
    ``kueue.enabled`` and a pass every 2 s, then ``overlay`` laid over it section by section
    (:func:`devtools.sandbox.objects.user_config`, which validates it)."""
    base: dict[str, Any] = {
        "providers": ["static"],
        "clusters": {},
        "kueue": {"enabled": True, "interval_seconds": 2},
    }
    return user_config(base, overlay or {})


def webhook_configurations(manifest: Path, url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """Kueue's webhook configurations (``config/components/webhook/manifests.yaml`` of the
    module), only the webhooks of :data:`WEBHOOK_PATHS`, each pointed at ``url`` + its path
    with the sandbox CA."""
    found = []
    for document in yaml.safe_load_all(manifest.read_text(encoding="utf-8")):
        if not document:
            continue
        kind = document["kind"]
        hooks = []
        for hook in document.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            if any(part in path for part in WEBHOOK_PATHS):
                hooks.append({**hook, "clientConfig": {"url": url + path, "caBundle": ca_bundle}})
        prefix = "mutating" if kind == "MutatingWebhookConfiguration" else "validating"
        found.append({
            "apiVersion": document["apiVersion"], "kind": kind,
            "metadata": {"name": f"kueue-{prefix}-webhook-configuration"},
            "webhooks": hooks,
        })  # fmt: skip
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m devtools.sandbox.kueue up|down|status [--state-dir DIR] [--dispatcher N]
    [--zones W=Z,...] [--carbon-window CONTROLLER] [--carbonshift [--config FILE]]``."""
    p = argparse.ArgumentParser(
        prog="python -m devtools.sandbox.kueue",
        description="A Kueue MultiKueue manager and two worker clusters on 127.0.0.1 where "
        "Jobs run on KWOK Nodes; with --carbonshift, carbonshift serve dispatches them "
        "(make sandbox SANDBOX=kueue). A development tool.",
        epilog="Exit status: 0 success, 1 a component failed; status: 3 when nothing runs.",
    )
    p.add_argument("command", choices=("up", "down", "status"))
    p.add_argument("--state-dir", type=Path, default=None,
                   help="state folder (default: .sandbox/kueue)")  # fmt: skip
    p.add_argument("--dispatcher", default=None,
                   help=f"default {ALL_AT_ONCE}; {DISPATCHER} with --carbonshift")  # fmt: skip
    p.add_argument("--zones", default="",
                   help="W=Z,...: each MultiKueueCluster's carbonshift.io/zone (with "
                   "--carbonshift default worker-a=PL,worker-b=SE-SE3)")  # fmt: skip
    p.add_argument("--carbon-window", default=None, metavar="CONTROLLER",
                   help=f"an AdmissionCheck {CARBON_WINDOW} of this controller on the "
                   f"manager's ClusterQueue ({WINDOW_CONTROLLER}, the default with "
                   "--carbonshift)")  # fmt: skip
    p.add_argument("--carbonshift", action="store_true",
                   help="run carbonshift serve too, as the chart runs it (leader election, "
                   "a kubeconfig of the manager with its service account's RBAC), nominating "
                   f"workers as Kueue's dispatcher; {NAMESPACE} opted in, {OTHER_NAMESPACE} "
                   "not")  # fmt: skip
    p.add_argument("--config", type=Path, default=os.environ.get("SANDBOX_CONFIG") or None,
                   metavar="FILE",
                   help="with --carbonshift: a carbonshift config laid over the sandbox's, "
                   "section by section (default: $SANDBOX_CONFIG)")  # fmt: skip
    args = p.parse_args(argv)
    zones = dict(pair.split("=", 1) for pair in args.zones.split(",") if "=" in pair)
    layout = kueue_layout(Layout.default())
    if args.state_dir is not None:
        layout = dataclasses.replace(layout, state=args.state_dir.resolve())
    try:
        overlay = read_yaml(args.config) if args.carbonshift and args.config else {}
        box = KueueSandbox(
            layout, dispatcher=args.dispatcher or ALL_AT_ONCE, zones=zones,
            carbon_window=args.carbon_window, carbonshift=args.carbonshift,
            carbonshift_config=overlay if isinstance(overlay, dict) else {},
        )  # fmt: skip
        if args.command == "up":
            box.up()
            _print_next_steps(box)
        elif args.command == "down":
            box.down()
        else:
            alive = box.running()
            for name in box.known_components():
                print(
                    f"{name:28} " + (f"running, pid {alive[name]}" if name in alive else "stopped")
                )
            return 0 if alive else 3
    except (SandboxError, InvalidInput) as exc:
        print(f"kueue: {exc}", file=sys.stderr)
        return 1
    return 0


def _print_next_steps(box: KueueSandbox) -> None:
    print(f"export KUBECONFIG={box.kubeconfig} PATH={box.layout.bin}:$PATH")
    if not box.with_carbonshift:
        return
    jobs = box.layout.root / "examples" / "kueue" / "jobs.yaml"
    print()
    print(f"carbonshift serve is Kueue's dispatcher: {box.carbonshift_url} (log: "
          f"{box.layout.log(CARBONSHIFT)}, config: {box.layout.carbonshift_config})")  # fmt: skip
    print(f"Contexts: {', '.join(box.clusters)}. Namespace {NAMESPACE} is opted in (placed by "
          f"carbon), {OTHER_NAMESPACE} is not (every worker at once). Try:")  # fmt: skip
    print(f"  kubectl --context {MANAGER} apply -f {jobs}")
    print(
        f"  kubectl --context {MANAGER} get workloads -A -o custom-columns="
        "NAME:.metadata.name,NOMINATED:.status.nominatedClusterNames,ON:.status.clusterName"
    )
    print(
        f"  kubectl --context {MANAGER} get events.events.k8s.io -A "
        "--sort-by=.metadata.creationTimestamp "
        "-o custom-columns=TYPE:.type,REASON:.reason,OBJECT:.regarding.name,NOTE:.note"
    )
    print("Stop it with: make sandbox-down (python -m devtools.sandbox.kueue down)")


if __name__ == "__main__":
    sys.exit(main())
