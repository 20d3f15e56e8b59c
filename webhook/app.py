"""The application manager: builds the process and runs it.

One ordered list of parts (:class:`Part`), started first to last and stopped last to first:

1. the Kubernetes client (with ``--kubeconfig`` or in a cluster; closed last);
2. the followers that read the fleet into memory: the Karmada Clusters
   (:class:`~webhook.kube.inventory.FleetInventory`), what the Karmada policy CRDs keep
   (:class:`~webhook.kube.karmada.KarmadaCrds`), Liqo's virtual nodes
   (:class:`~webhook.kube.peers.PeerInventory`), the Nodes' grid zone
   (:class:`~webhook.kube.nodes.NodeZones`) and, when the re-evaluation follows NodePools,
   carbonshift's carbon price NodeOverlays (:func:`webhook.controllers.karpenter.prices.watched`);
3. the leader elector (stopping it releases the Lease: another replica takes over at once);
4. the intensity feed (its refreshes run in the background; ``/readyz`` answers 503 until
   every zone was asked);
5. the leader's controllers, as the integrations' rows list them
   (:func:`webhook.integrations.controllers`), each switched by its config section: they
   pass only while this replica leads, and are stopped before the Lease is released;
6. the HTTPS server (:class:`~webhook.serve.server.HttpsServer`), stopped first: requests
   in progress finish before anything they read goes away.

A part that fails to start stops the ones started before it, in reverse, and the error
goes to the caller (``carbonshift serve`` prints it in one line).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from webhook import integrations
from webhook.feed import IntensityFeed
from webhook.integrations import Fleet, Wiring
from webhook.model.config import Config
from webhook.model.validation import InvalidInput
from webhook.runtime import collector
from webhook.serve import certs
from webhook.serve.server import HttpsServer, ensure_certificates
from webhook.serve.state import ServerState
from webhook.world import World

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

    from webhook.controllers.karpenter.prices import Obj
    from webhook.kube.cache import WatchedCache
    from webhook.kube.client import Settings

log = structlog.get_logger("carbonshift.app")


@dataclasses.dataclass(frozen=True, slots=True)
class Part:
    """One part of the process: how it starts (may be a coroutine) and stops."""

    name: str
    start: Callable[[], object]
    stop: Callable[[], Awaitable[object]]


class Manager:
    """Starts parts in order and stops the started ones in reverse."""

    def __init__(self) -> None:
        self.started: list[Part] = []

    async def start(self, part: Part) -> None:
        begun = part.start()
        if inspect.isawaitable(begun):
            await begun
        self.started.append(part)

    async def stop(self) -> None:
        """Stop every started part, last first; one that fails to stop is logged and the
        others still stop."""
        while self.started:
            part = self.started.pop()
            try:
                await part.stop()
            except Exception:
                log.exception("part_stop_failed", part=part.name)


def build_feed(config: Config) -> IntensityFeed:
    """The intensity feed for a configuration: its provider chain, zones in use and cache.

    Raises :class:`InvalidInput` for bad provider options or a bad ``CARBONSHIFT_REDIS_URL``.
    """
    try:
        return IntensityFeed.from_config(config)
    except ValueError as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput("CARBONSHIFT_REDIS_URL", str(exc)) from None


async def run(
    config: Config,
    *,
    host: str,
    port: int,
    cert_dir: Path,
    cert_reload_seconds: float = 10.0,
    shutdown_seconds: float = 10.0,
    stop: asyncio.Event | None = None,
    kube: Settings | None = None,
) -> None:
    """Run carbonshift until SIGTERM/SIGINT (or until ``stop`` is set).

    With ``kube`` (a kubeconfig or the in-cluster service account) the fleet's followers,
    the leader elector and the controllers run too."""
    feed = build_feed(config)
    if ensure_certificates(cert_dir, config, [host]):
        log.info(
            "development_certificates_created",
            directory=str(cert_dir),
            ca=str(cert_dir / certs.CA_CERT),
            hint="trust ca.crt (caBundle) in the webhook configuration",
        )
    manager = Manager()
    thresholds = collector.tune()
    try:
        state = ServerState(config=config, feed=feed)
        fleet = await _fleet(manager, config, state, kube) if kube is not None else None
        await manager.start(Part("feed", lambda: feed.start(wait=False), feed.stop))
        if fleet is not None and kube is not None:
            for controller in integrations.controllers(Wiring(config, state, fleet, kube)):
                await manager.start(Part(controller.name, controller.start, controller.stop))
        server = HttpsServer(
            state, host=host, port=port, cert_dir=cert_dir,
            cert_reload_seconds=cert_reload_seconds, shutdown_seconds=shutdown_seconds,
        )  # fmt: skip
        await manager.start(Part(server.name, server.start, server.stop))
        if stop is None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        gc.freeze()  # start-up objects never need collecting: shorter GC pauses per request
        await stop.wait()
    finally:
        started = time.monotonic()
        await manager.stop()
        gc.set_threshold(*thresholds)
        log.info("stopped", seconds=round(time.monotonic() - started, 3))


async def _fleet(manager: Manager, config: Config, world: World, kube: Settings) -> Fleet:
    """Connect to the API server and start what follows the fleet: the Clusters, Liqo's
    virtual nodes, the Nodes' zone and the leader elector (into ``world``)."""
    from webhook.kube import client, inventory, karmada, leader, nodes, peers  # noqa: PLC0415
    from webhook.kube.events import EventRecorder  # noqa: PLC0415
    from webhook.runtime.tasks import closed  # noqa: PLC0415

    api = await client.connect(kube)  # a bad kubeconfig: one line, a usage error
    await manager.start(Part("kubernetes-client", lambda: None, lambda: closed(api.close())))
    clusters = world.inventory = inventory.FleetInventory(config)
    crds = world.crds = karmada.KarmadaCrds()
    places = world.peers = peers.PeerInventory(config)
    world.nodes = nodes.NodeZones(config.zone)
    for name, follower in (
        ("fleet-inventory", clusters), ("karmada-crds", crds), ("liqo-peers", places),
        ("node-zones", world.nodes),
    ):  # fmt: skip
        await manager.start(Part(name, _starter(follower, api), follower.stop))
    kept = _overlays(config)
    if kept is not None:
        await manager.start(Part("node-overlays", _starter(kept, api), kept.stop))
    elector = leader.LeaderElector(api, kube.identity, namespace=kube.namespace, name=kube.lease)
    await manager.start(Part("leader-election", elector.start, elector.stop))
    log.info(
        "fleet_watch_started",
        kubeconfig=str(kube.kubeconfig or "in-cluster"),
        lease=f"{kube.namespace}/{kube.lease}",
        identity=kube.identity,
    )
    workers = None
    if config.kueue.enabled:
        from webhook.kube.kueue import Workers  # noqa: PLC0415

        workers = Workers(api, config.kueue.namespace)
        await manager.start(Part("kueue-workers", lambda: None, workers.close))
    events = EventRecorder(api, kube.identity, elector)
    return Fleet(api, elector, events, clusters, places, workers, kept)


def _overlays(config: Config) -> WatchedCache[Obj] | None:
    """The cache of carbonshift's NodeOverlays, when the re-evaluation follows NodePools
    (whose strategy ``price`` they carry); None otherwise."""
    from webhook.controllers.karpenter import prices as overlays  # noqa: PLC0415
    from webhook.kinds.reevaluation import targets  # noqa: PLC0415

    if not config.reevaluate.enabled:
        return None
    if not any(t.row.kind == overlays.FOLLOWS for t in targets()):
        return None
    return overlays.watched()


def _starter(follower: Any, api: ApiClient) -> Callable[[], None]:
    return lambda: follower.start(api)
