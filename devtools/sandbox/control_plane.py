"""The :class:`Sandbox`: starts, configures and stops the whole local control plane."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
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
from devtools.sandbox.layout import LOOPBACK, Layout, SandboxError, free_port
from devtools.sandbox.objects import (
    DEMO_CLUSTERS,
    carbonshift_config,
    carbonshift_webhook_configuration,
    karmada_webhook_configurations,
    user_config,
)
from devtools.sandbox.processes import (
    Component,
    launch,
    pid_alive,
    read_pid,
    terminate,
    wait_ready,
)
from webhook.validation import InvalidInput


def print_progress(message: str) -> None:
    print(f"[sandbox] {message}", flush=True)


MEMBERS = tuple(DEMO_CLUSTERS)

STATE_ENTRIES = (
    "data", "pki", "logs", "pids", "members", "carbonshift-certs",
    "kubeconfig", "carbonshift.yaml", "state.json",
)  # fmt: skip
"""What ``up`` writes under the state folder (``down`` removes them)."""


class Sandbox:
    """A Karmada control plane (etcd, kube-apiserver, kube-controller-manager, the Karmada
    CRDs, karmada-controller-manager, karmada-webhook, karmada-scheduler with the
    carbonshift plugin, carbonshift) and three member clusters (etcd, kube-apiserver,
    kube-controller-manager, kube-scheduler, KWOK each) joined in Push mode, all on
    127.0.0.1."""

    def __init__(
        self,
        layout: Layout | None = None,
        *,
        carbonshift_command: Sequence[str] | None = None,
        cert_reload_seconds: float = 10.0,
        with_karmada_webhook: bool = True,
        log: Callable[[str], None] | None = None,
        user_config: Path | None = None,
    ) -> None:
        self.layout = layout or Layout.default()
        self.carbonshift_command = list(carbonshift_command or default_carbonshift())
        self.cert_reload_seconds = cert_reload_seconds
        self.with_karmada_webhook = with_karmada_webhook
        self.user_config = user_config
        """A carbonshift config laid over the sandbox's (``SANDBOX_CONFIG``); None: none."""
        self._log = log or print_progress
        self.ports: dict[str, int] = {}
        self.components: dict[str, Component] = {}

    # ----------------------------------------------------------------- public API

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

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

    def down(self, *, keep_state: bool = False) -> None:
        """Stop every component this state folder knows of, newest first; then remove
        what ``up`` wrote there unless ``keep_state``."""
        for name in reversed(self.known_components()):
            self.stop(name)
        if not keep_state:
            self._remove_state()

    def known_components(self) -> list[str]:
        """The built-in components, then any added to ``components``, then stray pid files."""
        names = component_names(MEMBERS)
        names += [name for name in self.components if name not in names]
        pid_dir = self.layout.state / "pids"
        if pid_dir.is_dir():
            strays = sorted(p.stem for p in pid_dir.glob("*.pid"))
            names += [name for name in strays if name not in names]
        return names

    def running(self) -> dict[str, int]:
        """Component name -> pid, for the components that run."""
        alive = {}
        for name in self.known_components():
            entry = read_pid(self.layout.pid_file(name))
            if entry and pid_alive(*entry):
                alive[name] = entry[0]
        return alive

    def stop(self, name: str, timeout: float = 15.0) -> None:
        """Stop one component (SIGTERM, then SIGKILL) and remove its pid file."""
        pid_file = self.layout.pid_file(name)
        entry = read_pid(pid_file)
        component = self.components.get(name)
        process = component.process if component else None
        if entry and pid_alive(*entry):
            self._log(f"stopping {name} (pid {entry[0]})")
            terminate(entry, process, timeout)
        if component and process:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
            component.process = None
        pid_file.unlink(missing_ok=True)

    def start(self, *names: str, timeout: float = 60.0) -> None:
        """(Re)start components whose arguments are known, all at once, and wait until
        each is ready."""
        for name in names:
            self._log(f"starting {name} (log: {self.layout.log(name)})")
            launch(
                self.components[name],
                log_path=self.layout.log(name),
                pid_file=self.layout.pid_file(name),
                cwd=self.layout.state,
            )
        for name in names:
            wait_ready(
                self.components[name],
                cafile=self.layout.pki / "ca.crt",
                log_path=self.layout.log(name),
                timeout=timeout,
            )
            self._log(f"{name} is ready")

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the sandbox."""
        result = subprocess.run(
            [str(self.kubectl_binary()), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
        )
        if check and result.returncode != 0:
            raise SandboxError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def kubectl_binary(self) -> Path:
        built = self.layout.bin / "kubectl"
        if built.is_file():
            return built
        found = shutil.which("kubectl")
        if not found:
            raise SandboxError("no kubectl: run hack/build-binaries.sh")
        return Path(found)

    def rotate_carbonshift_certificate(self) -> pki.KeyPair:
        """Issue a new serving certificate for carbonshift and publish it on disk."""
        pair = pki.serving_pair(pki.read_ca(self.layout), "carbonshift")
        pki.write_atomic_pair(self.layout.carbonshift_certs, pair)
        return pair

    def apply(self, documents: Sequence[Mapping[str, Any]], *extra: str) -> str:
        """``kubectl apply`` the documents; returns kubectl's stdout."""
        text = yaml.safe_dump_all(list(documents), sort_keys=False)
        return self.kubectl("apply", *extra, "-f", "-", stdin=text).stdout

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
        )

    def _remove_state(self) -> None:
        state = self.layout.state
        for entry in STATE_ENTRIES:
            path = state / entry
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            state.rmdir()  # unless something else lives there

    def _carbonshift_config(self) -> dict[str, Any]:
        """The sandbox's carbonshift config, with the user's on top when one was given."""
        base = carbonshift_config()
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
        files = self.layout.crd_files()
        self._log(f"installing {len(files)} CRDs from {self.layout.shared / 'crds'}")
        args = ["apply", "--server-side", "--force-conflicts"]
        for path in files:
            args += ["-f", str(path)]
        self.kubectl(*args)
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")

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
        state = {"ports": self.ports, "kubeconfig": str(self.kubeconfig)}
        self.layout.state_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
