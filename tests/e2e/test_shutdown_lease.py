"""A real ``carbonshift serve`` that leads (its Lease in the real kube-apiserver) gives the
Lease up when it gets SIGTERM, so another replica takes over at once, and exits 0 well
within the pod's grace period."""

from __future__ import annotations

import asyncio
from pathlib import Path

from e2e_support import Kube, unique

from devtools.sandbox import Sandbox
from tests.serving import serve_process
from tests.support import awaited

GRACE_SECONDS = 30.0


async def holder(kube: Kube, lease: str) -> str | None:
    result = kube.run("get", "lease.coordination.k8s.io", lease, "-n", "default",
                      "-o", "jsonpath={.spec.holderIdentity}")  # fmt: skip
    return result.stdout.strip() or None if result.returncode == 0 else None


async def test_sigterm_releases_the_lease_and_exits_in_time(
    sandbox: Sandbox, kube: Kube, tmp_path: Path
) -> None:
    lease, identity = unique("carbonshift-leader"), unique("replica")
    args = (f"--kubeconfig={sandbox.kubeconfig}", "--lease-namespace=default",
            f"--lease-name={lease}")  # fmt: skip
    async with serve_process({}, tmp_path, *args, env={"POD_NAME": identity}) as server:

        async def leading() -> bool:
            return await holder(kube, lease) == identity

        try:
            await awaited(leading, f"{identity} holding Lease {lease}", every=0.2)
        except AssertionError:
            print(server.log.read_text()[-2000:])
            raise
        code, seconds = await asyncio.to_thread(server.terminate, GRACE_SECONDS)
        assert code == 0, server.log.read_text()[-2000:]
        assert seconds < GRACE_SECONDS / 3
        assert await holder(kube, lease) is None  # released, not left to expire
        events = [line.get("event") for line in server.lines()]
        assert "leader_released" in events
        print(f"\nSIGTERM as leader: Lease released, exit 0 after {seconds:.3f} s")
