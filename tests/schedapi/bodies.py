"""Request bodies for the scheduler API's tests: Karmada's and kube-scheduler's, good and
malformed, and the Nodes and Pods an extender request carries."""

from __future__ import annotations

from typing import Any

MAX = "carbonshift.io/max-intensity"

ISSUE_REQUEST = {
    "clusters": [
        {
            "name": "m1",
            "provider": "aws",
            "region": "eu-west-3",
            "zones": ["eu-west-3a"],
            "labels": {},
        },
        {"name": "m2", "zone": "PL"},
    ],
    "workload": {"namespace": "ns", "name": "app", "replicas": 3, "annotations": {MAX: "300"}},
}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {k.replace("_", "/"): v for k, v in labels.items()}},
        "spec": {},
        "status": {"allocatable": {"cpu": "4"}},
    }


GREEN = node("green", **{"topology.kubernetes.io/region": "eu-west-3"})
DIRTY = node("dirty", **{"topology.kubernetes.io/region": "ap-south-1"})
GRID = node("grid", **{"carbonshift.io/grid-zone": "SE-SE3"})


def pod(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "d", "annotations": annotations}, "spec": {}}


BAD_KARMADA = [
    b"not json",
    b"[]",
    {},
    {"clusters": {}},
    {"clusters": [{}]},
    {"clusters": [{"name": ""}]},
    {"clusters": [{"name": 3}]},
    {"clusters": [{"name": "a"}, {"name": "a"}]},
    {"clusters": [{"name": "a", "zone": 5}]},
    {"clusters": [{"name": "a", "zone": "not a zone!"}]},
    {"clusters": [{"name": "a", "zones": "x"}]},
    {"clusters": [{"name": "a", "labels": {"k": 1}}]},
    {"clusters": [{"name": "a", "provider": ["aws"]}]},
    {"clusters": [{"name": "a"}], "workload": []},
    {"clusters": [{"name": "a"}], "workload": {"replicas": -1}},
    {"clusters": [{"name": "a"}], "workload": {"replicas": True}},
    {"clusters": [{"name": "a"}], "workload": {"annotations": {MAX: 300}}},
    {"clusters": [{"name": f"c{i}"} for i in range(10_001)]},
]

BAD_EXTENDER = [
    b"{",
    b"1",
    {"Pod": []},
    {"Nodes": []},
    {"Nodes": {"items": {}}},
    {"Nodes": {"items": [{}]}},
    {"Nodes": {"items": [{"metadata": {"name": ""}}]}},
    {"Nodes": {"items": [{"metadata": {"name": "a", "labels": []}}]}},
    {"Nodes": {"items": [{"metadata": {"name": "a"}, "spec": {"providerID": 1}}]}},
    {"Nodes": {"items": [node("a"), node("a")]}},
    {"NodeNames": "a"},
    {"NodeNames": [""]},
]
