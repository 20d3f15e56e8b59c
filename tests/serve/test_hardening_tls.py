"""Locked-down TLS over real sockets: protocol versions, cipher suites and client
certificates for the scheduler API and /metrics (``service.client_ca``)."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.serve.hardening import REVIEW
from tests.serving import Running, serving
from tests.support import FLEET
from webhook.model.config import parse
from webhook.model.validation import InvalidInput
from webhook.serve import certs
from webhook.serve.tls import CIPHERS_TLS12, ReloadingTLS

SCORE = {"clusters": [{"name": "member-fr"}]}


@pytest.fixture
async def plain(tmp_path: Path) -> AsyncIterator[Running]:
    async with serving(parse(FLEET), tmp_path) as run:
        yield run


async def handshake(run: Running, ctx: ssl.SSLContext) -> ssl.SSLObject | None:
    """Connect with ``ctx``; the TLS object on success, None when the handshake fails."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", run.port, ssl=ctx)
    except (ssl.SSLError, ConnectionResetError):
        return None
    tls = writer.get_extra_info("ssl_object")
    writer.close()
    await writer.wait_closed()
    return tls  # type: ignore[no-any-return]


def legacy_client(run: Running, version: ssl.TLSVersion, ciphers: str) -> ssl.SSLContext:
    """A client that offers only ``version`` and ``ciphers`` (any security level)."""
    ctx = run.client_ssl()
    with warnings.catch_warnings():  # TLS 1.0 and 1.1 are deprecated: that is the point
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = ctx.maximum_version = version
    ctx.set_ciphers(f"{ciphers}:@SECLEVEL=0")
    return ctx


async def test_tls_13_and_12_with_aead_suites_are_served(plain: Running) -> None:
    tls13 = await handshake(plain, plain.client_ssl())
    assert tls13 is not None
    assert tls13.version() == "TLSv1.3"
    ctx = plain.client_ssl()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    tls12 = await handshake(plain, ctx)
    assert tls12 is not None
    cipher = tls12.cipher()
    assert cipher is not None
    assert tls12.version() == "TLSv1.2"
    assert cipher[0] in CIPHERS_TLS12.split(":")


@pytest.mark.parametrize(
    ("version", "ciphers"),
    [
        (ssl.TLSVersion.TLSv1_1, "ALL"),  # below TLS 1.2
        (ssl.TLSVersion.TLSv1, "ALL"),
        (ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES128-SHA"),  # CBC
        (ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-CAMELLIA128-SHA256:ECDHE-ECDSA-AES256-CCM8"),
    ],
    ids=["tls1.1", "tls1.0", "tls1.2-cbc", "tls1.2-not-in-list"],
)
async def test_old_protocols_and_weak_suites_are_refused(
    plain: Running, version: ssl.TLSVersion, ciphers: str
) -> None:
    assert await handshake(plain, legacy_client(plain, version, ciphers)) is None


# client certificates ------------------------------------------------------------------


class ClientCAs:
    """Two client CAs (the trusted one and a stranger) and a client certificate of each."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.trusted = certs.make_ca("scheduler-clients")
        self.stranger = certs.make_ca("someone-else")
        self.bundle = directory / "client-ca.crt"
        self.bundle.write_bytes(self.trusted[0])

    def client(self, ca: tuple[bytes, bytes], name: str) -> tuple[Path, Path]:
        cert, key = certs.make_client(*ca, common_name=name)
        cert_path, key_path = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        cert_path.write_bytes(cert)
        certs.write_private(key_path, key)
        return cert_path, key_path


def with_client_cert(run: Running, pair: tuple[Path, Path] | None) -> ssl.SSLContext:
    ctx = run.client_ssl()
    if pair is not None:
        ctx.load_cert_chain(*pair)
    return ctx


async def call(run: Running, ctx: ssl.SSLContext, method: str, path: str, body: Any = None) -> int:
    """The status of one request, or 0 when the TLS handshake is refused."""
    data = None if body is None else orjson.dumps(body)
    headers = {"Content-Type": "application/json"}
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, run.url + path, data=data, headers=headers, ssl=ctx) as resp,
        ):
            payload = await resp.read()
            if resp.status == 403:
                assert "client certificate is required" in orjson.loads(payload)["error"]
            return resp.status
    except (aiohttp.ClientConnectorError, aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
        return 0


@pytest.fixture
def cas(tmp_path: Path) -> ClientCAs:
    folder = tmp_path / "clients"
    folder.mkdir()
    return ClientCAs(folder)


def fleet_with(**service: Any) -> Any:
    return parse({**FLEET, "service": service})


async def test_scheduler_api_and_metrics_need_a_client_certificate(
    tmp_path: Path, cas: ClientCAs
) -> None:
    config = fleet_with(client_ca=str(cas.bundle))
    async with serving(config, tmp_path / "server") as run:
        none = with_client_cert(run, None)
        good = with_client_cert(run, cas.client(cas.trusted, "karmada-scheduler"))
        strange = with_client_cert(run, cas.client(cas.stranger, "mallory"))
        # kube-apiserver and the kubelet present no certificate and need none.
        assert await call(run, none, "POST", "/mutate", REVIEW) == 200
        assert await call(run, none, "GET", "/healthz") == 200
        # The scheduler API and /metrics: only with a certificate of the client CA.
        for method, path, body in [
            ("POST", "/v1/karmada/score", SCORE),
            ("POST", "/v1/karmada/filter", SCORE),
            ("POST", "/v1/extender/prioritize", {"Pod": {}, "Nodes": {"items": []}}),
            ("GET", "/metrics", None),
        ]:
            assert await call(run, none, method, path, body) == 403, path
            assert await call(run, good, method, path, body) == 200, path
            assert await call(run, strange, method, path, body) == 0, path  # handshake fails
        assert await call(run, good, "POST", "/mutate", REVIEW) == 200
        async with (
            aiohttp.ClientSession() as session,
            session.get(run.url + "/metrics", ssl=good) as resp,
        ):
            text = await resp.text()
    assert 'carbonshift_client_certificate_refusals_total{group="scheduler"} 3.0' in text
    assert 'carbonshift_client_certificate_refusals_total{group="metrics"} 1.0' in text


async def test_client_auth_lists_what_is_protected(tmp_path: Path, cas: ClientCAs) -> None:
    config = fleet_with(client_ca=str(cas.bundle), client_auth=["scheduler"])
    async with serving(config, tmp_path / "server") as run:
        none = with_client_cert(run, None)
        assert await call(run, none, "GET", "/metrics") == 200
        assert await call(run, none, "POST", "/v1/karmada/score", SCORE) == 403


async def test_without_client_ca_nothing_asks_for_a_certificate(plain: Running) -> None:
    none = with_client_cert(plain, None)
    assert await call(plain, none, "POST", "/v1/karmada/score", SCORE) == 200
    assert await call(plain, none, "GET", "/metrics") == 200


async def test_a_rotated_client_ca_is_taken_up_without_a_restart(
    tmp_path: Path, cas: ClientCAs
) -> None:
    config = fleet_with(client_ca=str(cas.bundle))
    async with serving(config, tmp_path / "server") as run:
        old = with_client_cert(run, cas.client(cas.trusted, "old"))
        new = with_client_cert(run, cas.client(cas.stranger, "new"))
        assert await call(run, new, "GET", "/metrics") == 0
        # Overlap: both CAs in the bundle, both clients accepted.
        cas.bundle.write_bytes(cas.trusted[0] + cas.stranger[0])
        assert await eventually(lambda: call(run, new, "GET", "/metrics"), 200)
        assert await call(run, old, "GET", "/metrics") == 200
        # The old CA retired: its clients are refused at the handshake.
        cas.bundle.write_bytes(cas.stranger[0])
        assert await eventually(lambda: call(run, old, "GET", "/metrics"), 0)
        assert await call(run, new, "GET", "/metrics") == 200


async def eventually(probe: Any, want: int, attempts: int = 60) -> bool:
    for _ in range(attempts):
        if await probe() == want:
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.parametrize(
    ("content", "problem"), [(None, "cannot read"), (b"not a certificate\n", "no PEM CA")]
)
def test_a_bad_client_ca_file_is_a_configuration_error(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    certs.issue(["localhost"]).write(tmp_path)
    bundle = tmp_path / "client-ca.crt"
    if content is not None:
        bundle.write_bytes(content)
    with pytest.raises(InvalidInput, match=f"service.client_ca: .*{problem}"):
        ReloadingTLS(tmp_path, bundle)


def test_serve_with_a_missing_client_ca_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"service: {{client_ca: {tmp_path / 'nowhere.crt'}}}\n")
    result = subprocess.run(
        [str(Path(sys.executable).with_name("carbonshift")), "serve", f"--config={config}",
         "--host=127.0.0.1", "--port=8443", f"--cert-dir={tmp_path / 'certs'}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith(
        f"carbonshift: config {config}: service.client_ca: cannot"
    )
