"""Can a NodePool's requirements still be met by an arm64 instance type?

Strategy ``efficiency`` adds ``kubernetes.io/arch In [arm64]`` only when some arm64
instance type satisfies every requirement the user wrote; otherwise the requirement would
make the pool unsatisfiable. The answer comes from :data:`FAMILIES`, a small table of the
arm64 instance families each Karpenter provider offers (source per row), with the
well-known labels their nodes carry.

Semantics follow Karpenter (``pkg/scheduling/requirements.go``): requirements on one key
intersect; ``In`` needs the label with one of the values, ``NotIn`` is met by an absent
label, ``Gt/Lt/Gte/Lte`` compare integers. A key the table does not model for a family
(sizes, memory, custom labels...) never blocks. ``minValues`` counts the distinct values
left among the matching arm64 families.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.model.objects import mapping

ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
_DEPRECATED = {
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
}
"""Karpenter normalizes these keys to the stable names (``NormalizedLabels``)."""

AWS = "karpenter.k8s.aws/"
AZURE = "karpenter.azure.com/"
KWOK = "karpenter.kwok.sh/"

NODE_CLASSES = {
    "EC2NodeClass": "aws",
    "AKSNodeClass": "azure",
    "GCENodeClass": "gcp",
    "KWOKNodeClass": "kwok",
}
"""``nodeClassRef.kind`` -> provider of :data:`FAMILIES`. Other kinds: provider unknown,
only ``kubernetes.io/arch`` can rule arm64 out."""

SOURCES = {
    "aws": "https://aws.amazon.com/ec2/graviton/ ; labels: "
    "https://karpenter.sh/docs/concepts/scheduling/#well-known-labels",
    "gcp": "https://cloud.google.com/compute/docs/instances/arm-on-compute",
    "azure": "https://learn.microsoft.com/azure/virtual-machines/sizes/cobalt-overview ; "
    "https://learn.microsoft.com/azure/virtual-machines/dpsv5-dpdsv5-series",
    "kwok": "kubernetes-sigs/karpenter@v1.14.1:kwok/tools/gen_instance_types.go "
    "(types <family>-<cpu>x-<arch>-<os>, families c, s, m; amd64 and arm64; linux and windows)",
}
"""Where each provider's rows come from."""

Labels = Mapping[str, tuple[str, ...]]
"""Label key -> the values nodes of a family may carry; ``()``: the label is never set."""


@dataclasses.dataclass(frozen=True, slots=True)
class Family:
    """One arm64 instance family: its provider, the labels its nodes carry, its type names."""

    provider: str
    name: str
    labels: Labels
    types: re.Pattern[str]
    """``node.kubernetes.io/instance-type`` values of this family."""


_LINUX: Labels = {ARCH: ("arm64",), OS: ("linux",), WINDOWS_BUILD: ()}
_AWS_SCHEME = re.compile(r"^([a-z]+)(\d+)([a-z-]*)$")
GRAVITON = re.compile(r"^[a-z]+\d+g[a-z]*$")
"""AWS names Graviton families with a ``g`` processor letter after the generation (m6g,
c7gn, im4gn, is4gen, hpc7g); with :data:`AWS_GRAVITON` it also covers families newer
than the table."""

AWS_GRAVITON = (
    "a1",  # Graviton (first generation)
    "c6g c6gd c6gn m6g m6gd r6g r6gd t4g x2gd im4gn is4gen i4g g5g",  # Graviton2
    "c7g c7gd c7gn m7g m7gd r7g r7gd hpc7g",  # Graviton3 / 3E
    "c8g c8gd c8gn m8g m8gd r8g r8gd x8g i8g i8ge",  # Graviton4
)
"""AWS Graviton (arm64) instance families (``karpenter.k8s.aws/instance-family``)."""
_AWS_GPU = {"g5g": {"manufacturer": "nvidia", "name": "t4g", "count": ("1", "2"), "mib": "16384"}}
"""The one Graviton family with GPUs (NVIDIA T4G); no Graviton family has accelerators."""

GCP_ARM64 = ("c4a", "t2a")
"""Google Axion C4A and Ampere Altra Tau T2A machine series (``c4a-standard-4``)."""

AZURE_ARM64 = (
    # Cobalt 100 (v6) and Ampere Altra (v5): D/E families with the "p" (Arm) feature letter.
    ("D", "6", "ps pds pls plds"),
    ("E", "6", "ps pds"),
    ("D", "5", "ps pds pls plds"),
    ("E", "5", "ps pds"),
    ("B", "2", "ps pls pts"),  # Bpsv2, Ampere Altra burstable
)
"""Azure Arm64 VM sizes: (sku family, version, feature letters), e.g. ``Standard_D4ps_v6``."""

KWOK_FAMILIES = ("c", "s", "m")


def _aws(name: str) -> Family:
    scheme = _AWS_SCHEME.match(name)
    category, generation = (scheme.group(1), scheme.group(2)) if scheme else (name, "")
    gpu = _AWS_GPU.get(name, {})
    labels: dict[str, tuple[str, ...]] = {
        **_LINUX,
        AWS + "instance-family": (name,),
        AWS + "instance-category": (category,),
        AWS + "instance-generation": (generation,) if generation else (),
        AWS + "instance-cpu-manufacturer": ("aws",),
        AWS + "instance-gpu-manufacturer": _one(gpu.get("manufacturer")),
        AWS + "instance-gpu-name": _one(gpu.get("name")),
        AWS + "instance-gpu-count": tuple(gpu.get("count", ())),
        AWS + "instance-gpu-memory": _one(gpu.get("mib")),
        AWS + "instance-accelerator-name": (),
        AWS + "instance-accelerator-manufacturer": (),
        AWS + "instance-accelerator-count": (),
    }
    return Family("aws", name, labels, re.compile(re.escape(name) + r"\.[a-z0-9-]+$"))


def _one(value: object) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else ()


def _azure(family: str, version: str, letters: str) -> Family:
    pattern = rf"^Standard_{family}\d+({'|'.join(letters.split())})_v{version}$"
    labels = {
        **_LINUX,
        AZURE + "sku-family": (family,),
        AZURE + "sku-version": (version,),
        AZURE + "sku-gpu-manufacturer": (),
        AZURE + "sku-gpu-name": (),
        AZURE + "sku-gpu-count": (),
    }
    return Family("azure", f"{family}p*v{version}", labels, re.compile(pattern))


def _kwok(family: str) -> Family:
    labels = {ARCH: ("arm64",), OS: ("linux", "windows"), KWOK + "instance-family": (family,)}
    pattern = re.compile(rf"^{family}-\d+x-arm64-(linux|windows)$")
    return Family("kwok", family, labels, pattern)


FAMILIES: tuple[Family, ...] = (
    *(_aws(name) for row in AWS_GRAVITON for name in row.split()),
    *(Family("gcp", f, _LINUX, re.compile(rf"^{f}-[a-z0-9-]+$")) for f in GCP_ARM64),
    *(_azure(*row) for row in AZURE_ARM64),
    *(_kwok(f) for f in KWOK_FAMILIES),
)
"""Every known arm64 instance family."""

_ANY_PROVIDER = Family("?", "any arm64", {ARCH: ("arm64",)}, re.compile(".+"))
"""Stands for an unknown provider's arm64 types: only the arch label is known."""


@dataclasses.dataclass(frozen=True, slots=True)
class Requirement:
    """One NodePool requirement, normalized."""

    key: str
    operator: str
    values: tuple[str, ...]
    min_values: int | None = None

    @classmethod
    def read(cls, raw: object) -> Requirement | None:
        if not isinstance(raw, Mapping) or not isinstance(key := raw.get("key"), str):
            return None
        values = raw.get("values") or ()
        minimum = raw.get("minValues")
        return cls(
            key=_DEPRECATED.get(key, key),
            operator=str(raw.get("operator", "")),
            values=tuple(str(v) for v in values) if isinstance(values, list) else (),
            min_values=minimum if isinstance(minimum, int) else None,
        )

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        shown = ", ".join(self.values[:3]) + (", …" if len(self.values) > 3 else "")
        return f"{self.key} {self.operator} [{shown}]"

    def allows(self, family: Family) -> bool:
        """Whether some instance type of ``family`` meets this requirement."""
        if self.key == INSTANCE_TYPE:
            return self._allows_type(family)
        have = family.labels.get(self.key)
        if have is None:
            return True  # not modeled: never blocks
        return any(self._holds(value) for value in have) or (not have and self._holds(None))

    def _allows_type(self, family: Family) -> bool:
        if self.operator == "In":
            return any(family.types.match(v) for v in self.values)
        return self.operator in ("NotIn", "Exists")

    def _holds(self, value: str | None) -> bool:
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        compare = _COMPARE.get(op)
        bound = self.values[0] if len(self.values) == 1 else ""
        if compare is None or not bound.isdigit():
            return True  # malformed: the CRD refuses it, carbonshift does not judge it
        return value is not None and value.isdigit() and compare(int(value), int(bound))

    def allowed_values(self, families: Iterable[Family]) -> set[str] | None:
        """Distinct values of this key left among ``families`` (None: not countable)."""
        if self.key == INSTANCE_TYPE:
            if self.operator != "In":
                return None
            return {v for v in self.values if any(f.types.match(v) for f in families)}
        found: set[str] = set()
        for family in families:
            have = family.labels.get(self.key)
            if have is None:
                return None
            found.update(v for v in have if self._holds(v))
        return found


_COMPARE = {
    "Gt": int.__gt__,
    "Lt": int.__lt__,
    "Gte": int.__ge__,
    "Lte": int.__le__,
}


def candidates(provider: str | None, requirements: Sequence[Requirement]) -> list[Family]:
    """The arm64 families of ``provider``, plus AWS families the user names that follow
    the Graviton naming but are newer than the table. With the provider unknown: any
    arm64 type, unless the pool names instance types: then those of every provider's
    table (a named type none of them knows is not taken for arm64)."""
    names_types = any(r.operator == "In" and r.key == INSTANCE_TYPE for r in requirements)
    if provider is None and not names_types:
        return [_ANY_PROVIDER]
    families = [f for f in FAMILIES if provider is None or f.provider == provider]
    if provider in ("aws", None):
        known = {f.name for f in families}
        named: set[str] = set()
        for r in requirements:
            if r.operator == "In" and r.key == AWS + "instance-family":
                named.update(r.values)
            elif r.operator == "In" and r.key == INSTANCE_TYPE:
                named.update(v.split(".", 1)[0] for v in r.values)
        families += [_aws(n) for n in sorted(named - known) if GRAVITON.match(n)]
    return families


_DOMAINS = {AWS: "aws", AZURE: "azure", KWOK: "kwok"}
"""Provider-specific label domains: a requirement on one names the provider."""


def provider_of(template_spec: Mapping[str, Any]) -> str | None:
    """The :data:`FAMILIES` provider of the pool: its ``nodeClassRef`` kind, else the
    provider whose labels its requirements use; None when neither tells."""
    ref = template_spec.get("nodeClassRef")
    kind = ref.get("kind") if isinstance(ref, Mapping) else None
    if isinstance(kind, str) and kind in NODE_CLASSES:
        return NODE_CLASSES[kind]
    raw = template_spec.get("requirements")
    for requirement in raw if isinstance(raw, list) else []:
        key = requirement.get("key") if isinstance(requirement, Mapping) else None
        for domain, provider in _DOMAINS.items():
            if isinstance(key, str) and key.startswith(domain):
                return provider
    return None


def why_not(template_spec: Mapping[str, Any]) -> str | None:
    """Why no arm64 instance type can meet the pool's requirements; None when one can."""
    raw = template_spec.get("requirements")
    reqs = [r for r in map(Requirement.read, raw if isinstance(raw, list) else []) if r]
    provider = provider_of(template_spec)
    families = candidates(provider, reqs)
    if not families:
        return f"{mapping(template_spec, 'nodeClassRef').get('kind')} offers no arm64 types"
    types = _named_types(reqs)
    matching = [
        f
        for f in families
        if all(r.allows(f) for r in reqs)
        and (types is None or any(f.types.match(t) for t in types))
    ]
    if not matching:
        alone = next((r for r in reqs if not any(r.allows(f) for f in families)), None)
        if alone is not None:
            return f"{alone} allows no arm64 type"
        return "the requirements together allow no arm64 type"
    for r in reqs:
        if r.min_values is None:
            continue
        left = r.allowed_values(matching)
        if left is not None and len(left) < r.min_values:
            return f"{r.key} minValues {r.min_values} leaves {len(left)} arm64 value(s)"
    return None


def _named_types(reqs: Sequence[Requirement]) -> set[str] | None:
    """The instance types the ``In`` lists leave, minus ``NotIn`` (None: no ``In`` list)."""
    named: set[str] | None = None
    excluded: set[str] = set()
    for r in reqs:
        if r.key == INSTANCE_TYPE and r.operator == "In":
            named = set(r.values) if named is None else named & set(r.values)
        elif r.key == INSTANCE_TYPE and r.operator == "NotIn":
            excluded.update(r.values)
    return None if named is None else named - excluded
