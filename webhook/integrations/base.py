"""What an integration row is: a technology carbonshift works with, and what it brings."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from webhook.kinds import Grant, Kind
from webhook.model.config import Config
from webhook.world import World

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

    from webhook.controllers.accounting import Accounts
    from webhook.controllers.follower import Follower
    from webhook.controllers.karpenter.prices import Obj
    from webhook.controllers.keeper import Keeper
    from webhook.controllers.runner import KeyedController
    from webhook.kube.cache import WatchedCache
    from webhook.kube.client import Settings
    from webhook.kube.events import EventRecorder
    from webhook.kube.inventory import FleetInventory
    from webhook.kube.kueue import Workers
    from webhook.kube.leader import LeaderElector
    from webhook.kube.peers import PeerInventory


@dataclasses.dataclass(slots=True)
class Fleet:
    """The cluster-facing parts: the client, the elector and the Event recorder the
    controllers share."""

    api: ApiClient
    elector: LeaderElector
    events: EventRecorder
    inventory: FleetInventory
    peers: PeerInventory
    workers: Workers | None = None
    """Clients of the Kueue MultiKueue workers (``kueue.enabled``)."""
    overlays: WatchedCache[Obj] | None = None
    """carbonshift's NodeOverlays (when the re-evaluation follows NodePools)."""
    shared: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What a row's controllers share, by a key of the row's (one set of watched caches
    for two controllers)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Wiring:
    """What a controller is built from: the configuration, the world every decision reads,
    the cluster-facing parts, the connection settings and the accounting hooks."""

    config: Config
    world: World
    fleet: Fleet
    kube: Settings
    keepers: tuple[Keep, ...] = ()
    """The integrations' keepers, in row order (:func:`webhook.integrations.controllers`
    hands the rows' :attr:`Integration.keepers`; the re-evaluation builds them)."""
    accounts: tuple[Accounts, ...] = ()
    """The integrations' accounting hooks, in row order (:func:`webhook.integrations.controllers`
    hands the rows' :attr:`Integration.accounting`; the accountant runs them)."""


Keep: TypeAlias = "Callable[[Follower, Wiring], Keeper | None]"
"""Builds a keeper for the follower (None: not while the configuration leaves it off)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """Controllers an integration runs while its config section is enabled."""

    section: str
    """The config section whose ``enabled`` switches them (``labels``, ``ocm``...)."""
    make: Callable[[Wiring], Sequence[KeyedController[Any]]]
    """Builds them, in start order (none when what they need is absent)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Integration:
    """One technology: the kinds carbonshift handles for it, the controllers the leader
    runs for it, the RBAC it needs besides its kinds' own, how the leader accounts its
    kinds' emissions, and the Event reasons recorded about objects that are no handled
    kind."""

    name: str
    kinds: tuple[Kind, ...] = ()
    """Its handled kinds (rows of :data:`webhook.kinds.REGISTRY`)."""
    runs: tuple[Run, ...] = ()
    grants: tuple[Grant, ...] = ()
    """ClusterRole rules besides its kinds' (:attr:`webhook.kinds.Kind.grants`)."""
    accounting: tuple[Accounts, ...] = ()
    """Its accounting hooks (:class:`webhook.controllers.accounting.Accounts`): each says
    which of its kinds it accounts and how; a kind no hook names is not accounted."""
    keepers: tuple[Keep, ...] = ()
    """What it runs after the re-evaluation settles, on its kinds' objects as they stand
    (:class:`webhook.controllers.keeper.Keeper`): built with the follower, while it
    follows those kinds."""
    events: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Event reason -> what it is recorded about, for reasons about no handled kind."""
