"""Open Cluster Management: ManagedClusters as places with a grid, and their carbon scores
(pure: no I/O, no clock).

OCM's placement controller ranks ManagedClusters on ``AddOnPlacementScore`` objects: one
per cluster, in the namespace named after the ManagedCluster, whose ``status.scores[]``
hold integer scores in [-100, 100] (higher is preferred) until ``status.validUntil``. The
leader publishes one named :data:`RESOURCE` per ManagedCluster with two scores:

- :data:`INTENSITY_SCORE`: the grid's current intensity;
- :data:`FORECAST_SCORE`: the mean of the forecast window policies rank on
  (:func:`webhook.decision.forecast.ranking_value`; the current intensity without a
  forecast);

both through :func:`score`: 100 at 0 gCO2eq/kWh, 0 at half of
:data:`~webhook.decision.ranking.CEILING`, -100 at the ceiling and above (linear, so a
score keeps the intensity it stands for to within 5 gCO2eq/kWh). ``validUntil`` is when
the reading behind the scores turns stale (its period's end plus ``feed.max_age_seconds``);
OCM scores an expired object 0, as it scores a cluster without one.

A ManagedCluster's grid zone resolves in the order of a Karmada Cluster's
(:mod:`webhook.decision.fleet`, the same functions): the ``carbonshift.io/zone`` label,
then annotation; the config's ``clusters.<name>``; the region table for the cloud and
region the cluster reports (its ``status.clusterClaims`` ``platform.open-cluster-management.io``
and ``region.open-cluster-management.io``, else the well-known labels ``cloud`` and
``region`` / ``topology.kubernetes.io/region``); else unknown.

:func:`due` is the write rule: a score is rewritten only when the intensity it stands for
moved by more than ``hysteresis.margin`` (relative), a score is missing, or the published
``validUntil`` is about to lapse while newer data holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from webhook.decision.fleet import ClusterEntry, configured_zone, declared_zone
from webhook.decision.ranking import CEILING
from webhook.model.config import Config
from webhook.model.intensity import Reading
from webhook.model.objects import items, mapping, meta_of
from webhook.model.resources import Resource
from webhook.model.validation import InvalidInput
from webhook.model.vocabulary import format_time, parse_time

GROUP = "cluster.open-cluster-management.io"
CLUSTERS = Resource(GROUP, "v1", "managedclusters", "ManagedCluster")
"""``ManagedCluster`` (cluster-scoped)."""
SCORE_KIND = "AddOnPlacementScore"
SCORES = Resource(GROUP, "v1alpha1", "addonplacementscores", SCORE_KIND)
"""``AddOnPlacementScore`` (namespaced; status subresource)."""
RESOURCE = "carbon"
"""The AddOnPlacementScore's name: a Placement's ``addOn.resourceName``."""
INTENSITY_SCORE = "intensity"
"""The score from the current intensity: a Placement's ``addOn.scoreName``."""
FORECAST_SCORE = "forecast"
"""The score from the forecast window's mean intensity."""
MAX_SCORE = 100

PLATFORM_CLAIM = "platform.open-cluster-management.io"
REGION_CLAIM = "region.open-cluster-management.io"
CLOUD_LABEL = "cloud"
REGION_LABELS = ("region", "topology.kubernetes.io/region")
AVAILABLE = "ManagedClusterConditionAvailable"
PLATFORMS: Mapping[str, str] = {
    "aws": "aws",
    "amazon": "aws",
    "eks": "aws",
    "gcp": "gcp",
    "gce": "gcp",
    "google": "gcp",
    "gke": "gcp",
    "azure": "azure",
    "aks": "azure",
}
"""Platform claim / ``cloud`` label values (OCM and its distributions write ``AWS``,
``Amazon``, ``GCP``, ``Google``, ``Azure``...) -> the region table's provider."""


def _claims(status: object) -> dict[str, str]:
    claims = status.get("clusterClaims") if isinstance(status, Mapping) else None
    if not isinstance(claims, list):
        return {}
    return {
        str(c["name"]): c["value"].strip()
        for c in claims
        if isinstance(c, Mapping) and isinstance(c.get("value"), str) and c.get("name")
    }


def _available(obj: Mapping[str, Any]) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == AVAILABLE and c.get("status") == "True"
        for c in items(obj, "status", "conditions")
    )


def managed_cluster(obj: Mapping[str, Any], config: Config) -> ClusterEntry:
    """A ManagedCluster object as the fleet inventory's entry of a cluster (no availability
    zones; ready: its ``ManagedClusterConditionAvailable`` condition is True);
    :class:`InvalidInput` when it has no name."""
    meta = meta_of(obj)
    name = meta.name
    if not name:
        raise InvalidInput("metadata.name", "missing")
    labels, annotations = dict(meta.labels), meta.annotations
    claims = _claims(obj.get("status"))
    platform = claims.get(PLATFORM_CLAIM) or labels.get(CLOUD_LABEL)
    provider = PLATFORMS.get(platform.strip().lower()) if platform else None
    region = claims.get(REGION_CLAIM) or next(
        (r for key in REGION_LABELS if (r := labels.get(key, "").strip())), None
    )
    zone, source, problems = declared_zone(labels, annotations)
    if zone is None:
        zone, source = configured_zone(name, provider, region, config)
    return ClusterEntry(name, labels, provider, region, (), _available(obj), zone, source, problems)


def score(intensity: float | None) -> int | None:
    """OCM score in [-100, 100] for an intensity (greener higher); None when unknown."""
    if intensity is None:
        return None
    clipped = min(max(intensity, 0.0), CEILING)
    return round(MAX_SCORE - 2 * MAX_SCORE * clipped / CEILING)


def intensity_of(value: int) -> float:
    """The intensity a score stands for (the inverse of :func:`score` inside its range)."""
    clipped = min(max(value, -MAX_SCORE), MAX_SCORE)
    return (MAX_SCORE - clipped) * CEILING / (2 * MAX_SCORE)


@dataclasses.dataclass(frozen=True, slots=True)
class Scores:
    """What one AddOnPlacementScore's status says (or should say)."""

    values: Mapping[str, int]
    """Score name -> value."""
    valid_until: datetime | None


def scores(current: Reading | None, ranked: Reading | None, max_age: timedelta) -> Scores | None:
    """The scores for a cluster's zone: ``current`` (the feed's reading), ``ranked`` (the
    same zone read as the forecast window's mean; None: as ``current``). None without a
    reading."""
    now_score = score(current.value if current is not None else None)
    if current is None or now_score is None:
        return None
    ahead = ranked if ranked is not None else current
    forecast_score = score(ahead.value)
    values = {INTENSITY_SCORE: now_score}
    if forecast_score is not None:
        values[FORECAST_SCORE] = forecast_score
    return Scores(values, current.valid_to + max_age)


def published(obj: Mapping[str, Any] | None) -> Scores | None:
    """The scores an AddOnPlacementScore object holds (None: no object)."""
    if obj is None:
        return None
    status = mapping(obj, "status")
    values: dict[str, int] = {}
    for item in items(status, "scores"):
        if isinstance(item, Mapping) and isinstance(item.get("value"), int):
            values[str(item.get("name"))] = int(item["value"])
    until: datetime | None = None
    raw = status.get("validUntil")
    if isinstance(raw, str):
        try:
            until = parse_time(raw)
        except ValueError:
            until = None
    return Scores(values, until)


def due(
    held: Scores | None, new: Scores, *, margin: float, now: datetime, renew: timedelta
) -> bool:
    """Whether ``new`` must be written over ``held`` (the published scores).

    Written when nothing is published, a score is missing or extra, a score's intensity
    moved by more than ``margin`` (relative to the published one's), or the published
    ``validUntil`` lapses within ``renew`` of ``now`` while ``new`` is valid longer (or the
    data behind it turned stale earlier than published)."""
    if held is None or set(held.values) != set(new.values):
        return True
    for name, value in new.values.items():
        before = held.values[name]
        if value == before:
            continue
        was, now_is = intensity_of(before), intensity_of(value)
        if abs(now_is - was) > margin * was:
            return True
    if new.valid_until is None or held.valid_until is None:
        return new.valid_until != held.valid_until
    if new.valid_until < held.valid_until:
        return True  # the data behind the scores expires earlier: say so
    return held.valid_until - now <= renew and new.valid_until > held.valid_until


def status(new: Scores) -> dict[str, Any]:
    """The AddOnPlacementScore ``status`` for ``new`` (scores sorted by name)."""
    body: dict[str, Any] = {
        "scores": [{"name": n, "value": v} for n, v in sorted(new.values.items())]
    }
    body["validUntil"] = format_time(new.valid_until) if new.valid_until is not None else None
    return body


def score_object(namespace: str) -> dict[str, Any]:
    """An empty AddOnPlacementScore :data:`RESOURCE` in ``namespace`` (its status is
    written through the status subresource)."""
    return {
        "apiVersion": SCORES.api_version,
        "kind": SCORE_KIND,
        "metadata": {
            "name": RESOURCE,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "carbonshift"},
        },
    }
