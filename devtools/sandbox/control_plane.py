"""The :class:`Sandbox`: starts, configures and stops the whole local control plane."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from devtools.sandbox import pki
from devtools.sandbox.components import COMPONENTS, PORTS, default_carbonshift, define_components
from devtools.sandbox.layout import LOOPBACK, Layout, SandboxError, free_port
from devtools.sandbox.objects import (
    DEMO_CLUSTERS,
    carbonshift_config,
    carbonshift_webhook_configuration,
    demo_cluster,
    demo_cluster_status,
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


class Sandbox:
    """etcd + kube-apiserver + CRDs + carbonshift + karmada-webhook on 127.0.0.1."""

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

    def up(self) -> None:
        """Start everything; on any failure stop what was started and raise."""
        if self.running():
            raise SandboxError(f"a sandbox already runs from {self.layout.state}: run down first")
        self._prepare_state()
        try:
            self._start_control_plane()
            self._install_crds()
            self._create_demo_clusters()
            self._start_webhooks()
            self._save_state()
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Stop every component this state folder knows of, newest first."""
        for name in reversed(self.known_components()):
            self.stop(name)

    def known_components(self) -> list[str]:
        """The built-in components, then any added to ``components``, then stray pid files."""
        names = list(COMPONENTS)
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

    def start(self, name: str, timeout: float = 60.0) -> None:
        """(Re)start a component whose arguments are known, and wait until it is ready."""
        component = self.components[name]
        log_path = self.layout.log(name)
        self._log(f"starting {name} (log: {log_path})")
        pid_file = self.layout.pid_file(name)
        launch(component, log_path=log_path, pid_file=pid_file, cwd=self.layout.state)
        wait_ready(component, cafile=self.layout.pki / "ca.crt", log_path=log_path, timeout=timeout)
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

    # ----------------------------------------------------------------- steps

    def _prepare_state(self) -> None:
        state = self.layout.state
        for sub in ("etcd", "pki", "logs", "pids", "carbonshift-certs"):
            shutil.rmtree(state / sub, ignore_errors=True)
        state.mkdir(parents=True, exist_ok=True)
        self.ports = {name: free_port() for name in PORTS}
        pki.write_pki(self.layout)
        pki.write_kubeconfig(self.layout, f"https://{LOOPBACK}:{self.ports['kube-apiserver']}")
        self.layout.carbonshift_config.write_text(
            "# Written by `python -m devtools.sandbox up`: the demo member clusters.\n"
            + yaml.safe_dump(self._carbonshift_config(), sort_keys=False),
            encoding="utf-8",
        )
        self.components = define_components(
            self.layout,
            self.ports,
            carbonshift_command=self.carbonshift_command,
            cert_reload_seconds=self.cert_reload_seconds,
        )

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

    def _start_control_plane(self) -> None:
        self.start("etcd")
        self.start("kube-apiserver", timeout=120.0)

    def _install_crds(self) -> None:
        files = self.layout.crd_files()
        self._log(f"installing {len(files)} CRDs from {self.layout.shared / 'crds'}")
        args = ["apply", "--server-side", "--force-conflicts"]
        for path in files:
            args += ["-f", str(path)]
        self.kubectl(*args)
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")

    def _create_demo_clusters(self) -> None:
        self._log(f"creating demo member clusters: {', '.join(DEMO_CLUSTERS)}")
        self.apply([demo_cluster(name, spec) for name, spec in DEMO_CLUSTERS.items()])
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name in DEMO_CLUSTERS:
            self.kubectl(
                "patch", "cluster.cluster.karmada.io", name, "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": demo_cluster_status(now)}),
            )  # fmt: skip

    def _start_webhooks(self) -> None:
        ca_bundle = pki.b64((self.layout.pki / "ca.crt").read_bytes())
        if self.with_karmada_webhook:
            self.start("karmada-webhook")
            url = f"https://{LOOPBACK}:{self.ports['karmada-webhook']}"
            self.apply(karmada_webhook_configurations(url, ca_bundle))
        self.start("carbonshift")
        webhook = carbonshift_webhook_configuration(
            self.layout.root / "manifests" / "base" / "webhook.yaml",
            f"{self.carbonshift_url}/mutate",
            ca_bundle,
        )
        self.apply([webhook])

    def _save_state(self) -> None:
        state = {"ports": self.ports, "kubeconfig": str(self.kubeconfig)}
        self.layout.state_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
