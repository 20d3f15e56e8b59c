"""CA rotation under load, on the real kube-apiserver: the API server trusts carbonshift's
old CA (the registration's ``caBundle``); then both CAs (the overlap); carbonshift, still
running, picks up a serving certificate signed by the new CA from its ``--cert-dir``; then
the API server trusts the new CA only. ``kubectl apply`` of opted-in PropagationPolicies
never stops, and every stored object carries carbonshift's decision."""

from __future__ import annotations

import ssl
import time
from collections import Counter
from pathlib import Path

from e2e_support import Kube, unique
from rollout_support import (
    Load,
    Replica,
    eventually,
    failed_open,
    registered,
    registration,
    rollout_namespace,
    served_certificate,
    wait_mutating,
    webhook_errors,
)

from devtools.sandbox import LOOPBACK, Sandbox
from devtools.sandbox.pki import new_ca, serving_pair, write_atomic_pair

PHASE_SECONDS = 6.0
"""Load in each phase; also ample for the API server's informer to see a new caBundle."""
PHASES = ("old CA", "old + new CA", "new certificate served", "new CA only")


def test_ca_rotation_under_load_stores_every_object_decided(
    sandbox: Sandbox, kube: Kube, tmp_path: Path
) -> None:
    old, new = new_ca("carbonshift-ca-2025"), new_ca("carbonshift-ca-2026")
    old.write(tmp_path, "old-ca.crt", "old-ca.key")
    cert_dir = tmp_path / "certs"
    write_atomic_pair(cert_dir, serving_pair(old, "carbonshift"))
    name = unique("ca-rotation")
    replica = Replica(sandbox, tmp_path, name, cert_dir=cert_dir,
                      cafile=tmp_path / "old-ca.crt", lease=name)  # fmt: skip
    namespace = rollout_namespace(kube)
    url = f"https://{LOOPBACK}:{replica.port}"

    def trust(bundle: bytes) -> dict[str, object]:
        return registration(sandbox, name, url, bundle, namespace)

    phase = [PHASES[0]]
    rotated = serving_pair(new, "carbonshift")
    try:
        replica.start()
        with registered(kube, trust(old.cert_pem)):
            wait_mutating(kube, namespace)
            with Load(kube, namespace, phase=lambda: phase[0]) as load:
                time.sleep(PHASE_SECONDS)
                kube.apply(trust(old.cert_pem + new.cert_pem))
                phase[0] = PHASES[1]
                time.sleep(PHASE_SECONDS)
                write_atomic_pair(cert_dir, rotated)
                expected = ssl.PEM_cert_to_DER_cert(rotated.cert_pem.decode())
                eventually(lambda: served_certificate(replica.port) == expected, 15.0,
                           "carbonshift to serve the certificate of the new CA")  # fmt: skip
                phase[0] = PHASES[2]
                time.sleep(PHASE_SECONDS)
                kube.apply(trust(new.cert_pem))
                phase[0] = PHASES[3]
                time.sleep(PHASE_SECONDS)
            undecided = load.undecided()
            fail_open = failed_open(kube, trust(new.cert_pem))
            errors = webhook_errors(sandbox, trust(new.cert_pem))
    except BaseException:
        print(replica.tail())
        raise
    finally:
        replica.kill()
        kube.run("delete", "namespace", namespace, "--wait=false")
    per_phase = Counter[str]()
    for apply in load.applies:
        per_phase[apply.phase] += len(apply.names)
    print(
        f"\nCA rotation: {load.objects} objects in {len(load.applies)} applies "
        f"({', '.join(f'{p}: {per_phase[p]}' for p in PHASES)}), {len(load.failed)} failed, "
        f"{len(undecided)} stored without a decision, {fail_open} failed open (API server); "
        f"apply latency max {load.max_seconds:.2f} s"
    )
    assert not load.failed, [a.error for a in load.failed[:3]]
    assert all(per_phase[p] >= 10 for p in PHASES), per_phase
    assert not undecided, f"{len(undecided)} of {load.objects} objects stored undecided"
    assert fail_open == 0, errors[:3]
