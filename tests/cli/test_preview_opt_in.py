"""``carbonshift mutate`` applies the webhook's opt-in rule, and says what it assumed.

kube-apiserver calls the webhook for a namespaced object only when its namespace carries
``carbonshift.io/enabled=true``; the preview asks the same function admission and the
leader ask (:func:`webhook.decision.optin.not_opted_in`), with the namespace's labels
from a Namespace object in the input, else a cluster (``--kubeconfig``), else it assumes
the namespace opted in and the reason says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests import kubeapi
from tests.support import FLEET, NOW
from webhook import testing
from webhook.cli import main, parser, preview
from webhook.decision import optin
from webhook.decision.follow import not_managed
from webhook.kinds import Context
from webhook.model.config import Config, parse
from webhook.model.intensity import Reading
from webhook.model.vocabulary import DECISION, ENABLED

CONFIG = "zone: PL\nclusters:\n  member-fr: {zone: FR}\n  member-pl: {zone: PL}\n"


def namespace(name: str, enabled: str | None) -> dict[str, Any]:
    labels = {} if enabled is None else {ENABLED: enabled}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def policy(ns: str = "shop") -> dict[str, Any]:
    return testing.propagation_policy(namespace=ns, clusters=["member-fr", "member-pl"])


@pytest.fixture
def ctx(config: Config, table: dict[str, Reading]) -> Context:
    return Context(config=config, table=table, now=NOW)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, *docs: dict[str, Any]) -> str:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    (tmp_path / "c.yaml").write_text(CONFIG)
    return str(path)


# --- the one rule --------------------------------------------------------------------------


@pytest.mark.parametrize("ns", [None, "true", "TRUE", "false", "maybe"])
@pytest.mark.parametrize("own", [None, "true", "false"])
def test_preview_and_the_leader_apply_one_rule(
    ctx: Context, ns: str | None, own: str | None
) -> None:
    obj = testing.propagation_policy(namespace="shop", labels={ENABLED: own} if own else None)
    labels = {} if ns is None else {ENABLED: ns}
    [shown] = preview.preview([obj], ctx, {"shop": labels})
    rule = optin.not_opted_in(obj, labels)
    assert (shown.outcome.result == "skipped") == (rule is not None)
    if rule is not None:
        assert rule in shown.outcome.reason
        assert ("namespace" in shown.outcome.reason) == (own != "false")  # whose opt-out
        assert shown.stored == obj
        managed = {**obj, "metadata": {**obj["metadata"], "annotations": {DECISION: "{}"}}}
        assert not_managed(managed, labels) == rule  # the leader's re-evaluation agrees


def test_a_cluster_scoped_object_follows_its_own_label_only(ctx: Context) -> None:
    off = testing.cluster_propagation_policy(clusters=["member-fr"])
    on = testing.cluster_propagation_policy("on", clusters=["member-fr"], enabled=True)
    # A Namespace object labelled false says nothing about cluster-scoped objects.
    [_, shown_off, shown_on] = preview.preview([namespace("default", "false"), off, on], ctx)
    assert shown_off.outcome.result == "skipped"
    assert shown_off.outcome.reason == optin.not_opted_in(off, None)
    assert shown_on.outcome.result == "patched"
    assert "assumed" not in shown_on.outcome.reason


# --- Namespace objects in the input ------------------------------------------------------------


def test_a_namespace_opted_out_in_the_input_leaves_its_policy_unchanged(ctx: Context) -> None:
    obj = policy()
    [_, shown] = preview.preview([namespace("shop", "false"), obj], ctx)
    assert shown.outcome.result == "skipped"
    assert shown.outcome.reason == (
        f"not opted in (its namespace is labelled {ENABLED}=false): namespace shop"
    )
    assert shown.stored == obj
    assert shown.outcome.patch == []


def test_a_namespace_after_its_policy_counts_too(ctx: Context) -> None:
    [shown, _] = preview.preview([policy(), namespace("shop", None)], ctx)
    assert shown.outcome.result == "skipped"
    assert f"no {ENABLED}=true on its namespace" in shown.outcome.reason


def test_the_input_wins_over_the_cluster(ctx: Context) -> None:
    cluster = {"shop": {ENABLED: "true"}}
    [_, shown] = preview.preview([namespace("shop", "false"), policy()], ctx, cluster)
    assert shown.outcome.result == "skipped"
    [shown] = preview.preview([policy()], ctx, cluster)
    assert shown.outcome.result == "patched"
    assert "assumed" not in shown.outcome.reason


def test_an_opted_in_namespace_in_the_input_needs_no_assumption(ctx: Context) -> None:
    [_, shown] = preview.preview([namespace("shop", "true"), policy()], ctx)
    assert shown.outcome.result == "patched"
    assert shown.outcome.reason == ""


def test_without_any_namespace_the_reason_says_it_assumed_one(ctx: Context) -> None:
    [shown] = preview.preview([policy()], ctx)
    assert shown.outcome.result == "patched"
    assert shown.outcome.reason == (
        f"assumed namespace shop opted in ({ENABLED}=true): no --kubeconfig and not in the input"
    )


def test_re_evaluation_reads_the_namespace_in_the_input_too(ctx: Context) -> None:
    from webhook.kinds.reevaluation import Reevaluation  # noqa: PLC0415

    [admitted] = preview.preview([policy()], ctx)
    rules = Reevaluation(ctx.config, None)
    [shown] = preview.reevaluate([namespace("shop", "false"), admitted.stored], ctx, rules)[1:]
    assert shown.outcome.result == "skipped"
    assert "namespace" in shown.outcome.reason
    [shown] = preview.reevaluate([admitted.stored], ctx, rules)
    assert shown.outcome.result != "skipped"
    assert "assumed namespace shop opted in" in shown.outcome.reason


def test_an_unchanged_object_always_has_a_reason(ctx: Context) -> None:
    [first] = preview.preview([namespace("shop", "true"), policy()], ctx)[1:]
    [again] = preview.preview([namespace("shop", "true"), dict(first.stored)], ctx)[1:]
    assert again.outcome.result == "unchanged"
    assert again.outcome.reason


# --- the command -------------------------------------------------------------------------------


def test_mutate_prints_the_skip_and_the_assumption(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        namespace("off", "false"),
        policy("off"),
        policy("shop"),
    )
    code, out, _ = run(capsys, "mutate", "-f", path, "--config", str(tmp_path / "c.yaml"))
    assert code == 0
    chunks = out.split("---\n")
    assert chunks[1].startswith("# carbonshift: PropagationPolicy web: skipped\n")
    assert (
        f"#   reason: not opted in (its namespace is labelled {ENABLED}=false): namespace off"
        in chunks[1]
    )
    assert yaml.safe_load(chunks[1]) == policy("off")
    assert chunks[2].startswith("# carbonshift: PropagationPolicy web: patched\n")
    assert "#   reason: assumed namespace shop opted in" in chunks[2]
    for chunk in chunks:  # every object not patched says why
        if ": patched\n" not in chunk.splitlines()[0] + "\n":
            assert "#   reason: " in chunk


def test_help_calls_it_a_preview_and_offers_kubeconfig() -> None:
    sub = parser()._subparsers._group_actions[0].choices["mutate"]  # type: ignore[union-attr]
    text = sub.format_help()
    assert "kubectl apply -f -" not in text
    assert "preview" in text
    assert "--kubeconfig" in text


async def test_kubeconfig_reads_the_namespaces_of_the_cluster(tmp_path: Path) -> None:
    async with kubeapi.serve() as kube:
        kube.add(namespace("off", "false"))
        kube.add(namespace("shop", "true"))
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": kube.api.configuration.host}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        found, karmada = await preview.cluster_namespaces(str(kubeconfig))
    assert karmada is None  # the test API server serves no Karmada policy CRD
    assert found["off"] == {ENABLED: "false"}
    assert found["shop"] == {ENABLED: "true"}
    ctx = Context(config=parse(FLEET), table={}, now=NOW)
    [off, shop, other] = preview.preview([policy("off"), policy("shop"), policy("new")], ctx, found)
    assert off.outcome.result == "skipped"
    assert "assumed" not in shop.outcome.reason
    assert other.outcome.reason.endswith(
        "assumed namespace new opted in (carbonshift.io/enabled=true): not in the cluster "
        "(--kubeconfig) nor in the input"
    )


def test_an_unreadable_kubeconfig_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, policy())
    code, out, err = run(capsys, "mutate", "-f", path, "--kubeconfig", str(tmp_path / "nope"))
    assert code == 2
    assert out == ""
    assert err.startswith("carbonshift: ")
    assert "--kubeconfig" in err
    assert err.count("\n") == 1


def test_json_output_carries_the_reason(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, namespace("shop", "false"), policy())
    code, out, _ = run(capsys, "mutate", "-f", path, "-o", "json")
    assert code == 0
    [_, shown] = orjson.loads(out)
    assert shown["outcome"] == "skipped"
    assert "labelled carbonshift.io/enabled=false" in shown["reason"]
