"""The kind registry agrees with the webhook registration and drives every path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from webhook import kinds
from webhook.cli import preview

WEBHOOK_YAML = Path(__file__).resolve().parents[1] / "manifests" / "base" / "webhook.yaml"


def _rules() -> list[tuple[str, str, str, str]]:
    doc: dict[str, Any] = yaml.safe_load(WEBHOOK_YAML.read_text())
    out = []
    for hook in doc["webhooks"]:
        for rule in hook["rules"]:
            out.extend(
                (group, version, resource, rule["scope"])
                for group in rule["apiGroups"]
                for version in rule["apiVersions"]
                for resource in rule["resources"]
            )
    return out


def test_every_registered_kind_has_exactly_one_webhook_rule_and_nothing_else() -> None:
    expected = sorted(
        (k.group, k.version, k.resource, "Namespaced" if k.namespaced else "Cluster")
        for k in kinds.KINDS
    )
    assert sorted(_rules()) == expected


def test_cluster_scoped_rules_sit_in_the_webhook_with_the_object_label_opt_in() -> None:
    doc: dict[str, Any] = yaml.safe_load(WEBHOOK_YAML.read_text())
    for hook in doc["webhooks"]:
        scopes = {rule["scope"] for rule in hook["rules"]}
        assert len(scopes) == 1, hook["name"]
        if scopes == {"Cluster"}:
            assert "namespaceSelector" not in hook
            expressions = hook["objectSelector"]["matchExpressions"]
            assert {"key": "carbonshift.io/enabled", "operator": "In", "values": ["true"]} in (
                expressions
            )


def test_lookup_ignores_the_version_the_api_server_converted_to() -> None:
    assert kinds.find("policy.karmada.io", "PropagationPolicy") is kinds.KINDS[0]
    assert kinds.find("apps", "Deployment") is None


def test_preview_takes_scope_from_the_registry() -> None:
    for row in kinds.KINDS:
        obj = {"apiVersion": row.api_version, "kind": row.kind, "metadata": {"name": "x"}}
        request = preview.review_for(obj)
        assert request["kind"] == {"group": row.group, "version": row.version, "kind": row.kind}
        assert bool(request["namespace"]) is row.namespaced
