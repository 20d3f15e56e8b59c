"""What the Karmada API carbonshift writes to keeps: the placement shape it may write.

Karmada added ``overflowAffinities`` to a ``clusterAffinities`` term in v1.18
(``policy.karmada.io_propagationpolicies.yaml``: no such field in v1.15, v1.16 or v1.17).
The policy CRDs have structural schemas without ``x-kubernetes-preserve-unknown-fields``,
so an older API server *prunes* the field from what the webhook's patch or the leader's
update writes: the stored policy keeps only the greenest tier, and replicas that do not
fit there stay unscheduled. carbonshift therefore writes the ordered fill in one of two
shapes (:mod:`webhook.decision.karmada.placement`):

- ``overflow`` (v1.18 on): one term, the greenest tier inline and the others as its
  ``overflowAffinities``, filled one after another by room;
- ``groups`` (every release): ordered ``clusterAffinities`` failover groups, term *k*
  holding tiers 0 to *k* (an open selection's catch-all last), divided by
  ``dynamicWeight: AvailableReplicas``. Karmada's scheduler (v1.16
  ``scheduleResourceBindingWithClusterAffinities``) tries the terms in order from the one
  a binding last observed; a term whose clusters cannot hold the replicas
  (``dynamicDivideReplicas``: available replicas below the target) fails and the next is
  tried.

:class:`KarmadaApi` says which one, and why: read from the policy CRDs' schemas with a
cluster connection (:func:`crd_overflow`), named by the config (``karmada.version``), or
by default the groups every release keeps. Pure: the Kubernetes side that watches the
CRDs is :mod:`webhook.kube.karmada`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

Source = Literal["crd", "config", "default", "stored"]
"""Where the answer comes from: the policy CRDs' schemas, the config's
``karmada.version``, the default (no cluster connection, ``auto``), or the stored policy
itself (the API server dropped ``overflowAffinities`` carbonshift wrote)."""

Shape = Literal["overflow", "groups"]

OVERFLOW_SINCE = (1, 18)
"""The first Karmada release whose policy API has ``overflowAffinities``."""

AUTO = "auto"

POLICY_CRDS = (
    "propagationpolicies.policy.karmada.io",
    "clusterpropagationpolicies.policy.karmada.io",
)
"""The CRDs whose schemas say what a policy write keeps."""

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


@dataclasses.dataclass(frozen=True, slots=True)
class KarmadaApi:
    """What the Karmada policy API keeps of what carbonshift writes."""

    overflow: bool
    """``overflowAffinities`` are kept (v1.18 on)."""
    source: Source
    version: str | None = None
    """The release, when named (``karmada.version``)."""

    @property
    def shape(self) -> Shape:
        """The ordered fill's shape this API keeps."""
        return "overflow" if self.overflow else "groups"

    @property
    def why(self) -> str:
        """Why this shape, in a few words (the decision record's ``karmada``)."""
        if self.source == "crd":
            return (
                "the policy CRDs keep overflowAffinities"
                if self.overflow
                else "the policy CRDs lack overflowAffinities (Karmada before 1.18)"
            )
        if self.source == "config":
            relation = "from" if self.overflow else "before"
            since = ".".join(map(str, OVERFLOW_SINCE))
            return f"karmada.version {self.version} (overflowAffinities {relation} {since})"
        if self.source == "stored":
            return "the API server dropped the overflowAffinities carbonshift wrote"
        return "no cluster connection, karmada.version auto: the shape every Karmada keeps"


GROUPS = KarmadaApi(False, "default")
"""The default: the shape every supported release keeps."""


def release(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of ``1.16``, ``v1.18.2``; None for ``auto`` or anything else."""
    found = _VERSION.match(version.strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


@functools.lru_cache(maxsize=16)
def configured(version: str) -> KarmadaApi | None:
    """The API ``karmada.version`` names; None for ``auto``. Kept per text (a
    decision asks on every object; the answer is immutable and a pure function of it)."""
    named = release(version)
    if named is None:
        return None
    return KarmadaApi(named >= OVERFLOW_SINCE, "config", version.strip().removeprefix("v"))


def resolve(version: str, crds: KarmadaApi | None) -> KarmadaApi:
    """The API decisions write for: the CRDs' answer when read (``crds``), except that an
    older release named by the config keeps the groups; else the configured release; else
    :data:`GROUPS`. The CRDs never grant what they lack."""
    named = configured(version)
    if crds is not None:
        if crds.overflow and named is not None and not named.overflow:
            return named
        return crds
    return named if named is not None else GROUPS


# --- reading the CRDs -----------------------------------------------------------------------

_PATH = ("spec", "placement", "clusterAffinities", "[]", "overflowAffinities")
"""Where ``overflowAffinities`` sits in a policy: ``spec.placement.clusterAffinities[]``."""


def crd_overflow(crd: Mapping[str, Any]) -> bool | None:
    """Whether a policy CRD keeps ``spec.placement.clusterAffinities[].overflowAffinities``:
    every served version's schema declares it, or preserves unknown fields on the way to
    it. None when the CRD has no readable schema."""
    spec = crd.get("spec")
    versions = spec.get("versions") if isinstance(spec, Mapping) else None
    if not isinstance(versions, list):
        return None
    answers = []
    for version in versions:
        if not isinstance(version, Mapping) or version.get("served") is False:
            continue
        schema = version.get("schema")
        root = schema.get("openAPIV3Schema") if isinstance(schema, Mapping) else None
        if not isinstance(root, Mapping):
            return None
        answers.append(_keeps(root, _PATH))
    return all(answers) if answers else None


def _keeps(node: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether a value at ``path`` under the structural schema ``node`` survives pruning."""
    for step in path:
        if step == "[]":
            child = node.get("items")
        else:
            properties = node.get("properties")
            child = properties.get(step) if isinstance(properties, Mapping) else None
        if not isinstance(child, Mapping):
            return node.get("x-kubernetes-preserve-unknown-fields") is True
        node = child
    return True


def from_crds(answers: Iterable[bool | None]) -> KarmadaApi | None:
    """The API the policy CRDs' answers (:func:`crd_overflow`, one per CRD found) say;
    None when no CRD could be read. Overflow only when every one keeps it."""
    read = [a for a in answers if a is not None]
    if not read:
        return None
    return KarmadaApi(all(read), "crd")
