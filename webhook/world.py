"""The world every decision reads, built once per process: the configuration, the
in-memory intensity feed and its forecast ranking, the fleet and its room (the Karmada
Clusters), the Nodes' zone, Liqo's peers and what the Karmada policy API keeps (the last
four when carbonshift runs with a kubeconfig or in a cluster).

The admission path (:mod:`webhook.serve`), the scheduler API and every leader controller
read :meth:`World.context`: one :class:`~webhook.kinds.Context` per second, snapshot and
fleet, with the forecast ranking computed once in it (``Context.ranked``)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from webhook.decision.fleet import ClusterEntry, placement_clusters
from webhook.decision.karmada.api import KarmadaApi, resolve
from webhook.feed import IntensityFeed, Snapshot
from webhook.kinds import Context
from webhook.kinds.reevaluation import Reevaluation
from webhook.model.config import ClusterConfig, Config
from webhook.model.intensity import IntensityTable, utcnow

if TYPE_CHECKING:
    from webhook.kube.inventory import FleetInventory
    from webhook.kube.karmada import KarmadaCrds
    from webhook.kube.nodes import NodeZones
    from webhook.kube.peers import PeerInventory


@dataclasses.dataclass(slots=True)
class World:
    """What decisions read, created once at start-up; the kube parts are set when the
    process follows a cluster."""

    config: Config
    feed: IntensityFeed
    inventory: FleetInventory | None = None
    """Karmada Clusters read from the API server (None: no cluster to talk to)."""
    nodes: NodeZones | None = None
    """The local grid zone from the cluster's Nodes (None: no cluster; config ``zone``)."""
    peers: PeerInventory | None = None
    """Liqo's virtual nodes: the remote clusters this cluster offloads to (None: no cluster)."""
    crds: KarmadaCrds | None = None
    """The Karmada policy CRDs: what a policy write keeps (None: no cluster)."""
    rules: Reevaluation = dataclasses.field(init=False)
    """The re-evaluation's rules on the feed's outlook: the one forecast ranking."""
    _context: tuple[Snapshot, int, Context] | None = dataclasses.field(default=None, init=False)
    _fleet: tuple[Mapping[str, ClusterEntry], int, Mapping[str, ClusterConfig]] | None = (
        dataclasses.field(default=None, init=False)
    )
    _karmada: tuple[KarmadaApi, int] | None = dataclasses.field(default=None, init=False)
    """What the Karmada API kept when last asked, and how many times that changed."""

    def __post_init__(self) -> None:
        self.rules = Reevaluation(self.config, self.feed.outlook)

    def clusters(self) -> Mapping[str, ClusterConfig]:
        """The member clusters now: the inventory's Clusters (read from memory, never
        waiting on the API server) merged with the config's ``clusters:``; without an
        inventory, the config's ``clusters:``."""
        return self._fleet_now()[1]

    def fleet_generation(self) -> int:
        """Changes whenever :meth:`clusters` answers differently (0 without an inventory)."""
        return self._fleet_now()[0]

    def _fleet_now(self) -> tuple[int, Mapping[str, ClusterConfig]]:
        if self.inventory is None:
            return 0, self.config.clusters
        view = self.inventory.clusters()  # a new mapping on every change of the inventory
        held = self._fleet
        if held is not None and held[0] is view:
            return held[1], held[2]
        merged = placement_clusters(view, self.config.clusters)
        if held is not None and held[2] == merged:  # e.g. only a status heartbeat changed
            self._fleet = (view, held[1], held[2])
            return held[1], held[2]
        generation = held[1] + 1 if held is not None else 1
        self._fleet = (view, generation, merged)
        for cluster in merged.values():  # a new member's zone: fetch its intensity too
            if (zone := cluster.grid_zone) is not None:
                self.feed.want(zone)
        return generation, merged

    def karmada(self) -> KarmadaApi:
        """What the Karmada policy API keeps now: the CRDs' answer once read (from memory),
        else the config's ``karmada.version``, else the failover groups every release keeps
        (:func:`webhook.decision.karmada.api.resolve`)."""
        read = self.crds.api() if self.crds is not None else None
        return resolve(self.config.karmada.version, read)

    def _karmada_epoch(self, api: KarmadaApi) -> int:
        """A number that changes whenever :meth:`karmada` answers differently."""
        held = self._karmada
        if held is None or held[0] != api:
            held = self._karmada = (api, held[1] + 1 if held is not None else 0)
        return held[1]

    def context(self) -> Context:
        """The decision context now: the feed's snapshot, the member clusters and the
        time, to the second.

        Rebuilt when the snapshot or the fleet changes or a second has passed, so a burst
        of admissions shares one (decisions read time only for the minimum dwell, in hours).
        """
        snapshot = self.feed.snapshot()
        second = int(time.time())
        generation, clusters = self._fleet_now()
        local = self.nodes.current.zone if self.nodes is not None else None
        pools = self.nodes.pools if self.nodes is not None else None
        peers = self.peers.places() if self.peers is not None else None
        karmada = self.karmada()
        # Decisions memoised or held on the fleet's generation change with the API too.
        generation |= self._karmada_epoch(karmada) << 32
        held = self._context
        if (
            held is not None
            and held[0] is snapshot
            and held[1] == second
            and held[2].fleet_generation == generation
            and held[2].local == local
            and held[2].nodepools == pools
            and held[2].peers is peers
            and held[2].karmada == karmada
        ):
            return held[2]
        if local is not None:
            self.feed.want(local)  # the Nodes' zone: fetch its intensity too
        fleet = None if self.inventory is None else clusters
        ctx = Context(
            self.config, snapshot.table, utcnow(), snapshot.generation, fleet, generation, local
        )
        ctx = dataclasses.replace(
            ctx, nodepools=pools, peers=peers, karmada=karmada, ranked=self._ranked(ctx)
        )
        self._context = (snapshot, second, ctx)
        return ctx

    def _ranked(self, ctx: Context) -> IntensityTable | None:
        """The forecast means policies rank on, as the re-evaluation does (one view per
        snapshot and fleet); None without a forecast method."""
        ranked = self.rules.ranked(ctx)
        return None if ranked is ctx else ranked.table
