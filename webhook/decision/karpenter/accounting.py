"""A NodePool's counterfactual zones for the carbon accounting: the topology zones its
user's own requirements allow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.decision.accounting import record_of
from webhook.decision.record import user_view
from webhook.model.objects import items, mapping

_ZONE_KEYS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")


def nodepool_zones(nodepool: Mapping[str, Any], topology: Mapping[str, str]) -> list[str]:
    """The topology zones (of ``topology``: zone -> grid zone) the user's own requirements
    allow: the NodePool's ``spec.template.spec.requirements`` with what carbonshift owns
    put back."""
    current = mapping(nodepool, "spec", "template", "spec")
    requirements = user_view(current, record_of(nodepool), "template.").get("requirements")
    allowed = set(topology)
    for r in requirements if isinstance(requirements, list) else []:
        if not isinstance(r, Mapping) or r.get("key") not in _ZONE_KEYS:
            continue
        values = {str(v) for v in items(r, "values")}
        if r.get("operator") == "In":
            allowed &= values
        elif r.get("operator") == "NotIn":
            allowed -= values
    return sorted(allowed)
