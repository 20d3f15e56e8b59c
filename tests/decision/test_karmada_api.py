"""What the Karmada policy API keeps: read from its CRDs' schemas, named by the config, or
the failover groups every release keeps; carried in the decision context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import FLEET, NOW
from webhook.decision.karmada.api import (
    GROUPS,
    KarmadaApi,
    configured,
    crd_overflow,
    from_crds,
    release,
    resolve,
)
from webhook.kinds import Context
from webhook.model.config import parse
from webhook.model.validation import InvalidInput


def crd(term: dict[str, Any], *, served: bool = True, version: str = "v1alpha1") -> dict[str, Any]:
    """A policy CRD whose ``clusterAffinities`` items schema is ``term`` (the rest trimmed)."""
    affinities = {"type": "array", "items": term}
    placement = {"type": "object", "properties": {"clusterAffinities": affinities}}
    spec = {"type": "object", "properties": {"placement": placement}}
    root = {"type": "object", "properties": {"spec": spec}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "propagationpolicies.policy.karmada.io"},
        "spec": {
            "versions": [{"name": version, "served": served, "schema": {"openAPIV3Schema": root}}]
        },
    }


TERM_1_16 = {
    "type": "object",
    "properties": {
        "affinityName": {"type": "string"},
        "clusterNames": {"type": "array", "items": {"type": "string"}},
        "exclude": {"type": "array", "items": {"type": "string"}},
    },
}
"""A ``ClusterAffinityTerm`` as Karmada v1.16.0's CRD describes it (no overflow)."""
TERM_1_18 = {
    **TERM_1_16,
    "properties": {**TERM_1_16["properties"], "overflowAffinities": {"type": "array"}},
}
"""The same from v1.18.0 on."""


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("1.16", (1, 16)),
        ("v1.18.2", (1, 18)),
        (" 1.19.0 ", (1, 19)),
        ("auto", None),
        ("1", None),
        ("1.x", None),
    ],
)
def test_releases(text: str, parsed: tuple[int, int] | None) -> None:
    assert release(text) == parsed


def test_the_config_names_a_release_or_auto() -> None:
    assert configured("auto") is None
    assert configured("1.16") == KarmadaApi(False, "config", "1.16")
    assert configured("v1.18.2") == KarmadaApi(True, "config", "1.18.2")
    assert configured("2.0") == KarmadaApi(True, "config", "2.0")
    assert configured("1.16") == KarmadaApi(False, "config", "1.16")  # asked again
    assert parse({"karmada": {"version": "v1.17.3"}}).karmada.version == "v1.17.3"
    assert parse({}).karmada.version == "auto"
    with pytest.raises(InvalidInput, match=r"karmada\.version: expected auto or a Karmada release"):
        parse({"karmada": {"version": "latest"}})


def test_the_crds_win_but_never_grant_what_they_lack() -> None:
    crds_18, crds_16 = KarmadaApi(True, "crd"), KarmadaApi(False, "crd")
    assert resolve("auto", None) == GROUPS
    assert resolve("1.18", None) == KarmadaApi(True, "config", "1.18")
    assert resolve("auto", crds_18) == crds_18
    assert resolve("auto", crds_16) == crds_16
    assert resolve("1.18", crds_16) == crds_16  # the API server would prune them
    assert resolve("1.16", crds_18) == KarmadaApi(False, "config", "1.16")  # asked for


def test_every_answer_says_why() -> None:
    assert "keep overflowAffinities" in KarmadaApi(True, "crd").why
    assert "lack overflowAffinities" in KarmadaApi(False, "crd").why
    assert KarmadaApi(False, "config", "1.16").why == (
        "karmada.version 1.16 (overflowAffinities before 1.18)"
    )
    assert "from 1.18" in KarmadaApi(True, "config", "1.18").why
    assert "dropped" in KarmadaApi(False, "stored").why
    assert {KarmadaApi(True, "crd").shape, GROUPS.shape} == {"overflow", "groups"}


def test_a_crds_schema_says_whether_overflow_is_kept() -> None:
    assert crd_overflow(crd(TERM_1_18)) is True
    assert crd_overflow(crd(TERM_1_16)) is False
    # unknown fields preserved on the way: kept
    assert crd_overflow(crd({**TERM_1_16, "x-kubernetes-preserve-unknown-fields": True})) is True
    # a version not served does not count; none served, or no schema: unreadable
    both = crd(TERM_1_18)
    both["spec"]["versions"].append(crd(TERM_1_16, served=False)["spec"]["versions"][0])
    assert crd_overflow(both) is True
    assert crd_overflow(crd(TERM_1_16, served=False)) is None
    assert crd_overflow({"spec": {"versions": [{"name": "v1alpha1"}]}}) is None
    assert crd_overflow({"spec": {}}) is None
    assert crd_overflow({}) is None


def test_both_crds_must_keep_it() -> None:
    assert from_crds([True, True]) == KarmadaApi(True, "crd")
    assert from_crds([True, False]) == KarmadaApi(False, "crd")
    assert from_crds([True, None]) == KarmadaApi(True, "crd")
    assert from_crds([None]) is None
    assert from_crds([]) is None


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("karmada/policy.karmada.io_propagationpolicies.yaml", True),
        ("karmada/policy.karmada.io_clusterpropagationpolicies.yaml", True),
    ],
)
def test_the_pinned_karmadas_crds(name: str, kept: bool) -> None:
    """Karmada v1.18.2's own CRDs (fetched by ``make binaries``) keep the overflow."""
    path = Path(__file__).parents[2] / ".cache/bin/crds" / name
    if not path.is_file():
        pytest.skip(f"{path} is missing: run `make binaries`")
    assert crd_overflow(yaml.safe_load(path.read_text())) is kept


def test_the_context_carries_the_api() -> None:
    config = parse(FLEET)
    assert Context(config, {}, NOW).karmada_api == GROUPS
    named = parse({**FLEET, "karmada": {"version": "1.18"}})
    assert Context(named, {}, NOW).karmada_api == KarmadaApi(True, "config", "1.18")
    read = KarmadaApi(False, "crd")
    assert Context(named, {}, NOW, karmada=read).karmada_api == read
