"""Liqo virtual nodes as places with a grid (pure: no I/O, no clock).

A Liqo virtual node stands for a remote (provider) cluster: Liqo labels it
``liqo.io/type=virtual-node`` and ``liqo.io/remote-cluster-id=<cluster id>``, and copies
onto it the labels the provider cluster declares with ``--cluster-labels``
(conventionally ``liqo.io/provider`` and ``topology.kubernetes.io/region``; a provider
cluster may declare ``carbonshift.io/zone`` the same way). Zones or other labels of the
provider's own nodes are not copied.

Its grid zone resolves in the order of a Karmada Cluster's
(:mod:`webhook.decision.fleet`, the same functions): the ``carbonshift.io/zone`` label,
then annotation, on the virtual node; the config's ``clusters.<cluster id>``; the region
table for ``liqo.io/provider`` + ``topology.kubernetes.io/region``; else unknown. Every
other Node is local and keeps the local cluster's zone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from webhook.decision.fleet import ZoneSource, configured_zone, declared_zone
from webhook.model.config import ClusterConfig, Config
from webhook.model.objects import meta_of
from webhook.model.validation import InvalidInput

TYPE_LABEL = "liqo.io/type"
VIRTUAL_NODE = "virtual-node"
REMOTE_ID_LABEL = "liqo.io/remote-cluster-id"
PROVIDER_LABEL = "liqo.io/provider"
REGION_LABEL = "topology.kubernetes.io/region"
SELECTOR = f"{TYPE_LABEL}={VIRTUAL_NODE}"
"""The label selector of every virtual node."""
PROVIDERS: Mapping[str, str] = {
    "aws": "aws",
    "eks": "aws",
    "gcp": "gcp",
    "gke": "gcp",
    "google": "gcp",
    "azure": "azure",
    "aks": "azure",
}
"""``liqo.io/provider`` values (Liqo's install providers and cloud names) -> the region
table's provider; any other value (``kind``, ``k3s``, ``kubeadm``...) names no cloud."""


def is_virtual(labels: Mapping[str, str]) -> bool:
    """The Node is a Liqo virtual node."""
    return labels.get(TYPE_LABEL) == VIRTUAL_NODE


def provider_of(labels: Mapping[str, str]) -> str | None:
    """The region table's provider for a virtual node's ``liqo.io/provider`` label."""
    raw = labels.get(PROVIDER_LABEL)
    return PROVIDERS.get(raw.strip().lower()) if raw else None


@dataclasses.dataclass(frozen=True, slots=True)
class Peer:
    """One virtual node: the remote cluster behind it and its grid zone."""

    node: str
    cluster_id: str
    labels: Mapping[str, str]
    provider: str | None
    region: str | None
    grid_zone: str | None
    zone_source: ZoneSource
    problems: tuple[InvalidInput, ...] = ()
    """Values that were ignored (a malformed ``carbonshift.io/zone``)."""


def peer_zone(
    cluster_id: str,
    declared: tuple[str | None, ZoneSource],
    provider: str | None,
    region: str | None,
    config: Config,
) -> tuple[str | None, ZoneSource]:
    """A remote cluster's zone: ``declared`` (:func:`fleet.declared_zone` on its virtual
    node) when it names one, else :func:`fleet.configured_zone` by its cluster id."""
    if declared[0] is not None:
        return declared
    return configured_zone(cluster_id, provider, region, config)


def peer(node: Mapping[str, Any], config: Config) -> Peer:
    """The :class:`Peer` of a virtual Node object; :class:`InvalidInput` when it is not a
    virtual node or names no remote cluster."""
    meta = meta_of(node)
    name, labels = meta.name, meta.labels
    if not name:
        raise InvalidInput("metadata.name", "missing")
    if not is_virtual(labels):
        raise InvalidInput(f"metadata.labels.{TYPE_LABEL}", f"must be {VIRTUAL_NODE}")
    cluster_id = labels.get(REMOTE_ID_LABEL)
    if not isinstance(cluster_id, str) or not cluster_id:
        raise InvalidInput(f"metadata.labels.{REMOTE_ID_LABEL}", "missing")
    zone, source, problems = declared_zone(labels, meta.annotations)
    provider, region = provider_of(labels), labels.get(REGION_LABEL) or None
    zone, source = peer_zone(cluster_id, (zone, source), provider, region, config)
    return Peer(name, cluster_id, dict(labels), provider, region, zone, source, problems)


def place(found: Peer) -> ClusterConfig:
    """A remote cluster as decisions read it: its id, grid zone and virtual node labels."""
    return ClusterConfig(
        name=found.cluster_id,
        zone=found.grid_zone,
        provider=found.provider,
        region=found.region,
        labels=found.labels,
    )
