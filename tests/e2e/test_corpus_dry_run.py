"""Class 6, real components: what carbonshift writes into the upstream corpus objects is
accepted by a real kube-apiserver (CRD schema, the NodePool CRD's CEL rules) and Karmada's
own validating webhook, through ``kubectl apply --dry-run=server``.

Every distinct written shape (corpus object x annotation variant, run through the
webhook's admission code by ``webhook.cli.preview``) is sent once. The stored object carries
``carbonshift.io/enabled: "false"`` so the sandbox's carbonshift leaves it as it is; the
user's object is sent first, and only shapes whose user object the server accepts count
(documentation fragments without a ``resourceSelectors`` or ``nodeClassRef`` are not
objects anyone could create).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

import yaml
from e2e_support import Kube

from tests.semantics import fleet

MIN_ACCEPTED = 40
"""Written shapes whose user object the server accepts: far fewer means the set-up broke."""


def _affinity_shape(term: Mapping[str, Any]) -> tuple[str, ...]:
    keys = sorted(k for k, v in term.items() if v not in (None, [], {}))
    name = str(term.get("affinityName", ""))
    return (name if name.startswith("carbonshift-") else "user", *keys)


def shape(stored: Mapping[str, Any]) -> str:
    """What carbonshift wrote, without the values: one sample per shape is enough."""
    spec = stored.get("spec") or {}
    if stored.get("kind") == "NodePool":
        requirements = ((spec.get("template") or {}).get("spec") or {}).get("requirements") or []
        written = {
            "keys": sorted({r.get("key", "") for r in requirements}),
            "weight": "weight" in spec,
            "static": "replicas" in spec,
            "limits": sorted(spec.get("limits") or {}),
        }
    else:
        placement = spec.get("placement") or {}
        scheduling = placement.get("replicaScheduling") or {}
        preference = scheduling.get("weightPreference") or {}
        written = {
            "kind": stored.get("kind"),
            "fields": sorted(placement),
            "affinity": _affinity_shape(placement.get("clusterAffinity") or {}),
            "terms": [_affinity_shape(t) for t in placement.get("clusterAffinities") or []],
            "scheduling": sorted(scheduling.items(), key=str) if not preference else None,
            "preference": sorted(preference),
            "division": scheduling.get("replicaDivisionPreference"),
            "spread": bool(placement.get("spreadConstraints")),
        }
    return json.dumps(written, sort_keys=True, default=str)


def prepared(obj: Mapping[str, Any], name: str, namespace: str) -> dict[str, Any]:
    """The object as a client would send it: named, in the test namespace, not for us."""
    out = copy.deepcopy(dict(obj))
    out.pop("status", None)
    meta = out.setdefault("metadata", {})
    meta["name"] = name
    meta["labels"] = {**(meta.get("labels") or {}), "carbonshift.io/enabled": "false"}
    if out.get("kind") == "PropagationPolicy":
        meta["namespace"] = namespace
        # Karmada's mutating webhook does this before its validating webhook runs.
        for selector in (out.get("spec") or {}).get("resourceSelectors") or []:
            if isinstance(selector, dict):
                selector["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    return out


def samples() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(case id, user object, stored object), one per written shape."""
    chosen: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}
    for case_id, _sample, _variant, obj in fleet.cases():
        stored, _warnings = fleet.run(obj)
        chosen.setdefault(shape(stored), (case_id, obj, stored))
    return list(chosen.values())


def dry_run(kube: Kube, obj: Mapping[str, Any]) -> str | None:
    """None when the server accepts the object, else its answer."""
    result = kube.run("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(dict(obj)))
    return None if result.returncode == 0 else (result.stderr or result.stdout).strip()


def test_every_written_shape_is_accepted_by_the_real_api_server(kube: Kube) -> None:
    namespace = kube.namespace(enabled=False)
    accepted, upstream_rejected, rejected = 0, 0, []
    for i, (case_id, user, stored) in enumerate(samples()):
        name = re.sub(r"[^a-z0-9-]", "-", f"corpus-{i}")
        if dry_run(kube, prepared(user, name, namespace)) is not None:
            upstream_rejected += 1
            continue
        answer = dry_run(kube, prepared(stored, name, namespace))
        if answer is None:
            accepted += 1
        else:
            rejected.append(f"{case_id}: {answer}\n  stored: {json.dumps(stored['spec'])}")
    print(f"corpus dry-run: {accepted} shapes accepted, {upstream_rejected} user objects rejected")
    assert not rejected, "\n".join(rejected)
    assert accepted >= MIN_ACCEPTED, (accepted, upstream_rejected)
