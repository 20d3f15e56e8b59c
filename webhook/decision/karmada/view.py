"""One read-only view of a Karmada placement: how Karmada divides its replicas and
which terms select its clusters.

Every reader of a ``spec.placement`` (the webhook's decision, the hysteresis, the
accounting's counterfactual, the simulator) classifies it through :class:`PlacementView`
instead of reading ``replicaScheduling`` by hand; the writers stay in
:mod:`webhook.decision.karmada.terms`.

The division follows Karmada v1.18.2 as the scheduler sees a stored policy:

- ``replicaScheduling`` absent: Duplicated (``Placement.ReplicaSchedulingType``,
  ``pkg/apis/policy/v1alpha1/propagation_helper.go``);
- ``replicaSchedulingType`` absent: Divided (the CRD's ``+kubebuilder:default=Divided``);
- Divided without ``replicaDivisionPreference``: Weighted (karmada-webhook,
  ``helper.SetReplicaDivisionPreferenceWeighted``);
- Divided + Aggregated: fewest clusters by available replicas; ``weightPreference`` is
  ignored (``newAssignState``, ``pkg/scheduler/core/assignment.go``);
- Divided + Weighted with a ``dynamicWeight``: by that factor, the ``staticWeightList``
  ignored (``ClusterPreferences.DynamicWeight``);
- Divided + Weighted with a ``staticWeightList``: by those weights; a cluster matching no
  entry gets none (``getStaticWeightInfoList``, ``division_algorithm.go``);
- Divided + Weighted without either: every candidate weighs 1 (``assignByStaticWeightStrategy``
  with ``getDefaultWeightPreference``).

Overflow (``overflowAffinities``) is allowed for Divided + Aggregated and Divided + Weighted
with a ``dynamicWeight`` (``IsOverflowSchedulingAllowed``, ``pkg/util/policy.go``).

Pure and lenient: entries the API schema would reject (a term that is no object, a weight
entry without a ``targetCluster`` object) are left out rather than raised on;
:func:`webhook.decision.karmada.terms.selected_groups` is where malformed selections are refused.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from webhook.decision.karmada.api import Shape
from webhook.decision.selectors import is_open

GREEN_TERM = "carbonshift-greenest"
"""The first term carbonshift writes: the ordered fill's greenest tier, or green-first's
greenest clusters."""

GROUP_TERM = "carbonshift-group-"
"""The ordered fill's failover groups after the greenest (``groups`` shape, Karmada before
v1.18): ``carbonshift-group-1`` holds tiers 0 and 1, ``-2`` tiers 0 to 2, ...; after the
leader's *n*-th move back, ``carbonshift-group-1-r<n>`` (:data:`ROUND`)."""

ROUND = "-r"
"""Suffix of a failover group's name after the leader renamed the groups (its move back:
Karmada schedules a binding whose observed term is gone from the first term again)."""

OTHERS_TERM = "carbonshift-others"
"""An open selection's last tier: its overflow tier for the clusters carbonshift does not
know (``overflow`` shape), or its last failover group, the user's selection itself
(``groups`` shape)."""

AVAILABLE_REPLICAS = "AvailableReplicas"
"""The one ``dynamicWeight`` factor Karmada knows: division by room."""

Tiers = list[list[str]]


class Division(enum.Enum):
    """How Karmada divides a policy's replicas among the clusters it selects."""

    DUPLICATED = "Duplicated"
    """Every selected cluster runs all replicas (also: no ``replicaScheduling``)."""
    AGGREGATED = "Aggregated"
    """Divided into as few clusters as hold them, most available replicas first."""
    DYNAMIC_WEIGHT = "DynamicWeight"
    """Divided + Weighted by a ``dynamicWeight`` (``AvailableReplicas``)."""
    STATIC_WEIGHT = "StaticWeight"
    """Divided + Weighted by a ``staticWeightList``."""
    EVEN = "Even"
    """Divided + Weighted (or no preference) without weights: every candidate weighs 1."""

    @property
    def divided(self) -> bool:
        return self is not Division.DUPLICATED


@dataclasses.dataclass(frozen=True, slots=True)
class StaticWeight:
    """One ``staticWeightList`` entry: the clusters its ``targetCluster`` matches weigh
    ``weight`` (the highest matching entry wins)."""

    target: Mapping[str, Any]
    weight: int
    """0 when the entry carries no integer weight."""


@dataclasses.dataclass(frozen=True, slots=True)
class Term:
    """One ``clusterAffinities`` term: its name, inline affinity and overflow tiers."""

    name: str
    affinity: Mapping[str, Any]
    """The term as written (Karmada inlines its ``ClusterAffinity``)."""
    overflow: tuple[Mapping[str, Any], ...] | None
    """The ``overflowAffinities`` tiers, in order; None: the term has none."""

    @property
    def names(self) -> list[str]:
        """The term's inline ``clusterNames``."""
        return _names(self.affinity)


@dataclasses.dataclass(frozen=True, slots=True)
class PlacementView:
    """A Karmada placement as Karmada reads it (see the module docstring). Read-only."""

    division: Division
    scheduling: bool
    """Whether ``replicaScheduling`` is written (absent: Karmada duplicates)."""
    dynamic_weight: str | None
    """The ``dynamicWeight`` Karmada divides by (Division.DYNAMIC_WEIGHT only)."""
    static_weights: tuple[StaticWeight, ...]
    """The ``staticWeightList`` entries Karmada divides by (Division.STATIC_WEIGHT only)."""
    lists_weights: bool
    """A non-empty ``staticWeightList`` is written, whether or not Karmada divides by it."""
    terms: tuple[Term, ...]
    """``clusterAffinities``, tried in order; empty: the single ``clusterAffinity``."""
    affinity: Mapping[str, Any] | None
    """The single ``clusterAffinity`` (None: every cluster) when there are no terms."""
    fill_tiers: Tiers | None
    """carbonshift's ordered-fill tiers (named clusters only), greenest first; None: the
    placement is no ordered fill."""
    fill_shape: Shape | None = None
    """How the ordered fill is written: ``overflow`` (one term and its
    ``overflowAffinities``; also a lone greenest term) or ``groups`` (failover terms, each
    adding the next tier); None: no ordered fill."""

    @classmethod
    def of(cls, placement: Mapping[str, Any]) -> PlacementView:
        scheduling: Any = placement.get("replicaScheduling")
        written = type(scheduling) is dict or isinstance(scheduling, Mapping)
        rules = scheduling if written else {}
        preference = rules.get("weightPreference")
        if type(preference) is not dict and not isinstance(preference, Mapping):
            preference = {}
        dynamic = preference.get("dynamicWeight")
        listed = preference.get("staticWeightList")
        entries = tuple(_entries(listed))
        division = _division(written, rules, bool(dynamic), bool(listed))
        raw_terms = placement.get("clusterAffinities")
        terms = tuple(_terms(raw_terms)) if raw_terms else ()
        affinity = placement.get("clusterAffinity")
        fill = _fill(terms, bool(listed))
        return cls(
            division=division,
            scheduling=written,
            dynamic_weight=str(dynamic) if division is Division.DYNAMIC_WEIGHT else None,
            static_weights=entries if division is Division.STATIC_WEIGHT else (),
            lists_weights=bool(listed),
            terms=terms,
            affinity=None if terms or not isinstance(affinity, Mapping) else affinity,
            fill_tiers=fill[0],
            fill_shape=fill[1],
        )

    @property
    def reach(self) -> tuple[Mapping[str, Any], ...] | None:
        """The static weight targets when Karmada divides by them, else None.

        Karmada gives a cluster that matches no ``staticWeightList`` entry no replicas, so
        the list bounds where replicas can go (``getStaticWeightInfoList``).
        """
        if self.division is not Division.STATIC_WEIGHT:
            return None
        return tuple(w.target for w in self.static_weights)

    @property
    def overflow_allowed(self) -> bool:
        """Whether Karmada accepts ``overflowAffinities`` (``IsOverflowSchedulingAllowed``)."""
        return self.division in (Division.AGGREGATED, Division.DYNAMIC_WEIGHT)

    @property
    def by_room(self) -> bool:
        """Whether Karmada divides by available replicas (Aggregated, or ``dynamicWeight:
        AvailableReplicas``): what overflow tiers need to fill one after another."""
        return self.division is Division.AGGREGATED or self.dynamic_weight == AVAILABLE_REPLICAS

    @property
    def has_overflow(self) -> bool:
        """Whether any term has ``overflowAffinities`` (even an empty list)."""
        return any(t.overflow is not None for t in self.terms)

    @property
    def opened(self) -> bool:
        """Whether the selection matches clusters by selectors, or every cluster: clusters
        nobody named (unknown ones, ones that join later) can match."""
        if self.terms:
            return any(is_open(a) for t in self.terms for a in (t.affinity, *(t.overflow or ())))
        return is_open(self.affinity)

    def term(self, name: str) -> Term | None:
        """The first term named ``name``."""
        return next((t for t in self.terms if t.name == name), None)


def green_terms(placement: Mapping[str, Any]) -> tuple[Tiers | None, Term | None]:
    """:attr:`PlacementView.fill_tiers` and the ``carbonshift-greenest`` term
    (:meth:`PlacementView.term`) without reading the rest of the placement: what the
    leader reads of every managed policy on every pass."""
    raw = placement.get("clusterAffinities")
    terms = tuple(_terms(raw)) if raw else ()
    if not terms:
        return None, None
    green = next((t for t in terms if t.name == GREEN_TERM), None)
    return _fill(terms, _listed(placement))[0], green


def fill_of(placement: Mapping[str, Any]) -> tuple[Tiers | None, Shape | None]:
    """:attr:`PlacementView.fill_tiers` and :attr:`PlacementView.fill_shape`, read from the
    affinity terms alone (:func:`green_terms`)."""
    raw = placement.get("clusterAffinities")
    terms = tuple(_terms(raw)) if raw else ()
    if not terms:
        return None, None
    return _fill(terms, _listed(placement))


def _listed(placement: Mapping[str, Any]) -> bool:
    """Whether a non-empty ``staticWeightList`` is written."""
    scheduling = placement.get("replicaScheduling")
    preference = scheduling.get("weightPreference") if isinstance(scheduling, Mapping) else None
    listed = preference.get("staticWeightList") if isinstance(preference, Mapping) else None
    return bool(listed)


def _division(written: bool, rules: Mapping[str, Any], dynamic: bool, listed: bool) -> Division:
    if not written or rules.get("replicaSchedulingType", "Divided") != "Divided":
        return Division.DUPLICATED
    if rules.get("replicaDivisionPreference") == "Aggregated":
        return Division.AGGREGATED
    if dynamic:
        return Division.DYNAMIC_WEIGHT
    return Division.STATIC_WEIGHT if listed else Division.EVEN


def _names(affinity: object) -> list[str]:
    names = (
        affinity.get("clusterNames")
        if type(affinity) is dict or isinstance(affinity, Mapping)
        else None
    )
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _entries(listed: object) -> list[StaticWeight]:
    if not isinstance(listed, list):
        return []
    out = []
    for entry in listed:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("targetCluster"), Mapping):
            continue
        weight = entry.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool):
            weight = 0
        out.append(StaticWeight(entry["targetCluster"], weight))
    return out


def _terms(raw: object) -> list[Term]:
    if not isinstance(raw, list):
        return []
    out = []
    for term in raw:
        if type(term) is not dict and not isinstance(term, Mapping):
            continue
        extra = term.get("overflowAffinities")
        overflow: tuple[Mapping[str, Any], ...] | None = None
        if isinstance(extra, list):
            overflow = tuple(o for o in extra if type(o) is dict or isinstance(o, Mapping))
        elif extra is not None:
            overflow = ()  # not a list: the API server refuses it; counts as overflow
        out.append(Term(str(term.get("affinityName") or ""), term, overflow))
    return out


def fill_shape(terms: tuple[Term, ...], listed: bool) -> Shape | None:
    """The shape of carbonshift's ordered fill in ``terms`` (:attr:`PlacementView.fill_shape`)."""
    green = terms[0] if terms else None
    if green is None or green.name != GREEN_TERM:
        return _overflow_shape(terms, listed)
    if green.overflow is None and len(terms) > 1 and not listed:
        rest = terms[1:]
        if all(t.overflow is None and _group_name(t.name) for t in rest):
            return "groups"
    return _overflow_shape(terms, listed)


def _overflow_shape(terms: tuple[Term, ...], listed: bool) -> Shape | None:
    green = next((t for t in terms if t.name == GREEN_TERM), None)
    if green is None:
        return None
    if green.overflow is None and (len(terms) != 1 or listed):
        return None
    return "overflow"


def group_name(k: int, round_: int = 0, *, others: bool = False) -> str:
    """The name of failover group ``k`` (or the catch-all) in ``round_``."""
    name = OTHERS_TERM if others else f"{GROUP_TERM}{k}"
    return f"{name}{ROUND}{round_}" if round_ else name


def group_index(name: str) -> tuple[int | None, int] | None:
    """``(k, round)`` of a failover group's name (k None: the catch-all); None: no group's."""
    base, marker, tail = name.rpartition(ROUND)
    round_ = 0
    if marker and tail.isdigit() and (base == OTHERS_TERM or base.startswith(GROUP_TERM)):
        name, round_ = base, int(tail)
    if name == OTHERS_TERM:
        return None, round_
    index = name[len(GROUP_TERM) :] if name.startswith(GROUP_TERM) else ""
    return (int(index), round_) if index.isdigit() else None


def _group_name(name: str) -> bool:
    """A failover group's name: ``carbonshift-group-<k>`` or the catch-all
    ``carbonshift-others``, in any round."""
    return group_index(name) is not None


def _fill(terms: tuple[Term, ...], listed: bool) -> tuple[Tiers | None, Shape | None]:
    """The tiers of carbonshift's ordered fill and its shape: the ``carbonshift-greenest``
    term's names, then each overflow tier's (``overflow``), or each failover group's names
    not in an earlier group (``groups``). A lone greenest term without overflow is a
    one-tier fill (every candidate equally green) unless static weights divide it
    (green-first)."""
    shape = fill_shape(terms, listed)
    if shape is None:
        return None, None
    if shape == "groups":
        seen: set[str] = set()
        tiers: Tiers = []
        for term in terms:
            tier = [n for n in term.names if n not in seen]
            seen.update(tier)
            if tier:
                tiers.append(tier)
        return tiers, shape
    green = next(t for t in terms if t.name == GREEN_TERM)
    named = [names for names in map(_names, green.overflow or ()) if names]
    return [green.names, *named], shape
