"""JSON Patch construction."""

from __future__ import annotations

import copy

import jsonpatch

from webhook.decision.outcome import REMOVE, Change
from webhook.decision.patch import build, pointer


def test_pointer_escapes_slash_and_tilde() -> None:
    assert pointer(("metadata", "annotations", "carbonshift.io/x~y")) == (
        "/metadata/annotations/carbonshift.io~1x~0y"
    )


def test_missing_parents_are_created_once_for_several_changes() -> None:
    obj = {"metadata": {"name": "x"}, "spec": {}}
    changes = [
        Change(("spec", "placement", "a"), 1),
        Change(("spec", "placement", "b"), 2),
        Change(("metadata", "annotations", "k/v"), "s"),
    ]
    ops = build(obj, changes)
    stored = jsonpatch.apply_patch(copy.deepcopy(obj), ops)
    assert stored == {
        "metadata": {"name": "x", "annotations": {"k/v": "s"}},
        "spec": {"placement": {"a": 1, "b": 2}},
    }
    assert obj == {"metadata": {"name": "x"}, "spec": {}}


def test_unchanged_values_and_absent_removals_make_no_operations() -> None:
    obj = {"spec": {"weight": 5}}
    assert build(obj, [Change(("spec", "weight"), 5), Change(("spec", "limits"), REMOVE)]) == []
    assert build(obj, [Change(("spec", "weight"), REMOVE)]) == [
        {"op": "remove", "path": "/spec/weight"}
    ]
