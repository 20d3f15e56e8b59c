"""The kinds carbonshift mutates: one registry row per group/kind.

Each row says how an object of that kind is decided (its decider in
:mod:`webhook.decision`), whether it is namespaced (cluster-scoped objects opt in with
their own ``carbonshift.io/enabled=true`` label, since no namespace label applies), when
an UPDATE is decided again, and the resource name the webhook registration's ``rules:``
use. :mod:`webhook.serve.admission` dispatches on it, :mod:`webhook.cli.preview` builds reviews
from it and a test checks ``manifests/base/webhook.yaml`` against it.

Adding a kind: a decider module under ``webhook/decision/``, a row in :data:`KINDS`,
its ``rules:`` entry in ``manifests/base/webhook.yaml``, and tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from webhook.decision import nodepool, offloading, placement
from webhook.decision.hysteresis import Hysteresis
from webhook.decision.labels import Rule
from webhook.decision.outcome import Decision
from webhook.model.config import ClusterConfig, Config
from webhook.model.intensity import IntensityTable


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
    """Identifies :attr:`fleet`'s content: it changes whenever a member cluster changes
    (admission keys its memo on it next to :attr:`generation`)."""
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

    @property
    def local_zone(self) -> str | None:
        """The local grid zone NodePools are classed by."""
        return self.local or self.config.zone

    @property
    def clusters(self) -> Mapping[str, ClusterConfig]:
        """The member clusters placement chooses among."""
        return self.config.clusters if self.fleet is None else self.fleet

    def other_pools(self, obj: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The cluster's NodePools besides ``obj``; None: unknown."""
        if self.nodepools is None:
            return None
        name = (obj.get("metadata") or {}).get("name")
        return tuple(p for p in self.nodepools if p != name)


Decider = Callable[[Mapping[str, Any], Context], Decision]


def _never(_: Config) -> bool:
    return False


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
    every_update: Callable[[Config], bool] = _never
    """Whether every UPDATE is decided again; otherwise only an UPDATE that changes
    ``carbonshift.io/refresh`` is (a placement change reschedules the workload)."""

    @property
    def api_version(self) -> str:
        """``group/version``."""
        return f"{self.group}/{self.version}"


def _policy(obj: Mapping[str, Any], ctx: Context) -> Decision:
    h = ctx.config.hysteresis
    inputs = placement.PolicyInputs(
        ctx.clusters,
        ctx.table if ctx.ranked is None else ctx.ranked,
        ctx.config.weighting,
        hysteresis=Hysteresis(margin=h.margin, dwell_hours=h.dwell_hours),
        now=ctx.now,
    )
    return placement.decide(obj, inputs)


def _nodepool(obj: Mapping[str, Any], ctx: Context) -> Decision:
    inputs = nodepool.NodePoolInputs(
        ctx.local_zone, ctx.table, ctx.config.nodepools, other_pools=ctx.other_pools(obj)
    )
    return nodepool.decide(obj, inputs)


def _nodepool_updates(config: Config) -> bool:
    return config.nodepools.mutate_on_update


def _offloading(obj: Mapping[str, Any], ctx: Context) -> Decision:
    h = ctx.config.hysteresis
    inputs = offloading.OffloadingInputs(
        ctx.peers or {},
        ctx.table,
        Rule.of(ctx.config),
        Hysteresis(margin=h.margin, dwell_hours=h.dwell_hours),
        ctx.now,
    )
    return offloading.decide(obj, inputs)


KARMADA = "policy.karmada.io"
KARPENTER = "karpenter.sh"
LIQO = "offloading.liqo.io"

KINDS: tuple[Kind, ...] = (
    Kind(KARMADA, "v1alpha1", "PropagationPolicy", "propagationpolicies", True, _policy),
    Kind(
        KARMADA,
        "v1alpha1",
        "ClusterPropagationPolicy",
        "clusterpropagationpolicies",
        False,
        _policy,
    ),
    Kind(KARPENTER, "v1", "NodePool", "nodepools", False, _nodepool, _nodepool_updates),
    Kind(LIQO, "v1beta1", "NamespaceOffloading", "namespaceoffloadings", True, _offloading),
)
"""Every kind carbonshift mutates."""

_BY_NAME: Mapping[tuple[str, str], Kind] = {(k.group, k.kind): k for k in KINDS}


def find(group: str, kind: str) -> Kind | None:
    """The row for ``group``/``kind`` (any version: the API server may convert), or None."""
    return _BY_NAME.get((group, kind))
