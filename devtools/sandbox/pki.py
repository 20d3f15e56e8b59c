"""The sandbox's PKI and kubeconfig, issued with :mod:`webhook.serve.certs`.

One CA signs everything: kube-apiserver's serving certificate, the admin client
certificate (``O=system:masters``), karmada-webhook's and carbonshift's serving
certificates. Files live under ``<state>/pki`` and ``<state>/carbonshift-certs``.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from devtools.sandbox.layout import LOOPBACK, Layout
from webhook.serve import certs


@dataclasses.dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, PEM encoded."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, cert: str = "tls.crt", key: str = "tls.key") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        certs.write_private(directory / key, self.key_pem)
        (directory / cert).write_bytes(self.cert_pem)

    @classmethod
    def read(cls, directory: Path, cert: str, key: str) -> KeyPair:
        return cls((directory / cert).read_bytes(), (directory / key).read_bytes())


def new_ca(common_name: str) -> KeyPair:
    """A self-signed certificate authority."""
    return KeyPair(*certs.make_ca(common_name))


def serving_pair(
    ca: KeyPair, common_name: str, hosts: Sequence[str] = ("localhost", LOOPBACK)
) -> KeyPair:
    """A serving certificate, by default for a process listening on the loopback address."""
    return KeyPair(*certs.make_serving(ca.cert_pem, ca.key_pem, hosts, common_name))


def client_pair(ca: KeyPair, common_name: str, organizations: Sequence[str] = ()) -> KeyPair:
    """A client certificate: the user ``common_name`` in the groups ``organizations``."""
    return KeyPair(*certs.make_client(ca.cert_pem, ca.key_pem, common_name, organizations))


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


def read_ca(layout: Layout) -> KeyPair:
    return KeyPair.read(layout.pki, "ca.crt", "ca.key")


def write_pki(layout: Layout) -> None:
    """A new CA and every certificate and key the components need."""
    pki = layout.pki
    ca = new_ca("carbonshift-sandbox-ca")
    ca.write(pki, "ca.crt", "ca.key")
    apiserver_hosts = ("localhost", "kubernetes", "kubernetes.default", LOOPBACK)
    serving_pair(ca, "kube-apiserver", apiserver_hosts).write(pki, "apiserver.crt", "apiserver.key")
    client_pair(ca, "sandbox-admin", ["system:masters"]).write(pki, "admin.crt", "admin.key")
    sa_private, sa_public = certs.make_signing_key()
    certs.write_private(pki / "sa.key", sa_private)
    (pki / "sa.pub").write_bytes(sa_public)
    serving_pair(ca, "karmada-webhook").write(pki / "karmada-webhook")
    write_atomic_pair(layout.carbonshift_certs, serving_pair(ca, "carbonshift"))


KARMADA_CONTEXT = "karmada"
"""The context of the Karmada API server in the sandbox's kubeconfig (the current one)."""


def write_kubeconfig(path: Path, layout: Layout, servers: Mapping[str, str]) -> None:
    """An admin kubeconfig with one context per API server (``servers``: context name ->
    URL, the first one current), the certificates inline. Every API server trusts the
    sandbox CA's admin client certificate."""
    pki = layout.pki
    ca = b64((pki / "ca.crt").read_bytes())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {
            "server": server, "certificate-authority-data": ca,
        }} for name, server in servers.items()],
        "users": [{"name": "sandbox-admin", "user": {
            "client-certificate-data": b64((pki / "admin.crt").read_bytes()),
            "client-key-data": b64((pki / "admin.key").read_bytes()),
        }}],
        "contexts": [{"name": name, "context": {
            "cluster": name, "user": "sandbox-admin",
        }} for name in servers],
        "current-context": next(iter(servers)),
    }  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    certs.write_private(path, yaml.safe_dump(config, sort_keys=False).encode())
