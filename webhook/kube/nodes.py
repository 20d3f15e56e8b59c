"""The local grid zone from the cluster's own Nodes (Karpenter NodePools are classed by it).

Each Node names its cloud region (label ``topology.kubernetes.io/region``) and its cloud
provider (the ``spec.providerID`` prefix: ``aws:///eu-north-1a/i-...`` is aws,
``gce://...`` gcp, ``azure://...`` azure); the region table (:mod:`webhook.model.regions`, the
one Karmada Clusters go through) turns them into a grid zone. A Node labelled
``carbonshift.io/grid-zone`` names its zone directly. :func:`resolve` (pure) takes the
zone most Nodes give, else the config's ``zone``; with neither the zone is unknown, and
NodePools are left alone with a warning (admission), a readiness detail (``/readyz``
``localZone``) and a log line.

:class:`NodeZones` lists the Nodes (one page, :data:`PAGE`; only labels and providerID
are read) every :data:`INTERVAL_SECONDS` (every :data:`UNKNOWN_RETRY_SECONDS` while the
zone is unknown): a region does not change under a running node, so a list now and then
is enough, and a failed list keeps the last answer. It also keeps the NodePools' names:
a limited NodePool's warnings say where urgent pods can still land.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import structlog
from kubernetes_asyncio import client

from webhook.decision.liqo import peers as liqo
from webhook.kube.client import REQUEST_TIMEOUT, absent, refused
from webhook.model.objects import dig, items, meta_of
from webhook.model.regions import zone_for_region
from webhook.model.validation import InvalidInput
from webhook.model.vocabulary import GRID_ZONE, zone
from webhook.runtime import tasks

log = structlog.get_logger("carbonshift.nodes")

REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
PROVIDER_PREFIXES: Mapping[str, str] = {"aws": "aws", "gce": "gcp", "azure": "azure"}
"""``spec.providerID`` scheme -> the region table's provider name."""
PAGE = 100
"""Nodes read per list (a sample: every node of a cluster is in the same region)."""
INTERVAL_SECONDS = 300.0
UNKNOWN_RETRY_SECONDS = 10.0
"""While the zone is unknown, the Nodes are listed again this soon (a first node, or its
region label, may be on its way)."""
NODEPOOLS = "nodepools.karpenter.sh"
Source = Literal["node-label", "node-region", "config", "unknown"]


@dataclasses.dataclass(frozen=True, slots=True)
class LocalZone:
    """The grid zone NodePools are classed by, and where it comes from."""

    zone: str | None
    source: Source
    detail: str

    def readiness(self) -> dict[str, Any]:
        """The ``/readyz`` entry."""
        return {"zone": self.zone, "source": self.source, "detail": self.detail}


def provider_of(provider_id: object) -> str | None:
    """``aws:///eu-north-1a/i-0abc`` -> ``aws``; None for other schemes (kind, kwok)."""
    if not isinstance(provider_id, str) or "://" not in provider_id:
        return None
    return PROVIDER_PREFIXES.get(provider_id.split("://", 1)[0].lower())


def node_zone(node: Mapping[str, Any]) -> tuple[str | None, str]:
    """One Node's grid zone (None: unknown) and what it says (``aws/eu-north-1``)."""
    labels = meta_of(node).labels
    if GRID_ZONE in labels:
        try:
            return zone(labels[GRID_ZONE]), f"{GRID_ZONE}={labels[GRID_ZONE]}"
        except InvalidInput:
            pass
    region = next((labels[k] for k in REGION_LABELS if labels.get(k)), None)
    provider = provider_of(dig(node, "spec", "providerID"))
    said = f"{provider or '?'}/{region or '?'}"
    if region is None:
        return None, said
    return zone_for_region(provider, region), said


def resolve(nodes: Iterable[Mapping[str, Any]], configured: str | None) -> LocalZone:
    """The zone most Nodes give (ties: the first by name), else ``configured``."""
    votes: Counter[str] = Counter()
    labelled = False
    unknown: set[str] = set()
    for node in nodes:
        if liqo.is_virtual(meta_of(node).labels):
            continue  # a Liqo virtual node stands for a remote cluster, on its own grid
        found, said = node_zone(node)
        if found is None:
            unknown.add(said)
            continue
        votes[found] += 1
        labelled |= said.startswith(GRID_ZONE)
    if votes:
        best = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))
        top, count = best[0]
        detail = f"{count} of {sum(votes.values())} nodes"
        if len(best) > 1:
            others = ", ".join(f"{z} ({n})" for z, n in best[1:])
            detail += f"; other nodes say {others}"
        return LocalZone(top, "node-label" if labelled else "node-region", detail)
    if configured:
        return LocalZone(configured, "config", "config zone (no node names a known region)")
    seen = ", ".join(sorted(unknown)[:3]) or "no nodes"
    return LocalZone(
        None,
        "unknown",
        f"no node names a region the region table knows ({seen}) and config zone is not set:"
        f" label a node {GRID_ZONE}=<zone> or set zone",
    )


class NodeZones:
    """The local zone from the Nodes the API server holds, refreshed in the background."""

    def __init__(self, configured: str | None) -> None:
        self.configured = configured
        self.current = resolve((), configured)
        self.pools: tuple[str, ...] | None = None
        """The cluster's NodePools by name (None: not listed, or Karpenter not installed)."""
        self._task: asyncio.Task[None] | None = None

    def update(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        """A new list of Nodes."""
        new = resolve(nodes, self.configured)
        if new.zone != self.current.zone or new.source != self.current.source:
            level = log.warning if new.zone is None else log.info
            level("local_zone", zone=new.zone, source=new.source, detail=new.detail)
        self.current = new

    def start(self, api: client.ApiClient, interval: float = INTERVAL_SECONDS) -> None:
        """List the Nodes now and every ``interval`` seconds (until :meth:`stop`)."""
        self._task = asyncio.create_task(self._run(api, interval), name="node-zones")

    async def _run(self, api: client.ApiClient, interval: float) -> None:
        core = client.CoreV1Api(api)
        while True:
            try:
                listed = await core.list_node(limit=PAGE, _request_timeout=REQUEST_TIMEOUT)
                self.update(items(api.sanitize_for_serialization(listed), "items"))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the last answer stays; listed again later
                log.warning("nodes_list_failed", error=str(exc))
            self.pools = await _nodepools(client.CustomObjectsApi(api), self.pools)
            known = self.current.zone is not None
            await asyncio.sleep(interval if known else min(interval, UNKNOWN_RETRY_SECONDS))

    async def stop(self) -> None:
        await tasks.cancel(self._task)
        self._task = None


async def _nodepools(
    objects: client.CustomObjectsApi, last: tuple[str, ...] | None
) -> tuple[str, ...] | None:
    """The NodePools' names (one page); None where Karpenter is not installed, ``last``
    when the list fails otherwise."""
    try:
        listed = await objects.list_cluster_custom_object(
            "karpenter.sh", "v1", "nodepools", limit=PAGE, _request_timeout=REQUEST_TIMEOUT
        )
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if absent(exc, NODEPOOLS) or refused(exc, "list", NODEPOOLS):
            return None
        log.warning("nodepools_list_failed", error=str(exc))
        return last
    return tuple(sorted(meta_of(o).name for o in items(listed, "items")))
