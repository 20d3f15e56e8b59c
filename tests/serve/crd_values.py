"""Values generated from the real CRD schemas (from the pinned Go modules, fetched by
``make crds``): :func:`from_schema` turns an ``openAPIV3Schema`` into a Hypothesis strategy,
:func:`crd_schema` is the schema of one of :data:`KINDS` as an opted-in CREATE sends it.
Shared by the fuzzing of a real ``carbonshift serve`` and the API server's dry runs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from devtools.sandbox.layout import crd
from webhook import kinds
from webhook.decision.liqo.offloading import NAME as OFFLOADING_NAME

KINDS = {
    k.kind: (k.group, k.version, k.resource, "shop" if k.namespaced else "") for k in kinds.KINDS
}
"""Every registered kind: ``(group, version, resource, namespace)`` (``""``: cluster-scoped)."""


def crd_file(kind: str) -> Path:
    """The upstream CRD of ``kind`` that ``make crds`` fetched: ``<group>_<resource>.yaml``
    of its project (the group's second-level name: ``karmada``, ``karpenter``, ``liqo``);
    a one-line error naming ``make binaries`` when missing."""
    group, _, resource, _ = KINDS[kind]
    return crd(group.split(".")[-2], f"{group}_{resource}.yaml")


FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
"""Hypothesis settings against a real server: no deadline, no example database, no
health checks."""

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
"""Any small JSON value."""

INT32 = 2**31 - 1
MAX_ITEMS = 3
"""Longest generated list or map (the schemas' own limits are often far larger)."""


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid against a structural CRD schema (OpenAPI v3 as Kubernetes uses it:
    types, properties, required, additionalProperties, items, enum, anyOf, bounds,
    patterns, ``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields``).
    CEL rules (``x-kubernetes-validations``) are not followed: the API server checks them,
    carbonshift must still answer."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    if "anyOf" in schema:
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        return st.one_of([from_schema({**rest, **choice}) for choice in schema["anyOf"]])
    if schema.get("x-kubernetes-int-or-string"):
        return st.integers(0, 1000) | st.from_regex(r"\A[0-9]{1,2}%\Z")
    kind = schema.get("type")
    if kind == "object":
        return _object(schema)
    if kind == "array":
        items = from_schema(schema.get("items", {}))
        low = schema.get("minItems", 0)
        return st.lists(
            items,
            min_size=low,
            max_size=max(low, min(schema.get("maxItems", MAX_ITEMS), MAX_ITEMS)),
        )
    if kind == "string":
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 40), 40)
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(
                lambda v: low <= len(v) <= schema.get("maxLength", 10**9)
            )
        return st.text(min_size=low, max_size=max(low, high))
    if kind == "integer":
        return st.integers(schema.get("minimum", -INT32), schema.get("maximum", INT32))
    if kind == "number":
        return st.floats(schema.get("minimum", -1e9), schema.get("maximum", 1e9))
    if kind == "boolean":
        return st.booleans()
    return JSON  # no type: x-kubernetes-preserve-unknown-fields, anything goes


def _object(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    if not properties:
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            keys = st.from_regex(r"\A[a-z][a-z0-9.-]{0,15}\Z")
            return st.dictionaries(keys, from_schema(extra), max_size=MAX_ITEMS)
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return st.dictionaries(st.text(max_size=8), JSON, max_size=MAX_ITEMS)
        return st.just({})
    return st.fixed_dictionaries(
        {k: from_schema(v) for k, v in properties.items() if k in required},
        optional={k: from_schema(v) for k, v in properties.items() if k not in required},
    )


def crd_schema(kind: str) -> dict[str, Any]:
    group, version, _, _ = KINDS[kind]
    crd = yaml.safe_load(crd_file(kind).read_text())
    (found,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: dict[str, Any] = copy.deepcopy(found["schema"]["openAPIV3Schema"])
    properties = schema["properties"]
    properties["apiVersion"] = {"const": f"{group}/{version}"}
    properties["kind"] = {"const": kind}
    properties.pop("status", None)  # the status subresource: not sent on a CREATE
    properties["metadata"] = {
        "type": "object",
        "properties": {
            # Liqo reads only the NamespaceOffloading of this name (carbonshift decides it).
            "name": {"enum": ["fuzzed", OFFLOADING_NAME]},
            "labels": {  # opted in, mostly (cluster-scoped kinds opt in by this label)
                "type": "object",
                "properties": {"carbonshift.io/enabled": {"enum": ["true", "true", "false"]}},
                "required": ["carbonshift.io/enabled"],
                "additionalProperties": False,
            },
            "annotations": {
                "type": "object",
                "properties": {
                    key: {"type": "string", "maxLength": 12}
                    for key in (
                        "carbonshift.io/strategy",
                        "carbonshift.io/max-intensity",
                        "carbonshift.io/max-clusters",
                        "carbonshift.io/override",
                    )
                },
                "additionalProperties": False,
            },
        },
        "required": ["name", "labels"],
        "additionalProperties": False,
    }
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    return schema
