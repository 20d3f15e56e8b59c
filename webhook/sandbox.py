"""A local control plane to try carbonshift with ``kubectl apply``.

``python -m webhook.sandbox up`` starts, on 127.0.0.1 only:

* etcd and kube-apiserver (built from Go modules by ``hack/build-binaries.sh``), with a
  freshly generated PKI and an admin client certificate (``O=system:masters``);
* the Karmada and Karpenter CRDs from the shared reference folder, and three demo Karmada
  member clusters in grids of clearly different carbon intensity;
* carbonshift itself and karmada-webhook, both registered as admission webhooks.

It writes ``.sandbox/kubeconfig`` and prints the two lines to paste. ``down`` stops every
process it started (pid files under the state folder); ``status`` tells what runs.

The same :class:`Sandbox` class is the control-plane fixture of the end-to-end tests.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK = "127.0.0.1"
"""The only address the sandbox binds or dials."""

CARBONSHIFT_WEBHOOK_CONFIG = "carbonshift"
KARMADA_WEBHOOK_CONFIG = "karmada-webhook"

DEMO_CLUSTERS: Mapping[str, Mapping[str, Any]] = {
    # name -> grid zone and cloud location; intensities ~23, ~99 and ~819 gCO2eq/kWh.
    "member-se": {"zone": "SE-SE3", "provider": "aws", "region": "eu-north-1",
                  "zones": ["eu-north-1a"]},
    "member-fr": {"zone": "FR", "provider": "aws", "region": "eu-west-3",
                  "zones": ["eu-west-3a"]},
    "member-pl": {"zone": "PL", "provider": "gcp", "region": "europe-central2",
                  "zones": ["europe-central2-a"]},
}  # fmt: skip

COMPONENTS = ("etcd", "kube-apiserver", "karmada-webhook", "carbonshift")
"""Start order; ``down`` stops them in reverse."""


class SandboxError(RuntimeError):
    """A component could not be built, started or configured."""


# --------------------------------------------------------------------------- locations


def repo_root() -> Path:
    """The carbonshift checkout (``CARBONSHIFT_ROOT`` overrides)."""
    env = os.environ.get("CARBONSHIFT_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parent.parent
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


def free_port() -> int:
    """A TCP port that is free on the loopback address right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


# --------------------------------------------------------------------------- PKI


@dataclasses.dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, PEM encoded."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, cert: str = "tls.crt", key: str = "tls.key") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        _write_private(directory / key, self.key_pem)
        (directory / cert).write_bytes(self.cert_pem)

    @classmethod
    def read(cls, directory: Path, cert: str, key: str) -> KeyPair:
        return cls((directory / cert).read_bytes(), (directory / key).read_bytes())


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def new_ca(common_name: str, days: int = 365) -> KeyPair:
    """A self-signed certificate authority."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue(
    ca: KeyPair,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    dns_names: Sequence[str] = (),
    ips: Sequence[str] = (),
    client: bool = False,
    days: int = 365,
) -> KeyPair:
    """A leaf certificate signed by ``ca``: a server certificate, or a client one."""
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise SandboxError("the sandbox CA key must be an EC key")
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    key = _new_key()
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def serving_pair(ca: KeyPair, common_name: str) -> KeyPair:
    """A serving certificate for a process listening on the loopback address."""
    return issue(ca, common_name, dns_names=["localhost"], ips=[LOOPBACK])


def write_atomic_pair(directory: Path, pair: KeyPair) -> None:
    """Publish ``tls.crt``/``tls.key`` the way the kubelet updates a Secret volume.

    The files live in a fresh timestamped folder; ``..data`` is a symlink to it, swapped
    with one ``rename``; ``tls.crt`` and ``tls.key`` are symlinks through ``..data``. A
    reader never sees a new certificate with an old key.
    """
    directory.mkdir(parents=True, exist_ok=True)
    stamp = f"..{time.time_ns()}"
    pair.write(directory / stamp)
    tmp_link = directory / "..data_tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp_link.unlink()
    old = os.readlink(directory / "..data") if (directory / "..data").is_symlink() else None
    tmp_link.symlink_to(stamp)
    tmp_link.rename(directory / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(Path("..data") / name)
    if old:
        shutil.rmtree(directory / old, ignore_errors=True)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# --------------------------------------------------------------------------- processes


@dataclasses.dataclass(slots=True)
class Component:
    """A process the sandbox runs."""

    name: str
    argv: list[str]
    ready_url: str
    ready_statuses: frozenset[int] = frozenset({200})
    """HTTP answers that mean "serving" (any answer over verified TLS will do for some)."""
    process: subprocess.Popen[bytes] | None = None


def _pid_alive(pid: int, executable: str) -> bool:
    """True when ``pid`` runs and is still the program we started (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # a zombie has finished
        return False
    return any(executable.encode() in part for part in cmdline[:2])


def _read_pid(pid_file: Path) -> tuple[int, str] | None:
    try:
        pid, executable = pid_file.read_text(encoding="utf-8").split("\n", 2)[:2]
        return int(pid), executable
    except (OSError, ValueError):
        return None


def _http_status(url: str, context: ssl.SSLContext) -> int | str:
    """The HTTP status of a GET, or why there was none."""
    try:
        # url is always an http(s) URL on 127.0.0.1 built by the sandbox.
        with urllib.request.urlopen(url, context=context, timeout=2) as response:  # noqa: S310
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError) as exc:
        return str(exc)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


# --------------------------------------------------------------------------- the sandbox


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
    ) -> None:
        self.layout = layout or Layout.default()
        self.carbonshift_command = list(carbonshift_command or _default_carbonshift())
        self.cert_reload_seconds = cert_reload_seconds
        self.with_karmada_webhook = with_karmada_webhook
        self._log = log or _print_progress
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
            entry = _read_pid(self.layout.pid_file(name))
            if entry and _pid_alive(*entry):
                alive[name] = entry[0]
        return alive

    def stop(self, name: str, timeout: float = 15.0) -> None:
        """Stop one component (SIGTERM, then SIGKILL) and remove its pid file."""
        pid_file = self.layout.pid_file(name)
        entry = _read_pid(pid_file)
        component = self.components.get(name)
        if entry and _pid_alive(*entry):
            pid = entry[0]
            self._log(f"stopping {name} (pid {pid})")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _pid_alive(*entry) and time.monotonic() < deadline:
                if component and component.process:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        component.process.wait(0.1)
                else:
                    time.sleep(0.1)
            if _pid_alive(*entry):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if component and component.process:
            with contextlib.suppress(subprocess.TimeoutExpired):
                component.process.wait(5)
            component.process = None
        pid_file.unlink(missing_ok=True)

    def start(self, name: str, timeout: float = 60.0) -> None:
        """(Re)start a component whose arguments are known, and wait until it is ready."""
        component = self.components[name]
        log_path = self.layout.log(name)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.layout.pid_file(name).parent.mkdir(parents=True, exist_ok=True)
        self._log(f"starting {name} (log: {log_path})")
        with log_path.open("ab") as log:
            component.process = subprocess.Popen(
                component.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.layout.state,
                start_new_session=True,  # survives the `up` command; `down` stops it
            )
        self.layout.pid_file(name).write_text(
            f"{component.process.pid}\n{component.argv[0]}\n", encoding="utf-8"
        )
        self._wait_ready(component, timeout)

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

    def rotate_carbonshift_certificate(self) -> KeyPair:
        """Issue a new serving certificate for carbonshift and publish it on disk."""
        pair = serving_pair(self._ca(), "carbonshift")
        write_atomic_pair(self.layout.carbonshift_certs, pair)
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
        self.ports = {name: free_port() for name in (
            "etcd", "etcd-peer", "kube-apiserver", "carbonshift", "karmada-webhook",
        )}  # fmt: skip
        self._write_pki()
        self._write_kubeconfig()
        self._write_carbonshift_config()
        self._define_components()

    def _ca(self) -> KeyPair:
        return KeyPair.read(self.layout.pki, "ca.crt", "ca.key")

    def _write_pki(self) -> None:
        pki = self.layout.pki
        ca = new_ca("carbonshift-sandbox-ca")
        ca.write(pki, "ca.crt", "ca.key")
        apiserver = issue(
            ca, "kube-apiserver", dns_names=["localhost", "kubernetes", "kubernetes.default"],
            ips=[LOOPBACK],
        )  # fmt: skip
        apiserver.write(pki, "apiserver.crt", "apiserver.key")
        admin = issue(ca, "sandbox-admin", organizations=["system:masters"], client=True)
        admin.write(pki, "admin.crt", "admin.key")
        sa_key = _new_key()
        _write_private(pki / "sa.key", _key_pem(sa_key))
        (pki / "sa.pub").write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        serving_pair(ca, "karmada-webhook").write(pki / "karmada-webhook")
        write_atomic_pair(self.layout.carbonshift_certs, serving_pair(ca, "carbonshift"))

    def _write_kubeconfig(self) -> None:
        pki = self.layout.pki
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sandbox", "cluster": {
                "server": f"https://{LOOPBACK}:{self.ports['kube-apiserver']}",
                "certificate-authority-data": b64((pki / "ca.crt").read_bytes()),
            }}],
            "users": [{"name": "sandbox-admin", "user": {
                "client-certificate-data": b64((pki / "admin.crt").read_bytes()),
                "client-key-data": b64((pki / "admin.key").read_bytes()),
            }}],
            "contexts": [{"name": "sandbox", "context": {
                "cluster": "sandbox", "user": "sandbox-admin",
            }}],
            "current-context": "sandbox",
        }  # fmt: skip
        _write_private(self.kubeconfig, yaml.safe_dump(config, sort_keys=False).encode())

    def _write_carbonshift_config(self) -> None:
        clusters = {
            name: {key: spec[key] for key in ("zone", "provider", "region", "zones")}
            for name, spec in DEMO_CLUSTERS.items()
        }
        topology = {az: spec["zone"] for spec in DEMO_CLUSTERS.values() for az in spec["zones"]}
        config = {
            "zone": "DE",
            "providers": ["static"],
            "clusters": clusters,
            "nodepools": {"topology_zones": topology},
        }
        self.layout.carbonshift_config.write_text(
            "# Written by `python -m webhook.sandbox up`: the demo member clusters.\n"
            + yaml.safe_dump(config, sort_keys=False),
            encoding="utf-8",
        )

    def _define_components(self) -> None:
        lay, ports, pki = self.layout, self.ports, self.layout.pki
        api = f"https://{LOOPBACK}:{ports['kube-apiserver']}"
        etcd_url = f"http://{LOOPBACK}:{ports['etcd']}"
        self.components = {
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
                *self.carbonshift_command, "serve",
                f"--config={lay.carbonshift_config}",
                f"--host={LOOPBACK}", f"--port={ports['carbonshift']}",
                f"--cert-dir={lay.carbonshift_certs}",
                f"--cert-reload-seconds={self.cert_reload_seconds:g}",
            ], f"https://{LOOPBACK}:{ports['carbonshift']}/readyz"),
        }  # fmt: skip

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
        ca_bundle = b64((self.layout.pki / "ca.crt").read_bytes())
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

    def _wait_ready(self, component: Component, timeout: float) -> None:
        context = ssl.create_default_context(cafile=str(self.layout.pki / "ca.crt"))
        deadline = time.monotonic() + timeout
        last = "not started"
        while time.monotonic() < deadline:
            process = component.process
            if process is not None and process.poll() is not None:
                raise SandboxError(
                    f"{component.name} exited with status {process.returncode}:\n"
                    + _tail(self.layout.log(component.name))
                )
            status = _http_status(component.ready_url, context)
            if status in component.ready_statuses:
                self._log(f"{component.name} is ready")
                return
            last = f"HTTP {status}" if isinstance(status, int) else status
            time.sleep(0.25)
        raise SandboxError(
            f"{component.name} not ready after {timeout:g}s ({last}):\n"
            + _tail(self.layout.log(component.name))
        )

    def _save_state(self) -> None:
        state = {"ports": self.ports, "kubeconfig": str(self.kubeconfig)}
        self.layout.state_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- objects


def _print_progress(message: str) -> None:
    print(f"[sandbox] {message}", flush=True)


def _default_carbonshift() -> list[str]:
    beside = Path(sys.executable).parent / "carbonshift"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("carbonshift")
    return [found] if found else [sys.executable, "-m", "webhook.cli"]


def demo_cluster(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A Push-mode Karmada Cluster object (nothing ever dials its endpoint)."""
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": {"carbonshift.io/grid-zone": spec["zone"]}},
        "spec": {
            "syncMode": "Push",
            "apiEndpoint": "https://127.0.0.1:1",
            "provider": spec["provider"],
            "region": spec["region"],
            "zones": list(spec["zones"]),
        },
    }


def demo_cluster_status(now: str) -> dict[str, Any]:
    """A healthy member: Ready, serving apps/v1 Deployments, with room for replicas."""
    return {
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "ClusterReady",
            "message": "sandbox member", "lastTransitionTime": now,
        }],
        "apiEnablements": [{
            "groupVersion": "apps/v1",
            "resources": [{"name": "deployments", "kind": "Deployment"}],
        }],
        "resourceSummary": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"}},
    }  # fmt: skip


def carbonshift_webhook_configuration(manifest: Path, url: str, ca_bundle: str) -> dict[str, Any]:
    """The production MutatingWebhookConfiguration, pointed at a URL instead of a Service."""
    try:
        document = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SandboxError(f"cannot read the webhook manifest {manifest}: {exc}") from exc
    document["metadata"] = {"name": CARBONSHIFT_WEBHOOK_CONFIG}
    for hook in document["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return dict(document)


def karmada_webhook_configurations(url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """karmada-webhook's own registrations for (Cluster)PropagationPolicy, as upstream."""

    def hook(kind: str, plural: str, scope: str, verb: str) -> dict[str, Any]:
        return {
            "name": f"{kind}.{verb}.karmada.io",
            "rules": [{
                "operations": ["CREATE", "UPDATE"], "apiGroups": ["policy.karmada.io"],
                "apiVersions": ["*"], "resources": [plural], "scope": scope,
            }],
            "clientConfig": {"url": f"{url}/{verb}-{kind}", "caBundle": ca_bundle},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 3,
        }  # fmt: skip

    policies = [
        ("propagationpolicy", "propagationpolicies", "Namespaced"),
        ("clusterpropagationpolicy", "clusterpropagationpolicies", "Cluster"),
    ]
    meta = {"name": KARMADA_WEBHOOK_CONFIG, "labels": {"app": "karmada-webhook"}}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [hook(*p, "mutate") for p in policies],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [hook(*p, "validate") for p in policies],
        },
    ]


# --------------------------------------------------------------------------- CLI


def _print_next_steps(sandbox: Sandbox) -> None:
    bin_dir = sandbox.kubectl_binary().parent
    print()
    print("Sandbox is up. Try it:")
    print(f"  export KUBECONFIG={sandbox.kubeconfig} PATH={bin_dir}:$PATH")
    print(f"  kubectl apply -f {sandbox.layout.root / 'examples'}/")
    print()
    print(f"carbonshift: {sandbox.carbonshift_url} (logs: {sandbox.layout.state / 'logs'})")
    print("Stop it with: make sandbox-down (python -m webhook.sandbox down)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m webhook.sandbox",
        description="Local control plane (etcd, kube-apiserver, Karmada/Karpenter CRDs, "
        "carbonshift and karmada-webhook) on 127.0.0.1.",
    )
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument(
        "--state-dir", type=Path, default=None, help="state folder (default: .sandbox)"
    )
    parser.add_argument(
        "--no-karmada-webhook", action="store_true", help="do not run karmada-webhook"
    )
    args = parser.parse_args(argv)
    sandbox = Sandbox(
        Layout.default(args.state_dir), with_karmada_webhook=not args.no_karmada_webhook
    )
    try:
        if args.command == "up":
            sandbox.up()
            _print_next_steps(sandbox)
        elif args.command == "down":
            sandbox.down()
            print("Sandbox stopped.")
        else:
            alive = sandbox.running()
            for name in sandbox.known_components():
                pid = alive.get(name)
                print(f"{name:16} {'running, pid ' + str(pid) if pid else 'stopped'}")
            if alive and sandbox.layout.state_file.is_file():
                state = json.loads(sandbox.layout.state_file.read_text(encoding="utf-8"))
                print(f"kubeconfig       {state['kubeconfig']}")
                print(f"carbonshift      https://{LOOPBACK}:{state['ports']['carbonshift']}")
            return 0 if alive else 3
    except SandboxError as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
