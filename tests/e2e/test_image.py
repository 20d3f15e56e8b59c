"""The container image, built here with no Docker engine and no registry
(`hack/build-image.sh`, `make image`: a Debian bookworm base from Debian's own packages,
the repository's Dockerfile built by buildah), runs as its non-root user on a read-only
root filesystem and answers a real AdmissionReview (README, Quickstart) with the decision.

`hack/build-image.sh run` starts it with podman when a container can run on this machine,
else from the image's root filesystem (read-only bind mount, chroot, setpriv to the
image's user with no capabilities). The test checks the serving process itself, from
outside: its uids and gids, its capabilities and the mount options of its root.

Needs root and the Debian packages buildah, podman and mmdebstrap (the script installs
them). Measured on the shared 2-core VM: the base 25-80 s (mmdebstrap, once), the image
12-17 s (pip in the build stage, every run), the whole test 15 s with the base built. Run
alone: `.venv/bin/pytest -m e2e -q -s tests/e2e/test_image.py`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import unavailable

from devtools.sandbox.layout import free_port
from webhook.cli import main as carbonshift

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "build-image.sh"
USER = 65532
REVIEW: dict[str, Any] = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "policy.karmada.io", "version": "v1alpha1", "kind": "PropagationPolicy"},
        "resource": {"group": "policy.karmada.io", "version": "v1alpha1",
                     "resource": "propagationpolicies"},
        "namespace": "shop", "operation": "CREATE", "userInfo": {"username": "admin"},
        "object": {
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": "web"}],
                "placement": {
                    "clusterAffinity": {"clusterNames": ["member-fr", "member-pl"]},
                    "replicaScheduling": {"replicaSchedulingType": "Divided"},
                },
            },
        },
    },
}  # fmt: skip

pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Build the image (cached base; the image itself is rebuilt); returns its size line."""
    if os.geteuid() != 0:
        unavailable("building and running the image needs root (mmdebstrap, buildah, chroot)")
    if shutil.which("apt-get") is None and shutil.which("buildah") is None:
        unavailable("no buildah and no apt-get to install it")
    log = tmp_path_factory.mktemp("image") / "build.log"
    with log.open("w") as out:
        built = subprocess.run(
            [str(SCRIPT), "build"], stdout=out, stderr=subprocess.STDOUT, check=False, timeout=1700
        )
    if built.returncode != 0:
        unavailable(f"hack/build-image.sh failed:\n{log.read_text()[-4000:]}")
    size = subprocess.run([str(SCRIPT), "size"], capture_output=True, text=True, check=True)
    return size.stdout.strip()


@pytest.fixture
def running(tmp_path: Path, image: str) -> Iterator[tuple[int, Path, Path]]:
    """The image serving on 127.0.0.1 with fresh certificates and the example config:
    (port, CA file, log)."""
    certs = tmp_path / "certs"
    status = carbonshift(["certs", "--service", "carbonshift", "--namespace", "carbonshift-system",
                          "--ip", "127.0.0.1", "--out", str(certs)])  # fmt: skip
    assert status == 0
    (certs / "ca.key").unlink()  # the server needs only its pair (and ca.crt)
    for path in certs.iterdir():
        path.chmod(0o644)  # readable by the image's user, as a Secret volume would be
    config = tmp_path / "config.yaml"
    shutil.copy(ROOT / "config" / "example.yaml", config)
    config.chmod(0o644)
    port = free_port()
    log = tmp_path / "run.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(SCRIPT), "run", "--certs", str(certs), "--config", str(config),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        yield port, certs / "ca.crt", log
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def wait_healthy(port: int, context: ssl.SSLContext, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{port}/healthz", context=context, timeout=2
            ) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"not healthy in {timeout} s:\n{log.read_text()}"
        time.sleep(0.5)


def server_pid(port: int) -> int:
    """The carbonshift process serving ``port``: inside the image's root, not ours."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            root = os.readlink(proc / "root")
        except OSError:
            continue
        inside = root != "/" and b"serve" in argv and str(port).encode() in argv
        if inside and any(a.endswith(b"/carbonshift") for a in argv):
            return int(proc.name)
    raise AssertionError(f"no carbonshift process serving port {port}")


def status_fields(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def root_mount_options(pid: int) -> set[str]:
    """The mount options of the process's own root, from its mountinfo."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return set(fields[5].split(","))
    raise AssertionError(f"no root mount for {pid}")


def test_the_image_answers_an_admission_review_as_non_root_on_a_read_only_root(
    image: str, running: tuple[int, Path, Path]
) -> None:
    port, ca, log = running
    context = ssl.create_default_context(cafile=str(ca))
    wait_healthy(port, context, log)

    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/mutate",
        data=json.dumps(REVIEW).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        review = json.load(answer)
    response = review["response"]
    assert response["uid"] == REVIEW["request"]["uid"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    # The placement is rewritten and the decision recorded (what the placement becomes is
    # the decision core's business, tested elsewhere).
    paths = {op["path"] for op in patch}
    assert any(path.startswith("/spec/placement") for path in paths), patch
    decision = [op for op in patch if "carbonshift.io/decision" in json.dumps(op.get("value"))]
    assert decision, patch

    pid = server_pid(port)
    fields = status_fields(pid)
    assert fields["Uid"].split() == [str(USER)] * 4, fields["Uid"]
    assert fields["Gid"].split() == [str(USER)] * 4, fields["Gid"]
    assert int(fields["CapEff"], 16) == 0, fields["CapEff"]
    assert "ro" in root_mount_options(pid)
    runner = next((line for line in log.read_text().splitlines() if "runner:" in line), "?")
    print(
        f"\nimage size {image} bytes; {runner}; pid {pid} uid/gid {USER}, no capabilities, ro root"
    )
