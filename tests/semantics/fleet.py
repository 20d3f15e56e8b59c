"""The fixed world the corpus runs in: clusters, intensities, config, corpus, variants."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from tests.semantics.checker import World
from tests.support import FLEET, NOW, reading
from webhook import kinds
from webhook.cli import preview
from webhook.model import config
from webhook.model.intensity import Reading

CORPUS = Path(__file__).resolve().parent.parent / "corpus"

GRID: dict[str, float] = {"SE": 30, "FR": 60, "ES": 150, "DE": 380, "IT": 420, "PL": 700}
"""Grid zone -> gCO2eq/kWh. The local zone (PL) is ``high`` for NodePools."""

_EXTRA: dict[str, tuple[str, str, str, str, dict[str, str]]] = {
    # name: grid zone, provider, region, availability zone, labels
    "member1": ("SE", "huaweicloud", "cn-south-1", "cn-south-1a", {"location": "us"}),
    "member2": ("FR", "huaweicloud", "cn-north-1", "cn-north-1a", {}),
    "member3": ("PL", "aws", "us-west-1", "us-west-1a", {"location": "us"}),
    "member4": ("DE", "aws", "us-east-1", "us-east-1a", {}),
    "member5": ("ES", "gcp", "us-central1", "us-central1-a", {}),
    "cluster1": ("SE", "aws", "eu-north-1", "eu-north-1a", {}),
    "cluster2": ("DE", "aws", "eu-central-1", "eu-central-1b", {}),
    "cluster3": ("IT", "aws", "eu-south-1", "eu-south-1a", {}),
    "clustera": ("FR", "aws", "eu-west-3", "eu-west-3b", {}),
    "clusterb": ("PL", "gcp", "europe-central2", "europe-central2-b", {}),
    "cluster-a": ("ES", "aws", "eu-south-2", "eu-south-2a", {}),
    "cluster-b": ("IT", "gcp", "europe-west8", "europe-west8-a", {}),
    "local-member1": ("DE", "idc", "local", "local-a", {}),
    "local-member2": ("PL", "idc", "local", "local-b", {}),
    "public-cloud-member1": ("SE", "aws", "eu-north-1", "eu-north-1b", {}),
    "public-cloud-member2": ("FR", "aws", "eu-west-3", "eu-west-3c", {}),
    "cloud-gpu-cluster1": ("FR", "aws", "eu-west-3", "eu-west-3a", {"gpu": "true"}),
    "cloud-gpu-cluster2": ("DE", "aws", "eu-central-1", "eu-central-1c", {"gpu": "true"}),
    "idc-gpu-cluster1": ("PL", "idc", "local", "local-c", {"gpu": "true"}),
}

TOPOLOGY: dict[str, str] = {
    "us-west-2a": "SE",
    "us-west-2b": "DE",
    "us-west-2c": "PL",
    "us-east-1a": "FR",
    "eu-west-3a": "FR",
    "eu-north-1a": "SE",
    "europe-central2-a": "PL",
}
"""Cloud topology zone -> grid zone for NodePool ``zones``."""


def config_document() -> dict[str, Any]:
    clusters = copy.deepcopy(FLEET["clusters"])
    for name, (zone, provider, region, az, labels) in _EXTRA.items():
        clusters[name] = {
            "zone": zone,
            "provider": provider,
            "region": region,
            "zones": [az],
            "labels": labels,
        }
    return {"zone": "PL", "clusters": clusters, "nodepools": {"topology_zones": TOPOLOGY}}


CONFIG = config.parse(config_document())


def table() -> dict[str, Reading]:
    return {z: reading(z, g, valid_to=NOW + timedelta(hours=1)) for z, g in GRID.items()}


def context() -> kinds.Context:
    return kinds.Context(config=CONFIG, table=table(), now=NOW)


def world() -> World:
    intensity = {n: GRID[c.grid_zone] for n, c in CONFIG.clusters.items() if c.grid_zone in GRID}
    topology = {z: GRID[g] for z, g in TOPOLOGY.items()}
    return World(clusters=CONFIG.clusters, intensity=intensity, level="high", topology=topology)


# --- the corpus -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One corpus object and where it came from."""

    id: str
    source: str
    obj: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind"))


def corpus() -> list[Sample]:
    """Every corpus object, in file order."""
    out = []
    for path in sorted(CORPUS.glob("*/*.yaml")):
        source = next(
            line.split(":", 1)[1].strip()
            for line in path.read_text().splitlines()
            if line.startswith("# source:")
        )
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        for i, doc in enumerate(docs):
            name = (doc.get("metadata") or {}).get("name", "unnamed")
            out.append(Sample(f"{path.parent.name}/{path.stem}#{i}:{name}", source, doc))
    return out


# --- variants ----------------------------------------------------------------------------------

POLICY_VARIANTS: dict[str, dict[str, str]] = {
    "none": {},
    "max-clusters-1": {"carbonshift.io/max-clusters": "1"},
    "max-clusters-2": {"carbonshift.io/max-clusters": "2"},
    "max-intensity-low": {"carbonshift.io/max-intensity": "100"},
    "max-intensity-high": {"carbonshift.io/max-intensity": "1000"},
    "strategy-weighted": {"carbonshift.io/strategy": "weighted"},
    "strategy-none": {"carbonshift.io/strategy": "none"},
    "override": {"carbonshift.io/override": "true"},
    "override-max-clusters-1": {
        "carbonshift.io/override": "true",
        "carbonshift.io/max-clusters": "1",
    },
    "override-weighted-low": {
        "carbonshift.io/override": "true",
        "carbonshift.io/strategy": "weighted",
        "carbonshift.io/max-intensity": "100",
    },
    "all": {
        "carbonshift.io/max-clusters": "1",
        "carbonshift.io/max-intensity": "400",
        "carbonshift.io/strategy": "weighted",
    },
}

NODEPOOL_VARIANTS: dict[str, dict[str, str]] = {
    "none": {},
    "efficiency": {"carbonshift.io/strategy": "efficiency"},
    "zones": {"carbonshift.io/strategy": "zones"},
    "weight": {"carbonshift.io/strategy": "weight"},
    "pause": {"carbonshift.io/strategy": "pause"},
    "efficiency,zones": {"carbonshift.io/strategy": "efficiency,zones"},
    "all": {"carbonshift.io/strategy": "efficiency,zones,weight,pause"},
    "override-weight": {"carbonshift.io/strategy": "weight", "carbonshift.io/override": "true"},
}


def variants(kind: str) -> dict[str, dict[str, str]]:
    return NODEPOOL_VARIANTS if kind == "NodePool" else POLICY_VARIANTS


def with_variant(obj: Mapping[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
    """The object with the variant's annotations, opted in when cluster-scoped."""
    out = copy.deepcopy(dict(obj))
    meta = out.setdefault("metadata", {})
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    if out.get("kind") != "PropagationPolicy":
        meta["labels"] = {**(meta.get("labels") or {}), "carbonshift.io/enabled": "true"}
    return out


def cases() -> Iterator[tuple[str, Sample, str, dict[str, Any]]]:
    """(test id, sample, variant name, object with the variant) for the whole grid."""
    for sample in corpus():
        for name, marks in variants(sample.kind).items():
            yield f"{sample.id}[{name}]", sample, name, with_variant(sample.obj, marks)


def run(obj: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The stored object and warnings, as the webhook's admission code answers."""
    [shown] = preview.preview([obj], context())
    return dict(shown.stored), list(shown.outcome.warnings)
