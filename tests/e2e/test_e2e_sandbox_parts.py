"""The sandbox's own pieces that need no control plane: PKI, certificate publishing and the
webhook registration derived from the production manifest."""

from __future__ import annotations

import ssl
from pathlib import Path

from cryptography import x509

from devtools.sandbox.layout import Layout
from devtools.sandbox.objects import carbonshift_webhook_configuration
from devtools.sandbox.pki import client_pair, new_ca, serving_pair, write_atomic_pair


def test_serving_certificate_verifies_for_the_loopback_address(tmp_path: Path) -> None:
    ca = new_ca("test-ca")
    ca.write(tmp_path, "ca.crt", "ca.key")
    pair = serving_pair(ca, "carbonshift")
    pair.write(tmp_path)
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")  # key matches cert


def test_admin_client_certificate_is_in_system_masters() -> None:
    ca = new_ca("test-ca")
    admin = client_pair(ca, "admin", ["system:masters"])
    cert = x509.load_pem_x509_certificate(admin.cert_pem)
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [x509.ExtendedKeyUsageOID.CLIENT_AUTH]


def test_rotation_swaps_both_files_at_once_and_keeps_one_generation(tmp_path: Path) -> None:
    ca = new_ca("test-ca")
    first, second = serving_pair(ca, "a"), serving_pair(ca, "b")
    write_atomic_pair(tmp_path, first)
    write_atomic_pair(tmp_path, second)
    assert (tmp_path / "tls.crt").read_bytes() == second.cert_pem
    assert (tmp_path / "tls.key").read_bytes() == second.key_pem
    generations = [p for p in tmp_path.iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(generations) == 1


def test_sandbox_registers_the_production_webhook_with_a_url() -> None:
    manifest = Layout.default().root / "manifests" / "base" / "webhook.yaml"
    config = carbonshift_webhook_configuration(manifest, "https://127.0.0.1:1/mutate", "Q0E=")
    hooks = config["webhooks"]
    assert [h["name"] for h in hooks] == [
        "propagationpolicies.carbonshift.io",
        "cluster-scoped.carbonshift.io",
    ]
    for hook in hooks:
        assert hook["clientConfig"] == {"url": "https://127.0.0.1:1/mutate", "caBundle": "Q0E="}
        assert hook["failurePolicy"] == "Ignore"
        assert hook["sideEffects"] == "None"
        assert hook["reinvocationPolicy"] == "IfNeeded"
        assert hook["matchPolicy"] == "Equivalent"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] <= 3
        for rule in hook["rules"]:
            assert rule["operations"] == ["CREATE", "UPDATE"]
