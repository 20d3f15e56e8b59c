"""``carbonshift.io/enabled`` has one parser, and admission and the leader read it alike."""

from __future__ import annotations

from typing import Any

import pytest

from tests.semantics import fleet
from webhook import kinds
from webhook.decision.optin import not_opted_in
from webhook.model.vocabulary import ENABLED, opt_in
from webhook.serve import admission, reviews


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({ENABLED: "true"}, True),
        ({ENABLED: " TRUE "}, True),
        ({ENABLED: "false"}, False),
        ({ENABLED: "False"}, False),
        ({ENABLED: "yes"}, None),
        ({ENABLED: ""}, None),
        ({}, None),
        (None, None),
    ],
)
def test_the_label_reads_in_any_case(labels: dict[str, str] | None, expected: bool | None) -> None:
    assert opt_in(labels) is expected


def _nodepool(value: str | None) -> dict[str, Any]:
    labels = {} if value is None else {ENABLED: value}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p", "labels": labels, "annotations": {"x": "y"}},
        "spec": {"template": {"spec": {}}},
    }


def _admission_skip(obj: dict[str, Any]) -> str | None:
    row = kinds.find("karpenter.sh", "NodePool")
    assert row is not None
    request = reviews.request_of(
        {
            "uid": "u",
            "kind": {"group": "karpenter.sh", "version": "v1", "kind": "NodePool"},
            "resource": {"group": "karpenter.sh", "version": "v1", "resource": "nodepools"},
            "operation": "CREATE",
            "name": "p",
            "object": obj,
        }
    )
    return admission._skip_reason(request, row, obj, fleet.context())


@pytest.mark.parametrize("value", ["true", "True", "false", "FALSE", "maybe", None])
def test_admission_and_the_leader_agree_on_a_cluster_scoped_object(value: str | None) -> None:
    obj = _nodepool(value)
    admitted, followed = _admission_skip(obj), not_opted_in(obj, None)
    assert (admitted is None) == (followed is None), (admitted, followed)
    if opt_in(obj["metadata"]["labels"]) is False:
        assert admitted is not None
        assert "opted out" in admitted
        assert followed is not None
        assert "opted out" in followed


def test_an_opted_in_namespace_reads_in_any_case() -> None:
    obj = {"metadata": {"name": "p", "namespace": "team", "labels": {}}}
    assert not_opted_in(obj, {ENABLED: "TRUE"}) is None
    assert not_opted_in(obj, {ENABLED: "false"}) is not None
    assert (
        not_opted_in(
            {**obj, "metadata": {**obj["metadata"], "labels": {ENABLED: "False"}}},
            {ENABLED: "true"},
        )
        is not None
    )
