"""Offline preview: run manifests through the admission path and apply the patches.

``carbonshift mutate`` builds the AdmissionReview the API server would send for a
CREATE, runs it through :func:`webhook.serve.admission.admit` (the webhook's own code path)
and applies the returned JSON Patch, so what it prints is what would be stored.
``carbonshift mutate --reevaluate`` instead treats each manifest as stored (e.g. from
``kubectl get -o yaml``) and runs the leader's re-evaluation on it
(:class:`webhook.kinds.reevaluation.Reevaluation`, the reconciler's own code), printing what
the leader would write.
"""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import jsonpatch

from webhook import kinds
from webhook.decision.outcome import Change
from webhook.kinds.reevaluation import Reevaluation, target_of
from webhook.model.objects import Obj
from webhook.model.validation import InvalidInput
from webhook.model.vocabulary import DECISION, ENABLED
from webhook.serve import admission, reviews


@dataclasses.dataclass(frozen=True, slots=True)
class Preview:
    """One document's result."""

    stored: Mapping[str, Any]
    outcome: admission.Outcome


def review_for(obj: Mapping[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    """The ``request`` part of the AdmissionReview kube-apiserver would send."""
    view = Obj(obj)
    group, kind, meta = view.group, view.kind, view.meta
    row = kinds.find(group, kind)
    namespaced = row.namespaced if row is not None else bool(meta.namespace)
    return {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": view.version, "kind": kind},
        "operation": operation,
        "namespace": (meta.namespace or "default") if namespaced else "",
        "name": meta.raw.get("name", ""),  # as written: the review refuses a wrong type
        "object": obj,
        "oldObject": None,
        "dryRun": True,
    }


def preview(documents: Iterable[Mapping[str, Any]], ctx: kinds.Context) -> list[Preview]:
    """Admit each document as a CREATE and apply the resulting patch.

    A document the API server would not send (an API version the webhook does not
    register) or could not have sent (a malformed object) comes back unchanged with
    outcome ``ignored`` or ``invalid`` and the reason; the others are decided as usual.
    """
    return [_one(doc, ctx) for doc in documents]


def _one(doc: Mapping[str, Any], ctx: kinds.Context) -> Preview:
    request = review_for(doc)
    kind = request["kind"]
    unchanged = admission.Outcome(uid=request["uid"], kind=kind["kind"], name=request["name"])
    row = kinds.find(kind["group"], kind["kind"])
    if row is not None and row.version != kind["version"]:
        unchanged.reason = f"{doc.get('apiVersion')} is not registered"
        unchanged.warnings = (
            f"carbonshift: {kind['kind']} {doc.get('apiVersion')} is not mutated; "
            f"the webhook handles {row.api_version}",
        )
        return Preview(stored=doc, outcome=unchanged)
    try:
        outcome = admission.admit(reviews.request_of(request), ctx)
    except InvalidInput as exc:
        unchanged.result, unchanged.reason = "invalid", str(exc)
        return Preview(stored=doc, outcome=unchanged)
    stored = copy.deepcopy(dict(doc))
    if outcome.patch:
        stored = jsonpatch.apply_patch(stored, outcome.patch)
    return Preview(stored=stored, outcome=outcome)


OPTED_IN = {ENABLED: "true"}
"""The labels a namespaced object's namespace is assumed to carry offline: a stored
object with a decision annotation was admitted in an opted-in namespace."""


def reevaluate(
    documents: Iterable[Mapping[str, Any]], ctx: kinds.Context, rules: Reevaluation
) -> list[Preview]:
    """Re-evaluate each stored object as the leader would at ``ctx.now``.

    The outcome's ``result`` is the step's (``kept``, ``switched``, ``too_soon``,
    ``stale``, ``user_owned``, ``skipped``; ``ignored`` for kinds not re-evaluated), its
    ``reason`` the step's why, and ``stored`` the object after the leader's write.
    """
    out = []
    for doc in documents:
        view = Obj(doc)
        name, kind = view.meta.name, view.kind
        outcome = admission.Outcome(uid="", kind=kind, name=name, operation="REEVALUATE")
        target = target_of(view.api_version, kind)
        if target is None:
            outcome.reason = f"{doc.get('apiVersion')} {kind} is not re-evaluated"
            out.append(Preview(stored=doc, outcome=outcome))
            continue
        action = rules.decide(target, doc, ctx, OPTED_IN)
        outcome.result, outcome.reason = action.outcome, action.reason
        outcome.decision = _annotation(action.changes)
        out.append(Preview(stored=action.applied(doc), outcome=outcome))
    return out


def _annotation(changes: Iterable[Change]) -> str | None:
    found = [c.value for c in changes if c.path == ("metadata", "annotations", DECISION)]
    return str(found[-1]) if found else None
