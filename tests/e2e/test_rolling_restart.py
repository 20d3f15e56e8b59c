"""Rolling restart under load, on the real kube-apiserver: two ``carbonshift serve``
replicas (same certificate) behind a real HAProxy (TLS passed through, health checks on
``/readyz``), registered with carbonshift's production webhook under a name of the test's
own; ``kubectl apply`` of opted-in PropagationPolicies never stops while the replicas get
SIGTERM and start again one after the other. No apply fails and every stored object
carries carbonshift's decision (``failurePolicy: Ignore`` hides a failed admission, so
the stored objects are counted, not the errors). The API server's own count of calls that
failed open must stay 0 too: a failed first call is often hidden by the reinvocation
(``reinvocationPolicy: IfNeeded``) after karmada-webhook changes the object."""

from __future__ import annotations

import time
from pathlib import Path

from e2e_support import Kube, unique
from rollout_support import (
    Fleet,
    Load,
    failed_open,
    haproxy_binary,
    registered,
    registration,
    rollout_namespace,
    wait_mutating,
    webhook_errors,
)

from devtools.sandbox import Sandbox
from devtools.sandbox.pki import new_ca, serving_pair, write_atomic_pair

RUN_SECONDS = 60.0
GRACE_SECONDS = 30.0


def test_rolling_restart_under_load_stores_every_object_decided(
    sandbox: Sandbox, kube: Kube, tmp_path: Path
) -> None:
    haproxy_binary()
    ca = new_ca("carbonshift-rollout-ca")
    ca.write(tmp_path, "ca.crt", "ca.key")
    cert_dir = tmp_path / "certs"
    write_atomic_pair(cert_dir, serving_pair(ca, "carbonshift"))
    namespace = rollout_namespace(kube)
    try:
        with Fleet(sandbox, tmp_path, cert_dir, tmp_path / "ca.crt") as fleet:
            document = registration(sandbox, unique("carbonshift-rollout"), fleet.proxy.url,
                                    ca.cert_pem, namespace)  # fmt: skip
            with registered(kube, document):
                wait_mutating(kube, namespace)
                with Load(kube, namespace) as load:
                    started = time.monotonic()
                    while time.monotonic() - started < RUN_SECONDS:
                        fleet.roll(GRACE_SECONDS)
                    elapsed = time.monotonic() - started
                undecided = load.undecided()
                fail_open = failed_open(kube, document)
                errors = webhook_errors(sandbox, document)
    finally:
        kube.run("delete", "namespace", namespace, "--wait=false")
    print(
        f"\nrolling restart: {load.objects} objects in {len(load.applies)} applies in "
        f"{elapsed:.0f} s, {len(load.failed)} failed, {len(undecided)} stored without a "
        f"decision, {fail_open} failed open (API server); apply latency max "
        f"{load.max_seconds:.2f} s; {fleet.summary()}"
    )
    assert not load.failed, [a.error for a in load.failed[:3]]
    assert load.objects >= 300, f"only {load.objects} objects applied"
    assert len(fleet.restarts) >= 4
    assert not undecided, f"{len(undecided)} of {load.objects} objects stored undecided"
    assert fail_open == 0, errors[:3]
