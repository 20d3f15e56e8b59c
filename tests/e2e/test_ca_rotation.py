"""CA rotation under load, on the real kube-apiserver: the API server trusts carbonshift's
old CA (the registration's ``caBundle``); then both CAs (the overlap); both replicas,
still running, pick up a serving certificate signed by the new CA from their
``--cert-dir``; then the API server trusts the new CA only. ``kubectl apply`` of opted-in
PropagationPolicies never stops, and every stored object carries carbonshift's decision.

The API server keeps its keep-alive connections, TLS sessions of the old certificate
included, so after the switch and after the last caBundle change the replicas restart one
after the other (behind HAProxy, as in the rolling-restart test): every connection is then
a new TLS handshake against the certificate served and the caBundle in force."""

from __future__ import annotations

import ssl
import time
from collections import Counter
from pathlib import Path
from typing import Any

from e2e_support import Kube, unique
from rollout_support import (
    Fleet,
    Load,
    eventually,
    failed_open,
    haproxy_binary,
    registered,
    registration,
    rollout_namespace,
    served_certificate,
    wait_mutating,
    webhook_errors,
)

from devtools.sandbox import Sandbox
from devtools.sandbox.pki import new_ca, serving_pair, write_atomic_pair

PHASE_SECONDS = 5.0
"""Load before a change; also ample for the API server's informer to see a new caBundle."""
PHASES = ("old CA", "old + new CA", "new certificate served", "new CA only")
PER_PHASE = 10
"""Objects applied in each phase, at least."""


def applied(load: Load, phase: str) -> int:
    """Objects sent by the applies begun in ``phase`` (failed ones included)."""
    return sum(len(a.names) for a in load.applies if a.phase == phase)


def test_ca_rotation_under_load_stores_every_object_decided(
    sandbox: Sandbox, kube: Kube, tmp_path: Path
) -> None:
    haproxy_binary()
    old, new = new_ca("carbonshift-ca-2025"), new_ca("carbonshift-ca-2026")
    both = tmp_path / "both-cas.crt"  # the test's own trust (readiness, HAProxy's checks)
    both.write_bytes(old.cert_pem + new.cert_pem)
    cert_dir = tmp_path / "certs"
    write_atomic_pair(cert_dir, serving_pair(old, "carbonshift"))
    name, namespace = unique("carbonshift-ca-rotation"), rollout_namespace(kube)
    phase = [PHASES[0]]
    rotated = serving_pair(new, "carbonshift")
    expected = ssl.PEM_cert_to_DER_cert(rotated.cert_pem.decode())
    try:
        with Fleet(sandbox, tmp_path, cert_dir, both) as fleet:

            def trust(bundle: bytes) -> dict[str, Any]:
                return registration(sandbox, name, fleet.proxy.url, bundle, namespace)

            def switched() -> bool:
                return all(served_certificate(r.port) == expected for r in fleet.replicas)

            with registered(kube, trust(old.cert_pem)):
                wait_mutating(kube, namespace)
                # A steady load (a few hundred policies in all), not a flood Karmada's
                # controllers would still be working through in the tests after this one.
                with Load(kube, namespace, phase=lambda: phase[0], pause=1.0) as load:

                    def loaded(seconds: float = 0.0) -> None:
                        """The current phase under load for ``seconds`` and :data:`PER_PHASE`
                        objects at least (a busy machine applies fewer in a second)."""
                        time.sleep(seconds)
                        eventually(
                            lambda: applied(load, phase[0]) >= PER_PHASE,
                            120.0,
                            f"{PER_PHASE} objects applied in phase {phase[0]!r}",
                        )

                    loaded(PHASE_SECONDS)
                    kube.apply(trust(old.cert_pem + new.cert_pem))
                    phase[0] = PHASES[1]
                    loaded(PHASE_SECONDS)
                    write_atomic_pair(cert_dir, rotated)
                    eventually(switched, 15.0, "both replicas to serve the new CA's certificate")
                    phase[0] = PHASES[2]
                    fleet.roll()
                    kube.apply(trust(new.cert_pem))
                    loaded()
                    phase[0] = PHASES[3]
                    loaded(PHASE_SECONDS)
                    fleet.roll()
                undecided = load.undecided()
                fail_open = failed_open(kube, trust(new.cert_pem))
                errors = webhook_errors(sandbox, trust(new.cert_pem))
    finally:
        kube.run("delete", "namespace", namespace, "--wait=false")
    per_phase = Counter({p: applied(load, p) for p in PHASES})
    print(
        f"\nCA rotation: {load.objects} objects in {len(load.applies)} applies "
        f"({', '.join(f'{p}: {per_phase[p]}' for p in PHASES)}), {len(load.failed)} failed, "
        f"{len(undecided)} stored without a decision, {fail_open} failed open (API server); "
        f"apply latency max {load.max_seconds:.2f} s; {fleet.summary()}"
    )
    assert not load.failed, [a.error for a in load.failed[:3]]
    assert all(per_phase[p] >= PER_PHASE for p in PHASES), per_phase
    assert not undecided, f"{len(undecided)} of {load.objects} objects stored undecided"
    assert fail_open == 0, errors[:3]
