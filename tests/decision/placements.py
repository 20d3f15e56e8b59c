"""PropagationPolicies for the placement tests: as the user wrote them (:func:`policy`,
:func:`divided`), as the webhook would store them (:func:`mutate`), and their static
weights (:func:`weights_of`)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from webhook.decision.karmada.placement import PolicyInputs, decide
from webhook.decision.outcome import Change
from webhook.decision.patch import build
from webhook.model.vocabulary import DECISION


def policy(placement: dict[str, Any] | None = None, **annotations: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}
    if placement is not None:
        spec["placement"] = placement
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "shop", "annotations": annotations},
        "spec": spec,
    }


def mutate(obj: dict[str, Any], inputs: PolicyInputs) -> tuple[dict[str, Any], list[str]]:
    """What the webhook would store, and the warnings."""
    decision = decide(obj, inputs)
    changes = list(decision.changes)
    if changes and decision.record is not None:
        changes.append(Change(("metadata", "annotations", DECISION), decision.record.encode()))
    return jsonpatch.apply_patch(copy.deepcopy(obj), build(obj, changes)), decision.warnings


def divided() -> dict[str, Any]:
    return {"replicaScheduling": {"replicaSchedulingType": "Divided"}}


def weights_of(obj: dict[str, Any]) -> dict[str, int]:
    """Per-cluster static weights (catch-all entries for unknown clusters left out)."""
    entries = obj["spec"]["placement"]["replicaScheduling"]["weightPreference"]["staticWeightList"]
    return {
        e["targetCluster"]["clusterNames"][0]: e["weight"]
        for e in entries
        if e["targetCluster"].get("clusterNames")
    }
