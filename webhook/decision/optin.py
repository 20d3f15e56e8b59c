"""Which objects carbonshift may change: the one opt-in rule.

Admission (:mod:`webhook.serve.admission`), the leader's re-evaluation
(:func:`webhook.decision.follow.step`) and the offline preview (``carbonshift mutate``)
all ask :func:`not_opted_in`, so an object is in or out the same way on every path:

- an object labelled ``carbonshift.io/enabled=false`` is out, wherever it lives;
- a namespaced object follows its namespace's ``carbonshift.io/enabled=true`` label (the
  webhook registration's ``namespaceSelector``);
- a cluster-scoped object needs its own ``carbonshift.io/enabled=true`` label (a
  ``namespaceSelector`` never filters cluster-scoped objects, so the registration's
  ``objectSelector`` asks for it);
- an object being deleted is out.

Pure: labels in, reason out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.model.objects import mapping
from webhook.model.vocabulary import ENABLED, opt_in

SELECTED: Mapping[str, str] = {ENABLED: "true"}
"""The namespace labels an admission request implies: kube-apiserver sends a namespaced
object only when its namespace matches the registration's ``namespaceSelector``
(``carbonshift.io/enabled In [true]``)."""


def not_opted_in(obj: Mapping[str, Any], namespace_labels: Mapping[str, str] | None) -> str | None:
    """Why carbonshift must leave ``obj`` alone, or None when it is opted in.

    ``namespace_labels``: the labels of the object's namespace for a namespaced object;
    None for a cluster-scoped one (which then opts in with its own label)."""
    meta = mapping(obj, "metadata")
    if meta.get("deletionTimestamp"):
        return "being deleted"
    enabled = opt_in(meta.get("labels") if isinstance(meta.get("labels"), Mapping) else None)
    if enabled is False:
        return f"opted out ({ENABLED}=false)"
    if namespace_labels is None:
        if enabled is not True:
            return f"not opted in (cluster-scoped objects need label {ENABLED}=true)"
        return None
    namespace = opt_in(namespace_labels)
    if namespace is False:
        return f"not opted in (its namespace is labelled {ENABLED}=false)"
    if namespace is not True:
        return f"not opted in (no {ENABLED}=true on its namespace)"
    return None
