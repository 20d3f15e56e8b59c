"""What a handled kind is: everything carbonshift does with one group/kind, in one value.

A :class:`Kind` says how an object of the kind is decided at admission (its decider in
:mod:`webhook.decision`), whether it is namespaced (cluster-scoped objects opt in with
their own ``carbonshift.io/enabled=true`` label, since no namespace label applies), which
``carbonshift.io/*`` annotations apply to it (its :data:`~webhook.model.vocabulary.Scope`),
when an UPDATE is decided again, how the leader follows it after creation
(:class:`Following`: the pure step, the fields carbonshift owns, the Events and the gauge
it feeds), and the RBAC it needs (:class:`Grant`). Each kind is one module of
:mod:`webhook.kinds`; the registry there is the only list of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from webhook.decision import follow
from webhook.decision.karmada import following
from webhook.decision.karmada.api import KarmadaApi, resolve
from webhook.decision.outcome import Decision, Path
from webhook.model.config import ClusterConfig, Config
from webhook.model.intensity import IntensityTable
from webhook.model.objects import EMPTY, meta_of
from webhook.model.resources import Resource
from webhook.model.vocabulary import Scope


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    """Inputs of one decision besides the object: config and in-memory intensities."""

    config: Config
    table: IntensityTable
    now: datetime
    generation: int | None = None
    """Identifies the table's content (:attr:`webhook.feed.Snapshot.generation`): equal
    generations mean equal tables. Admission memoises decisions only when it is set."""
    fleet: Mapping[str, ClusterConfig] | None = None
    """The member clusters placement chooses among (the fleet inventory merged with the
    config's ``clusters:``); None: the config's ``clusters:`` alone."""
    fleet_generation: int = 0
    """Identifies :attr:`fleet`'s content and what the Karmada API keeps
    (:attr:`karmada`): it changes whenever a member cluster or the API changes (admission
    keys its memo on it next to :attr:`generation`)."""
    local: str | None = None
    """The grid zone the cluster's own Nodes give (:mod:`webhook.kube.nodes`); None: the
    config's ``zone``."""
    nodepools: tuple[str, ...] | None = None
    """The NodePools of the cluster, by name (:mod:`webhook.kube.nodes`; a NodePool's
    warnings name where urgent pods can still land while it is limited); None: unknown."""
    peers: Mapping[str, ClusterConfig] | None = None
    """Liqo's remote clusters by cluster id (:mod:`webhook.kube.peers`: their virtual
    nodes' labels and grid zones); None: not known (no cluster to talk to)."""
    ranked: IntensityTable | None = None
    """What policies rank their clusters on: :attr:`table` with each member zone read as
    the forecast mean the re-evaluation ranks on (:meth:`Reevaluation.ranked`); None:
    :attr:`table` (no forecast, or none in memory yet)."""
    karmada: KarmadaApi | None = None
    """What the Karmada policy API keeps (:mod:`webhook.decision.karmada.api`), as read
    from its CRDs with a cluster connection; None: not read (the config's
    ``karmada.version``, else the shape every release keeps: :attr:`karmada_api`)."""

    @property
    def karmada_api(self) -> KarmadaApi:
        """The Karmada policy API placement writes for: :attr:`karmada`, else what the
        config's ``karmada.version`` names, else the failover groups every release keeps."""
        if self.karmada is not None:
            return self.karmada
        return resolve(self.config.karmada.version, None)

    @property
    def local_zone(self) -> str | None:
        """The local grid zone NodePools are classed by."""
        return self.local or self.config.zone

    @property
    def clusters(self) -> Mapping[str, ClusterConfig]:
        """The member clusters placement chooses among."""
        return self.config.clusters if self.fleet is None else self.fleet

    @property
    def known_peers(self) -> Mapping[str, ClusterConfig]:
        """Liqo's remote clusters by cluster id; none when :attr:`peers` is not known."""
        return EMPTY if self.peers is None else self.peers

    def other_pools(self, obj: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The cluster's NodePools besides ``obj``; None: unknown."""
        if self.nodepools is None:
            return None
        name = meta_of(obj).name
        return tuple(p for p in self.nodepools if p != name)


Decider = Callable[[Mapping[str, Any], Context], Decision]
LocalDecider = Callable[
    [Mapping[str, Any], IntensityTable, Context, Sequence[float] | None], Decision
]
"""A kind decided on the local grid: ``(obj, table, ctx, outlook) -> Decision``."""


def _never(_: Config) -> bool:
    return False


def _members(ctx: Context) -> Mapping[str, ClusterConfig]:
    return ctx.clusters


@dataclasses.dataclass(frozen=True, slots=True)
class Grant:
    """One ClusterRole rule carbonshift needs: verbs on resources of an API group."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str
    """Why: the comment above the rule in the generated ClusterRole
    (``manifests/base/rbac.yaml`` and the chart's, ``make generate``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Tally:
    """A gauge the leader sets after each pass: how many listed objects ``counts``."""

    name: str
    documentation: str
    counts: Callable[[Mapping[str, Any]], bool]


@dataclasses.dataclass(frozen=True, slots=True)
class Following:
    """How the leader follows a kind after creation (re-evaluation)."""

    rules: follow.Rules = following.POLICY_RULES
    """The kind's parts of the one re-evaluation step (:func:`webhook.decision.follow.step`:
    keep, switch, or release what carbonshift wrote)."""
    fields: Mapping[str, Path] = dataclasses.field(default_factory=lambda: following.POLICY_FIELDS)
    """Record key prefix -> where the fields carbonshift owns live in the object."""
    local: LocalDecider | None = None
    """Decided on the local grid (the cluster's own zone) over time, with the feed's
    outlook over the object's slack; None: on the members' forecast-ranked intensities."""
    places: Callable[[Context], Mapping[str, ClusterConfig]] = _members
    """The places its decisions name, by name (stale data there writes nothing)."""
    events: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    """The step's named events (``Action.pause``) -> (Event reason, action verb); a switch
    without one records ``CarbonRebalanced``."""
    tally: Tally | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Kind:
    """One handled kind."""

    group: str
    version: str
    kind: str
    resource: str
    """Plural resource name, as in the webhook registration's ``rules:``."""
    namespaced: bool
    decide: Decider
    scope: Scope
    """Which ``carbonshift.io/*`` annotations apply (:func:`webhook.model.vocabulary.knobs`)."""
    every_update: Callable[[Config], bool] = _never
    """Whether every UPDATE is decided again; otherwise only an UPDATE that changes
    ``carbonshift.io/refresh`` is (a placement change reschedules the workload)."""
    following: Following | None = None
    """How the leader follows it after creation; None: admission only."""
    grants: tuple[Grant, ...] = ()
    """The ClusterRole rules the leader needs for it (reading and writing it, and what its
    following touches besides)."""
    events: tuple[str, ...] = ()
    """Every Event reason recorded about objects of this kind or on their behalf."""
    operations: tuple[str, ...] = ("CREATE", "UPDATE")
    """The admission operations its webhook rule registers."""

    @property
    def api_version(self) -> str:
        """``group/version``."""
        return f"{self.group}/{self.version}"

    @property
    def api(self) -> Resource:
        """Where the API server serves it."""
        return Resource(self.group, self.version, self.resource, self.kind)
