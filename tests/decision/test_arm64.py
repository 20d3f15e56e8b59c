"""Whether a NodePool's requirements leave room for arm64 (strategy ``efficiency``)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import reading
from webhook.decision.karpenter import arm64
from webhook.decision.karpenter.nodepool import NodePoolInputs, decide
from webhook.model.config import NodePoolConfig

AWS = "karpenter.k8s.aws/"
FAMILY = AWS + "instance-family"
CATEGORY = AWS + "instance-category"
GENERATION = AWS + "instance-generation"
CPU = AWS + "instance-cpu-manufacturer"
TYPE, ARCH, OS = "node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os"
GPU_MAKER = AWS + "instance-gpu-manufacturer"
GPU_NAME = AWS + "instance-gpu-name"
GPU_COUNT = AWS + "instance-gpu-count"
ACCEL = AWS + "instance-accelerator-manufacturer"


def req(key: str, operator: str, *values: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return {**out, **extra}


def spec(*requirements: dict[str, Any], kind: str = "EC2NodeClass") -> dict[str, Any]:
    ref = {"group": "example", "kind": kind, "name": "default"}
    return {"nodeClassRef": ref, "requirements": list(requirements)}


# Pools from the Karpenter docs and provider examples, and what the table must say.
ELIGIBLE = {
    "no requirements": spec(),
    "docs default pool": spec(
        req("karpenter.sh/capacity-type", "In", "spot", "on-demand"),
        req(CATEGORY, "In", "c", "m", "r"),
        req(GENERATION, "Gt", "2"),
    ),
    "mixed family list": spec(req(FAMILY, "In", "m5", "m6g")),
    "mixed type list": spec(req(TYPE, "In", "m5.large", "m6g.large")),
    "graviton newer than the table": spec(req(FAMILY, "In", "m9g")),
    "cpu manufacturer aws": spec(req(CPU, "In", "aws")),
    "arch both": spec(req(ARCH, "In", "amd64", "arm64")),
    "arch NotIn amd64": spec(req(ARCH, "NotIn", "amd64")),
    "beta arch arm64": spec(req("beta.kubernetes.io/arch", "In", "arm64")),
    "nvidia gpu (g5g)": spec(req(GPU_MAKER, "In", "nvidia")),
    "two gpus (g5g.16xlarge)": spec(req(GPU_COUNT, "Gt", "1")),
    "no gpu": spec(req(GPU_COUNT, "DoesNotExist")),
    "generation from 7, compute": spec(req(CATEGORY, "In", "c"), req(GENERATION, "Gte", "7")),
    "family NotIn x86": spec(req(FAMILY, "NotIn", "m5", "c5")),
    "custom key": spec(req("example.com/team", "In", "payments")),
    "unknown operator": spec(req(FAMILY, "Near", "m5")),
    "minValues met": spec(req(FAMILY, "In", "m6g", "c6g", "m5", minValues=2)),
    "kwok": spec(kind="KWOKNodeClass"),
    "kwok windows": spec(req(OS, "In", "windows"), kind="KWOKNodeClass"),
    "kwok arm type": spec(req(TYPE, "In", "c-4x-arm64-linux"), kind="KWOKNodeClass"),
    "aks D family": spec(req("karpenter.azure.com/sku-family", "In", "D"), kind="AKSNodeClass"),
    "aks cobalt size": spec(req(TYPE, "In", "Standard_D4ps_v6"), kind="AKSNodeClass"),
    "aks altra size": spec(req(TYPE, "In", "Standard_E8pds_v5"), kind="AKSNodeClass"),
    "gce axion": spec(req(TYPE, "In", "c4a-standard-4", "n2-standard-4"), kind="GCENodeClass"),
    "unknown node class, windows": spec(req(OS, "In", "windows"), kind="OtherNodeClass"),
    "unknown node class, Graviton type": spec(req(TYPE, "In", "m7g.large"), kind="OtherNodeClass"),
}
INELIGIBLE = {
    # A type no provider's table knows as arm64 is not taken for one, whatever the class.
    "unknown node class, x86 types": (
        spec(req(TYPE, "In", "m5.large"), kind="OtherNodeClass"),
        TYPE,
    ),
    "gpu families": (spec(req(FAMILY, "In", "p3", "p4d", "g4dn")), FAMILY),
    "gpu category p": (spec(req(CATEGORY, "In", "p")), CATEGORY),
    "gpu name a100": (spec(req(GPU_NAME, "In", "a100")), GPU_NAME),
    "inferentia": (spec(req(ACCEL, "In", "aws")), ACCEL),
    "windows": (spec(req(OS, "In", "windows")), OS),
    "x86 families": (spec(req(FAMILY, "In", "m5", "c5", "r5", "c4")), FAMILY),
    "x86 types": (spec(req(TYPE, "In", "m5.large", "c5.xlarge")), TYPE),
    "intel": (spec(req(CPU, "In", "intel")), CPU),
    "amd": (spec(req(CPU, "In", "amd")), CPU),
    "not aws cpu": (spec(req(CPU, "NotIn", "aws")), CPU),
    "arch NotIn arm64": (spec(req(ARCH, "NotIn", "arm64")), ARCH),
    "arch amd64": (spec(req(ARCH, "In", "amd64")), ARCH),
    "beta arch amd64": (spec(req("beta.kubernetes.io/arch", "In", "amd64")), ARCH),
    "arch DoesNotExist": (spec(req(ARCH, "DoesNotExist")), ARCH),
    "generation above 8": (spec(req(GENERATION, "Gt", "8")), GENERATION),
    "old c/m/r": (spec(req(CATEGORY, "In", "c", "m", "r"), req(GENERATION, "Lt", "6")), "together"),
    "minValues on families": (spec(req(FAMILY, "In", "m5", "m6g", "c5", minValues=2)), "minValues"),
    "kwok x86 type": (spec(req(TYPE, "In", "c-4x-amd64-linux"), kind="KWOKNodeClass"), TYPE),
    "aks gpu family": (
        spec(req("karpenter.azure.com/sku-family", "In", "N"), kind="AKSNodeClass"),
        "sku-family",
    ),
    "aks x86 size": (spec(req(TYPE, "In", "Standard_D4s_v5"), kind="AKSNodeClass"), TYPE),
    "gce x86": (spec(req(TYPE, "In", "n2-standard-4"), kind="GCENodeClass"), TYPE),
    "unknown node class, amd64": (spec(req(ARCH, "In", "amd64"), kind="OtherNodeClass"), ARCH),
}


@pytest.mark.parametrize("name", ELIGIBLE)
def test_pools_that_can_run_arm64(name: str) -> None:
    assert arm64.why_not(ELIGIBLE[name]) is None


@pytest.mark.parametrize("name", INELIGIBLE)
def test_pools_that_cannot_run_arm64_say_why(name: str) -> None:
    template, named = INELIGIBLE[name]
    reason = arm64.why_not(template)
    assert reason is not None
    assert named in reason
    assert len(f"carbonshift: efficiency left alone: {reason}") < 120


def test_table_rows_name_their_source_and_match_their_own_types() -> None:
    examples = {
        "aws": "{}.large",
        "gcp": "{}-standard-4",
        "kwok": "{}-4x-arm64-linux",
    }
    for family in arm64.FAMILIES:
        assert arm64.SOURCES[family.provider]
        assert family.labels[arm64.ARCH] == ("arm64",)
        if family.provider in examples:
            assert family.types.match(examples[family.provider].format(family.name))
    aws = {f.name: f.labels for f in arm64.FAMILIES if f.provider == "aws"}
    assert aws["im4gn"][CATEGORY] == ("im",)
    assert aws["im4gn"][GENERATION] == ("4",)
    assert aws["a1"][CATEGORY] == ("a",)
    assert aws["a1"][GENERATION] == ("1",)
    assert all(arm64.GRAVITON.match(n) for n in aws if n != "a1")


# --- property: efficiency never makes a pool unsatisfiable ------------------------------


def ec2(name: str, category: str, generation: str, cpu: str, **more: str) -> dict[str, str]:
    """A concrete EC2 type and the labels Karpenter puts on its nodes ("Well-Known Labels")."""
    family = name.split(".", maxsplit=1)[0]
    labels = {TYPE: name, FAMILY: family, CATEGORY: category, GENERATION: generation, CPU: cpu}
    keys = {"gpu": GPU_MAKER, "gpu_name": GPU_NAME, "gpus": GPU_COUNT, "accelerator": ACCEL}
    return {**labels, **{keys[k]: v for k, v in more.items()}}


T4G = {"gpu": "nvidia", "gpu_name": "t4g"}
CATALOGUE = [
    ec2("m6g.large", "m", "6", "aws"),
    ec2("c7g.xlarge", "c", "7", "aws"),
    ec2("r8g.large", "r", "8", "aws"),
    ec2("t4g.micro", "t", "4", "aws"),
    ec2("a1.medium", "a", "1", "aws"),
    ec2("im4gn.large", "im", "4", "aws"),
    ec2("g5g.xlarge", "g", "5", "aws", **T4G, gpus="1"),
    ec2("g5g.16xlarge", "g", "5", "aws", **T4G, gpus="2"),
    ec2("m5.large", "m", "5", "intel"),
    ec2("c5a.large", "c", "5", "amd"),
    ec2("m7i.large", "m", "7", "intel"),
    ec2("p3.2xlarge", "p", "3", "intel", gpu="nvidia", gpu_name="v100", gpus="1"),
    ec2("inf2.xlarge", "inf", "2", "amd", accelerator="aws"),
]
ARM = {"m6g", "c7g", "r8g", "t4g", "a1", "im4gn", "g5g"}
NODES = [
    {**labels, TYPE: size, ARCH: "arm64" if labels[FAMILY] in ARM else "amd64", OS: os}
    for labels, os in itertools.product(CATALOGUE, ("linux", "windows"))
    for size in (labels[TYPE], labels[FAMILY] + ".48xlarge")  # every family has more sizes
    if os == "linux" or labels[FAMILY] not in ARM  # no Windows on Graviton
]
MODELED = (TYPE, FAMILY, CATEGORY, GENERATION, CPU, ARCH, OS, GPU_MAKER, GPU_NAME, GPU_COUNT, ACCEL)


def matches(node: Mapping[str, str], r: Mapping[str, Any]) -> bool:
    """Kubernetes node-selector semantics on one concrete node."""
    key = {"beta.kubernetes.io/arch": ARCH}.get(r["key"], r["key"])
    if key not in MODELED:
        return True  # Karpenter sets custom requirement labels on the node itself
    value, op, values = node.get(key), r["operator"], r.get("values", [])
    if op == "In":
        return value in values
    if op == "NotIn":
        return value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    bound, have = int(values[0]), int(value) if value and value.isdigit() else None
    return have is not None and {"Gt": have > bound, "Lt": have < bound}[op]


VALUES = {
    key: sorted({n[key] for n in CATALOGUE if key in n} | {"other", "windows", "arm64"})
    for key in (TYPE, FAMILY, CATEGORY, CPU, ARCH, OS, GPU_MAKER, GPU_NAME, ACCEL)
}


@st.composite
def requirement(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from([*VALUES, GENERATION, GPU_COUNT, "example.com/team"]))
    if key in (GENERATION, GPU_COUNT):
        op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
        if op in ("Gt", "Lt"):
            return req(key, op, str(draw(st.integers(0, 9))))
        pool = [str(i) for i in range(10)]
    else:
        op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
        pool = VALUES.get(key, ["a", "b"])
    if op in ("Exists", "DoesNotExist"):
        return req(key, op)
    return req(key, op, *draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4, unique=True)))


@settings(max_examples=400, deadline=None)
@given(st.lists(requirement(), max_size=4))
def test_efficiency_adds_arm64_exactly_when_an_arm64_node_fits(reqs: list[dict[str, Any]]) -> None:
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p", "annotations": {"carbonshift.io/strategy": "efficiency"}},
        "spec": {"template": {"spec": spec(*reqs)}},
    }
    decision = decide(pool, NodePoolInputs("DE", {"DE": reading("DE", 600)}, NodePoolConfig()))
    written = next(
        (c.value for c in decision.changes if c.path[-1] == "requirements"), pool["spec"]
    )
    added = (
        isinstance(written, list)
        and {"key": ARCH, "operator": "In", "values": ["arm64"]} in (written[len(reqs) :])
    )
    fits = [n for n in NODES if n[ARCH] == "arm64" and all(matches(n, r) for r in reqs)]
    if added:
        # Never makes a satisfiable pool unsatisfiable: some arm64 type still fits.
        parsed = [r for r in map(arm64.Requirement.read, reqs) if r is not None]
        assert len(parsed) == len(reqs)
        table = [f for f in arm64.candidates("aws", parsed) if all(r.allows(f) for r in parsed)]
        satisfiable = any(all(matches(n, r) for r in reqs) for n in NODES)
        beyond = any(f.name not in ARM for f in table)  # a family the catalogue lacks
        assert fits or not satisfiable or beyond
    else:
        # Never a missed chance: no concrete arm64 node fits, or the user pinned arm64.
        pinned = any(
            r["key"].endswith("/arch") and r["operator"] == "In" and r.get("values") == ["arm64"]
            for r in reqs
        )
        assert not fits or pinned
        assert not fits or not any("efficiency left alone" in w for w in decision.warnings)


def test_provider_follows_the_label_domain_when_the_node_class_does_not_say() -> None:
    gpu_fragment = {
        "requirements": [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p3"]}
        ]
    }
    assert arm64.provider_of(gpu_fragment) == "aws"
    assert arm64.why_not(gpu_fragment) is not None
    assert arm64.provider_of({"requirements": []}) is None


@pytest.mark.parametrize(
    ("types", "eligible"),
    [(["m5.large", "m5.xlarge"], False), (["c4.large"], False), (["p3.8xlarge"], False),
     (["m7g.large"], True), (["Standard_D4ps_v6"], True), (["c4a-standard-4"], True)],
)  # fmt: skip
def test_named_types_without_a_node_class_are_judged_against_every_provider(
    types: list[str], eligible: bool
) -> None:
    spec = {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                              "values": types}]}  # fmt: skip
    assert (arm64.why_not(spec) is None) is eligible
