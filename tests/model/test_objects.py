"""Typed views over Kubernetes objects read them as Go's decoders do: a null or a
wrong-typed optional field is its zero value, and nothing raises."""

from __future__ import annotations

import datetime
from types import MappingProxyType
from typing import Any

import pytest

from webhook.model.objects import (
    Meta,
    Obj,
    OwnerRef,
    condition,
    dig,
    items,
    mapping,
    meta_of,
    strings,
    text,
)

UTC = datetime.UTC

POLICY: dict[str, Any] = {
    "apiVersion": "policy.karmada.io/v1alpha1",
    "kind": "PropagationPolicy",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "uid": "u-1",
        "resourceVersion": "42",
        "generation": 3,
        "labels": {"app": "web"},
        "annotations": {"carbonshift.io/strategy": "fill"},
        "creationTimestamp": "2026-11-23T11:00:00Z",
        "deletionTimestamp": "2026-11-23T12:00:00.5+01:00",
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "web",
                "uid": "d-1",
                "controller": True,
            },
        ],
    },
    "spec": {"placement": {"clusterAffinity": {"clusterNames": ["a", "b"]}}},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}


def test_a_whole_object_reads_through_its_view() -> None:
    obj = Obj(POLICY)
    assert obj.raw is POLICY
    assert (obj.api_version, obj.kind) == ("policy.karmada.io/v1alpha1", "PropagationPolicy")
    assert (obj.group, obj.version) == ("policy.karmada.io", "v1alpha1")
    meta = obj.meta
    assert (meta.name, meta.namespace, meta.uid) == ("web", "shop", "u-1")
    assert meta.namespaced_name == "shop/web"
    assert Meta({"generateName": "web-"}).generate_name == "web-"
    assert Meta({"name": "fleet", "namespace": None}).namespaced_name == "fleet"
    assert (meta.resource_version, meta.generation) == ("42", 3)
    assert meta.labels == {"app": "web"}
    assert meta.annotations is POLICY["metadata"]["annotations"]  # not copied
    assert meta.creation_timestamp == datetime.datetime(2026, 11, 23, 11, tzinfo=UTC)
    assert meta.deletion_timestamp == datetime.datetime(2026, 11, 23, 11, 0, 0, 500000, tzinfo=UTC)
    assert meta.owner_references == (OwnerRef("apps/v1", "Deployment", "web", "d-1", True),)
    assert obj.spec is POLICY["spec"]
    assert obj.path("spec", "placement", "clusterAffinity", "clusterNames", 1) == "b"
    assert obj.items("spec", "placement", "clusterAffinity", "clusterNames") == ["a", "b"]
    assert obj.mapping("spec", "placement") == POLICY["spec"]["placement"]
    assert obj.text("status", "conditions", 0, "type") == "Ready"
    assert condition(POLICY, "Ready") == "True"
    assert meta_of(POLICY).raw is POLICY["metadata"]
    assert meta_of(None).name == ""
    assert repr(obj) == "Obj(PropagationPolicy Meta(shop/web))"


def test_the_core_group_is_empty() -> None:
    assert (Obj({"apiVersion": "v1"}).group, Obj({"apiVersion": "v1"}).version) == ("", "v1")
    assert (Obj({}).group, Obj({}).version) == ("", "")


NULLS: dict[str, Any] = {
    "apiVersion": None,
    "kind": None,
    "metadata": {
        "name": None,
        "namespace": None,
        "uid": None,
        "resourceVersion": None,
        "generation": None,
        "labels": None,
        "annotations": None,
        "creationTimestamp": None,
        "deletionTimestamp": None,
        "ownerReferences": None,
    },
    "spec": None,
    "status": None,
}

WRONG: dict[str, Any] = {
    "apiVersion": 1,
    "kind": ["PropagationPolicy"],
    "metadata": {
        "name": 7,
        "namespace": {"x": 1},
        "uid": 1.5,
        "resourceVersion": 42,
        "generation": True,
        "labels": ["app"],
        "annotations": "carbonshift.io/strategy=fill",
        "creationTimestamp": 1700000000,
        "deletionTimestamp": "yesterday",
        "ownerReferences": {"kind": "Deployment"},
    },
    "spec": [],
    "status": "Ready",
}


@pytest.mark.parametrize(
    "raw", [NULLS, WRONG, {}, {"metadata": None}, {"metadata": "x"}, None, "x", 3]
)
def test_nulls_and_wrong_types_read_as_zero_values(raw: Any) -> None:
    obj = Obj(raw)
    assert (obj.api_version, obj.kind, obj.group, obj.version) == ("", "", "", "")
    meta = obj.meta
    assert (meta.name, meta.namespace, meta.uid, meta.resource_version) == ("", "", "", "")
    assert meta.generation == 0
    assert meta.labels == {}
    assert meta.annotations == {}
    assert meta.creation_timestamp is None
    assert meta.deletion_timestamp is None
    assert meta.owner_references == ()
    assert obj.spec == {}
    assert obj.status == {}
    assert obj.path("spec", "placement") is None
    assert obj.mapping("spec", "placement") == {}
    assert obj.items("status", "conditions") == ()
    assert obj.text("metadata", "name") == ""
    assert condition(raw, "Ready") == ""


def test_string_maps_keep_their_string_values_only() -> None:
    meta = Meta({"labels": {"app": "web", "n": 3, "null": None, "flag": True}})
    assert meta.labels == {"app": "web"}
    assert strings({"a": "1"}) == {"a": "1"}
    assert strings([("a", "1")]) == {}


def test_owner_references_skip_what_is_not_an_object() -> None:
    meta = Meta({"ownerReferences": ["junk", None, {"kind": "ReplicaSet", "controller": "true"}]})
    assert meta.owner_references == (OwnerRef("", "ReplicaSet", "", "", False),)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (("a", "b"), [1, {"c": "x"}]),
        (("a", "b", 0), 1),
        (("a", "b", -1, "c"), "x"),
        (("a", "b", 2), None),  # out of range
        (("a", "b", "c"), None),  # a key into a list
        (("a", 0), None),  # an index into a mapping
        (("a", "b", 0, "c"), None),  # a key into a number
        (("z",), None),
        ((), {"a": {"b": [1, {"c": "x"}]}}),
    ],
)
def test_dig_walks_mappings_and_lists(keys: tuple[Any, ...], expected: Any) -> None:
    assert dig({"a": {"b": [1, {"c": "x"}]}}, *keys) == expected


def test_typed_accessors_fall_back_to_zero_values() -> None:
    raw = {"m": {"k": "v"}, "l": ["x"], "s": "text", "n": None}
    assert (mapping(raw, "m"), mapping(raw, "l"), mapping(raw, "n")) == ({"k": "v"}, {}, {})
    assert (items(raw, "l"), items(raw, "m"), items(raw, "n")) == (["x"], (), ())
    assert (text(raw, "s"), text(raw, "m"), text(raw, "n")) == ("text", "", "")


def test_the_first_condition_of_a_type_answers() -> None:
    obj = {
        "status": {
            "conditions": [
                "junk",
                {"type": "Ready", "status": "False"},
                {"type": "Ready", "status": "True"},
            ]
        }
    }
    assert condition(obj, "Ready") == "False"
    assert condition(obj, "Available") == ""


def test_a_mapping_that_is_no_dict_reads_as_a_dict_does() -> None:
    labels = MappingProxyType({"app": "web", "n": 3})
    meta = Meta(MappingProxyType({"name": "a", "labels": labels}))
    assert meta.name == "a"
    assert meta.labels == {"app": "web"}
    assert strings(MappingProxyType({"a": "1"})) == {"a": "1"}
    assert meta_of(MappingProxyType({"metadata": {"name": "b"}})).name == "b"
