"""Placement over the fleet read from a real kube-apiserver: the sandbox's carbonshift runs
with a kubeconfig and no ``clusters:`` in its config, so the Karmada Cluster objects are
the candidates. A Cluster unknown to the config gets its grid zone from its region; a
labelSelector picks exactly the Clusters that match; a relabel reaches the next admission;
with the API server out of reach admissions keep answering from memory."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import ssl
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from e2e_support import Kube, carbon_order, propagation_policy, unique

from devtools.sandbox import Sandbox
from devtools.sandbox.layout import free_port
from webhook.kube.client import Settings
from webhook.model import vocabulary
from webhook.model.config import load

SECONDS = 10.0
"""How soon a change of a Cluster must reach an admission."""
CLUSTERS = "cluster.cluster.karmada.io"


def karmada_cluster(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1", **spec},
    }


def until(check: Callable[[], Any], timeout: float = SECONDS, what: str = "condition") -> Any:
    """Poll ``check()`` until it returns something truthy; returns that."""
    started = time.monotonic()
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() - started < timeout, f"{what} not reached in {timeout:g}s"
        time.sleep(0.2)


def context(sandbox: Sandbox) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(sandbox.layout.pki / "ca.crt"))


def score_zone(sandbox: Sandbox, name: str) -> str | None:
    """The grid zone the sandbox's carbonshift gives a candidate Karmada names without
    any location (only the inventory can know it)."""
    request = urllib.request.Request(
        f"{sandbox.carbonshift_url}/v1/karmada/score",
        data=json.dumps({"clusters": [{"name": name}]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context(sandbox), timeout=5) as answer:
        zone: str | None = json.loads(answer.read())["scores"][0]["zone"]
        return zone


@contextlib.contextmanager
def clusters(kube: Kube, *objects: dict[str, Any]) -> Iterator[list[str]]:
    """Create Clusters; delete them afterwards (later tests see the demo fleet only)."""
    names = [obj["metadata"]["name"] for obj in objects]
    try:
        for obj in objects:
            kube.apply(obj)
        yield names
    finally:
        kube.run("delete", CLUSTERS, *names, "--ignore-not-found")


def selected(group: str) -> dict[str, Any]:
    return {
        "clusterAffinity": {"labelSelector": {"matchLabels": {"e2e-group": group}}},
        "replicaScheduling": {"replicaSchedulingType": "Divided"},
    }


def test_discovered_cluster_gets_its_zone_and_a_label_selector_picks_exactly_the_matches(
    sandbox: Sandbox, kube: Kube
) -> None:
    group = unique("g")
    aws, gcp, other = unique("disc-aws"), unique("disc-gcp"), unique("disc-other")
    with clusters(
        kube,
        karmada_cluster(aws, {"e2e-group": group}, provider="aws", region="eu-north-1"),
        karmada_cluster(gcp, {"e2e-group": group}, provider="gcp", region="europe-central2"),
        karmada_cluster(other, {"e2e-group": "elsewhere"}, provider="aws", region="eu-west-3"),
    ):
        # No config entry: the zone comes from spec.provider + spec.region.
        assert until(lambda: score_zone(sandbox, aws), what="inventory") == "SE-SE3"
        until(lambda: score_zone(sandbox, other), what="inventory")

        namespace = kube.namespace(enabled=True)
        name = unique("web")
        policy = propagation_policy(name, namespace, placement=selected(group))
        stored = kube.apply_json(policy)
        assert carbon_order(stored) == [aws, gcp]  # SE-SE3 is greener than PL


def test_a_relabelled_cluster_is_seen_by_the_next_admission(sandbox: Sandbox, kube: Kube) -> None:
    group = unique("g")
    first, second = unique("relabel-a"), unique("relabel-b")
    with clusters(
        kube,
        karmada_cluster(first, {"e2e-group": group}, provider="aws", region="eu-north-1"),
        karmada_cluster(second, {}, provider="aws", region="eu-west-3"),
    ):
        until(lambda: score_zone(sandbox, second), what="inventory")
        namespace = kube.namespace(enabled=True)
        policy = propagation_policy(unique("web"), namespace, placement=selected(group))
        assert carbon_order(kube.apply_json(policy, "--dry-run=server")) == [first]

        kube.ok("label", CLUSTERS, second, f"e2e-group={group}")
        started = time.monotonic()
        until(
            lambda: (
                set(carbon_order(kube.apply_json(policy, "--dry-run=server"))) == {first, second}
            ),
            what="the relabelled cluster in the next admission",
        )
        assert time.monotonic() - started < SECONDS

        # A carbonshift.io/zone label beats the region table at once as well.
        kube.ok("label", CLUSTERS, first, f"{vocabulary.ZONE}=PL")
        until(lambda: score_zone(sandbox, first) == "PL", what="the labelled zone")


def test_intensity_clusters_lists_the_fleet_of_the_api_server(sandbox: Sandbox, kube: Kube) -> None:
    name = unique("cli-aws")
    with clusters(kube, karmada_cluster(name, {}, provider="aws", region="eu-north-1")):
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        result = subprocess.run(
            [*sandbox.carbonshift_command, "intensity", "--clusters", "-o", "json",
             f"--config={sandbox.layout.carbonshift_config}",
             f"--kubeconfig={sandbox.kubeconfig}"],
            capture_output=True, text=True, timeout=60, check=False, env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        rows = {row["cluster"]: row for row in json.loads(result.stdout)}
        assert {"member-se", "member-fr", "member-pl", name} <= set(rows)
        assert (rows[name]["zone"], rows[name]["zone_source"]) == ("SE-SE3", "region-table")
        assert rows[name]["intensity"]["value"] > 0
        assert rows["member-fr"]["zone"] == "FR"
        assert rows["member-fr"]["ready"] is True


# --- the API server out of reach ----------------------------------------------------------


class Cuttable:
    """A TCP forwarder to kube-apiserver that the test can cut and restore (on one port)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.server: asyncio.Server | None = None
        self.links: list[asyncio.StreamWriter] = []

    async def open(self) -> None:
        self.server = await asyncio.start_server(self._link, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Refuse new connections and reset every open one."""
        assert self.server is not None
        self.server.close()
        for writer in self.links:
            writer.transport.abort()
        self.links.clear()
        await self.server.wait_closed()
        self.server = None

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.transport.abort()
            return
        self.links += [writer, up_writer]
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.transport.abort()


@pytest.fixture
async def proxy(sandbox: Sandbox) -> AsyncIterator[Cuttable]:
    forwarder = Cuttable(sandbox.ports["kube-apiserver"])
    await forwarder.open()
    try:
        yield forwarder
    finally:
        if forwarder.server is not None:
            await forwarder.cut()


def review(policy: dict[str, Any], uid: str) -> dict[str, Any]:
    meta = policy["metadata"]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "policy.karmada.io", "version": "v1alpha1",
                     "kind": "PropagationPolicy"},
            "operation": "CREATE",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "object": policy,
        },
    }  # fmt: skip


OUTAGE_SECONDS = 20
"""How long the API server stays out of reach."""


async def test_admissions_answer_from_memory_while_the_api_server_is_out_of_reach(
    sandbox: Sandbox, kube: Kube, proxy: Cuttable, tmp_path: Path
) -> None:
    from webhook import app  # noqa: PLC0415

    kubeconfig = yaml.safe_load(sandbox.kubeconfig.read_text())
    kubeconfig["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    config = load(sandbox.layout.carbonshift_config)
    port = free_port()
    settings = Settings(tmp_path / "kubeconfig", "default", "outage-e2e", unique("outage-leader"))
    group, name = unique("g"), unique("outage")
    policy = propagation_policy(unique("web"), "shop", placement=selected(group))
    base = f"https://127.0.0.1:{port}"
    stop = asyncio.Event()
    certs = tmp_path / "certs"

    with clusters(
        kube, karmada_cluster(name, {"e2e-group": group}, provider="aws", region="eu-north-1")
    ):
        task = asyncio.create_task(
            app.run(config, host="127.0.0.1", port=port, cert_dir=certs, stop=stop, kube=settings)
        )
        try:
            async with aiohttp.ClientSession() as session:

                async def get(path: str) -> tuple[int, dict[str, Any]]:
                    tls = ssl.create_default_context(cafile=str(certs / "ca.crt"))
                    async with session.get(base + path, ssl=tls) as resp:
                        return resp.status, await resp.json()

                async def mutate(uid: str) -> set[str]:
                    """The clusters a direct POST to /mutate weighs."""
                    tls = ssl.create_default_context(cafile=str(certs / "ca.crt"))
                    body = review(policy, uid)
                    async with session.post(f"{base}/mutate", json=body, ssl=tls) as resp:
                        assert resp.status == 200
                        answer = await resp.json()
                    patch = answer["response"].get("patch")
                    return named(json.loads(base64.b64decode(patch))) if patch else set()

                async def synced() -> bool:
                    if task.done():
                        task.result()
                    with contextlib.suppress(aiohttp.ClientError, OSError):
                        status, body = await get("/readyz")
                        return status == 200 and body.get("inventorySynced") is True
                    return False

                async def not_synced() -> bool:
                    status, body = await get("/readyz")
                    return status == 200 and body.get("inventorySynced") is False

                async def weighs_only_ours() -> bool:
                    return await mutate(unique("u")) == {name}

                async def weighs_none() -> bool:
                    return await mutate(unique("u")) == set()

                await eventually(synced, 30)
                await eventually(weighs_only_ours)

                await proxy.cut()
                await eventually(not_synced)
                started = time.monotonic()
                while time.monotonic() - started < OUTAGE_SECONDS:
                    status, body = await get("/readyz")
                    assert status == 200, body
                    assert body["inventorySynced"] is False, body
                    assert await mutate(unique("during")) == {name}  # from memory
                    await asyncio.sleep(0.3)

                await proxy.open()
                await eventually(synced, 60)  # resynced
                kube.ok("label", CLUSTERS, name, "e2e-group-")  # followed again
                await eventually(weighs_none)
        finally:
            stop.set()
            await task


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = SECONDS) -> None:  # noqa: ASYNC109
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < timeout, f"{check.__name__} not reached in time"
        await asyncio.sleep(0.2)


def named(value: Any) -> set[str]:
    """Every cluster a JSON patch names (ordered-fill tiers, static weights)."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("path"), str) and value["path"].endswith("/clusterNames"):
            value = {"clusterNames": value.get("value")}
        found.update(value.get("clusterNames") or [])
        for inner in value.values():
            found |= named(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= named(inner)
    return found
