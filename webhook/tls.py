"""Serving TLS with certificates that can be replaced on disk without a restart.

The listening socket uses a fixed *front* context whose ``sni_callback`` hands every
new handshake the *current* context (this also runs when the client sends no SNI,
e.g. when it dials an IP). A poller re-reads ``tls.crt``/``tls.key`` when their
contents change, loads them into a fresh context first (a half-written pair is
rejected without touching the live one) and then swaps the reference. Established
connections keep the certificate they started with; nothing is dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from pathlib import Path

import structlog

from webhook.certs import TLS_CERT, TLS_KEY

log = structlog.get_logger("carbonshift.tls")


def _context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


class ReloadingTLS:
    """The server's SSL context, following the certificate files in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.cert_path = directory / TLS_CERT
        self.key_path = directory / TLS_KEY
        self._digest = self._read_digest()
        self._current = _context(self.cert_path, self.key_path)
        self.front = _context(self.cert_path, self.key_path)
        self.front.sni_callback = self._select
        self.reloads = 0

    def _select(self, sslobj: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
        sslobj.context = self._current

    def _read_digest(self) -> bytes:
        digest = hashlib.sha256()
        digest.update(self.cert_path.read_bytes())
        digest.update(self.key_path.read_bytes())
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
            fresh = _context(self.cert_path, self.key_path)
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
