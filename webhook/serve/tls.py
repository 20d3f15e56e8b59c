"""Serving TLS with certificates that can be replaced on disk without a restart.

The listening socket uses a fixed *front* context whose ``sni_callback`` hands every
new handshake the *current* context (this also runs when the client sends no SNI,
e.g. when it dials an IP). A poller re-reads ``tls.crt``/``tls.key`` when their
contents change, loads them into a fresh context first (a half-written pair is
rejected without touching the live one) and then swaps the reference. Established
connections keep the certificate they started with; nothing is dropped.

Protocols and ciphers: TLS 1.2 and 1.3 only; on TLS 1.2 only ECDHE key exchange with
AEAD ciphers (AES-GCM, ChaCha20-Poly1305), i.e. Mozilla's "intermediate" list without
finite-field DHE; TLS 1.3 suites are all AEAD. No compression, no renegotiation.

Client certificates (``service.client_ca``): the server then asks every client for one
(``CERT_OPTIONAL``: a client without one still connects, so kube-apiserver and the
kubelet's probes need none) and verifies any it gets against that CA bundle; the
handlers decide which paths require one (:func:`has_client_certificate`). The CA file is
followed like the serving pair, so a new client CA (or an old and a new one during a
rotation) is taken up without a restart.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from pathlib import Path

import structlog
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from webhook.model.errors import UsageError
from webhook.model.validation import InvalidInput
from webhook.serve.certs import TLS_CERT, TLS_KEY

log = structlog.get_logger("carbonshift.tls")

CIPHERS_TLS12 = ":".join(
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
    )
)
"""The TLS 1.2 cipher suites offered (OpenSSL names); every one is also in Go's
default list, so kube-apiserver and the Go schedulers negotiate one of them."""


def _context(cert: Path, key: Path, client_ca: Path | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(CIPHERS_TLS12)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    ctx.load_cert_chain(cert, key)
    if client_ca is not None:
        ctx.load_verify_locations(cafile=client_ca)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def _check_client_ca(path: Path) -> None:
    """Refuse a client CA file that is missing or holds no PEM certificate (a usage error
    at start-up, exit status 2, rather than a server that trusts no client)."""
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_verify_locations(cafile=path)
    except ssl.SSLError:  # before OSError, its base class
        raise InvalidInput("service.client_ca", f"{path} holds no PEM CA certificate") from None
    except OSError as exc:
        raise InvalidInput("service.client_ca", f"cannot read {path}: {exc.strerror}") from None


def pair_problem(cert: Path, key: Path) -> str | None:
    """Why ``cert`` and ``key`` cannot serve TLS, in a few words, or None when they can:
    unreadable, no PEM certificate, no PEM private key (or an encrypted one), or a key
    that is not the certificate's."""
    try:
        cert_pem, key_pem = cert.read_bytes(), key.read_bytes()
    except OSError as exc:
        return f"cannot read {exc.filename}: {(exc.strerror or str(exc)).lower()}"
    try:
        certificate = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return f"{cert} holds no PEM certificate"
    try:
        private = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        return f"{key} is encrypted: carbonshift needs an unencrypted key"
    except (ValueError, UnsupportedAlgorithm):
        return f"{key} holds no PEM private key"
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    if private.public_key().public_bytes(serialization.Encoding.PEM, public) != (
        certificate.public_key().public_bytes(serialization.Encoding.PEM, public)
    ):
        return f"{key} is not the key of {cert}"
    try:
        _context(cert, key, None)
    except ssl.SSLError as exc:  # anything else OpenSSL refuses
        return f"{cert} and {key} are refused for TLS: {exc.reason or exc}"
    return None


def has_client_certificate(peercert: object) -> bool:
    """Whether a connection's ``peercert`` extra info is a verified client certificate
    (the handshake refuses one the CA bundle does not verify, so any certificate present
    was verified)."""
    return bool(peercert)


class ReloadingTLS:
    """The server's SSL context, following the certificate files in ``directory`` (and the
    client CA bundle ``client_ca``, when given)."""

    def __init__(self, directory: Path, client_ca: Path | None = None) -> None:
        self.cert_path = directory / TLS_CERT
        self.key_path = directory / TLS_KEY
        self.client_ca = client_ca
        if client_ca is not None:
            _check_client_ca(client_ca)
        problem = pair_problem(self.cert_path, self.key_path)
        if problem is not None:  # one line at start-up rather than OpenSSL's traceback
            raise UsageError(f"--cert-dir {directory}: {problem}")
        self._digest = self._read_digest()
        self._current = self._fresh()
        self.front = self._fresh()
        self.front.sni_callback = self._select
        self.reloads = 0

    def _fresh(self) -> ssl.SSLContext:
        return _context(self.cert_path, self.key_path, self.client_ca)

    def _select(self, sslobj: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
        sslobj.context = self._current

    def _read_digest(self) -> bytes:
        digest = hashlib.sha256()
        digest.update(self.cert_path.read_bytes())
        digest.update(self.key_path.read_bytes())
        if self.client_ca is not None:
            digest.update(self.client_ca.read_bytes())
        return digest.digest()

    def reload_if_changed(self) -> bool:
        """Swap in the files' certificate if they changed and form a valid pair."""
        try:
            digest = self._read_digest()
        except OSError as exc:
            log.warning("certificate_unreadable", path=str(self.cert_path), error=exc.strerror)
            return False
        if digest == self._digest:
            return False
        try:
            fresh = self._fresh()
        except (ssl.SSLError, OSError) as exc:
            # Typically a pair caught half-written; the next poll retries.
            log.warning("certificate_rejected", path=str(self.cert_path), error=str(exc))
            return False
        self._current, self._digest = fresh, digest
        self.reloads += 1
        log.info("certificate_reloaded", path=str(self.cert_path))
        return True

    async def watch(self, interval: float) -> None:
        """Poll the files forever (Secret volumes do not reliably emit inotify events)."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.reload_if_changed()
            except Exception:  # keep serving the current certificate whatever happens
                log.exception("certificate_reload_failed")
