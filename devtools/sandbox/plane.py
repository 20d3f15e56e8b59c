"""What every cluster the sandbox runs shares: its processes, recorded in a state folder
and started, checked and stopped by name, kubectl against its API server, and waiting
until its CRDs are served (:func:`wait_established`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from devtools.sandbox import pki
from devtools.sandbox.layout import LOOPBACK, Layout, SandboxError, free_port
from devtools.sandbox.processes import (
    Component,
    launch,
    pid_alive,
    read_pid,
    terminate,
    wait_ready,
)

ESTABLISHED = (
    '{range .items[*]}{.metadata.name}{" "}'
    '{range .status.conditions[*]}{.type}={.status}{","}{end}{"\\n"}{end}'
)
"""kubectl's jsonpath for every CRD's name and conditions, one CRD a line
(``foo.example.com NamesAccepted=True,Established=True,``). A CRD just created has no
conditions yet (``status.conditions`` is null): the range prints nothing for it, where a
filter, and ``kubectl wait --for=condition=Established``, err instead of waiting
(``.status.conditions accessor error: <nil> is of the type <nil>``)."""


class Kubectl(Protocol):
    """Runs kubectl against one cluster and returns its stdout."""

    def __call__(self, *args: str) -> str: ...


def conditions(listing: str) -> dict[str, list[str]]:
    """CRD name -> its conditions (``Established=True``...), from kubectl's output of
    :data:`ESTABLISHED`; an empty list for a CRD without conditions yet."""
    found: dict[str, list[str]] = {}
    for line in listing.splitlines():
        name, _, listed = line.strip().partition(" ")
        if name:
            found[name] = [c for c in listed.split(",") if c]
    return found


def wait_established(
    kubectl: Kubectl,
    names: Sequence[str] = (),
    *,
    timeout: float = 60.0,
    poll: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> None:
    """Until the CRDs ``names`` (every CRD when none) are Established: ``kubectl get crd``
    every ``poll`` seconds, a CRD not listed yet or without conditions yet counting as not
    Established. Past ``timeout`` a :class:`SandboxError` names the CRDs still waited for
    and the conditions kubectl showed for them."""
    deadline = clock() + timeout
    while True:
        seen = conditions(kubectl("get", "crd", "-o", f"jsonpath={ESTABLISHED}"))
        wanted = list(names) or sorted(seen)
        pending = [name for name in wanted if "Established=True" not in seen.get(name, [])]
        if wanted and not pending:
            return
        if clock() >= deadline:
            state = [
                f"{name} ({','.join(seen[name]) or 'no conditions'})"
                if name in seen
                else f"{name} (not listed)"
                for name in pending
            ]
            raise SandboxError(
                f"CRDs not Established after {timeout:g} s: {', '.join(state) or 'none listed'}"
            )
        sleep(poll)


class Plane:
    """The processes of one cluster under ``layout.state`` (pid files, logs, state)."""

    STATE_ENTRIES: tuple[str, ...] = ()
    """What ``up`` writes under the state folder (``down`` removes them)."""

    def __init__(self, layout: Layout, log: Callable[[str], None]) -> None:
        self.layout = layout
        self._log = log
        self.ports: dict[str, int] = {}
        self.components: dict[str, Component] = {}

    def component_order(self) -> list[str]:
        """The components in start order (``down`` stops them in reverse)."""
        raise NotImplementedError

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    def known_components(self) -> list[str]:
        """The components in start order, then any added to ``components``, then stray
        pid files."""
        names = self.component_order()
        names += [name for name in self.components if name not in names]
        pid_dir = self.layout.state / "pids"
        if pid_dir.is_dir():
            names += sorted(p.stem for p in pid_dir.glob("*.pid") if p.stem not in names)
        return names

    def running(self) -> dict[str, int]:
        """Component name -> pid, for the components that run."""
        alive = {}
        for name in self.known_components():
            entry = read_pid(self.layout.pid_file(name))
            if entry and pid_alive(*entry):
                alive[name] = entry[0]
        return alive

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each running component (``VmRSS``)."""
        sizes = {}
        for name, pid in self.running().items():
            with contextlib.suppress(OSError, ValueError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        sizes[name] = int(line.split()[1]) * 1024
        return sizes

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

    def down(self, *, keep_state: bool = False) -> None:
        """Stop every component this state folder knows of, newest first; then remove
        what ``up`` wrote there unless ``keep_state``."""
        for name in reversed(self.known_components()):
            self.stop(name)
        if not keep_state:
            self._remove_state()

    def _remove_state(self) -> None:
        state = self.layout.state
        for entry in self.STATE_ENTRIES:
            path = state / entry
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            state.rmdir()  # unless something else lives there

    def bring_up(self, what: str, prepare: Callable[[], None], steps: Callable[[], None]) -> None:
        """Start a fresh cluster: ``prepare`` its state folder, start etcd and kube-apiserver,
        run ``steps`` (CRDs, the other components) and record the ports and kubeconfig in
        ``state.json``. On any failure stop what was started (keeping its logs, which say
        what went wrong) and raise. ``what`` names the cluster in the error when one runs."""
        if self.running():
            raise SandboxError(f"{what} already runs from {self.layout.state}")
        prepare()
        try:
            self.start("etcd")
            self.start("kube-apiserver", timeout=120.0)
            steps()
            state = {"ports": self.ports, "kubeconfig": str(self.kubeconfig)}
            self.layout.state_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        except BaseException:
            self.down(keep_state=True)
            raise

    def prepare_state(
        self, ports: Sequence[str], context: str, config: Mapping[str, Any], written_by: str
    ) -> None:
        """A fresh state folder (what a crashed run left is removed), a free port for each
        of ``ports``, a new PKI, the admin kubeconfig (context ``context``, the
        ``kube-apiserver`` port) and carbonshift's ``config`` (headed ``written_by``)."""
        state = self.layout.state
        for sub in ("data", "pki", "logs", "pids", "carbonshift-certs"):  # a crashed run's
            shutil.rmtree(state / sub, ignore_errors=True)
        state.mkdir(parents=True, exist_ok=True)
        self.ports = {name: free_port() for name in ports}
        pki.write_pki(self.layout)
        servers = {context: f"https://{LOOPBACK}:{self.ports['kube-apiserver']}"}
        pki.write_kubeconfig(self.kubeconfig, self.layout, servers)
        self.layout.carbonshift_config.write_text(
            f"# Written by {written_by}.\n" + yaml.safe_dump(dict(config), sort_keys=False),
            encoding="utf-8",
        )

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster."""
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

    def wait_established(
        self, *names: str, context: str | None = None, timeout: float = 60.0
    ) -> None:
        """Until the CRDs ``names`` (every CRD when none) are Established on this cluster, or
        on the kubeconfig's ``context`` (:func:`wait_established`)."""
        flags = [f"--context={context}"] if context else []

        def kubectl(*args: str) -> str:
            return self.kubectl(*flags, *args).stdout

        wait_established(kubectl, names, timeout=timeout)

    def kubectl_binary(self) -> Path:
        built = self.layout.bin / "kubectl"
        if built.is_file():
            return built
        found = shutil.which("kubectl")
        if not found:
            raise SandboxError("no kubectl: run hack/build-binaries.sh")
        return Path(found)

    def apply(self, documents: Sequence[Mapping[str, Any]], *extra: str) -> str:
        """``kubectl apply`` the documents; returns kubectl's stdout."""
        text = yaml.safe_dump_all(list(documents), sort_keys=False)
        return self.kubectl("apply", *extra, "-f", "-", stdin=text).stdout
