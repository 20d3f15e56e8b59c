"""Karmada cluster affinity matching (``pkg/util/selector.go`` ``ClusterMatches``).

``exclude`` is checked first; labelSelector, fieldSelector and clusterNames are ANDed.
fieldSelector keys are ``provider``, ``region`` (label-selector semantics on the
cluster's spec fields) and ``zone`` (In = any overlap with the cluster's zones,
NotIn = no overlap).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.model.config import ClusterConfig
from webhook.model.errors import SelectorError as SelectorError  # noqa: PLC0414 - callers import it here


def _strings(value: object, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SelectorError(f"{what} must be a list of strings")
    return value


def _expression_matches(expr: Mapping[str, Any], present: bool, value: str | None) -> bool:
    operator = expr.get("operator")
    values = _strings(expr.get("values"), "matchExpressions values")
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    raise SelectorError(f"unsupported selector operator {operator!r}")


def labels_match(selector: object, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: matchLabels AND every matchExpression."""
    if selector is None:
        return True
    if not isinstance(selector, Mapping):
        raise SelectorError("labelSelector must be an object")
    match_labels = selector.get("matchLabels") or {}  # untyped: input check, bad types refused
    if not isinstance(match_labels, Mapping):
        raise SelectorError("matchLabels must be an object")
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    expressions = selector.get("matchExpressions") or []  # untyped: input check, bad types refused
    if not isinstance(expressions, list):
        raise SelectorError("matchExpressions must be a list")
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise SelectorError("each matchExpression must be an object")
        key = expr.get("key")
        if not isinstance(key, str):
            raise SelectorError("matchExpressions need a key")
        if not _expression_matches(expr, key in labels, labels.get(key)):
            return False
    return True


def fields_match(selector: object, cluster: ClusterConfig) -> bool:
    """Karmada fieldSelector on provider, region and zone."""
    if selector is None:
        return True
    if not isinstance(selector, Mapping):
        raise SelectorError("fieldSelector must be an object")
    expressions = selector.get("matchExpressions") or []  # untyped: input check, bad types refused
    if not isinstance(expressions, list):
        raise SelectorError("fieldSelector.matchExpressions must be a list")
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise SelectorError("each fieldSelector expression must be an object")
        key, operator = expr.get("key"), expr.get("operator")
        values = set(_strings(expr.get("values"), "fieldSelector values"))
        if operator not in ("In", "NotIn"):
            raise SelectorError(f"fieldSelector operator must be In or NotIn, got {operator!r}")
        if key == "zone":
            overlap = bool(values & set(cluster.zones))
            if overlap != (operator == "In"):
                return False
        elif key in ("provider", "region"):
            value = cluster.provider if key == "provider" else cluster.region
            if not _expression_matches(expr, value is not None, value):
                return False
        else:
            raise SelectorError(f"fieldSelector key must be provider, region or zone, got {key!r}")
    return True


def allowed_clusters(
    affinity: Mapping[str, Any] | None, known: Mapping[str, ClusterConfig]
) -> list[str]:
    """Names a ClusterAffinity allows, sorted.

    Without ``clusterNames`` the pool is the known (configured) clusters. Named clusters
    that are not configured are kept when not excluded: their labels and region are
    unknown here, and Karmada still applies the selectors itself.
    """
    if affinity is None:
        return sorted(known)
    if not isinstance(affinity, Mapping):
        raise SelectorError("clusterAffinity must be an object")
    excluded = set(_strings(affinity.get("exclude"), "exclude"))
    names: Sequence[str] = _strings(affinity.get("clusterNames"), "clusterNames") or sorted(known)
    allowed = []
    for name in names:
        if name in excluded:
            continue
        cluster = known.get(name)
        if cluster is not None and not (
            labels_match(affinity.get("labelSelector"), cluster.labels)
            and fields_match(affinity.get("fieldSelector"), cluster)
        ):
            continue
        allowed.append(name)
    return sorted(set(allowed))


def is_open(affinity: object) -> bool:
    """True when an affinity can match clusters not named in it: no ``clusterNames``.

    Such an affinity (selectors only, only ``exclude``, or none at all: every cluster)
    also matches clusters carbonshift does not know and clusters that join later.
    """
    if affinity is None:
        return True
    if type(affinity) is not dict and not isinstance(affinity, Mapping):
        return False
    return not affinity.get("clusterNames")
