"""The :class:`Sandbox`: starts, configures and stops the whole local control plane."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from devtools.sandbox import members, pki
from devtools.sandbox.components import (
    HOST_PARTS,
    MEMBER_PARTS,
    component_names,
    default_carbonshift,
    define_components,
    member_component,
    port_names,
)
from devtools.sandbox.layout import LOOPBACK, Layout, SandboxError, free_port, karmada_release
from devtools.sandbox.objects import (
    DEMO_CLUSTERS,
    carbonshift_config,
    carbonshift_webhook_configuration,
    karmada_webhook_configurations,
    user_config,
)
from devtools.sandbox.plane import Plane
from webhook.model.validation import InvalidInput


def print_progress(message: str) -> None:
    print(f"[sandbox] {message}", flush=True)


MEMBERS = tuple(DEMO_CLUSTERS)


class Sandbox(Plane):
    """A Karmada control plane (etcd, kube-apiserver, kube-controller-manager, the Karmada
    CRDs, karmada-controller-manager, karmada-webhook, karmada-scheduler with the
    carbonshift plugin, carbonshift) and three member clusters (etcd, kube-apiserver,
    kube-controller-manager, kube-scheduler, KWOK each) joined in Push mode, all on
    127.0.0.1.

    ``karmada`` picks the Karmada release (``"v1.16.0"``; None: the one ``hack/tools``
    pins): its CRDs, karmada-controller-manager, karmada-webhook and karmada-scheduler (the
    stock one of another release, without carbonshift's plugin); a release no module pins
    is a :class:`SandboxError`."""

    STATE_ENTRIES = (
        "data", "pki", "logs", "pids", "members", "carbonshift-certs",
        "kubeconfig", "carbonshift.yaml", "state.json",
    )  # fmt: skip

    def __init__(
        self,
        layout: Layout | None = None,
        *,
        carbonshift_command: Sequence[str] | None = None,
        cert_reload_seconds: float = 10.0,
        with_karmada_webhook: bool = True,
        log: Callable[[str], None] | None = None,
        user_config: Path | None = None,
        quiet: bool = False,
        karmada: str | None = None,
    ) -> None:
        self.carbonshift_command = list(carbonshift_command or default_carbonshift())
        self.cert_reload_seconds = cert_reload_seconds
        self.with_karmada_webhook = with_karmada_webhook
        self.user_config = user_config
        """A carbonshift config laid over the sandbox's (``SANDBOX_CONFIG``); None: none."""
        self.quiet = quiet
        """No cluster labels and no re-evaluation (:func:`carbonshift_config`)."""
        super().__init__(layout or Layout.default(), log or print_progress)
        self.karmada = karmada_release(karmada, self.layout.root)
        """The Karmada release the control plane runs."""

    # ----------------------------------------------------------------- public API

    @property
    def carbonshift_url(self) -> str:
        return f"https://{LOOPBACK}:{self.ports['carbonshift']}"

    @property
    def members(self) -> tuple[str, ...]:
        """The member clusters: each is a context of ``kubeconfig``."""
        return MEMBERS

    def member_url(self, member: str) -> str:
        return f"https://{LOOPBACK}:{self.ports[f'{member}-apiserver']}"

    def up(self) -> None:
        """Start everything; on any failure stop what was started and raise."""
        if self.running():
            raise SandboxError(f"a sandbox already runs from {self.layout.state}: run down first")
        self._prepare_state()
        try:
            self._start_clusters()
            self._install_crds()
            self._start_karmada_webhook()
            self._join_members()
            self._start_carbonshift()
            self.start("karmada-scheduler")
            self._save_state()
        except BaseException:
            self.down(keep_state=True)  # its logs say what went wrong
            raise

    def component_order(self) -> list[str]:
        return component_names(MEMBERS)

    def rotate_carbonshift_certificate(self) -> pki.KeyPair:
        """Issue a new serving certificate for carbonshift and publish it on disk."""
        pair = pki.serving_pair(pki.read_ca(self.layout), "carbonshift")
        pki.write_atomic_pair(self.layout.carbonshift_certs, pair)
        return pair

    def _kubectl_out(self, *args: str, stdin: str | None = None) -> str:
        return self.kubectl(*args, stdin=stdin).stdout

    # ----------------------------------------------------------------- steps

    def _prepare_state(self) -> None:
        self._remove_state()
        self.layout.state.mkdir(parents=True, exist_ok=True)
        self.ports = {name: free_port() for name in port_names(MEMBERS)}
        pki.write_pki(self.layout)
        host = f"https://{LOOPBACK}:{self.ports['kube-apiserver']}"
        servers = {pki.KARMADA_CONTEXT: host} | {m: self.member_url(m) for m in MEMBERS}
        pki.write_kubeconfig(self.kubeconfig, self.layout, servers)
        for member in MEMBERS:
            path = self.layout.member_kubeconfig(member)
            pki.write_kubeconfig(path, self.layout, {member: servers[member]})
        self.layout.carbonshift_config.write_text(
            "# Written by `python -m devtools.sandbox up`: the demo member clusters.\n"
            + yaml.safe_dump(self._carbonshift_config(), sort_keys=False),
            encoding="utf-8",
        )
        self.components = define_components(
            self.layout,
            self.ports,
            MEMBERS,
            carbonshift_command=self.carbonshift_command,
            cert_reload_seconds=self.cert_reload_seconds,
            karmada=self.karmada,
        )

    def _carbonshift_config(self) -> dict[str, Any]:
        """The sandbox's carbonshift config, with the user's on top when one was given."""
        base = carbonshift_config(quiet=self.quiet)
        if self.user_config is None:
            return base
        try:
            user = yaml.safe_load(self.user_config.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise SandboxError(f"cannot read {self.user_config}: {exc}") from None
        if not isinstance(user, dict):
            raise SandboxError(f"{self.user_config}: a config is a YAML mapping")
        try:
            return user_config(base, user)
        except InvalidInput as exc:
            raise SandboxError(f"{self.user_config}: {exc}") from None

    def _start_clusters(self) -> None:
        """The Karmada API server and the members' API servers, each part started at once
        on every cluster."""
        for part in MEMBER_PARTS:
            host = [HOST_PARTS[part]] if part in HOST_PARTS else []
            self.start(*host, *(member_component(m, part) for m in MEMBERS), timeout=120.0)

    def _install_crds(self) -> None:
        files = self.layout.crd_files(self.karmada.crds)
        self._log(
            f"installing {len(files)} CRDs (Karmada {self.karmada.version}) from {self.layout.crds}"
        )
        args = ["apply", "--server-side", "--force-conflicts"]
        for path in files:
            args += ["-f", str(path)]
        self.kubectl(*args)
        self.wait_established()

    def _join_members(self) -> None:
        self._log(f"joining the member clusters in Push mode: {', '.join(MEMBERS)}")
        for member in MEMBERS:
            members.add_node(self._kubectl_out, member)
            members.join(
                self._kubectl_out,
                member,
                DEMO_CLUSTERS[member],
                self.member_url(member),
                self._ca_bundle(),
            )
        self.start("karmada-controller-manager")
        members.wait_ready(self._kubectl_out, MEMBERS, timeout=45.0)
        self._log("karmada-controller-manager reports every member Ready")

    def _start_karmada_webhook(self) -> None:
        """Before any Karmada controller: it labels bindings and Works as they are created."""
        if self.with_karmada_webhook:
            self.start("karmada-webhook")
            url = f"https://{LOOPBACK}:{self.ports['karmada-webhook']}"
            self.apply(karmada_webhook_configurations(url, self._ca_bundle()))

    def _ca_bundle(self) -> str:
        return pki.b64((self.layout.pki / "ca.crt").read_bytes())

    def _start_carbonshift(self) -> None:
        self.start("carbonshift")
        webhook = carbonshift_webhook_configuration(
            self.layout.root / "manifests" / "base" / "webhook.yaml",
            f"{self.carbonshift_url}/mutate",
            self._ca_bundle(),
        )
        self.apply([webhook])

    def _save_state(self) -> None:
        state = {
            "ports": self.ports,
            "kubeconfig": str(self.kubeconfig),
            "karmada": self.karmada.version,
        }
        self.layout.state_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
