"""Objects generated from the real CRD schemas, sent through the real kube-apiserver with
``dryRun: All``: carbonshift's webhook (registered in the sandbox) mutates them, then the
API server checks the CRD schema and its CEL rules and karmada-webhook validates the
Karmada kinds. Every object the API server accepts as generated (opted out) must also be
accepted as carbonshift patched it (opted in); at least 500 of those carry a patch."""

from __future__ import annotations

import asyncio
import copy
import time
from collections import Counter
from typing import Any

from e2e_support import DECISION, DEMO, ENABLED, Kube
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from devtools.sandbox import Sandbox
from tests.serve.crd_values import FUZZ, KINDS, crd_schema, from_schema
from webhook.kube.client import Settings, connect
from webhook.runtime.tasks import closed

EXAMPLES = {"PropagationPolicy": 800, "ClusterPropagationPolicy": 700, "NodePool": 500}
WANT_PATCHED = 500
CONCURRENCY = 8
PLACEMENTS = st.sampled_from(
    [
        {"replicaScheduling": {"replicaSchedulingType": "Divided"}},
        {"clusterAffinity": {"clusterNames": list(DEMO)},
         "replicaScheduling": {"replicaSchedulingType": "Divided",
                               "replicaDivisionPreference": "Weighted"}},
        {"clusterAffinity": {"clusterNames": list(DEMO[1:])},
         "replicaScheduling": {"replicaSchedulingType": "Divided"}},
    ]
)  # fmt: skip
"""Divided placements over the sandbox's members: a generated placement mostly names
clusters no fleet has (carbonshift then leaves it alone), so most policies get one of
these instead and the rest of the spec stays as generated."""


def generated(kind: str, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    @settings(FUZZ, max_examples=count)
    @given(obj=from_schema(crd_schema(kind)), placement=PLACEMENTS, keep=st.integers(0, 9))
    def collect(obj: dict[str, Any], placement: dict[str, Any], keep: int) -> None:
        if kind != "NodePool":
            if keep < 9:  # nine in ten (Hypothesis favours 0)
                obj["spec"]["placement"] = placement
            for selector in obj["spec"].get("resourceSelectors", []):
                selector.pop("namespace", None)  # karmada-webhook: must be the policy's own
        found.append(obj)

    collect()
    return found


def opted(obj: dict[str, Any], name: str, enabled: bool) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name
    out["metadata"]["labels"] = {ENABLED: "true" if enabled else "false"}
    return out


async def dry_run(
    api: CustomObjectsApi, kind: str, namespace: str, body: dict[str, Any]
) -> tuple[dict[str, Any] | None, str, str]:
    """The object as the API server would store it (None if refused), the refusal, and
    the warnings it answered with."""
    group, version, plural, scoped = KINDS[kind]
    try:
        if scoped:
            stored, _, headers = await api.create_namespaced_custom_object_with_http_info(
                group, version, namespace, plural, body, dry_run="All"
            )
        else:
            stored, _, headers = await api.create_cluster_custom_object_with_http_info(
                group, version, plural, body, dry_run="All"
            )
    except ApiException as exc:
        return None, f"{exc.status}: {str(exc.body)[:300]}", ""
    return stored, "", str(headers.get("Warning", ""))


async def test_patched_objects_pass_the_real_api_server(sandbox: Sandbox, kube: Kube) -> None:
    namespace = kube.namespace(enabled=True)
    client: ApiClient = await connect(Settings(sandbox.kubeconfig, "default", "fuzz-dry-run"))
    api = CustomObjectsApi(client)
    tally: Counter[str] = Counter()
    broken: list[str] = []
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(kind: str, i: int, obj: dict[str, Any]) -> None:
        name = f"fuzz-{kind.lower()}-{i}"
        async with gate:
            _, refused, _ = await dry_run(api, kind, namespace, opted(obj, name, enabled=False))
            if refused:
                tally["invalid as generated"] += 1  # e.g. a CEL rule the generator ignores
                return
            stored, refused, warning = await dry_run(
                api, kind, namespace, opted(obj, name, enabled=True)
            )
        if stored is None:
            broken.append(f"{kind} {name}: accepted as written, refused as patched: {refused}")
            return
        patched = DECISION in (stored["metadata"].get("annotations") or {})
        tally[f"{kind} {'patched' if patched else 'unchanged'}"] += 1
        tally["patched" if patched else "unchanged"] += 1
        if "carbonshift: overloaded" in warning:
            tally["shed (overloaded)"] += 1

    started = time.monotonic()
    try:
        for kind, count in EXAMPLES.items():
            objects = generated(kind, count)
            await asyncio.gather(*(one(kind, i, obj) for i, obj in enumerate(objects)))
    finally:
        await closed(client.close())
    seconds = time.monotonic() - started
    print(f"\ndry-run through kube-apiserver: {dict(sorted(tally.items()))} in {seconds:.1f} s")
    assert broken == [], broken[:5]
    assert tally["patched"] >= WANT_PATCHED, tally
