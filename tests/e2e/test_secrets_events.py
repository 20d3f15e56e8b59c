"""Provider credentials stay out of what the leader writes to the real API server (the
Cluster's carbonshift.io annotations, its Events) and out of the log, while every
provider refuses the credentials (and the upstream echoes the token back)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import yaml
from e2e_support import Kube, unique

from devtools.sandbox import Sandbox
from tests.providers.failing import EM_TOKEN, assert_clean, failing_providers
from tests.serving import serve_process
from tests.support import FakeUpstream, Reply
from webhook.model import vocabulary

CLUSTERS = "clusters.cluster.karmada.io"


def cluster(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": {vocabulary.ZONE: "FR"}},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1"},
    }


async def test_no_secret_in_what_the_leader_writes(
    sandbox: Sandbox, kube: Kube, fake: FakeUpstream, tmp_path: Path
) -> None:
    refused = Reply({"message": f"bad token {EM_TOKEN}"}, status=401)
    sections, env = failing_providers(fake, tmp_path, refused)
    config = {**sections, "labels": {"interval_seconds": 1}}
    env["POD_NAME"] = unique("secrets")
    name, lease = unique("secrets"), unique("carbonshift-leader")
    kube.apply(cluster(name))
    args = (f"--kubeconfig={sandbox.kubeconfig}", "--lease-namespace=default",
            f"--lease-name={lease}", "--log-level=debug")  # fmt: skip
    try:
        async with serve_process(config, tmp_path, *args, env=env) as server:
            events: list[dict[str, Any]] = []
            started = time.monotonic()
            # Until the label's Event (an IntensityDataMissing Warning may come first, while
            # the failing provider is asked and the feed falls back).
            while not any(e.get("reason") == "IntensityClassChanged" for e in events):
                assert time.monotonic() - started < 30, server.log.read_text()[-2000:]
                await asyncio.sleep(0.5)
                out = kube.ok("get", "events.events.k8s.io", "-n", "default", "-o", "yaml")
                events = [
                    e
                    for e in yaml.safe_load(out)["items"]
                    if e.get("regarding", {}).get("name") == name
                    and e.get("reportingInstance") == env["POD_NAME"]
                ]
            stored = kube.get(CLUSTERS, name)
            code, _ = await asyncio.to_thread(server.terminate)
            log = server.log.read_text()
    finally:
        kube.ok("delete", CLUSTERS, name, "--wait=false")
    assert code == 0
    assert stored["metadata"]["labels"].get(vocabulary.INTENSITY_CLASS)
    assert_clean(yaml.safe_dump(events), yaml.safe_dump(stored["metadata"]), log)
    assert any(s.headers.get("auth-token") == EM_TOKEN for s in fake.seen)
