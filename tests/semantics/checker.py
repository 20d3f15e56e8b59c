"""What carbonshift may do to a policy or NodePool, checked from the outside.

:func:`check` compares the object as the user wrote it with the object as carbonshift
stored it (the admission patch applied, e.g. by :func:`webhook.cli.preview.preview`) and the
warnings it answered, and returns every broken invariant:

- ``valid``: the stored object passes an offline approximation of what the API server
  enforces (the CRD's openAPIV3Schema through ``jsonschema``, Karmada's validating webhook
  rules for placements, the NodePool CRD's CEL rules) -- problems the user's object did
  not have already;
- ``reach``: the clusters a policy can place on never grow (clusterNames, exclude,
  label/field selectors, overflowAffinities, the zero weight of clusters a user
  ``staticWeightList`` leaves out), judged over the known clusters plus unknown "phantom"
  twins, and spreadConstraints stay as written;
- ``overwrite``: a field the user set keeps its value unless ``carbonshift.io/override``
  is ``"true"`` (additions that only narrow, such as more ``exclude`` entries or more
  NodePool requirements, are not overwrites);
- ``schedulable``: a policy the known fleet could schedule stays schedulable (some
  affinity term satisfies every spreadConstraint's minGroups), a NodePool whose
  requirements could be met still can (arm64 against instance families/types, OS,
  CPU manufacturer; per-key value sets; minValues);
- ``warned``: a ``carbonshift.io`` annotation that asked for something that was not done
  comes with a warning.

The checker shares no code with the webhook's decision modules on purpose.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import yaml

from devtools.sandbox.layout import crd
from webhook.model.config import ClusterConfig

CRDS = {
    "PropagationPolicy": ("karmada", "policy.karmada.io_propagationpolicies.yaml"),
    "ClusterPropagationPolicy": ("karmada", "policy.karmada.io_clusterpropagationpolicies.yaml"),
    "NodePool": ("karpenter", "karpenter.sh_nodepools.yaml"),
}
"""The upstream CRD (project, file) per kind, fetched from the pinned Go modules into the
binary cache by ``hack/crds.sh`` (``make crds``)."""


def crd_file(kind: str) -> Path:
    """The CRD file of ``kind``; a one-line error naming ``make binaries`` when missing."""
    return crd(*CRDS[kind])


PREFIX = "carbonshift.io/"
OVERRIDE = PREFIX + "override"
STRATEGY = PREFIX + "strategy"
MAX_CLUSTERS = PREFIX + "max-clusters"
MAX_INTENSITY = PREFIX + "max-intensity"
ENABLED = PREFIX + "enabled"
INTENSITY_LABEL = PREFIX + "intensity"
ARCH_KEYS = ("kubernetes.io/arch", "beta.kubernetes.io/arch")
ZONE_KEYS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
FAMILY = "karpenter.k8s.aws/instance-family"
TYPE_KEYS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
OS_KEYS = ("kubernetes.io/os", "beta.kubernetes.io/os")
CPU_MAKER = "karpenter.k8s.aws/instance-cpu-manufacturer"
_ARM_FAMILY = re.compile(r"^(a1|[a-z]+[0-9]+g[a-z-]*)$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclasses.dataclass(frozen=True)
class Violation:
    """One broken invariant."""

    invariant: str
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.detail}"


@dataclasses.dataclass(frozen=True)
class World:
    """What the checker knows besides the two objects."""

    clusters: Mapping[str, ClusterConfig]
    """The member clusters carbonshift is configured with."""
    intensity: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Cluster name -> gCO2eq/kWh (for ``max-intensity``)."""
    level: str = "medium"
    """The local grid's class for NodePools: low | medium | high."""
    topology: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Cloud topology zone -> gCO2eq/kWh of its grid (for NodePool ``zones``)."""


# --- (a) valid ---------------------------------------------------------------------------


@functools.cache
def _validator(kind: str, version: str) -> jsonschema.protocols.Validator | None:
    if kind not in CRDS:
        return None
    definition = yaml.safe_load(crd_file(kind).read_text())
    for v in definition["spec"]["versions"]:
        if v["name"] == version:
            schema = v["schema"]["openAPIV3Schema"]
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft4Validator)
            validator: jsonschema.protocols.Validator = cls(schema)
            return validator
    return None


def _version(obj: Mapping[str, Any]) -> str:
    return str(obj.get("apiVersion", "")).rpartition("/")[2]


def schema_problems(obj: Mapping[str, Any]) -> set[str]:
    """The CRD openAPIV3Schema's complaints (metadata is the API server's, not checked)."""
    validator = _validator(str(obj.get("kind")), _version(obj))
    if validator is None:
        return {f"no CRD schema for {obj.get('apiVersion')} {obj.get('kind')}"}
    body = {k: v for k, v in obj.items() if k != "metadata"}
    out = set()
    for error in validator.iter_errors(body):
        where = "/".join(str(p) for p in error.absolute_path)
        out.add(f"schema {where}: {error.message[:160]}")
    return out


def _is_label_key(key: object) -> bool:
    if not isinstance(key, str) or not key:
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.match(name))


def _overflow_allowed(scheduling: Mapping[str, Any] | None) -> bool:
    if not scheduling or scheduling.get("replicaSchedulingType") != "Divided":
        return False
    preference = scheduling.get("replicaDivisionPreference")
    if preference == "Aggregated":
        return True
    if preference == "Weighted":
        return bool((scheduling.get("weightPreference") or {}).get("dynamicWeight"))
    return False


def _field_selector_problems(affinity: Mapping[str, Any], where: str) -> list[str]:
    out = []
    for e in (affinity.get("fieldSelector") or {}).get("matchExpressions") or []:
        if e.get("key") not in ("provider", "region", "zone"):
            out.append(f"karmada {where}.fieldSelector: unsupported key {e.get('key')!r}")
        if e.get("operator") not in ("In", "NotIn"):
            out.append(f"karmada {where}.fieldSelector: unsupported operator {e.get('operator')!r}")
    return out


def _empty_affinity(term: Mapping[str, Any]) -> bool:
    return not any(
        term.get(k) is not None if k.endswith("Selector") else term.get(k)
        for k in ("labelSelector", "fieldSelector", "clusterNames", "exclude")
    )


def karmada_problems(obj: Mapping[str, Any]) -> set[str]:
    """Karmada's validating webhook rules for ``spec.placement`` (pkg/util/validation)."""
    placement = (obj.get("spec") or {}).get("placement") or {}
    out: list[str] = []
    terms = placement.get("clusterAffinities")
    if placement.get("clusterAffinity") is not None and terms is not None:
        out.append("karmada placement: clusterAffinities cannot co-exist with clusterAffinity")
    scheduling = placement.get("replicaScheduling")
    if placement.get("clusterAffinity") is not None:
        out += _field_selector_problems(placement["clusterAffinity"], "clusterAffinity")
    names: set[str] = set()
    for i, term in enumerate(terms or []):
        where = f"clusterAffinities[{i}]"
        name = term.get("affinityName")
        if not _is_label_key(name):
            out.append(f"karmada {where}: affinityName {name!r} is not a label key")
        if name in names:
            out.append("karmada clusterAffinities: each affinity term must have a unique name")
        names.add(name)
        out += _field_selector_problems(term, where)
        overflow = term.get("overflowAffinities")
        if overflow is None:
            continue
        if not _overflow_allowed(scheduling):
            out.append(f"karmada {where}.overflowAffinities: only with dynamic weight/aggregated")
        if _empty_affinity(term):
            out.append(f"karmada {where}.overflowAffinities: needs an inline ClusterAffinity")
        seen = {name}
        for j, o in enumerate(overflow):
            if not _is_label_key(o.get("affinityName")) or o.get("affinityName") in seen:
                out.append(f"karmada {where}.overflowAffinities[{j}]: bad or duplicate name")
            seen.add(o.get("affinityName"))
            out += _field_selector_problems(o, f"{where}.overflowAffinities[{j}]")
    fields: dict[str, int] = {}
    for i, c in enumerate(placement.get("spreadConstraints") or []):
        if c.get("spreadByField") and c.get("spreadByLabel"):
            out.append(f"karmada spreadConstraints[{i}]: spreadByLabel with spreadByField")
        low, high = c.get("minGroups") or 0, c.get("maxGroups") or 0
        if low < 0 or high < 0 or (high > 0 and high < low):
            out.append(f"karmada spreadConstraints[{i}]: bad minGroups/maxGroups")
        if c.get("spreadByField"):
            fields[c["spreadByField"]] = fields.get(c["spreadByField"], 0) + 1
    if any(n > 1 for n in fields.values()):
        out.append("karmada spreadConstraints: one constraint per spreadByField")
    if fields and "cluster" not in fields:
        out.append("karmada spreadConstraints: the cluster spread constraint is required")
    return set(out)


def karpenter_problems(obj: Mapping[str, Any]) -> set[str]:
    """The NodePool CRD's CEL rules (x-kubernetes-validations) that carbonshift can touch."""
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    out: list[str] = []
    labels = (template.get("metadata") or {}).get("labels") or {}
    for key in labels:
        domain = key.split("/", 1)[0] if "/" in key else ""
        if domain.endswith("karpenter.sh") and key != "karpenter.sh/capacity-type":
            out.append(f"cel label {key}: domain karpenter.sh is restricted")
        if key == "kubernetes.io/hostname":
            out.append("cel label kubernetes.io/hostname is restricted")
    requirements = (template.get("spec") or {}).get("requirements") or []
    for i, r in enumerate(requirements):
        key, op, values = r.get("key", ""), r.get("operator"), r.get("values") or []
        domain = key.split("/", 1)[0] if "/" in key else ""
        if domain.endswith("karpenter.sh") and key != "karpenter.sh/capacity-type":
            out.append(f"cel requirements[{i}]: domain karpenter.sh is restricted")
        if key == "kubernetes.io/hostname":
            out.append(f"cel requirements[{i}]: kubernetes.io/hostname is restricted")
        if op == "In" and not values:
            out.append(f"cel requirements[{i}]: In needs a value")
        if op == "In" and r.get("minValues") is not None and len(values) < r["minValues"]:
            out.append(f"cel requirements[{i}]: fewer values than minValues")
        if op in ("Gt", "Lt", "Gte", "Lte") and (len(values) != 1 or not str(values[0]).isdigit()):
            out.append(f"cel requirements[{i}]: {op} needs one non-negative integer")
    if len(requirements) + len(labels) > 100:
        out.append("karpenter: more than 100 requirements and labels")
    if spec.get("replicas") is not None:
        limits = spec.get("limits") or {}
        if limits and set(limits) != {"nodes"}:
            out.append("cel spec: only limits.nodes on static NodePools")
        if spec.get("weight") is not None:
            out.append("cel spec: weight is not supported on static NodePools")
    return set(out)


def problems(obj: Mapping[str, Any]) -> set[str]:
    """Everything the offline approximation of the API server rejects."""
    rules = karpenter_problems if obj.get("kind") == "NodePool" else karmada_problems
    try:
        return schema_problems(obj) | rules(obj)
    except (AttributeError, TypeError) as exc:  # a shape the rules cannot even read
        return {f"unreadable: {exc}"}


# --- cluster reach ---------------------------------------------------------------------


def _expr(expr: Mapping[str, Any], present: bool, value: str | None) -> bool:
    op, values = expr.get("operator"), set(expr.get("values") or [])
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    return False


def matches(affinity: Mapping[str, Any] | None, cluster: ClusterConfig) -> bool:
    """Whether a Karmada ClusterAffinity admits the cluster (Karmada's own semantics)."""
    if not affinity:
        return True
    names = affinity.get("clusterNames") or []
    if names and cluster.name not in names:
        return False
    if cluster.name in (affinity.get("exclude") or []):
        return False
    selector = affinity.get("labelSelector") or {}
    labels = cluster.labels
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        if not _expr(e, e.get("key") in labels, labels.get(e.get("key"))):
            return False
    for e in (affinity.get("fieldSelector") or {}).get("matchExpressions") or []:
        key, op = e.get("key"), e.get("operator")
        if key == "zone":
            if bool(set(e.get("values") or []) & set(cluster.zones)) != (op == "In"):
                return False
        else:
            value = cluster.provider if key == "provider" else cluster.region
            if not _expr(e, value is not None, value):
                return False
    return True


def universe(known: Mapping[str, ClusterConfig]) -> dict[str, ClusterConfig]:
    """The known clusters, a twin of each that carbonshift does not know, and a bare one.

    A twin matches every selector its original matches but no name list, so dropping a
    user's ``clusterNames`` or selector shows up as reach even when the known clusters
    alone would not tell.
    """
    out = dict(known)
    for name, c in known.items():
        twin = f"phantom-{name}"
        out[twin] = ClusterConfig(
            name=twin,
            zone=c.zone,
            provider=c.provider,
            region=c.region,
            zones=c.zones,
            labels=c.labels,
        )
    out["phantom-bare"] = ClusterConfig(name="phantom-bare", zone="XX")
    return out


def terms(placement: Mapping[str, Any]) -> list[list[Mapping[str, Any]]]:
    """Each affinity group Karmada may try, as its list of ClusterAffinities (a term and
    its overflow affinities); one group without ``clusterAffinities``."""
    groups = placement.get("clusterAffinities")
    if groups:
        return [[t, *(t.get("overflowAffinities") or [])] for t in groups]
    return [[placement.get("clusterAffinity") or {}]]


def weighted(placement: Mapping[str, Any], clusters: Mapping[str, ClusterConfig]) -> set[str]:
    """Clusters a static weight list gives a replica share (all, without one)."""
    scheduling = placement.get("replicaScheduling") or {}
    preference = scheduling.get("weightPreference") or {}
    static = preference.get("staticWeightList")
    if (
        scheduling.get("replicaSchedulingType", "Divided") != "Divided"
        or scheduling.get("replicaDivisionPreference") != "Weighted"
        or preference.get("dynamicWeight")
        or not static
    ):
        return set(clusters)
    return {
        n
        for n, c in clusters.items()
        for rule in static
        if (rule.get("weight") or 0) > 0 and matches(rule.get("targetCluster") or {}, c)
    }


def group_reach(
    group: Sequence[Mapping[str, Any]], clusters: Mapping[str, ClusterConfig]
) -> set[str]:
    return {n for n, c in clusters.items() if any(matches(a, c) for a in group)}


def reach(
    placement: Mapping[str, Any],
    clusters: Mapping[str, ClusterConfig],
    *,
    failover: bool = False,
) -> set[str]:
    """Every cluster the placement can put replicas on.

    Per affinity group, as Karmada divides static weights (``getStaticWeightInfoList``):
    the group's clusters with a weight; when none of them has one, all of them (each at
    weight 1). ``failover``: also when none of the weighted ones is feasible (Karmada then
    weighs every feasible cluster of the group 1), so the group's clusters all count.
    """
    share = weighted(placement, clusters)
    out: set[str] = set()
    for group in terms(placement):
        candidates = group_reach(group, clusters)
        out |= candidates if failover else ((candidates & share) or candidates)
    return out


def _unweighted_groups(
    placement: Mapping[str, Any], clusters: Mapping[str, ClusterConfig]
) -> set[str]:
    """The clusters of the placement's affinity groups that have no weighted cluster."""
    share = weighted(placement, clusters)
    out: set[str] = set()
    for group in terms(placement):
        candidates = group_reach(group, clusters)
        if not candidates & share:
            out |= candidates
    return out


def _groups(names: Iterable[str], field: str, clusters: Mapping[str, ClusterConfig]) -> int:
    out: set[str] = set()
    for n in names:
        c = clusters[n]
        if field == "cluster":
            out.add(n)
        elif field == "zone":
            out.update(c.zones)
        elif field == "region" and c.region:
            out.add(c.region)
        elif field == "provider" and c.provider:
            out.add(c.provider)
    return len(out)


def schedulable(placement: Mapping[str, Any], clusters: Mapping[str, ClusterConfig]) -> bool:
    """Some affinity group has clusters enough for every spreadConstraint's minGroups.

    Only ``spreadByField`` counts: Karmada's scheduler does not act on ``spreadByLabel``.
    Static weights are not applied here: Karmada selects clusters by affinity and spread
    first and divides replicas by weight afterwards.
    """
    constraints = [c for c in placement.get("spreadConstraints") or [] if c.get("spreadByField")]
    for group in terms(placement):
        names = group_reach(group, clusters)
        if names and all(
            _groups(names, c["spreadByField"], clusters) >= (c.get("minGroups") or 0)
            for c in constraints
        ):
            return True
    return False


# --- NodePool requirements ------------------------------------------------------------------


def _family(value: str) -> str:
    return value.split(".", 1)[0]


def unsatisfiable(requirements: Sequence[Mapping[str, Any]]) -> str | None:
    """Why no node could meet the requirements, or None (an offline approximation)."""
    allowed: dict[str, set[str] | None] = {}
    for r in requirements:
        key, op = str(r.get("key")), r.get("operator")
        values: set[str] = set(r.get("values") or [])
        current = allowed.get(key)
        if op == "In":
            allowed[key] = values if current is None else current & values
            if not allowed[key]:
                return f"{key}: no value left"
        elif op == "NotIn" and current is not None:
            allowed[key] = current - values
            if not allowed[key]:
                return f"{key}: no value left"
        elif op == "DoesNotExist" and current:
            return f"{key}: DoesNotExist against In"
    arm = {"arm64"} == next((allowed[k] for k in ARCH_KEYS if allowed.get(k)), None)
    if not arm:
        return None
    for r in requirements:
        if r.get("key") in ARCH_KEYS and r.get("operator") == "DoesNotExist":
            return "arch DoesNotExist against arm64"
    for r in requirements:
        if r.get("operator") != "In":
            continue
        key, values = str(r.get("key")), set(r.get("values") or [])
        if key == FAMILY or key in TYPE_KEYS:
            arm_values = {v for v in values if _ARM_FAMILY.match(_family(v))}
            if not arm_values:
                return f"arm64 against {key} {sorted(values)}"
            if r.get("minValues") is not None and len(arm_values) < r["minValues"]:
                return f"arm64 leaves {len(arm_values)} {key} values, minValues {r['minValues']}"
        if key in OS_KEYS and "linux" not in values:
            return f"arm64 against {key} {values}"
        if key == CPU_MAKER and "aws" not in values:
            return f"arm64 against {key} {values}"
    return None


# --- the check ------------------------------------------------------------------------------


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _not_ours(values: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in values.items() if not k.startswith(PREFIX)}


def _flag(annotations: Mapping[str, str], key: str) -> bool:
    return annotations.get(key, "").strip().lower() == "true"


def _strategies(annotations: Mapping[str, str]) -> set[str]:
    return {s.strip() for s in annotations.get(STRATEGY, "").split(",") if s.strip()}


def _opted_in(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    enabled = labels.get(ENABLED)
    if enabled == "false":
        return False
    return obj.get("kind") == "PropagationPolicy" or enabled == "true"


def check(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    warnings: Sequence[str],
    world: World,
) -> list[Violation]:
    """Every invariant the stored object ``after`` breaks (empty: all hold)."""
    out: list[Violation] = []
    if not problems(before):  # the API server rejects an invalid object whatever we add
        out += [Violation("valid", p) for p in sorted(problems(after))]
    meta_before, meta_after = before.get("metadata") or {}, after.get("metadata") or {}
    for field in set(meta_before) | set(meta_after):
        if field == "annotations":
            same = _not_ours(meta_before.get(field) or {}) == _not_ours(meta_after.get(field) or {})
        else:
            same = meta_before.get(field) == meta_after.get(field)
        if not same:
            out.append(Violation("overwrite", f"metadata.{field} changed"))
    out += _differing("", before, after, ("spec", "metadata"))
    if before.get("kind") == "NodePool":
        out += _check_nodepool(before, after, warnings, world)
    else:
        out += _check_policy(before, after, warnings, world)
    return out


def _check_policy(
    before: Mapping[str, Any], after: Mapping[str, Any], warnings: Sequence[str], world: World
) -> list[Violation]:
    out: list[Violation] = []
    spec_b, spec_a = before.get("spec") or {}, after.get("spec") or {}
    rest_b = {k: v for k, v in spec_b.items() if k != "placement"}
    rest_a = {k: v for k, v in spec_a.items() if k != "placement"}
    if rest_b != rest_a:
        out.append(Violation("overwrite", "spec outside placement changed"))
    old: Mapping[str, Any] = spec_b.get("placement") or {}
    new: Mapping[str, Any] = spec_a.get("placement") or {}
    annotations = _annotations(before)
    override = _flag(annotations, OVERRIDE)

    # (b) reach, every cluster feasible or some not: a fallback group of the user's
    # unweighted clusters reaches what the user's own group reached once its weighted
    # clusters were not feasible
    everyone = universe(world.clusters)
    wider = sorted(reach(new, everyone) - reach(old, everyone))
    if wider:
        failing_over = _unweighted_groups(new, everyone) & reach(old, everyone, failover=True)
        wider = [n for n in wider if n not in failing_over]
    if wider:
        out.append(Violation("reach", f"now also reaches {', '.join(wider)}"))
    if old.get("spreadConstraints") != new.get("spreadConstraints"):
        out.append(Violation("reach", "spreadConstraints changed"))

    # (c) overwrite
    owned = ("clusterAffinity", "clusterAffinities", "replicaScheduling")
    out += _differing("placement.", old, {k: new.get(k) for k in old}, owned)
    if not override:
        out += _affinity_kept(old, new)
        scheduling_b = old.get("replicaScheduling") or {}
        scheduling_a = new.get("replicaScheduling") or {}
        for key, value in scheduling_b.items():
            if scheduling_a.get(key) != value:
                out.append(Violation("overwrite", f"replicaScheduling.{key} changed"))

    # (d) schedulable
    if schedulable(old, world.clusters) and not schedulable(new, world.clusters):
        out.append(Violation("schedulable", "no affinity term satisfies the spreadConstraints"))

    # (e) warned
    if not _opted_in(before):
        return out
    why = _declined_policy(old, new, annotations, world)
    if why and not _telling(warnings):
        out.append(Violation("warned", f"{why} without a warning"))
    return out


def _differing(
    prefix: str, before: Mapping[str, Any], after: Mapping[str, Any], skip: tuple[str, ...]
) -> list[Violation]:
    """Fields (but ``skip``) whose values differ between the two mappings."""
    fields = sorted((set(before) | set(after)) - set(skip))
    return [
        Violation("overwrite", f"{prefix}{f} changed")
        for f in fields
        if before.get(f) != after.get(f)
    ]


def _telling(warnings: Sequence[str]) -> bool:
    """Some warning other than the data-coverage notes every decision may carry."""
    return any("no intensity data" not in w for w in warnings)


def _selectors(term: Mapping[str, Any]) -> tuple[Any, Any]:
    return term.get("labelSelector") or None, term.get("fieldSelector") or None


def _affinity_kept(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Violation]:
    """The user's affinity fields survive: same selectors and names, more excludes only."""
    out: list[Violation] = []
    if old.get("clusterAffinities"):
        before_terms = old["clusterAffinities"]
        after_terms = new.get("clusterAffinities") or []
        if [t.get("affinityName") for t in before_terms] != [
            t.get("affinityName") for t in after_terms
        ]:
            return [Violation("overwrite", "user clusterAffinities replaced")]
        for b, a in zip(before_terms, after_terms, strict=True):
            strip = ("exclude",)
            if {k: v for k, v in b.items() if k not in strip} != {
                k: v for k, v in a.items() if k not in strip
            } or not set(b.get("exclude") or []) <= set(a.get("exclude") or []):
                out.append(Violation("overwrite", f"term {b.get('affinityName')} changed"))
        return out
    affinity = old.get("clusterAffinity")
    if not affinity:
        return out
    after_terms = new.get("clusterAffinities") or [new.get("clusterAffinity") or {}]
    names = set(affinity.get("clusterNames") or [])
    for a in after_terms:
        if _selectors(a) != _selectors(affinity):
            out.append(Violation("overwrite", "clusterAffinity selectors changed"))
        if names and not set(a.get("clusterNames") or []) <= names:
            out.append(Violation("overwrite", "clusterAffinity.clusterNames changed"))
        if not names and new.get("clusterAffinity") is not None and a.get("clusterNames"):
            out.append(Violation("overwrite", "clusterAffinity.clusterNames added"))
        if not set(affinity.get("exclude") or []) <= set(a.get("exclude") or []):
            out.append(Violation("overwrite", "clusterAffinity.exclude entries dropped"))
    return out


def _declined_policy(
    old: Mapping[str, Any], new: Mapping[str, Any], annotations: Mapping[str, str], world: World
) -> str | None:
    """What an annotation asked for and did not happen (None: all done or nothing to do)."""
    known = world.clusters
    if annotations.get(MAX_CLUSTERS) is not None and old.get("clusterAffinities") == new.get(
        "clusterAffinities"
    ):
        return f"{MAX_CLUSTERS} not applied"
    limit_raw = annotations.get(MAX_INTENSITY)
    if limit_raw is not None:
        try:
            limit = float(limit_raw)
        except ValueError:
            return f"{MAX_INTENSITY} malformed"
        dirty = sorted(n for n in reach(new, known) if world.intensity.get(n, 0.0) > limit)
        if dirty:
            return f"{MAX_INTENSITY} {limit:g}: {', '.join(dirty)} still reachable"
    if "weighted" in _strategies(annotations) and (
        (old.get("replicaScheduling") or {}).get("weightPreference")
        == (new.get("replicaScheduling") or {}).get("weightPreference")
    ):
        return "strategy weighted not applied"
    return None


def _check_nodepool(
    before: Mapping[str, Any], after: Mapping[str, Any], warnings: Sequence[str], world: World
) -> list[Violation]:
    out: list[Violation] = []
    spec_b, spec_a = before.get("spec") or {}, after.get("spec") or {}
    annotations = _annotations(before)
    override = _flag(annotations, OVERRIDE)
    out += _differing("spec.", spec_b, spec_a, ("weight", "limits", "template"))
    if (
        spec_b.get("weight") is not None
        and spec_b["weight"] != spec_a.get("weight")
        and not override
    ):
        out.append(Violation("overwrite", "spec.weight changed"))
    limits_b, limits_a = spec_b.get("limits") or {}, spec_a.get("limits") or {}
    for key, value in limits_b.items():
        if limits_a.get(key) != value and not (key == "cpu" and limits_a.get(key) == "0"):
            out.append(Violation("overwrite", f"spec.limits.{key} changed"))
    template_b, template_a = spec_b.get("template") or {}, spec_a.get("template") or {}
    out += _differing("spec.template.", template_b, template_a, ("metadata", "spec"))
    tm_b, tm_a = template_b.get("metadata") or {}, template_a.get("metadata") or {}
    out += _differing("spec.template.metadata.", tm_b, tm_a, ("labels",))
    labels_b, labels_a = tm_b.get("labels") or {}, tm_a.get("labels") or {}
    if _not_ours(labels_b) != _not_ours(labels_a):
        out.append(Violation("overwrite", "template labels changed"))
    ts_b, ts_a = template_b.get("spec") or {}, template_a.get("spec") or {}
    out += _differing("spec.template.spec.", ts_b, ts_a, ("requirements",))
    req_b = list(ts_b.get("requirements") or [])
    req_a = list(ts_a.get("requirements") or [])
    if req_a[: len(req_b)] != req_b:
        out.append(Violation("overwrite", "user requirements changed"))
    if unsatisfiable(req_b) is None and (why := unsatisfiable(req_a)) is not None:
        out.append(Violation("schedulable", f"requirements unsatisfiable: {why}"))
    if _opted_in(before):
        why_declined = _declined_nodepool(before, after, world)
        if why_declined and not _telling(warnings):
            out.append(Violation("warned", f"{why_declined} without a warning"))
    return out


def _zone_values(requirements: Sequence[Mapping[str, Any]], zones: set[str]) -> set[str]:
    allowed = set(zones)
    for r in requirements:
        if r.get("key") in ZONE_KEYS:
            if r.get("operator") == "In":
                allowed &= set(r.get("values") or [])
            elif r.get("operator") == "NotIn":
                allowed -= set(r.get("values") or [])
    return allowed


def _declined_nodepool(
    before: Mapping[str, Any], after: Mapping[str, Any], world: World
) -> str | None:
    annotations = _annotations(before)
    wanted = _strategies(annotations)
    spec_b, spec_a = before.get("spec") or {}, after.get("spec") or {}
    req_a = ((spec_a.get("template") or {}).get("spec") or {}).get("requirements") or []
    arch = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
    if "efficiency" in wanted and world.level == "high" and arch not in req_a:
        return "efficiency: no arm64 requirement"
    if "zones" in wanted:
        req_b = ((spec_b.get("template") or {}).get("spec") or {}).get("requirements") or []
        zone_b = [r for r in req_b if r.get("key") in ZONE_KEYS]
        zone_a = [r for r in req_a if r.get("key") in ZONE_KEYS]
        allowed = _zone_values(req_b, set(world.topology))
        values = {world.topology[z] for z in allowed}
        if zone_a == zone_b and (not allowed or len(values) > 1):
            return "zones: no zone requirement written"
    if "weight" in wanted and spec_a.get("weight") is None:
        return "weight: spec.weight not set"
    if (
        "pause" in wanted
        and world.level == "high"
        and (spec_a.get("limits") or {}).get("cpu") != "0"
    ):
        return "pause: limits.cpu not 0"
    return None
