"""One real fleet per test session (``devtools.sandbox``), all on 127.0.0.1: the Karmada
control plane (etcd, kube-apiserver, kube-controller-manager, the Karmada and Karpenter
CRDs, karmada-controller-manager, karmada-webhook, karmada-scheduler with the carbonshift
plugin, carbonshift) and three member clusters joined in Push mode (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and KWOK each).

The binaries come from ``hack/build-binaries.sh`` (Go modules, cached). Under ``CI=true`` a
binary that cannot be built or started fails the tests; elsewhere a missing Go toolchain
skips them with the reason.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import Kube, build_binaries, unavailable

from devtools.sandbox import Layout, Sandbox, SandboxError

IN_CI = os.environ.get("CI", "").lower() == "true"
CERT_RELOAD_SECONDS = 1.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    state = tmp_path_factory.mktemp("sandbox")
    layout = Layout.default(state)
    build_binaries(layout, state / "build.log")
    # Quiet: tests that exercise labels and re-evaluation run their own replicas.
    box = Sandbox(
        layout, cert_reload_seconds=CERT_RELOAD_SECONDS, log=lambda _msg: None, quiet=True
    )
    try:
        box.up()
    except SandboxError as exc:
        unavailable(f"the sandbox did not start: {exc}")
    try:
        yield box
    finally:
        box.down()


@pytest.fixture
def kube(sandbox: Sandbox) -> Kube:
    return Kube(sandbox)


@pytest.fixture(autouse=True)
def _collected() -> Iterator[None]:
    """Garbage is collected after every test, so a socket or client a test leaves open
    fails that test (an unraisable ResourceWarning) instead of whichever runs next."""
    yield
    gc.collect()
