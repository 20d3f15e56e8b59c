"""The webhook rules and the ClusterRole rules in manifests/base and the chart are the
registry's, as ``make generate`` (devtools/manifests.py) writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools import manifests
from webhook import integrations, kinds
from webhook.kinds import policies

BASE = manifests.ROOT / "manifests" / "base"


@pytest.mark.parametrize("path", manifests.FILES, ids=lambda p: str(p.relative_to(manifests.ROOT)))
def test_the_generated_blocks_are_the_registrys(path: Path) -> None:
    text = path.read_text()
    assert text == manifests.render(text), (
        f"{path.relative_to(manifests.ROOT)} and the kind registry (webhook/kinds) drifted: "
        f"run `{manifests.COMMAND}`"
    )


def test_each_file_holds_its_blocks() -> None:
    for path in manifests.WEBHOOKS:
        assert manifests.blocks(path.read_text()) == ["namespaced-rules", "cluster-rules"]
    for path in manifests.RBAC:
        assert manifests.blocks(path.read_text()) == ["cluster-role"]


def test_the_check_says_which_command_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert manifests.main(["--check"]) == 0
    stale = tmp_path / "rbac.yaml"
    stale.write_text((BASE / "rbac.yaml").read_text().replace("verbs: [list]", "verbs: [get]"))
    assert manifests.stale((stale,)) == [stale]


def test_a_new_kind_changes_its_webhook_and_its_grants() -> None:
    widget = kinds.Kind(
        "example.carbonshift.io",
        "v1",
        "Widget",
        "widgets",
        namespaced=False,
        decide=policies.decide,
        scope="policy",
        grants=(
            kinds.Grant("example.carbonshift.io", ("widgets",), ("update", "get"), "it is ours"),
            kinds.Grant("", ("namespaces",), ("list",), "which namespaces opted in"),
        ),
    )
    registry = kinds.REGISTRY.with_(widget)
    webhook = yaml.safe_load(manifests.render((BASE / "webhook.yaml").read_text(), registry))
    namespaced, cluster = webhook["webhooks"]
    assert {"example.carbonshift.io"} & {
        g for r in namespaced["rules"] for g in r["apiGroups"]
    } == set()
    assert cluster["rules"][-1] == {
        "apiGroups": ["example.carbonshift.io"],
        "apiVersions": ["v1"],
        "resources": ["widgets"],
        "operations": ["CREATE", "UPDATE"],
        "scope": "Cluster",
    }
    text = manifests.render((BASE / "rbac.yaml").read_text(), registry)
    assert "  # Widget: it is ours.\n  - apiGroups: [example.carbonshift.io]" in text
    role_rules = integrations.cluster_role(registry)
    (namespaces,) = [r for r in role_rules if r.resources == ("namespaces",)]
    assert namespaces.whys == (
        "PropagationPolicy, ClusterPropagationPolicy, NamespaceOffloading, Widget: "
        "which namespaces opted in",
    )
    role = _cluster_role(text)
    assert {
        "apiGroups": ["example.carbonshift.io"],
        "resources": ["widgets"],
        "verbs": ["get", "update"],
    } in role


def test_a_block_without_its_end_is_refused() -> None:
    with pytest.raises(manifests.MarkerError, match="END generated cluster-role"):
        manifests.render("rules:\n  # BEGIN generated cluster-role\n  - x\n")
    with pytest.raises(manifests.MarkerError, match="unknown"):
        manifests.render("  # BEGIN generated widgets\n  # END generated widgets\n")


def _cluster_role(text: str) -> list[dict[str, Any]]:
    (role,) = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "ClusterRole"]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def test_grants_on_the_same_resources_are_one_rule_with_every_reason() -> None:
    rules = _cluster_role((BASE / "rbac.yaml").read_text())
    resources = [(r["apiGroups"][0], tuple(r["resources"])) for r in rules]
    assert len(resources) == len(set(resources))
    (nodes,) = [r for r in integrations.cluster_role() if r.resources == ("nodes",)]
    assert nodes.verbs == ("get", "list", "watch", "patch")
    assert len(nodes.whys) == 2
    assert nodes.whys[0].startswith("NodePool: ")
