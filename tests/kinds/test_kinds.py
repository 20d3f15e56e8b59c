"""The kind registry agrees with the webhook registration and drives every path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.semantics import fleet
from webhook import integrations, kinds
from webhook.cli import preview
from webhook.kinds import policies, reevaluation
from webhook.kinds.reevaluation import Reevaluation, target_of
from webhook.model.vocabulary import ENABLED

WEBHOOK_YAML = Path(__file__).resolve().parents[2] / "manifests" / "base" / "webhook.yaml"


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


RBAC_YAML = WEBHOOK_YAML.parent / "rbac.yaml"


def _cluster_role() -> set[tuple[str, str, str]]:
    docs = [d for d in yaml.safe_load_all(RBAC_YAML.read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_cluster_role_grants_exactly_what_the_kinds_and_the_fleet_ask_for() -> None:
    asked = kinds.REGISTRY.grants() | {
        (g.group, resource, verb)
        for g in integrations.grants()
        for resource in g.resources
        for verb in g.verbs
    }
    granted = _cluster_role()
    assert asked - granted == set(), "missing from manifests/base/rbac.yaml (a 403 at run time)"
    assert granted - asked == set(), "granted but asked for by no kind and no fleet feature"


def test_every_followed_kind_may_read_and_update_itself() -> None:
    granted = _cluster_role()
    for row in kinds.REGISTRY.followed():
        for verb in ("get", "list", "update"):
            assert (row.group, row.resource, verb) in granted, (row.kind, verb)


def test_the_webhook_rules_are_the_registrys() -> None:
    assert sorted(_rules()) == kinds.REGISTRY.webhook_rules()


# --- a kind of one's own --------------------------------------------------------------
# Adding a kind is one module: a Kind value with its decider, how it is followed and
# the RBAC it needs. This one is shaped like a PropagationPolicy in a group of its own.

WIDGET = kinds.Kind(
    "example.carbonshift.io",
    "v1",
    "Widget",
    "widgets",
    namespaced=True,
    decide=policies.decide,
    scope="policy",
    following=kinds.Following(),
    grants=(kinds.Grant("example.carbonshift.io", ("widgets",), ("get", "list", "update"), "own"),),
    events=("CarbonRebalanced",),
)


def _widget() -> dict[str, Any]:
    return {
        "apiVersion": "example.carbonshift.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "team"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"}],
            "placement": {
                "clusterAffinity": {"clusterNames": sorted(fleet.CONFIG.clusters)},
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                },
            },
        },
    }


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> kinds.Registry:
    extended = kinds.REGISTRY.with_(WIDGET)
    monkeypatch.setattr(kinds, "REGISTRY", extended)
    return extended


def test_a_kind_of_ones_own_is_admitted_followed_and_granted(registry: kinds.Registry) -> None:
    ctx = fleet.context()
    (admitted,) = preview.preview([_widget()], ctx)
    assert admitted.outcome.result == "patched", admitted.outcome.reason
    assert "carbonshift-group-1" in str(admitted.stored["spec"]["placement"])  # groups: no API read

    target = target_of("example.carbonshift.io/v1", "Widget")
    assert target is not None
    assert target in reevaluation.targets()
    action = Reevaluation(fleet.CONFIG).decide(target, admitted.stored, ctx, {ENABLED: "true"})
    assert action.outcome in {"kept", "too_soon"}, action.reason

    assert ("example.carbonshift.io", "v1", "widgets", "Namespaced") in registry.webhook_rules()
    assert ("example.carbonshift.io", "widgets", "update") in registry.grants()


def test_a_kind_is_registered_once() -> None:
    with pytest.raises(ValueError, match="twice"):
        kinds.REGISTRY.with_(kinds.KINDS[0])


def test_zones_read_notes_every_zone_asked_for_found_or_not() -> None:
    seen: set[str] = set()
    table = reevaluation.ZonesRead({"DE": 1.0}, seen)
    assert table.get("DE") == 1.0
    assert table.get("FR") is None
    assert table.get("PL", 2.0) == 2.0
    assert seen == {"DE", "FR", "PL"}
