"""Certificates for the webhook: a small CA and a serving certificate signed by it.

EC P-256 keys; the CA has ``BasicConstraints(ca=True, path_length=0)`` and
``KeyUsage(key_cert_sign, crl_sign)``; the serving certificate has the Service DNS
names (and any IPs) as SANs and ``ExtendedKeyUsage(serverAuth)``. kube-apiserver
ignores the CN and checks only SANs. :func:`make_client` issues client certificates
from the same CA (the development control plane uses one for its admin user).
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.model.errors import UsageError

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
BUNDLE_FILES = (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)
"""What :meth:`Bundle.write` writes."""
CA_DAYS = 3650
SERVING_DAYS = 365


@dataclasses.dataclass(frozen=True, slots=True)
class Bundle:
    """PEM bytes of a CA and a serving certificate with its key."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    @property
    def ca_bundle(self) -> str:
        """The base64 PEM CA, as ``caBundle`` in a webhook configuration wants it."""
        return base64.b64encode(self.ca_cert).decode()

    def write(self, directory: Path) -> None:
        """Write ``ca.crt ca.key tls.crt tls.key`` (keys readable by the owner only).

        The serving pair is written key first, each file atomically, so a reader that
        polls the directory never sees a certificate with the wrong key for long.
        """
        directory.mkdir(parents=True, exist_ok=True)
        for name, data, private in (
            (CA_CERT, self.ca_cert, False),
            (CA_KEY, self.ca_key, True),
            (TLS_KEY, self.key, True),
            (TLS_CERT, self.cert, False),
        ):
            _atomic_write(directory / name, data, 0o600 if private else 0o644)


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    tmp.replace(path)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "carbonshift"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _sans(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            names.append(x509.DNSName(host))
        else:
            if not ip.is_unspecified:
                names.append(x509.IPAddress(ip))
    return names


def make_ca(common_name: str = "carbonshift-ca") -> tuple[bytes, bytes]:
    """A new CA certificate and key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def make_serving(
    ca_cert: bytes, ca_key: bytes, hosts: Iterable[str], common_name: str | None = None
) -> tuple[bytes, bytes]:
    """A serving certificate and key for ``hosts`` (DNS names or IPs), signed by the CA.

    The subject CN is ``common_name``, or else the first DNS name among ``hosts``.
    """
    sans = _sans(hosts)
    if not sans:
        raise ValueError("a serving certificate needs at least one DNS name or IP")
    first = next((n.value for n in sans if isinstance(n, x509.DNSName)), "carbonshift")
    subject = _name(common_name or str(first))
    return _sign(ca_cert, ca_key, subject, ExtendedKeyUsageOID.SERVER_AUTH, sans)


def make_client(
    ca_cert: bytes, ca_key: bytes, common_name: str, organizations: Iterable[str] = ()
) -> tuple[bytes, bytes]:
    """A client certificate and key signed by the CA (``ExtendedKeyUsage(clientAuth)``).

    kube-apiserver reads the CN as the user name and each O as a group, so the subject
    holds exactly ``organizations`` and ``common_name``.
    """
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return _sign(ca_cert, ca_key, x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH, [])


def make_signing_key() -> tuple[bytes, bytes]:
    """A bare EC key pair with no certificate: the private key (PKCS#8 PEM) and the public
    key (SubjectPublicKeyInfo PEM), e.g. for signing service-account tokens."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _pem_key(key), public


def _sign(
    ca_cert: bytes,
    ca_key: bytes,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    sans: list[x509.GeneralName],
) -> tuple[bytes, bytes]:
    """A leaf certificate for a new key, signed by the CA; SANs only when given."""
    issuer = x509.load_pem_x509_certificate(ca_cert)
    signer = serialization.load_pem_private_key(ca_key, password=None)
    if not isinstance(signer, ec.EllipticCurvePrivateKey):
        raise TypeError("the CA key must be an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=SERVING_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(signer, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` atomically, readable by the owner only (keys, kubeconfigs)."""
    _atomic_write(path, data, 0o600)


def issue(hosts: Iterable[str]) -> Bundle:
    """A fresh CA and a serving certificate for ``hosts``."""
    ca_cert, ca_key = make_ca()
    cert, key = make_serving(ca_cert, ca_key, hosts)
    return Bundle(ca_cert=ca_cert, ca_key=ca_key, cert=cert, key=key)


DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
"""An RFC 1123 label as Kubernetes names Services and namespaces (lower case)."""
_DNS_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)", re.IGNORECASE)
_IP_LIKE = re.compile(r"[0-9.]+|.*:.*")
"""What a person meant as an IP address: digits and dots only (``999.1.1.1``), or a colon."""


def dns_problem(name: str) -> str | None:
    """Why ``name`` is not a DNS name a certificate can carry (RFC 1123 labels, at most
    253 characters, a leading ``*.`` wildcard allowed), or None when it is one."""
    bare = name.removeprefix("*.").removesuffix(".")
    if not bare or len(bare) > 253:
        return "expected 1 to 253 characters"
    if _IP_LIKE.fullmatch(bare):
        return "looks like an IP address, not a DNS name"
    bad = next((label for label in bare.split(".") if not _DNS_LABEL.fullmatch(label)), None)
    if bad is not None:
        return (
            f"label {bad!r} is not 1 to 63 letters, digits or hyphens (not at either end)"
            if bad
            else "empty label"
        )
    return None


def check_hosts(ips: Iterable[str], dns: Iterable[str]) -> None:
    """Refuse a malformed ``--ip`` or ``--dns`` (a :class:`UsageError` naming the flag),
    instead of writing ``999.1.1.1`` into the certificate as a DNS name."""
    for value in ips:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise UsageError(f"--ip {value}: not an IPv4 or IPv6 address") from None
    for value in dns:
        problem = dns_problem(value)
        if problem is not None:
            raise UsageError(f"--dns {value}: not a DNS name: {problem}")


def writable_dir(directory: Path, flag: str) -> None:
    """Create ``directory`` (and its parents) if absent; a path that is a file, lies under a
    file or cannot be created is a :class:`UsageError` naming ``flag``."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{flag} {directory}: is a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise UsageError(f"{flag} {directory}: cannot create the directory: {reason}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {directory}: cannot write there: permission denied")


def serving_dir(directory: Path, hosts: Iterable[str]) -> bool:
    """Make ``directory`` ready for ``carbonshift serve``: a development CA and serving
    certificate for ``hosts`` are written when it is absent or empty (returns True); when
    it holds both ``tls.crt`` and ``tls.key`` it is used as is (returns False). Anything
    else is the user's and is left untouched: a file instead of a directory, or a directory
    with files but without ``tls.crt`` or ``tls.key`` (a half-mounted Secret), is a
    :class:`UsageError` naming what is missing."""
    flag = "--cert-dir"
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{flag} {directory}: is a file, not a directory")
    try:
        present = sorted(p.name for p in directory.iterdir()) if directory.exists() else []
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise UsageError(f"{flag} {directory}: cannot read the directory: {reason}") from None
    if not present:
        writable_dir(directory, flag)
        issue(hosts).write(directory)
        return True
    missing = [name for name in (TLS_CERT, TLS_KEY) if name not in present]
    if missing:
        raise UsageError(
            f"{flag} {directory}: {' and '.join(missing)} missing: put the serving "
            f"certificate and its key there as {TLS_CERT} and {TLS_KEY}, or pass an empty "
            "directory for a development certificate (files already there are never replaced)"
        )
    return False


def service_hosts(service: str, namespace: str, extra: Iterable[str] = ()) -> list[str]:
    """The names kube-apiserver may use for a webhook Service, plus ``extra``."""
    base = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
    return [*base, f"{service}.{namespace}.svc.cluster.local", *extra]
