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
    HAProxy,
    Load,
    Replica,
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
    cafile, cert_dir = tmp_path / "ca.crt", tmp_path / "certs"
    write_atomic_pair(cert_dir, serving_pair(ca, "carbonshift"))
    lease = unique("rollout-leader")
    replicas = [
        Replica(sandbox, tmp_path, f"{lease}-{i}", cert_dir=cert_dir, cafile=cafile, lease=lease)
        for i in (0, 1)
    ]
    proxy = HAProxy(tmp_path, replicas, cafile)
    namespace = rollout_namespace(kube)
    restarts: list[tuple[str, float, float, float]] = []  # replica, exit s, ready s, UP s
    try:
        for replica in replicas:
            replica.start()
        proxy.start()
        for replica in replicas:
            proxy.wait_state(replica.name, "UP")
        document = registration(sandbox, unique("carbonshift-rollout"), proxy.url,
                                ca.cert_pem, namespace)  # fmt: skip
        with registered(kube, document):
            wait_mutating(kube, namespace)
            with Load(kube, namespace) as load:
                started = time.monotonic()
                while time.monotonic() - started < RUN_SECONDS:
                    for replica in replicas:
                        code, exited = replica.terminate(GRACE_SECONDS)
                        assert code == 0, replica.tail()
                        ready = replica.start()
                        up = proxy.wait_state(replica.name, "UP")
                        restarts.append((replica.name, exited, ready, up))
                elapsed = time.monotonic() - started
            undecided = load.undecided()
            fail_open = failed_open(kube, document)
            errors = webhook_errors(sandbox, document)
    except BaseException:
        for replica in replicas:
            print(replica.tail())
        raise
    finally:
        for replica in replicas:
            replica.kill()
        proxy.stop()
        kube.run("delete", "namespace", namespace, "--wait=false")
    print(
        f"\nrolling restart: {load.objects} objects in {len(load.applies)} applies in "
        f"{elapsed:.0f} s, {len(restarts)} restarts, {len(load.failed)} failed, "
        f"{len(undecided)} stored without a decision, {fail_open} failed open (API server); "
        f"apply latency max {load.max_seconds:.2f} s; exit after SIGTERM max "
        f"{max(r[1] for r in restarts):.2f} s, ready after start max "
        f"{max(r[2] for r in restarts):.2f} s, HAProxy UP after that max "
        f"{max(r[3] for r in restarts):.2f} s; HAProxy sessions by end state "
        f"{proxy.session_ends()}"
    )
    assert not load.failed, [a.error for a in load.failed[:3]]
    assert load.objects >= 300, f"only {load.objects} objects applied"
    assert len(restarts) >= 4
    assert not undecided, f"{len(undecided)} of {load.objects} objects stored undecided"
    assert fail_open == 0, errors[:3]
