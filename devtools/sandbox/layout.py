"""Where the sandbox finds its inputs (binaries, CRDs, manifests) and keeps its state."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"
"""The only address the sandbox binds or dials."""


class SandboxError(RuntimeError):
    """A component could not be built, started or configured."""


def repo_root() -> Path:
    """The carbonshift checkout (``CARBONSHIFT_ROOT`` overrides)."""
    env = os.environ.get("CARBONSHIFT_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parents[2]
    if (here / "hack" / "build-binaries.sh").is_file():
        return here
    return Path.cwd().resolve()


@dataclasses.dataclass(frozen=True, slots=True)
class Layout:
    """Where the sandbox finds its inputs and keeps its state."""

    root: Path
    state: Path
    bin: Path
    shared: Path

    @classmethod
    def default(cls, state: Path | None = None) -> Layout:
        root = repo_root()
        cache = os.environ.get("CARBONSHIFT_CACHE")
        shared = os.environ.get("CARBONSHIFT_SHARED")
        return cls(
            root=root,
            state=(state or root / ".sandbox").resolve(),
            bin=Path(cache).resolve() if cache else root / ".cache" / "bin",
            shared=Path(shared).resolve() if shared else root.parent / "shared",
        )

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def carbonshift_certs(self) -> Path:
        return self.state / "carbonshift-certs"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    def member_kubeconfig(self, member: str) -> Path:
        """An admin kubeconfig whose current context is the member (its
        kube-controller-manager's); the shared ``kubeconfig`` has a context per member."""
        return self.state / "members" / f"{member}.kubeconfig"

    def data(self, name: str) -> Path:
        """The data folder of an etcd."""
        return self.state / "data" / name

    @property
    def carbonshift_config(self) -> Path:
        return self.state / "carbonshift.yaml"

    @property
    def state_file(self) -> Path:
        return self.state / "state.json"

    def log(self, name: str) -> Path:
        return self.state / "logs" / f"{name}.log"

    def pid_file(self, name: str) -> Path:
        return self.state / "pids" / f"{name}.pid"

    def binary(self, name: str) -> Path:
        path = self.bin / name
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SandboxError(f"{path} is missing: run hack/build-binaries.sh (make binaries)")
        return path

    def crd_files(self) -> list[Path]:
        files = sorted((self.shared / "crds" / "karmada").glob("*.yaml"))
        files += sorted((self.shared / "crds" / "karpenter").glob("karpenter.sh_*.yaml"))
        if not files:
            raise SandboxError(
                f"no CRDs under {self.shared / 'crds'}: set CARBONSHIFT_SHARED to the shared folder"
            )
        return files


LISTEN_PORTS = (10000, 32768)
"""Where listening ports are chosen: below the kernel's ephemeral range (by default
32768-60999), which outgoing connections take their source ports from. A port chosen
there could be taken by one of the many connections the fleet opens before the component
it was reserved for starts listening."""


def free_port() -> int:
    """A TCP port that is free on the loopback address right now, outside the ephemeral
    range (:data:`LISTEN_PORTS`)."""
    low, high = LISTEN_PORTS
    with contextlib.suppress(OSError, ValueError):
        ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        high = min(high, int(ephemeral[0]))
    for _ in range(200):
        port = random.randrange(low, high)  # noqa: S311 - spreading ports, not a secret
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    raise SandboxError(f"no free port on {LOOPBACK} between {low} and {high}")
