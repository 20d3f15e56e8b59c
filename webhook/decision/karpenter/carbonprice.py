"""The carbon price of an instance size, as Karpenter NodeOverlays (strategy ``price``).

Karpenter orders each launch's instance-type options and decides consolidation by price;
a ``NodeOverlay`` (``karpenter.sh/v1alpha1``, feature gate ``NodeOverlay``) adjusts the
price of the offerings its requirements select. Strategy ``price`` adds to every instance
type the cost of the carbon it emits in an hour on the local grid:

    $/h = vCPUs x watts per vCPU (by architecture) x PUE / 1000 x intensity (g/kWh)
          x carbon price ($/t) / 1e6

so where the grid is dirty the efficient types (arm64 at 1.08 W per vCPU against 2.12 W
for amd64, Cloud Carbon Footprint's coefficients) become cheaper and consolidation moves to
them; where it is clean the difference shrinks below the raw price gaps and nothing moves.
No requirement of the pool changes: a pool whose pods cannot run on arm64 stays exactly as
satisfiable as before.

One overlay per architecture and size (``carbonshift-price-<arch>-<vcpus>``), selecting
``karpenter.sh/nodepool In [<the priced pools>]``, ``kubernetes.io/arch In [<arch>]`` and
the provider's vCPU label (``karpenter.k8s.aws/instance-cpu``...: known per NodeClass
group, :data:`CPU_LABELS`); pools of several providers get one set each. A user's own
price overlay of higher ``weight`` wins for the offerings it selects (NodeOverlays do not
stack). Prices move only through :func:`due`: by more than the hysteresis margin, and not
sooner than the minimum interval after the last change (Karpenter consolidates on each).

Pure functions: the leader (:mod:`webhook.controllers.karpenter.prices`) lists, writes and deletes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from webhook.model.config import CarbonPriceConfig
from webhook.model.objects import meta_of
from webhook.model.resources import Resource
from webhook.model.vocabulary import (
    INTENSITY_SINCE,
    INTENSITY_VALUE,
    INTENSITY_ZONE,
    OVERLAY,
    parse_time,
)

NODE_OVERLAY = Resource("karpenter.sh", "v1alpha1", "nodeoverlays", "NodeOverlay")
"""Karpenter's NodeOverlay: where the carbon prices are written."""
NAME_PREFIX = "carbonshift-price-"
MANAGED_BY = "app.kubernetes.io/managed-by"
BASIS, ZONE, PRICED_AT = INTENSITY_VALUE, INTENSITY_ZONE, INTENSITY_SINCE
SELECTOR = f"{MANAGED_BY}=carbonshift,{OVERLAY}=price"
"""The overlays carbonshift keeps; their annotations say the intensity the prices were
computed from (``intensity-value``), of which zone, and when they last changed
(``intensity-since``)."""
NODEPOOL, ARCH = "karpenter.sh/nodepool", "kubernetes.io/arch"
CPU_LABELS: Mapping[str, str] = {
    "karpenter.k8s.aws": "karpenter.k8s.aws/instance-cpu",
    "karpenter.azure.com": "karpenter.azure.com/sku-cpu",
    "karpenter.kwok.sh": "karpenter.kwok.sh/instance-cpu",
}
"""NodeClass group (``spec.template.spec.nodeClassRef.group``) -> its instance-type label
holding the vCPU count (config ``nodepools.price.cpu_labels`` adds others)."""
PROVIDERS: Mapping[str, str] = {
    "karpenter.k8s.aws": "aws",
    "karpenter.azure.com": "azure",
    "karpenter.kwok.sh": "kwok",
}


def usd_per_hour(
    vcpus: int, watts_per_vcpu: float, intensity: float, s: CarbonPriceConfig
) -> float:
    """The carbon cost of running ``vcpus`` vCPUs for an hour at ``intensity`` g/kWh."""
    kwh = vcpus * watts_per_vcpu * s.pue / 1000.0
    return kwh * intensity * s.usd_per_tonne / 1e6


def adjustment(usd: float) -> str:
    """A ``priceAdjustment`` (``+0.000564``): signed, fixed point, at most 9 decimals."""
    text = f"{max(usd, 0.0):.9f}".rstrip("0").rstrip(".")
    return "+" + (text or "0")


@dataclasses.dataclass(frozen=True, slots=True)
class Pool:
    """A NodePool priced by carbon: its name and its NodeClass group."""

    name: str
    group: str


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """The overlays wanted, by name, and the pools left unpriced with why."""

    overlays: Mapping[str, dict[str, Any]]
    left: Mapping[str, str]


def cpu_label(group: str, s: CarbonPriceConfig) -> str | None:
    """The vCPU label of a NodeClass group; None when unknown."""
    return s.cpu_labels.get(group) or CPU_LABELS.get(group)


def _slug(group: str) -> str:
    known = PROVIDERS.get(group)
    return known or re.sub(r"[^a-z0-9]+", "-", group.lower()).strip("-")[:20] or "x"


def plan(
    pools: Sequence[Pool],
    intensity: float,
    s: CarbonPriceConfig,
    *,
    zone: str,
    at: datetime,
) -> Plan:
    """The overlays pricing ``pools`` at ``intensity`` (g/kWh of ``zone``), stamped ``at``
    (when these prices were decided: the basis time, not necessarily now)."""
    by_group: dict[str, list[str]] = {}
    left: dict[str, str] = {}
    for pool in pools:
        if cpu_label(pool.group, s) is None:
            left[pool.name] = (
                f"no vCPU label known for NodeClass group {pool.group or '(none)'}:"
                " set nodepools.price.cpu_labels"
            )
            continue
        by_group.setdefault(pool.group, []).append(pool.name)
    several = len(by_group) > 1
    overlays: dict[str, dict[str, Any]] = {}
    for group, names in sorted(by_group.items()):
        label = cpu_label(group, s)
        assert label is not None
        for arch, watts in sorted(s.watts_per_vcpu.items()):
            for vcpus in sorted(set(s.vcpus)):
                name = NAME_PREFIX + (f"{_slug(group)}-" if several else "") + f"{arch}-{vcpus}"
                usd = usd_per_hour(vcpus, watts, intensity, s)
                overlays[name] = overlay(
                    name,
                    requirements=[
                        {"key": NODEPOOL, "operator": "In", "values": sorted(set(names))},
                        {"key": ARCH, "operator": "In", "values": [arch]},
                        {"key": label, "operator": "In", "values": [str(vcpus)]},
                    ],
                    price=adjustment(usd),
                    weight=s.weight,
                    annotations={
                        BASIS: _number(intensity),
                        ZONE: zone,
                        PRICED_AT: at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    },
                )
    return Plan(overlays, left)


def overlay(
    name: str,
    *,
    requirements: list[dict[str, Any]],
    price: str,
    weight: int,
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """One NodeOverlay carbonshift owns."""
    return {
        "apiVersion": NODE_OVERLAY.api_version,
        "kind": NODE_OVERLAY.kind,
        "metadata": {
            "name": name,
            "labels": {MANAGED_BY: "carbonshift", OVERLAY: "price"},
            "annotations": dict(annotations),
        },
        "spec": {"requirements": requirements, "priceAdjustment": price, "weight": weight},
    }


def _number(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def due(
    basis: float | None,
    since: datetime | None,
    intensity: float,
    now: datetime,
    *,
    margin: float,
    min_interval_seconds: float,
) -> bool:
    """Whether prices computed at ``basis`` (``since``) move to ``intensity`` now: there
    are none yet, or the minimum interval has passed and the intensity moved by more
    than ``margin`` (relative)."""
    if basis is None or since is None:
        return True
    if (now - since).total_seconds() < min_interval_seconds:
        return False
    if basis <= 0:
        return intensity > 0
    return abs(intensity - basis) / basis > margin


def basis_of(overlays: Sequence[Mapping[str, Any]]) -> tuple[float | None, datetime | None]:
    """The intensity and time the kept overlays were priced at (None, None: none kept or
    their annotations unreadable)."""
    for found in overlays:
        notes = meta_of(found).annotations
        try:
            return float(notes[BASIS]), parse_time(str(notes[PRICED_AT]))
        except (KeyError, ValueError, TypeError):
            continue
    return None, None


def differs(want: Mapping[str, Any], have: Mapping[str, Any]) -> bool:
    """Whether a kept overlay must be rewritten to be ``want``."""
    keep = meta_of(have).annotations
    wanted = want["metadata"]["annotations"]
    return have.get("spec") != want["spec"] or any(keep.get(k) != v for k, v in wanted.items())


def summary(overlays: Mapping[str, Mapping[str, Any]], sizes: Sequence[int] = (2, 8)) -> str:
    """``amd64 2 vCPU +$0.000564/h, arm64 2 vCPU +$0.000287/h, ...`` for an Event."""
    parts = []
    for name, body in sorted(overlays.items()):
        arch, _, vcpus = name.removeprefix(NAME_PREFIX).rpartition("-")
        if vcpus.isdigit() and int(vcpus) in sizes:
            arch = arch.rpartition("-")[2]
            parts.append(f"{arch} {vcpus} vCPU {body['spec']['priceAdjustment']} $/h")
    return ", ".join(parts)
